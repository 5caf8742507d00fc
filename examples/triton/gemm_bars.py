"""The fused GEMM examples (ag_gemm, gemm_rs) at the benchmark shapes, against
the overlap bars, in one table.

    torchrun --nproc-per-node 4 examples/triton/gemm_bars.py [--out FILE] [--shape square,llm] [--iters 20]
             [--no-bench] [--rs-designs ce,events]

For each example and shape: the check against torch + NCCL (fresh data every
iteration), then the fused op, the GEMM alone at the same per-PE shape (no
communication) and the unfused torch.matmul + NCCL, each timed on a plain
stream (back-to-back calls) and from a CUDA graph (examples/triton/_common.py
bench). The bars: fused <= 1.10 x the GEMM alone, and >= 1.25 x faster than
torch + NCCL, in both modes. PE 0 prints the table (and writes it to --out).
gemm_rs runs in each design of --rs-designs (gemm_rs.py: ce, the default,
one Triton GEMM with the copies on the copy engines; events, the partial
bands by torch.mm); the ce rows also give its kernel alone with the flags
preset (no communication), in a graph.
--no-bench: the checks only (where PEs share a GPU, times say nothing of
NVLink).
"""
import argparse
import os
import sys

import _common as C
import ag_gemm
import gemm_rs

# (M, K, N) of the layer: the square benchmark shape, and an LLM MLP
# (hidden 8192, intermediate 28672, 4096 tokens): up-projection for
# all-gather + GEMM (N sharded), down-projection for GEMM + reduce-scatter
# (K sharded)
SHAPES = {
    "square": {"ag_gemm": (8192, 8192, 8192), "gemm_rs": (8192, 8192, 8192)},
    "llm": {"ag_gemm": (4096, 8192, 28672), "gemm_rs": (4096, 28672, 8192)},
    "small": {"ag_gemm": (1024, 1024, 2048), "gemm_rs": (1024, 2048, 1024)},
}
FUSED_OVER_GEMM, SPEEDUP_OVER_UNFUSED = 1.10, 1.25
HEADER = ("example", "M x N x K (per PE)", "check", "mode", "fused us", "GEMM alone us",
          "fused / GEMM alone (<= %.2f)" % FUSED_OVER_GEMM, "torch.matmul + NCCL us",
          "speedup (>= %.2f)" % SPEEDUP_OVER_UNFUSED, "bars", "host us/call (stream)",
          "fused kernel, no communication us (graph)")


def rows_of(name, res, bench=True):
    """Table rows (stream, graph) of one run() result; without bench, one
    row with the check only."""
    m, n, k = res["mnk"]
    if not bench:
        return [(name, "%dx%dx%d" % (m, n, k), "ok" if res["ok"] else "WRONG", "check only", "-", "-", "-",
                 "-", "-", "ok" if res["ok"] else "WRONG", "-", "-")]
    out = []
    for i, mode in enumerate(("stream", "graph")):
        f = res["symm_us"][i] if res["symm_us"] else None
        g = res["alone_us"][i] if res["alone_us"] else None
        u = res["ref_us"][i] if res["ref_us"] else None
        over = f / g if f and g else None
        speed = u / f if f and u else None
        miss = []
        if over is None:
            miss.append("no GEMM-alone time")
        elif over > FUSED_OVER_GEMM:
            miss.append("fused/GEMM %.2f > %.2f" % (over, FUSED_OVER_GEMM))
        if speed is None:
            miss.append("no torch + NCCL time")
        elif speed < SPEEDUP_OVER_UNFUSED:
            miss.append("speedup %.2f < %.2f" % (speed, SPEEDUP_OVER_UNFUSED))
        verdict = "WRONG" if not res["ok"] else ("pass" if not miss else "miss: " + "; ".join(miss))
        fmt = lambda v: "-" if v is None else "%.1f" % v  # noqa: E731
        out.append((name, "%dx%dx%d" % (m, n, k), "ok" if res["ok"] else "WRONG", mode, fmt(f),
                    "%s (%s)" % (fmt(g), res["alone"]), "-" if over is None else "%.2f" % over, fmt(u),
                    "-" if speed is None else "%.2f" % speed, verdict,
                    fmt(res.get("host_us")) if mode == "stream" else "-",
                    fmt(res.get("kernel_us")) if mode == "graph" else "-"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="markdown file for the table (PE 0 appends)")
    ap.add_argument("--shape", default="square,llm", help="comma-separated: %s" % ", ".join(SHAPES))
    ap.add_argument("--only", default="ag_gemm,gemm_rs", help="comma-separated examples")
    ap.add_argument("--iters", type=int, default=20, help="calls per timing window")
    ap.add_argument("--no-bench", action="store_true", help="check only")
    ap.add_argument("--rs-designs", default="ce", help="comma-separated gemm_rs designs: %s"
                    % ", ".join(gemm_rs.DESIGNS))
    args = ap.parse_args()
    unknown = [x for x in args.shape.split(",") if x not in SHAPES]
    if unknown:
        ap.error("no shape %s (choose among %s)" % (", ".join(unknown), ", ".join(SHAPES)))
    designs = args.rs_designs.split(",")
    bad = [d for d in designs if d not in gemm_rs.DESIGNS]
    if bad:
        ap.error("no gemm_rs design %s (choose among %s)" % (", ".join(bad), ", ".join(gemm_rs.DESIGNS)))
    env = C.setup()
    rows, ok = [], True
    try:
        for shape in args.shape.split(","):
            for name, mod in (("ag_gemm", ag_gemm), ("gemm_rs", gemm_rs)):
                if name not in args.only.split(","):
                    continue
                m, k, n = SHAPES[shape][name]
                for d in (designs if name == "gemm_rs" else [None]):
                    kw = {"design": d} if d else {}
                    res = mod.run(m=m, k=k, n=n, iters=args.iters, bench=not args.no_bench, **kw)
                    ok &= res["ok"]
                    label = "%s %s%s" % (name, shape, " " + d if d and len(designs) > 1 else "")
                    rows += rows_of(label, res, bench=not args.no_bench)
        if env.rank == 0:
            what = ("PEs share one GPU (%d PEs): not a measure of NVLink" % env.world if env.shared
                    else "%d PEs, one GPU each" % env.world)
            if args.no_bench:
                what += "; checks only"
            text = ["", "### symm.triton fused GEMMs against the overlap bars (%s)" % what, "",
                    "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
            text += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
            print("\n".join(text), flush=True)
            if args.out:
                os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
                with open(args.out, "a") as f:
                    f.write("\n".join(text) + "\n")
    finally:
        C.teardown()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
