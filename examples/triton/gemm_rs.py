"""GEMM + reduce-scatter, fused (tensor-parallel row layer).

Every PE holds a column shard A [M, K/n] of the activations and the matching
row shard B [K/n, N] of the weight; the layer computes
out_r = sum over PEs of (A @ B)[rows of PE r]. Instead of a full GEMM followed
by a reduce-scatter:

  - the Triton GEMM writes each finished tile straight into the owner PE's
    symmetric receive buffer (peer_ptr + tl.store, slot `me`), then adds 1 to
    that tile's counter on the owner (signal_op: thread 0 after a program
    barrier, release). Tiles are visited starting with the next PE's rows, so
    the data is on the wire while later tiles compute;
  - a second Triton kernel sums the n partial tiles of this PE's rows in fp32,
    each tile as soon as its counter shows all n (signal_wait_until, acquire).

Receive buffers and counters are double-buffered by call parity: a PE's
call-e+2 GEMM writes into a buffer the owner finished reducing in call e (the
PE's call-e+1 reduction waited for the owner's call-e+1 tiles, which the owner
computes after its call-e reduction).

    torchrun --nproc-per-node 4 examples/triton/gemm_rs.py --m 8192 --k 8192 --n 8192

Reference: torch.matmul, then torch.distributed.reduce_scatter_tensor.
"""
import torch
import torch.distributed as dist
import triton
import triton.language as tl

import _common as C
import symm
import symm.triton as st


@triton.jit
def gemm_scatter_kernel(ctx, a, b, recv, counters, M, N, K, M_LOC,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    me = st.my_pe(ctx)
    pid = tl.program_id(0)
    num_n = tl.cdiv(N, BN)
    num_m = M // BM
    pid_m = (pid // num_n + (me + 1) * (M_LOC // BM)) % num_m    # the next PE's rows first
    pid_n = pid % num_n
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b + offs_k[:, None] * N + offs_n[None, :]
    nmask = offs_n[None, :] < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, K, BK):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs, mask=nmask, other=0.0), acc)
        a_ptrs += BK
        b_ptrs += BK * N
    owner = (pid_m * BM) // M_LOC
    lrow = pid_m * BM - owner * M_LOC + tl.arange(0, BM)
    dst = st.peer_ptr(ctx, recv, owner) + me * M_LOC * N     # slot `me` of the owner's buffer
    tl.store(dst + lrow[:, None] * N + offs_n[None, :], acc.to(recv.dtype.element_ty), mask=nmask)
    tile = (pid_m * BM - owner * M_LOC) // BM * num_n + pid_n
    st.signal_op(ctx, counters + tile, 1, st.SIGNAL_ADD, owner)


@triton.jit
def reduce_tiles_kernel(ctx, recv, counters, out, target, N, M_LOC,
                        BM: tl.constexpr, BN: tl.constexpr):
    npes = st.n_pes(ctx)
    pid = tl.program_id(0)
    num_n = tl.cdiv(N, BN)
    pid_m = pid // num_n
    pid_n = pid % num_n
    st.signal_wait_until(ctx, counters + pid, st.CMP_GE, target)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    idx = offs_m[:, None] * N + offs_n[None, :]
    mask = offs_n[None, :] < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for p in range(0, npes):
        acc += tl.load(recv + p * M_LOC * N + idx, mask=mask).to(tl.float32)
    tl.store(out + idx, acc.to(out.dtype.element_ty), mask=mask)


class GemmRS:
    BM, BN, BK = 128, 128, 64

    def __init__(self, env, m, k_local, n, dtype=torch.bfloat16):
        w = env.world
        self.env, self.m, self.k, self.n = env, m, k_local, n
        self.m_loc = m // w
        if m % w or self.m_loc % self.BM or k_local % self.BK:
            raise ValueError("shapes: M/n_pes must be a multiple of %d and K/n_pes of %d"
                             % (self.BM, self.BK))
        self.tiles = (self.m_loc // self.BM) * triton.cdiv(n, self.BN)
        self.recv = symm.zeros((2, w, self.m_loc, n), dtype)
        self.counters = symm.zeros((2, self.tiles), torch.int64)
        self.calls = [0, 0]
        symm.barrier()

    def __call__(self, a, b, out):
        env = self.env
        par = (self.calls[0] + self.calls[1]) % 2
        self.calls[par] += 1
        grid = ((self.m // self.BM) * triton.cdiv(self.n, self.BN),)
        st.launch(gemm_scatter_kernel, grid, env.ctx, a, b, self.recv[par], self.counters[par],
                  self.m, self.n, self.k, self.m_loc, BM=self.BM, BN=self.BN, BK=self.BK,
                  num_warps=8, num_stages=3)
        st.launch(reduce_tiles_kernel, (self.tiles,), env.ctx, self.recv[par], self.counters[par],
                  out, self.calls[par] * env.world, self.n, self.m_loc, BM=self.BM, BN=self.BN,
                  num_warps=8)
        return out

    def close(self):
        torch.cuda.synchronize()
        symm.barrier()
        symm.free_tensor(self.counters)
        symm.free_tensor(self.recv)


def run(m=8192, k=8192, n=8192, iters=20, bench=True, checks=2):
    env = C.setup()
    w = env.world
    k_loc = k // w
    op = GemmRS(env, m, k_loc, n)
    a = torch.empty(m, k_loc, dtype=torch.bfloat16, device=env.device)
    b = torch.empty(k_loc, n, dtype=torch.bfloat16, device=env.device)
    out = torch.empty(m // w, n, dtype=torch.bfloat16, device=env.device)
    ok = True
    worst = 0.0
    for it in range(checks):
        g = torch.Generator(device=env.device).manual_seed(41000 * it + env.rank)
        a.normal_(generator=g).mul_(0.05)
        b.normal_(generator=g).mul_(0.05)
        op(a, b, out)
        ref = torch.empty_like(out)
        dist.reduce_scatter_tensor(ref, torch.matmul(a, b))
        worst = max(worst, (out.float() - ref.float()).abs().max().item())
        ok &= torch.allclose(out.float(), ref.float(), rtol=2e-2, atol=2e-2)
    ok = C.all_ok(ok)
    t_symm = t_ref = None
    if bench:
        partial = torch.empty(m, n, dtype=a.dtype, device=env.device)
        ref_out = torch.empty_like(out)

        def ref():
            torch.matmul(a, b, out=partial)
            dist.reduce_scatter_tensor(ref_out, partial)
        t_symm = C.time_us(lambda: op(a, b, out), iters)
        t_ref = C.time_us(ref, iters)
    op.close()
    C.report(env, "gemm_rs", "M=%d K=%d (K/PE=%d) N=%d bf16, %d iterations vs matmul+reduce_scatter, "
             "max abs err %.2e" % (m, k, k_loc, n, checks, worst), ok,
             [("symm.triton", t_symm), ("torch.matmul + NCCL reduce_scatter", t_ref)])
    return {"ok": ok, "symm_us": t_symm, "ref_us": t_ref}


if __name__ == "__main__":
    C.main(run, __doc__.split("\n")[0], m=8192, k=8192, n=8192)
