"""gemm_rs_ce_kernel (examples/triton/gemm_rs.py) run by Triton's interpreter
on the CPU: for a few PE counts, PEs, sub-chunk sizes and N (a masked last
column tile included), one launch over every band with the peers' flags
preset must store every peer band's tiles into stage (the partial A @ B),
count each sub-chunk's tiles in done, and store into out the own band's
partial plus the peers' received partials, in fp32 then rounded. fp16
operands (the interpreter computes bf16 wrongly), the kernel's own tile
sizes. No GPU.

    python3 tests/python/triton_rs_interp.py   (exit 0: all passed)
"""
import builtins
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(REPO, "python"), os.path.join(REPO, "examples", "triton")]

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton.runtime.interpreter as TI  # noqa: E402


class _Int(int):
    """int() of the interpreter's one-element scalar arrays (NumPy 2 refuses
    them; the interpreter's range() over a kernel argument needs it)."""

    def __new__(cls, x=0, *a):
        if isinstance(x, np.ndarray):
            x = x.reshape(-1)[0]
        return builtins.int(x, *a)


TI.int = _Int

import gemm_rs as R  # noqa: E402

F16 = torch.float16


def case(P, me, m_loc, sub_m, n, k=128):
    cfg = R.G.GEMM_CONFIG["gemm_rs"]
    bm, bn = cfg["BM"], cfg["BN"]
    g = torch.Generator().manual_seed(P * 1000 + me * 100 + n)
    a = (torch.randn(P * m_loc, k, generator=g) * 0.1).to(F16)
    b = (torch.randn(k, n, generator=g) * 0.1).to(F16)
    stage = torch.full((P * m_loc, n), float("nan"), dtype=F16)
    recv = (torch.randn(P * m_loc, n, generator=g) * 0.1).to(F16)
    subs = m_loc // sub_m
    done = torch.zeros(P * subs, dtype=torch.int64)
    rflag = torch.ones(P * subs, dtype=torch.int64)
    out = torch.full((m_loc, n), float("nan"), dtype=F16)
    rec = torch.zeros(4, dtype=torch.int64)
    ctx = torch.zeros(32, dtype=torch.int64)     # no deadline, no abort flag: the flags are set
    col_tiles = -(-n // bn)
    tiles = P * (m_loc // bm) * col_tiles
    R.gemm_rs_ce_kernel[(tiles,)](ctx.data_ptr(), *R.G.operands(a, b, cfg), stage, recv, done, rflag, out, rec, n,
                                  k, m_loc, sub_m, me, P, 0, VEC=n % 8 == 0, **R.G.split(cfg)[0])
    full = a.float() @ b.float()
    errs = []
    for q in range(P):
        rows = slice(q * m_loc, (q + 1) * m_loc)
        if q == me:
            continue
        if not torch.allclose(stage[rows].float(), full[rows], atol=1e-2, rtol=1e-2):
            errs.append("stage of PE %d's band" % q)
        want = (sub_m // bm) * col_tiles
        if done[q * subs:(q + 1) * subs].tolist() != [want] * subs:
            errs.append("done of PE %d: %s, %d each expected" % (q, done[q * subs:(q + 1) * subs].tolist(), want))
    mine = slice(me * m_loc, (me + 1) * m_loc)
    want = full[mine] + sum(recv[q * m_loc:(q + 1) * m_loc].float() for q in range(P) if q != me)
    if torch.isnan(out).any() or not torch.allclose(out.float(), want, atol=2e-2, rtol=2e-2):
        errs.append("out (own band + partials)")
    if done[me * subs:(me + 1) * subs].any() or rec.any():
        errs.append("own band counted, or a wait recorded")
    return errs


def main():
    failures = 0
    for P, me, m_loc, sub_m, n in [(1, 0, 256, 256, 256), (2, 0, 256, 256, 320), (2, 1, 256, 128, 512),
                                   (3, 2, 128, 128, 264), (4, 1, 256, 128, 256)]:
        errs = case(P, me, m_loc, sub_m, n)
        failures += bool(errs)
        print("gemm_rs_ce_kernel P=%d me=%d rows/band=%d sub=%d N=%d: %s"
              % (P, me, m_loc, sub_m, n, "ok" if not errs else "FAIL: " + "; ".join(errs)), flush=True)
    print("%d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
