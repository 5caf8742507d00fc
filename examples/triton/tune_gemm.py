"""Time candidate tile configurations of the examples' Triton GEMM.

    python3 examples/triton/tune_gemm.py                      # one GPU
    torchrun --nproc-per-node 4 examples/triton/tune_gemm.py  # every GPU, PE 0 prints

Runs _gemm.gemm_kernel (the tile order and main loop of ag_gemm.py and
gemm_rs.py, with no communication: flags as good as satisfied) at the per-PE
shapes of the 4-GPU benchmarks (bf16; --shapes picks some):
  ag_gemm      M=8192 K=8192 N=2048  (square layer: all rows of A, this PE's columns of B)
  gemm_rs      M=8192 K=2048 N=8192  (square layer: this PE's slice of K)
  ag_gemm_llm  M=4096 K=8192 N=7168  (LLM MLP up-projection, N=28672 over 4 PEs)
  gemm_rs_llm  M=4096 K=7168 N=8192  (LLM MLP down-projection, K=28672 over 4 PEs)
for each config in CANDIDATES, next to torch.matmul, and prints a table of
time (us), TFLOP/s and the ratio to torch.matmul. Each config compiles once
(about a few seconds each); timing is GPU time of back-to-back launches
between one event pair, median of 3. Put the winner in _gemm.GEMM_CONFIG.
"""
import argparse
import os
import statistics
import sys

import torch
import triton

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
import _gemm as G  # noqa: E402
from symm import timing  # noqa: E402

CANDIDATES = [
    dict(BM=128, BN=128, BK=64, GROUP_M=1, num_warps=8, num_stages=3),   # the old examples' config
    dict(BM=128, BN=256, BK=64, GROUP_M=8, num_warps=8, num_stages=3),
    dict(BM=128, BN=256, BK=64, GROUP_M=8, num_warps=8, num_stages=4),
    dict(BM=128, BN=128, BK=64, GROUP_M=8, num_warps=8, num_stages=4),
    dict(BM=128, BN=128, BK=64, GROUP_M=8, num_warps=4, num_stages=4),
    dict(BM=256, BN=128, BK=64, GROUP_M=8, num_warps=8, num_stages=3),
    dict(BM=128, BN=256, BK=128, GROUP_M=8, num_warps=8, num_stages=2),
    dict(BM=128, BN=256, BK=64, GROUP_M=16, num_warps=8, num_stages=4),
    dict(BM=256, BN=128, BK=64, GROUP_M=8, num_warps=8, num_stages=4),
    dict(BM=128, BN=128, BK=128, GROUP_M=8, num_warps=8, num_stages=3),
    dict(BM=128, BN=256, BK=64, GROUP_M=16, num_warps=8, num_stages=3),
]

SHAPES = {"ag_gemm": (8192, 8192, 2048), "gemm_rs": (8192, 2048, 8192),
          "ag_gemm_llm": (4096, 8192, 7168), "gemm_rs_llm": (4096, 7168, 8192)}


def gpu_us(fn, iters, repeats=3):
    fn()
    torch.cuda.synchronize()
    return statistics.median([timing.window_us(fn, iters) for _ in range(repeats)])


def config_name(cfg):
    return "BM%(BM)d BN%(BN)d BK%(BK)d G%(GROUP_M)d w%(num_warps)d s%(num_stages)d" % cfg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--bands", type=int, default=4, help="row bands (PEs of the benchmark)")
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated: %s" % ", ".join(SHAPES))
    ap.add_argument("--configs", help="comma-separated indices into CANDIDATES (default: all)")
    args = ap.parse_args()
    picked = [CANDIDATES[int(i)] for i in args.configs.split(",")] if args.configs else CANDIDATES
    rank = int(os.environ.get("RANK", "0"))
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dev = torch.device("cuda")
    rows = []
    for shape_name in args.shapes.split(","):
        m, k, n = SHAPES[shape_name]
        g = torch.Generator(device=dev).manual_seed(5)
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16, generator=g).mul_(0.05)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16, generator=g).mul_(0.05)
        c = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
        ref = torch.matmul(a, b)
        flop = 2.0 * m * n * k
        t_ref = gpu_us(lambda: torch.matmul(a, b, out=c), args.iters)
        rows.append((shape_name, "torch.matmul", t_ref, flop / t_ref / 1e6, 1.0, "ref"))
        for cfg in picked:
            cx, opts = G.split(cfg)
            m_loc = m // args.bands
            if m_loc % cx["BM"] or k % cx["BK"]:
                continue
            grid = ((m // cx["BM"]) * triton.cdiv(n, cx["BN"]),)

            ta, tb = G.operands(a, b, cx)

            def run():
                G.gemm_kernel[grid](ta, tb, c, m, n, k, m_loc, **cx, **opts)
            try:
                run()
                torch.cuda.synchronize()
                ok = torch.allclose(c.float(), ref.float(), rtol=2e-2, atol=2e-2)
                t = gpu_us(run, args.iters)
                rows.append((shape_name, config_name(cfg), t, flop / t / 1e6, t_ref / t,
                             "OK" if ok else "WRONG"))
            except Exception as e:  # noqa: BLE001 - e.g. out of shared memory: say so, go on
                rows.append((shape_name, config_name(cfg), None, None, None,
                             "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:80] if str(e) else "")))
    if rank == 0:
        print("| shape | config | us | TFLOP/s | x torch.matmul (>1: faster) | check |")
        print("| --- | --- | --- | --- | --- | --- |")
        for shape_name, name, t, tf, ratio, chk in rows:
            print("| %s | %s | %s | %s | %s | %s |" % (
                shape_name, name, "-" if t is None else "%.1f" % t,
                "-" if tf is None else "%.0f" % tf, "-" if ratio is None else "%.2f" % ratio, chk))
        for shape_name in args.shapes.split(","):
            best = min((r for r in rows if r[0] == shape_name and r[1] != "torch.matmul"
                        and r[2] is not None and r[5] == "OK"), key=lambda r: r[2], default=None)
            if best:
                print("best for %s: %s (%.1f us, x%.2f torch.matmul)" % (shape_name, best[1], best[2], best[4]))


if __name__ == "__main__":
    main()
