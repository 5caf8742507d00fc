"""All-to-all inside a Triton kernel.

The input holds one block per PE; block q goes to PE q, landing in block `me`
of its symmetric output. Program i first announces on every PE that it
entered this call and waits until every PE's program i has (their outputs
are then free to be overwritten). Then it moves slice i of every block
(peer_ptr + tl.store), adds 1 to slice i's arrival counter on each destination
(signal_op ADD, release) and waits until its own counter shows every PE's
slice i (acquire).

    torchrun --nproc-per-node 4 examples/triton/all_to_all.py [--numel N]

Reference: torch.distributed.all_to_all_single (NCCL).
"""
import torch
import torch.distributed as dist
import triton
import triton.language as tl

import _common as C
import symm
import symm.triton as st


@triton.jit
def all_to_all_kernel(ctx, out, inp, n, entry, arrived, target, BLOCK: tl.constexpr):
    me = st.my_pe(ctx)
    npes = st.n_pes(ctx)
    pid = tl.program_id(0)
    # entry handshake: once every PE has entered this call, their outputs are
    # free to be overwritten (what read them came earlier on their streams)
    C.arrive_and_wait(ctx, entry + pid, target)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    for i in range(0, npes):
        q = (me + i) % npes
        vals = tl.load(inp + q * n + offs, mask=mask)
        tl.store(st.peer_ptr(ctx, out, q) + me * n + offs, vals, mask=mask)
    C.arrive_and_wait(ctx, arrived + pid, target)


class AllToAll:
    BLOCK = 4096

    def __init__(self, env, numel, dtype=torch.bfloat16):
        self.env, self.numel = env, numel          # elements per block
        self.grid = (triton.cdiv(numel, self.BLOCK),)
        self.out = symm.zeros((env.world * numel,), dtype)
        self.arrived = symm.zeros((self.grid[0],), torch.int64)
        self.entry = symm.zeros((self.grid[0],), torch.int64)
        self.calls = 0
        symm.barrier()

    def __call__(self, inp):
        self.calls += 1
        st.launch(all_to_all_kernel, self.grid, self.env.ctx, self.out, inp, self.numel,
                  self.entry, self.arrived, self.calls * self.env.world, BLOCK=self.BLOCK, num_warps=8)
        return self.out

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        symm.free_tensor(self.entry)
        symm.free_tensor(self.arrived)
        symm.free_tensor(self.out)


def run(numel=1024 * 1024 + 7, iters=50, bench=True, checks=3):
    env = C.setup()
    op = AllToAll(env, numel)
    inp = torch.empty(env.world * numel, dtype=torch.bfloat16, device=env.device)
    ok = True
    for it in range(checks):
        inp.normal_(generator=torch.Generator(device=env.device).manual_seed(9000 * it + env.rank))
        got = op(inp).clone()
        ref = torch.empty_like(got)
        dist.all_to_all_single(ref, inp)
        ok &= torch.equal(got, ref)
    ok = C.all_ok(ok)
    t_symm = t_ref = t_c = None
    if bench:
        ref = torch.empty_like(inp)

        t_symm = C.time_us(lambda: op(inp), iters)
        t_ref = C.time_us(lambda: dist.all_to_all_single(ref, inp), iters)
        # symm's CUDA C stream collective on symmetric buffers, for comparison
        c_in, c_out = symm.tensor(inp.shape, inp.dtype), symm.tensor(inp.shape, inp.dtype)
        c_in.copy_(inp)
        t_c = C.time_us(lambda: symm.all_to_all(c_out, c_in), iters)
        torch.cuda.synchronize()
        symm.free_tensor(c_out)
        symm.free_tensor(c_in)
    op.close()
    C.report(env, "all_to_all", "%d iterations, %d bf16 elements per block, equal to NCCL's"
             % (checks, numel), ok,
             [("symm.triton", t_symm), ("torch+NCCL", t_ref), ("symm C all_to_all", t_c)])
    return {"ok": ok, "symm_us": t_symm, "ref_us": t_ref}


if __name__ == "__main__":
    C.main(run, __doc__.split("\n")[0], numel=1024 * 1024 + 7)
