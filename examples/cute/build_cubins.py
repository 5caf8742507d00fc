"""Compile every CuTe DSL kernel of symm.cute's examples and GPU check ahead of
time, for a GPU this machine need not have (default sm_90a):

    python examples/cute/build_cubins.py [-o build-cute] [--arch 90] [--backend nccl] [--library-only]

writes build-cute/<kernel>.cubin and build-cute/manifest.json (about 3 MiB),
which run_gpu.py --cubins build-cute launches through symm.cubin on a machine
with the CUDA driver and torch but no CuTe DSL, under the symm backend they
were built for (--backend: native, nccl or nvshmem; recorded in the manifest).
--library-only builds only the library check's kernels (run_gpu.py --only
library). On native, the CUDA C twins of the collective kernels
(c_twins.cu, by nvcc) join them. Needs CuTe DSL
(pip install 'nvidia-cutlass-dsl[cu13]==4.8.1') and the device bitcode.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))

from symm.cute import aot  # noqa: E402

SOURCES = (os.path.join(HERE, "kernels.py"), os.path.join(HERE, "hopper_gemm.py"),
           os.path.join(REPO, "tests", "python", "cute_kernels.py"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--out", default=os.path.join(REPO, "build-cute"))
    ap.add_argument("--arch", default="90", help="compute capability; 90 compiles for sm_90a (default: %(default)s)")
    ap.add_argument("--backend", default="native", choices=aot.BACKENDS)
    ap.add_argument("--library-only", action="store_true", help="only tests/python/cute_kernels.py")
    args = ap.parse_args()
    t0 = time.time()
    path = aot.build(SOURCES[-1:] if args.library_only else SOURCES, args.out, arch=args.arch,
                     backend=args.backend)
    if not args.library_only and args.backend == "native":
        import c_twins  # the CUDA C twins of the collective kernels, for the tables' ratios
        c_twins.build(args.out, args.arch)
    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    print("wrote %s: %.1f MiB in %.0f s" % (path, size / 2**20, time.time() - t0))


if __name__ == "__main__":
    main()
