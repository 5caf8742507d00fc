"""GEMM + reduce-scatter with symm.cute: out (on PE r) = the sum over PEs of
rows r*m.. of A_p @ Bt_p^T, the scatter done by the GEMM's epilogue.

gemm_rs (tensor cores: mma.sync bf16 -> f32 tiles) stores each C tile
straight into slot my_pe of its owner's recv over NVLink, then thread 0 adds
1 to the owner's word for that row tile (release, after a CTA barrier);
rs_reduce on the owner waits for a row tile's words from every PE and sums
the slots. Checked exactly against torch (integer-valued bf16 data), timed
next to torch.matmul followed by symm.reduce_scatter (one after the other),
and followed by torch.distributed's reduce_scatter_tensor (NCCL, where every
PE has a GPU of its own).

    torchrun --nproc-per-node 2 examples/cute/gemm_rs.py [--cubins build-cute]
"""
import torch
import torch.distributed as dist

import _common as C
import symm

SHAPES = ((128, 256, 256), (256, 1024, 1024), (512, 2048, 4096))  # (m per PE, n, k)
BM, BN = 128, 128


def run(env, args):
    rows, ok = [], True
    w, me = env.world, env.rank
    ep = C.Epochs()
    for m, n, k in (SHAPES[:2] if args.quick else SHAPES):
        sig = symm.zeros((m // BM,), torch.uint64)
        recv = symm.tensor((w * m * n,), torch.float32)
        out = torch.empty((m, n), dtype=torch.float32, device=env.device)
        a = torch.empty((w * m, k), dtype=torch.bfloat16, device=env.device)
        bt = torch.empty((n, k), dtype=torch.bfloat16, device=env.device)
        part = symm.tensor((w * m, n), torch.bfloat16)
        out_ref = symm.tensor((m, n), torch.bfloat16)

        def inputs(s, p):
            return (C.data(env, s, p, w * m * k, torch.bfloat16, integer=True).view(w * m, k),
                    C.data(env, s, 1000 + p, n * k, torch.bfloat16, integer=True).view(n, k))

        def fill(s):
            ai, bi = inputs(s, me)
            a.copy_(ai)
            bt.copy_(bi)
            out.zero_()

        def verify(s):
            total = torch.zeros((m, n), dtype=torch.float32, device=env.device)
            for p in range(w):
                ai, bi = inputs(s, p)
                total += ai[me * m:(me + 1) * m].float() @ bi.float().t()
            return torch.equal(out, total)

        def call():
            e = ep.next("gemm_rs_%d_%d" % (m, n))
            env.k["gemm_rs"]((w * m // BM, n // BN), env.ctx, recv, a, bt, sig, m, n, k)
            env.k["rs_reduce"](m // BM, env.ctx, out, recv, sig, m, n, e)

        def base():
            torch.matmul(a, bt.t(), out=part)
            symm.reduce_scatter(out_ref, part)

        part_dist = torch.empty((w * m, n), dtype=torch.bfloat16, device=env.device)
        out_dist = torch.empty((m, n), dtype=torch.bfloat16, device=env.device)

        def base_dist(group):
            torch.matmul(a, bt.t(), out=part_dist)
            dist.reduce_scatter_tensor(out_dist, part_dist, group=group)

        good, t, tb = C.check_and_time(env, args, call, fill, verify, base)
        ok &= good
        rows.append(C.gemm_row("gemm_rs", (w * m, n, k), good, t, tb, C.time_dist(env, args, base_dist)))
        for x in (sig, recv, part, out_ref):
            symm.free_tensor(x)
    header = ("kernel", "M x N x K", "check", "CuTe us", "torch.matmul + symm.reduce_scatter us",
              "ratio (base / CuTe)", "torch.matmul + torch.distributed reduce_scatter us",
              "ratio (torch / CuTe)", "CuTe TFLOP/s")
    return "GEMM + reduce-scatter, bf16 in (symm.cute)", header, rows, ok


if __name__ == "__main__":
    C.main(run, __doc__)
