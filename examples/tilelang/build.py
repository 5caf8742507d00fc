"""Build every TileLang kernel of examples/tilelang ahead of time, on a
machine with TileLang and nvcc and no GPU: CUDA source and a cubin per
kernel (--arch 90, the default: sm_90a) plus manifest.json, which symm.cubin
loads where TileLang is absent (the GPU machines).

    python3 examples/tilelang/build.py [--out build-tilelang] [--pes 1 2 4] [--jobs 2] [--only PREFIX...]
                                       [--backend native|nccl|nvshmem]

The folder (about 10 MiB; carry it to the GPU machine) is what
`run_all.py --aot build-tilelang` and scripts/gpu_tilelang.sh use. A scale-out
backend builds into its own folder (build-tilelang-<backend> by default);
`--backend nvshmem --only prim_` keeps it small enough to carry."""
import argparse
import concurrent.futures as cf
import multiprocessing
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

from symm._lib import BACKENDS  # noqa: E402

EXAMPLES = ("primitives", "ring_shift", "all_gather", "all_to_all", "gemm", "ag_gemm", "gemm_rs", "cannon", "summa",
            "seq_all_to_all")


def jobs(pes=(1, 2, 4), only_examples=False):
    """(name, builder) of every kernel the examples need for these PE counts."""
    import importlib
    out = {}
    for modname in EXAMPLES:
        if only_examples and modname == "primitives":
            continue
        mod = importlib.import_module(modname)
        for p in pes:
            for cfg in mod.CONFIGS:
                out.update(mod.kernels(p, cfg))
    return sorted(out.items())


def _build_one(job):
    name, out, arch, backend = job
    import symm.tilelang as sT
    builder = dict(jobs(_PES))[name]
    t0 = time.time()
    try:
        entry = sT.build(builder(), out, name, arch, backend=backend, manifest=False)  # main() writes them
    except Exception as e:  # TVM's errors do not pickle back to the parent
        import traceback
        raise RuntimeError("%s: %s\n%s" % (name, e, traceback.format_exc()[-3000:])) from None
    return name, entry, time.time() - t0


_PES = (1, 2, 4)


def main():
    global _PES
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="build folder (default build-tilelang, or build-tilelang-<backend>)")
    ap.add_argument("--backend", default="native", choices=BACKENDS,
                    help="symm backend the kernels are compiled for (docs/backends.md)")
    ap.add_argument("--pes", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--arch", default="90", help="compute capability; 90 compiles for sm_90a (default: %(default)s)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--only", nargs="+", metavar="PREFIX",
                    help="rebuild only the kernels whose names start with one of these (the manifest keeps the rest)")
    args = ap.parse_args()
    args.out = args.out or os.path.join(os.getcwd(), "build-tilelang" + (
        "" if args.backend == "native" else "-" + args.backend))
    _PES = tuple(args.pes)
    import symm.cubin
    import symm.tilelang as sT
    if args.backend != "native":
        sT.backend_flags(args.backend)  # a missing NCCL / NVSHMEM stops here once, not in every kernel
        if args.backend == "nvshmem":
            sT.nvshmem_device_library()
    if os.path.exists(os.path.join(args.out, "manifest.json")):
        others = {e.get("backend", "native") for e in symm.cubin.read_manifest(args.out).values()} - {args.backend}
        if others:
            print("%s holds kernels built for %s: build %s kernels into another folder (--out)"
                  % (args.out, " ".join(sorted(others)), args.backend))
            return 2
    names = [n for n, _ in jobs(_PES) if not args.only or n.startswith(tuple(args.only))]
    if not names:
        print("no kernel matches %s" % " ".join(args.only))
        return 1
    t0 = time.time()
    entries, failed = {}, []
    # spawn: TileLang's runtime does not survive fork
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(args.jobs, mp_context=ctx, initializer=_init, initargs=(_PES,)) as ex:
        futs = {ex.submit(_build_one, (n, args.out, args.arch, args.backend)): n for n in names}
        for f in cf.as_completed(futs):
            try:
                name, entry, dt = f.result()
                entries[name] = entry
                print("%-48s %5.1f s" % (name, dt), flush=True)
            except Exception as e:  # noqa: BLE001 - report every kernel
                failed.append(futs[f])
                print("%-48s FAILED: %s" % (futs[f], e), flush=True)
    symm.cubin.write_manifest(args.out, entries, drop=failed)
    print("%d kernels (%s) in %s (%.0f s)%s" % (len(entries), args.backend, args.out, time.time() - t0,
                                           ", FAILED: " + " ".join(failed) if failed else ""))
    return 1 if failed else 0


def _init(pes):
    global _PES
    _PES = pes


if __name__ == "__main__":
    sys.exit(main())
