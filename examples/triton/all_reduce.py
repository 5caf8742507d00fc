"""One-shot all-reduce inside a Triton kernel.

The input lives in symmetric memory. Program i announces "my slice i is
ready" to every PE (signal_op ADD, release: thread 0 after a program barrier),
waits until all PEs' slice i is ready (acquire), then sums slice i of every
PE's input straight from their memory (peer_ptr + tl.load over NVLink) in
fp32, in PE order so every PE gets bit-identical results, and writes its
output. A second round of counters says "I have read slice i", so nobody
overwrites its input while a peer still reads it.

    torchrun --nproc-per-node 4 examples/triton/all_reduce.py [--numel N]

Reference: torch.distributed.all_reduce (NCCL); the check is exact against
an fp32 sum of all PEs' inputs in PE order.
"""
import torch
import torch.distributed as dist
import triton
import triton.language as tl

import _common as C
import symm
import symm.triton as st


@triton.jit
def all_reduce_kernel(ctx, y, x, n, ready, done, target, BLOCK: tl.constexpr):
    npes = st.n_pes(ctx)
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    C.arrive_and_wait(ctx, ready + pid, target)
    acc = tl.zeros((BLOCK,), tl.float32)
    for q in range(0, npes):
        acc += tl.load(st.peer_ptr(ctx, x, q) + offs, mask=mask).to(tl.float32)
    tl.store(y + offs, acc.to(y.dtype.element_ty), mask=mask)
    C.arrive_and_wait(ctx, done + pid, target)


class AllReduce:
    BLOCK = 2048

    def __init__(self, env, numel, dtype=torch.bfloat16):
        self.env, self.numel = env, numel
        self.grid = (triton.cdiv(numel, self.BLOCK),)
        self.x = symm.zeros((numel,), dtype)            # callers write their input here
        self.ready = symm.zeros((self.grid[0],), torch.int64)
        self.done = symm.zeros((self.grid[0],), torch.int64)
        self.calls = 0
        symm.barrier()

    def __call__(self, y):
        self.calls += 1
        st.launch(all_reduce_kernel, self.grid, self.env.ctx, y, self.x, self.numel, self.ready,
                  self.done, self.calls * self.env.world, BLOCK=self.BLOCK, num_warps=8)
        return y

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        for t in (self.done, self.ready, self.x):
            symm.free_tensor(t)


def run(numel=1024 * 1024 + 1, iters=50, bench=True, checks=3):
    env = C.setup()
    op = AllReduce(env, numel)
    y = torch.empty(numel, dtype=torch.bfloat16, device=env.device)
    ok = True
    for it in range(checks):
        op.x.normal_(generator=torch.Generator(device=env.device).manual_seed(11000 * it + env.rank))
        op(y)
        parts = [torch.empty_like(op.x) for _ in range(env.world)]
        dist.all_gather(parts, op.x)
        want = torch.zeros(numel, dtype=torch.float32, device=env.device)
        for p in parts:
            want += p.float()
        ok &= torch.equal(y, want.to(y.dtype))
    ok = C.all_ok(ok)
    t_symm = t_ref = t_c = None
    if bench:
        ref = op.x.clone()
        t_symm = C.time_us(lambda: op(y), iters)
        t_ref = C.time_us(lambda: dist.all_reduce(ref), iters)
        # symm's CUDA C stream collective from the same symmetric input
        t_c = C.time_us(lambda: symm.all_reduce(op.x, out=y), iters)
    op.close()
    C.report(env, "all_reduce", "%d iterations of %d bf16 elements equal the fp32 sum of all PEs"
             % (checks, numel), ok,
             [("symm.triton", t_symm), ("torch+NCCL", t_ref), ("symm C all_reduce", t_c)])
    return {"ok": ok, "symm_us": t_symm, "ref_us": t_ref}


if __name__ == "__main__":
    C.main(run, __doc__.split("\n")[0], numel=1024 * 1024 + 1)
