"""GEMM + reduce-scatter, fused (tensor-parallel row layer).

Every PE holds a column shard A [M, K/n] of the activations and the matching
row shard B [K/n, N] of the weight; the layer computes
out_r = sum over PEs of (A @ B)[rows of PE r]. Instead of a full GEMM followed
by a reduce-scatter:

  - one Triton kernel computes the GEMM band by band (a band: the rows one
    PE owns), starting with the next PE's rows and ending with its own;
    inside a band GROUP_M row tiles share each column tile (_gemm.py; the
    tile configuration is _gemm.GEMM_CONFIG);
  - a tile of another PE's rows goes straight into the owner's symmetric
    receive buffer (peer_ptr + tl.store, slot `me`, 16 B per thread), then
    adds 1 to that tile's counter on the owner (signal_op: thread 0 after a
    program barrier, release);
  - a tile of its own rows, computed last, waits until its counter shows the
    n-1 peers' partial tiles (signal_wait_until, acquire; PE me-1 sent them
    first thing, the others while this PE computed earlier bands), adds them
    to its fp32 accumulator and writes the output: the reduction costs no
    separate pass, and its inputs crossed NVLink while the GEMM ran.

Waiting tiles are the last programs of the grid and wait only for peers'
earlier programs, which never wait, so a grid larger than the GPU cannot
deadlock. Receive buffers and counters are double-buffered by call parity: a
PE's call-e+2 GEMM writes into a buffer the owner finished reading in call e
(the PE's call-e+1 own tiles waited for the owner's call-e+1 partials, which
the owner computes after its call-e kernel). The wait targets come from a
per-tile count of this parity's calls kept on the GPU, so the launch can be
replayed from a CUDA graph (captured in pairs of calls).

    torchrun --nproc-per-node 4 examples/triton/gemm_rs.py --m 8192 --k 8192 --n 8192

Reference: torch.matmul, then torch.distributed.reduce_scatter_tensor.
"""
import torch
import torch.distributed as dist
import triton
import triton.language as tl

import _common as C
import _gemm as G
import symm
import symm.triton as st


@triton.jit
def gemm_rs_kernel(ctx, a, b, recv, counters, out, gen, M, N, K, M_LOC, VEC: tl.constexpr,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    me = st.my_pe(ctx)
    npes = st.n_pes(ctx)
    band, pid_m, pid_n = G.band_tile(tl.program_id(0), N, M_LOC, BM, BN, GROUP_M)
    owner = (me + 1 + band) % npes             # the next PE's rows first, this PE's last
    acc = G.mma_tile(a + (owner * M_LOC + pid_m * BM) * K, b, N, K, pid_n, BM, BN, BK)
    lrow = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    idx = lrow[:, None] * N + offs_n[None, :]
    nmask = offs_n[None, :] < N
    tile = pid_m * tl.cdiv(N, BN) + pid_n
    if owner == me:
        epoch = C.next_epoch(gen + tile)
        st.signal_wait_until(ctx, counters + tile, st.CMP_GE, epoch * (npes - 1))
        for i in range(1, npes):
            p = (me + i) % npes
            acc += tl.load(recv + p * M_LOC * N + idx, mask=nmask).to(tl.float32)
        tl.store(out + idx, acc.to(out.dtype.element_ty), mask=nmask)
        C.end_epoch(gen + tile, epoch)
    else:
        dst = st.peer_ptr(ctx, recv, owner) + me * M_LOC * N + idx   # slot `me` on the owner
        if VEC:
            dst = tl.max_contiguous(tl.multiple_of(dst, [16, 16]), [1, BN])
        tl.store(dst, acc.to(recv.dtype.element_ty), mask=nmask)
        st.signal_op(ctx, counters + tile, 1, st.SIGNAL_ADD, owner)


class GemmRS:
    def __init__(self, env, m, k_local, n, dtype=torch.bfloat16, config=None):
        w = env.world
        self.cx, self.opts = G.split(config or G.GEMM_CONFIG["gemm_rs"])
        bm, bn, bk = self.cx["BM"], self.cx["BN"], self.cx["BK"]
        self.env, self.m, self.k, self.n = env, m, k_local, n
        self.m_loc = m // w
        if m % w or self.m_loc % bm or k_local % bk:
            raise ValueError("shapes: M/n_pes must be a multiple of %d and K/n_pes of %d" % (bm, bk))
        self.tiles = (self.m_loc // bm) * triton.cdiv(n, bn)
        self.vec = C.vec_ok(n)
        self.recv = symm.zeros((2, w, self.m_loc, n), dtype)
        self.counters = symm.zeros((2, self.tiles), torch.int64)
        self.gen = torch.zeros((2, self.tiles), dtype=torch.int64, device=env.device)
        self.calls = 0
        symm.barrier()

    def __call__(self, a, b, out):
        env = self.env
        par = self.calls % 2
        self.calls += 1
        grid = (env.world * self.tiles,)
        st.launch(gemm_rs_kernel, grid, env.ctx, a, b, self.recv[par], self.counters[par], out,
                  self.gen[par], self.m, self.n, self.k, self.m_loc, VEC=self.vec, **self.cx,
                  **self.opts)
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
        t_symm = C.bench(lambda: op(a, b, out), iters)
        t_ref = C.bench(ref, iters)
    op.close()
    C.report(env, "gemm_rs", "M=%d K=%d (K/PE=%d) N=%d bf16, %d iterations vs matmul+reduce_scatter, "
             "max abs err %.2e" % (m, k, k_loc, n, checks, worst), ok,
             [("symm.triton", t_symm), ("torch.matmul + NCCL reduce_scatter", t_ref)])
    return {"ok": ok, "symm_us": t_symm, "ref_us": t_ref}


if __name__ == "__main__":
    C.main(run, __doc__.split("\n")[0], m=8192, k=8192, n=8192)
