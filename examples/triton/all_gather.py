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


class AllGather:
    NUM_WARPS = 8
    BLOCK = 2 * NUM_WARPS * 32 * 8              # 2 x 16 B of bf16 per thread

    def __init__(self, env, numel, dtype=torch.bfloat16):
        self.env, self.numel = env, numel
        self.grid = (max(1, min(triton.cdiv(numel, self.BLOCK), C.num_sms(env.device))),)
        self.vec = C.vec_ok(numel)
        self.out = symm.zeros((env.world * numel,), dtype)
        self.arrived = symm.zeros((self.grid[0],), torch.int64)
        self.entry = symm.zeros((self.grid[0],), torch.int64)
        self.gen = torch.zeros((self.grid[0],), dtype=torch.int64, device=env.device)
        self._launch = C.PreparedPerInput(
            lambda shard: st.prepare(all_gather_kernel, self.grid, env.ctx, self.out, shard, numel,
                                     self.entry, self.arrived, self.gen, VEC=self.vec,
                                     BLOCK=self.BLOCK, num_warps=self.NUM_WARPS))
        symm.barrier()

    def __call__(self, shard):
        self._launch(shard)
        return self.out

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        symm.free_tensor(self.entry)
        symm.free_tensor(self.arrived)
        symm.free_tensor(self.out)


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
        # symm's CUDA C stream collective on symmetric buffers, for comparison
        c_in, c_out = symm.tensor(shard.shape, shard.dtype), symm.tensor(ref.shape, ref.dtype)
        c_in.copy_(shard)
        t_c = C.bench(lambda: symm.all_gather(c_out, c_in), iters)
        torch.cuda.synchronize()
        symm.free_tensor(c_out)
        symm.free_tensor(c_in)
    op.close()
    C.report(env, "all_gather", "%d iterations, %d bf16 elements per PE, equal to NCCL's"
             % (checks, numel), ok,
             [("symm.triton", t_symm), ("torch+NCCL", t_ref), ("symm C all_gather", t_c)])
    return {"ok": ok, "symm_us": t_symm, "ref_us": t_ref}


if __name__ == "__main__":
    C.main(run, __doc__.split("\n")[0], numel=4 * 1024 * 1024 + 5)
