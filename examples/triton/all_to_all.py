"""All-to-all inside a Triton kernel (direct push, like symm's C all_to_all).

The input holds one block per PE; block q goes to PE q, landing in block `me`
of its symmetric output. A persistent grid: about one program per SM,
program i looping over tiles i, i+P... of the blocks. Program i first
announces on every PE that it entered this call and waits until every PE's
program i has (their outputs are then free to be overwritten). Then for each
of its tiles it moves that tile of every block to its PE (peer_ptr +
tl.store, 16 B per thread, programs starting at different peers), and only
after all its stores adds 1 to its arrival counter on each destination
(signal_op ADD, release: one signal per program per peer per call); then it
waits until its own counter shows every PE's program i (acquire). Signal
targets come from a per-program call count kept on the GPU (CUDA-graph safe).

    torchrun --nproc-per-node 4 examples/triton/all_to_all.py [--numel N]

Reference: torch.distributed.all_to_all_single (NCCL; on host copies over gloo when
PEs share a GPU).
"""
import torch
import triton
import triton.language as tl

import _common as C
import symm
import symm.triton as st


@triton.jit
def all_to_all_kernel(ctx, out, inp, n, entry, arrived, gen,
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
        for i in range(0, npes):
            q = (me + pid + i) % npes              # programs spread over the peers
            vals = tl.load(inp + q * n + offs, mask=mask)
            ptrs = C.vec_ptrs(st.peer_ptr(ctx, out, q) + me * n, offs, VEC, BLOCK)
            tl.store(ptrs, vals, mask=mask)
    C.arrive_and_wait(ctx, arrived + pid, target)
    C.end_epoch(gen + pid, epoch)


class AllToAll(C.TiledPush):
    """op(inp) -> the exchanged blocks (symmetric); numel is elements per
    block; counters (entry, arrived)."""

    def __init__(self, env, numel, dtype=torch.bfloat16):
        super().__init__(env, all_to_all_kernel, numel, env.world * numel, dtype=dtype)


def run(numel=1024 * 1024 + 7, iters=50, bench=True, checks=3):
    env = C.setup()
    op = AllToAll(env, numel)
    inp = torch.empty(env.world * numel, dtype=torch.bfloat16, device=env.device)
    ok = True
    for it in range(checks):
        inp.normal_(generator=torch.Generator(device=env.device).manual_seed(9000 * it + env.rank))
        got = op(inp).clone()
        ref = torch.empty_like(got)
        C.REF.all_to_all_single(ref, inp)
        ok &= torch.equal(got, ref)
    ok = C.all_ok(ok)
    t_symm = t_ref = t_c = None
    if bench:
        ref = torch.empty_like(inp)

        t_symm = C.bench(lambda: op(inp), iters)
        t_ref = C.bench_ref(lambda: C.REF.all_to_all_single(ref, inp), iters)
        t_c = C.bench_symm_c(symm.all_to_all, inp, inp.shape, iters)
    op.close()
    C.report(env, "all_to_all", "%d iterations, %d bf16 elements per block, equal to NCCL's"
             % (checks, numel), ok,
             [("symm.triton", t_symm), ("torch+NCCL", t_ref), ("symm C all_to_all", t_c)])
    return {"ok": ok, "symm_us": t_symm, "ref_us": t_ref}


if __name__ == "__main__":
    C.main(run, __doc__.split("\n")[0], numel=1024 * 1024 + 7)
