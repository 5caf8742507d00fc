"""The fused examples' GEMMs alone, next to torch.matmul, on one GPU.

    python examples/gemm_alone.py --cubins build-cute [--out FILE] [--shapes ...] [--no-triton]

At the per-PE shapes of the 4-PE benchmarks (bf16 in, fp32 accumulate, bf16
out): all-gather + GEMM computes M x K x N/4, GEMM + reduce-scatter
M x K/4 x N, for the square layer (M = K = N = 8192) and an LLM MLP (4096
tokens, hidden 8192, intermediate 28672). For each shape:
  - CuTe DSL: examples/cute/hopper_gemm.py hgemm (TMA, wgmma, 4 stages,
    persistent), from the cubins build_cubins.py made (symm.cubin: no CuTe
    DSL needed here), C = A @ Bt^T with Bt [N, K];
  - Triton: examples/triton/_gemm.py gemm_kernel with the config the fused
    example uses (_gemm.GEMM_CONFIG; A and B read through TMA descriptors),
    C = A @ B with B [K, N];
  - torch.matmul on the same operands as each (A @ Bt.t() and A @ B).
Each result is checked against torch.matmul (fresh random data), then timed
from a CUDA graph (10 calls per replay) and on a plain stream (20 calls back
to back): 7 windows of each, the parties of a shape taking their windows in
turn (so all run at the same clocks), medians. The bar: >= 0.90 x
torch.matmul.
"""
import argparse
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))

import symm.cubin  # noqa: E402
from symm import timing  # noqa: E402

BAR = 0.90
REPS = 7          # timing windows per party, taken in turn
# name -> (M, K, N) of the per-PE GEMM
SHAPES = {
    "ag square": (8192, 8192, 2048),
    "rs square": (8192, 2048, 8192),
    "ag llm": (4096, 8192, 7168),
    "rs llm": (4096, 7168, 8192),
}
TRITON_CONFIG = {"ag": "ag_gemm", "rs": "gemm_rs"}


class Timed:
    """One party's graph (calls launches) and stream timing windows; the
    parties of a shape take their windows in turn (interleaved), so that each
    sees the same clocks and the GPU's warm-up or drift lands on all alike."""

    def __init__(self, fn, graph_calls=10, stream_calls=20):
        for _ in range(2):
            fn()
        torch.cuda.synchronize()
        self.fn, self.graph_calls, self.stream_calls = fn, graph_calls, stream_calls
        self.g, err = timing.capture(fn, graph_calls)
        if self.g is None:
            raise RuntimeError("CUDA graph capture failed: " + err)
        self.g.replay()
        torch.cuda.synchronize()
        self.graph, self.stream = [], []

    def window(self):
        self.graph.append(timing.window_us(self.g.replay) / self.graph_calls)
        self.stream.append(timing.window_us(self.fn, self.stream_calls))

    def medians(self):
        del self.g
        return {"graph": statistics.median(self.graph), "stream": statistics.median(self.stream)}


def close_to(out, ref, atol=1e-2, rtol=2e-2):
    d = (out.float() - ref.float()).abs()
    return bool((d <= atol + rtol * ref.float().abs()).all().item())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cubins", default=os.environ.get("SYMM_CUTE_CUBINS"),
                    help="folder of build_cubins.py's cubins (no CuTe row without it)")
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated: %s" % ", ".join(SHAPES))
    ap.add_argument("--no-triton", action="store_true", help="leave Triton out (no compile)")
    ap.add_argument("--out", help="append the markdown table to this file")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("SKIP: no CUDA device")
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    cute = symm.cubin.load(args.cubins)["hgemm"] if args.cubins else None
    G = None
    if not args.no_triton:
        sys.path.insert(0, os.path.join(HERE, "triton"))
        import _gemm as G  # noqa: N812
    rows, ok = [], True
    for name in args.shapes.split(","):
        m, k, n = SHAPES[name]
        g = torch.Generator(device=dev).manual_seed(7)
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16, generator=g).mul_(0.05)
        bt = torch.randn(n, k, device=dev, dtype=torch.bfloat16, generator=g).mul_(0.05)
        b = bt.t().contiguous()
        c = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
        ref = torch.matmul(a, bt.t())
        flop = 2.0 * m * n * k
        parties = [("torch.matmul A @ Bt.t()", lambda: torch.matmul(a, bt.t(), out=c), None),
                   ("torch.matmul A @ B", lambda: torch.matmul(a, b, out=c), None)]
        if cute is not None:
            grid = max(1, min((m // 128) * (n // 256), sms))
            parties.append(("CuTe DSL hgemm", lambda: cute(a, bt, c, m, n, k, grid=grid), 0))
        if G is not None:
            cfg = G.GEMM_CONFIG[TRITON_CONFIG[name.split()[0]]]
            cx, opts = G.split(cfg)
            tgrid = ((m // cx["BM"]) * ((n + cx["BN"] - 1) // cx["BN"]),)
            label = "Triton gemm_kernel BM%(BM)d BN%(BN)d BK%(BK)d w%(num_warps)d s%(num_stages)d, TMA loads" % cfg
            ta, tb = G.operands(a, b, cx)
            parties.append((label, lambda: G.gemm_kernel[tgrid](ta, tb, c, m, n, k, m, **cx, **opts), 1))
        base, timed = {}, []
        for label, fn, torch_ref in parties:
            c.fill_(float("nan"))
            try:
                fn()
                torch.cuda.synchronize()
                good = close_to(c, ref)
                timed.append((label, torch_ref, good, Timed(fn)))
            except Exception as e:  # noqa: BLE001 - one party failing is a row of the table
                rows.append((name, "%dx%dx%d" % (m, n, k), label, "FAILED: %s" % str(e).splitlines()[0][:80],
                             "-", "-", "-", "-", "-"))
                ok = False
        for _ in range(REPS):
            for party in timed:
                party[3].window()
        for label, torch_ref, good, tm in timed:
            t = tm.medians()
            ok &= good
            if torch_ref is None:
                base[label] = t
                vs = "-"
                verdict = "ref"
            elif parties[torch_ref][0] not in base:
                vs, verdict = "-", "no reference (torch.matmul failed)"
            else:
                against = parties[torch_ref][0]
                r = {mode: base[against][mode] / t[mode] for mode in t}
                vs = "%.2f / %.2f" % (r["graph"], r["stream"])
                verdict = "WRONG" if not good else ("pass" if min(r.values()) >= BAR else "miss")
            rows.append((name, "%dx%dx%d" % (m, n, k), label, "ok" if good else "WRONG",
                         "%.1f" % t["graph"], "%.1f" % t["stream"], "%.0f" % (flop / t["graph"] / 1e6), vs,
                         verdict))
    header = ("shape", "M x N x K", "GEMM", "check", "graph us", "stream us", "TFLOP/s (graph)",
              "x torch.matmul, same layout (graph / stream; >= %.2f)" % BAR, "bar")
    text = ["", "### GEMM alone at the per-PE shapes, %s" % torch.cuda.get_device_name(dev), "",
            "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    text += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    print("\n".join(text), flush=True)
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n".join(text) + "\n")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
