"""Ring shift: every PE sends its buffer to the next PE, inside a Triton kernel.

A persistent grid: about one program per SM, program i looping over tiles
i, i+P... Each program first tells the previous PE "I have entered this
call" and waits for the same word from the next PE: from then on the next PE
is done with what its destination held before (its earlier work on its
stream is finished), so it may be overwritten. The program then copies each
of its tiles of the local source straight into the next PE's copy of the
symmetric destination over NVLink (peer_ptr + tl.store, 16 B per thread),
and after all of them signals the next PE once (signal_op: thread 0, after a
program barrier, with release semantics, so the whole program's stores are
delivered first) and waits for the previous PE's signal for the same program
(acquire). Per-program words, each written before its wait, keep a grid
larger than the GPU from deadlocking. The call count (the signals' value)
is kept on the GPU per program, so the launch can be replayed from a CUDA
graph.

    torchrun --nproc-per-node 4 examples/triton/ring_shift.py [--numel N]

Reference: torch.distributed batch_isend_irecv (NCCL send to the next PE,
receive from the previous one).
"""
import torch
import torch.distributed as dist
import triton
import triton.language as tl

import _common as C
import symm.triton as st


@triton.jit
def ring_shift_kernel(ctx, dst, src, n, sig, entry, gen, VEC: tl.constexpr, BLOCK: tl.constexpr):
    me = st.my_pe(ctx)
    npes = st.n_pes(ctx)
    nxt = (me + 1) % npes
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    epoch = C.next_epoch(gen + pid)
    st.signal_op(ctx, entry + pid, epoch, st.SIGNAL_SET, (me + npes - 1) % npes)
    st.signal_wait_until(ctx, entry + pid, st.CMP_GE, epoch)
    peer = st.peer_ptr(ctx, dst, nxt)
    for t in range(pid, tl.cdiv(n, BLOCK), nprog):
        offs = t * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        vals = tl.load(src + offs, mask=mask)
        tl.store(C.vec_ptrs(peer, offs, VEC, BLOCK), vals, mask=mask)
    st.signal_op(ctx, sig + pid, epoch, st.SIGNAL_SET, nxt)
    st.signal_wait_until(ctx, sig + pid, st.CMP_GE, epoch)
    C.end_epoch(gen + pid, epoch)


class RingShift(C.TiledPush):
    """op(src) -> this PE's dst (symmetric), holding the previous PE's src;
    counters (sig, entry)."""

    def __init__(self, env, numel, dtype=torch.bfloat16):
        super().__init__(env, ring_shift_kernel, numel, numel, dtype=dtype)


def run(numel=16 * 1024 * 1024 + 3, iters=50, bench=True, checks=3):
    env = C.setup()
    nxt, prv = (env.rank + 1) % env.world, (env.rank - 1) % env.world
    op = RingShift(env, numel)
    src = torch.empty(numel, dtype=torch.bfloat16, device=env.device)
    ok = True
    for it in range(checks):
        g = torch.Generator(device=env.device).manual_seed(1000 * it + env.rank)
        src.normal_(generator=g)
        out = op(src).clone()      # the kernel returns after the previous PE's data arrived
        g = torch.Generator(device=env.device).manual_seed(1000 * it + prv)
        want = torch.empty_like(src).normal_(generator=g)
        ok &= torch.equal(out, want)
    ok = C.all_ok(ok)
    t_symm = t_ref = None
    if bench:
        ref_dst = torch.empty_like(src)

        def ref():
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, src, nxt),
                                           dist.P2POp(dist.irecv, ref_dst, prv)])
            for r in reqs:
                r.wait()

        t_symm = C.bench(lambda: op(src), iters)
        t_ref = C.bench_ref(ref, iters)
    op.close()
    C.report(env, "ring_shift", "%d iterations of %d bf16 elements equal the previous PE's data"
             % (checks, numel), ok,
             [("symm.triton", t_symm), ("torch+NCCL", t_ref)])
    return {"ok": ok, "symm_us": t_symm, "ref_us": t_ref}


if __name__ == "__main__":
    C.main(run, __doc__.split("\n")[0], numel=16 * 1024 * 1024 + 3)
