"""Everything of symm.cute on GPUs, in one run per PE count: the library
check (every family of the device API in CuTe DSL kernels,
tests/python/cute_gpu_check.py) and every example, with their tables and a
short pass/fail table at the end.

    torchrun --nproc-per-node N examples/cute/run_gpu.py --cubins build-cute --out cute_N.md
    # or without --cubins on a machine with CuTe DSL (compiled just in time)

scripts/cute_gpu.sh runs it on 1, 2 and 4 PEs (under MPS where PEs share a GPU).
On a scale-out backend the cubins must be built for it (the tables name the
backend that ran):

    python examples/cute/build_cubins.py --backend nccl --library-only -o build-cute-nccl
    SYMM_BACKEND=nccl torchrun --nproc-per-node 1 examples/cute/run_gpu.py \
        --cubins build-cute-nccl --only library
"""
import os
import sys
import time
import traceback

import _common as C

sys.path.insert(0, os.path.join(C.REPO, "tests", "python"))
import cute_gpu_check  # noqa: E402

import ag_gemm  # noqa: E402
import all_gather  # noqa: E402
import all_reduce  # noqa: E402
import gemm_rs  # noqa: E402
import reduce_scatter  # noqa: E402
import ring  # noqa: E402

EXAMPLES = [("ring", ring), ("all_gather", all_gather), ("all_reduce", all_reduce),
            ("reduce_scatter", reduce_scatter), ("ag_gemm", ag_gemm), ("gemm_rs", gemm_rs)]


def main():
    ap = C.parser(__doc__)
    ap.add_argument("--only", help="comma-separated parts: library and/or example names")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    env = C.setup(args)
    summary = []
    if only is None or "library" in only:
        t0 = time.time()
        for name, good, detail in cute_gpu_check.run(env):
            summary.append(("library: " + name, "ok" if good else "FAILED", detail))
        env.log("library check: %.1f s" % (time.time() - t0))
    for name, mod in EXAMPLES:
        if only is not None and name not in only:
            continue
        t0 = time.time()
        try:
            what, header, rows, good = mod.run(env, args)
            C.table(env, what, header, rows, args.out)
            detail = "%d rows, %.1f s" % (len(rows), time.time() - t0)
        except Exception as e:  # noqa: BLE001 - one failing example is a row of the summary
            good, detail = False, "%s: %s" % (type(e).__name__, str(e)[:160])
            if env.rank == 0:
                traceback.print_exc()
        good = C.check_all_pes(good)
        summary.append(("example: " + name, "ok" if good else "FAILED", detail))
    C.table(env, "symm.cute summary", ("part", "result", "detail"), summary, args.out)
    failed = [s for s in summary if s[1] != "ok"]
    env.log("%d passed, %d failed" % (len(summary) - len(failed), len(failed)))
    C.finish()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
