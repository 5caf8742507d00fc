"""The TileLang GEMM alone (_gemm.py: T.Pipelined with TMA loads in a
producer warp group, wgmma in two consumer warp groups, bf16 in, fp32
accumulation, bf16 out) against torch.matmul, at the per-PE shapes of the
fused examples on 4 PEs, in every tile configuration: the table says how
close each comes to cuBLAS (bar: 0.9x torch.matmul's speed) and which one the
fused examples will use (the fastest). Each PE times its own GPU; the
slowest PE's time counts. Checked against torch.matmul with fresh data.

    torchrun --nproc-per-node N examples/tilelang/gemm.py [--aot build-tilelang]"""
import sys

import torch

import _fused as F
import _gemm
from _common import all_ok, close, example_main, rand, row, sync_all

BAR = 0.90
# (what, M, N, K): the per-PE GEMMs of ag_gemm.py, gemm_rs.py and the grid
# examples on 4 PEs (M=K=N=8192 split four ways; an LLM layer M=4096,
# K=8192, N=28672; a 2x2 grid of 4096^2 blocks)
CONFIGS = [dict(what="ag_gemm, M=K=N=8192 on 4 PEs", m=8192, n=2048, k=8192),
           dict(what="gemm_rs, M=K=N=8192 on 4 PEs", m=8192, n=8192, k=2048),
           dict(what="ag_gemm, M=4096 K=8192 N=28672 on 4 PEs", m=4096, n=7168, k=8192),
           dict(what="gemm_rs, M=4096 K=28672 N=8192 on 4 PEs", m=4096, n=8192, k=7168),
           dict(what="cannon / summa, 2x2 grid of 4096^2 blocks", m=4096, n=4096, k=8192)]


def kernels(world, cfg):
    return F.gemm_kernels(cfg["m"], cfg["n"], cfg["k"], _gemm.SPEED_PES)


def run(env, ks, cfg, args):
    M, N, K = cfg["m"], cfg["n"], cfg["k"]
    me = env.rank
    a = torch.empty((M, K), dtype=torch.bfloat16, device=env.device)
    b = torch.empty((K, N), dtype=torch.bfloat16, device=env.device)
    c = torch.empty((M, N), dtype=torch.bfloat16, device=env.device)
    best, times = F.pick_config(env, ks, M, N, K, args)
    mm = F.time_graph(lambda: torch.matmul(a, b, out=c), args.graph_iters) if not args.no_bench else None
    flop = 2.0 * M * N * K
    rows = []
    for name in [n for n in _gemm.CONFIGS if F.gemm_name(n, M, N, K) in ks]:
        k = F.launcher(ks[F.gemm_name(name, M, N, K)], _gemm.CONFIGS[name])
        ok = True
        for it in range(args.checks):
            a.copy_(rand((M, K), torch.bfloat16, env.device, "gemmA", it, me))
            b.copy_(rand((K, N), torch.float32, env.device, "gemmB", it, me).mul_(K ** -0.5))
            c.zero_()
            sync_all()
            k(a, b, c)
            ok = ok and close(c, a @ b, 2e-2, 2e-2)
        t = times.get(name)
        cells = {"config": name + (" (used)" if name == best else ""), "tilelang us": t, "torch.matmul us": mm,
                 "tilelang TFLOP/s": "%.0f" % (flop / t * 1e-6) if t else "-",
                 "torch.matmul TFLOP/s": "%.0f" % (flop / mm * 1e-6) if mm else "-",
                 "torch.matmul / tilelang": F.ratio(mm, t)}
        sp = F.ratio(mm, t)
        cells["bar (>= %.2f)" % BAR] = "n/a" if sp is None else ("pass" if sp >= BAR else "MISS")
        rows.append(row("gemm", "%s: %dx%dx%d" % (cfg["what"], M, N, K), env, all_ok(ok), **cells))
    return rows


if __name__ == "__main__":
    example_main(sys.modules[__name__], "TileLang GEMM alone vs torch.matmul")
