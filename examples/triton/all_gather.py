"""All-gather inside a Triton kernel (direct push, like symm's C all_gather).

A persistent grid: about one program per SM, program i looping over tiles
i, i+P, i+2P... of this PE's shard. Program i first announces on every PE
that it entered this call and waits until every PE's program i has (the
outputs are then free to be overwritten: whatever read them came earlier on
their streams). Then it pushes each of its tiles into block `me` of every
PE's symmetric output (peer_ptr + tl.store over NVLink, 16 B per thread;
programs start at different peers to spread the traffic), and only after
all its stores adds 1 to its arrival counter on each PE (signal_op ADD,
release: one signal per program per peer per call), then waits until its own
counter shows all PEs' program i (acquire). Program i covers the same tiles
on every PE, so when every program has returned the output is complete.
Signal targets come from a per-program call count kept on the GPU, so the
launch can be replayed from a CUDA graph.

    torchrun --nproc-per-node 4 examples/triton/all_gather.py [--numel N]

Reference: torch.distributed.all_gather_into_tensor (NCCL; on host copies over gloo when
PEs share a GPU).
"""
import torch
import triton
import triton.language as tl

import _common as C
import symm
import symm.triton as st


@triton.jit
def all_gather_kernel(ctx, out, shard, n, entry, arrived, gen,
                      VEC: tl.constexpr, BLOCK: tl.constexpr):
    me = st.my_pe(ctx)
    npes = st.n_pes(ctx)
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    epoch = C.next_epoch(gen + pid)
    target = epoch * npes
    # entry handshake: once every PE has entered this call, their outputs are
    # free to be overwritten (what read them came earlier on their streams)
    C.arrive_and_wait(ctx, entry + pid, target)
    for t in range(pid, tl.cdiv(n, BLOCK), nprog):
        offs = t * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        vals = tl.load(shard + offs, mask=mask)
        for i in range(0, npes):
            q = (me + pid + i) % npes              # programs spread over the peers
            ptrs = C.vec_ptrs(st.peer_ptr(ctx, out, q) + me * n, offs, VEC, BLOCK)
            tl.store(ptrs, vals, mask=mask)
    C.arrive_and_wait(ctx, arrived + pid, target)
    C.end_epoch(gen + pid, epoch)


class AllGather(C.TiledPush):
    """op(shard) -> the gathered output (symmetric), counters (entry, arrived)."""

    def __init__(self, env, numel, dtype=torch.bfloat16):
        super().__init__(env, all_gather_kernel, numel, env.world * numel, dtype=dtype)


def run(numel=4 * 1024 * 1024 + 5, iters=50, bench=True, checks=3):
    env = C.setup()
    op = AllGather(env, numel)
    shard = torch.empty(numel, dtype=torch.bfloat16, device=env.device)
    ok = True
    for it in range(checks):
        shard.normal_(generator=torch.Generator(device=env.device).manual_seed(7000 * it + env.rank))
        got = op(shard).clone()
        ref = torch.empty_like(got)
        C.REF.all_gather_into_tensor(ref, shard)
        ok &= torch.equal(got, ref)
    ok = C.all_ok(ok)
    t_symm = t_ref = t_c = None
    if bench:
        ref = torch.empty(env.world * numel, dtype=shard.dtype, device=env.device)

        t_symm = C.bench(lambda: op(shard), iters)
        t_ref = C.bench_ref(lambda: C.REF.all_gather_into_tensor(ref, shard), iters)
        t_c = C.bench_symm_c(symm.all_gather, shard, ref.shape, iters)
    op.close()
    C.report(env, "all_gather", "%d iterations, %d bf16 elements per PE, equal to NCCL's"
             % (checks, numel), ok,
             [("symm.triton", t_symm), ("torch+NCCL", t_ref), ("symm C all_gather", t_c)])
    return {"ok": ok, "symm_us": t_symm, "ref_us": t_ref}


if __name__ == "__main__":
    C.main(run, __doc__.split("\n")[0], numel=4 * 1024 * 1024 + 5)
