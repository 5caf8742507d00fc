"""Compile symm.cute Kernels ahead of time into cubins (no GPU needed).

    python -m symm.cute.aot -o build-cute [--arch 90] [--backend nccl] SOURCE...

SOURCE is a Python file or a module name; every symm.cute.Kernel it defines
at module level (or lists in a KERNELS sequence) is compiled for the
architecture (--arch 90, the default, compiles for sm_90a: H100 and H200)
and symm backend (native by default; nvshmem or nccl: docs/backends.md)
with CuTe DSL, and out/<name>.cubin plus an entry of out/manifest.json
(symm.cubin's format: the backend, each pointer's dtype and alignment) are
written. symm.cubin.load(out) launches them on a machine with the CUDA
driver and torch but no CuTe DSL. Two kernels with the same name in the
sources are an error (Kernel(name=) tells them apart).
"""
import argparse
import importlib
import importlib.util
import os
import sys
import time

from ..cubin import write_manifest
from ._bitcode import BACKENDS
from ._kernel import Kernel


def _load_source(src):
    if src.endswith(".py") or os.sep in src:
        path = os.path.abspath(src)
        name = "symm_aot_" + os.path.splitext(os.path.basename(path))[0]
        sys.path.insert(0, os.path.dirname(path))
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod
    return importlib.import_module(src)


def kernels_of(module):
    """The Kernels a module defines: its KERNELS sequence, else every
    module-level Kernel."""
    found = getattr(module, "KERNELS", None)
    if found is None:
        found = [v for v in vars(module).values() if isinstance(v, Kernel)]
    return list(found)


def build(sources, out_dir, arch=90, log=print, keep_ptx=False, backend="native"):
    """Compile every Kernel of the sources; returns the manifest path."""
    kernels = {}
    for src in sources:
        for k in kernels_of(_load_source(src)):
            if k.name in kernels and kernels[k.name] is not k:
                raise SystemExit("two kernels named %r (in %s)" % (k.name, src))
            kernels[k.name] = k
    entries = {}
    for name in sorted(kernels):
        t0 = time.time()
        entries[name] = kernels[name].aot(out_dir, arch=arch, keep_ptx=keep_ptx, backend=backend)
        log("  %-40s %5.1f s" % (name, time.time() - t0))
    return write_manifest(out_dir, entries)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m symm.cute.aot", description=__doc__.split("\n")[0])
    ap.add_argument("sources", nargs="+", help="Python files or module names defining Kernels")
    ap.add_argument("-o", "--out", default="build-cute", help="output folder (default: %(default)s)")
    ap.add_argument("--arch", default="90",
                    help="compute capability: 80 compiles for sm_80, 90 for sm_90a (the architecture-specific "
                         "target, which Hopper's wgmma and TMA need; the cubin runs on sm_90 GPUs only), 100 for "
                         "sm_100a; 'sm_90' and 'sm_90a' are read as 90 (default: %(default)s)")
    ap.add_argument("--backend", default="native", choices=BACKENDS,
                    help="the symm backend the kernels will run on (default: %(default)s)")
    ap.add_argument("--ptx", action="store_true", help="also write <name>.ptx")
    args = ap.parse_args(argv)
    t0 = time.time()
    path = build(args.sources, args.out, arch=args.arch, keep_ptx=args.ptx, backend=args.backend)
    print("wrote %s (%.1f s)" % (path, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
