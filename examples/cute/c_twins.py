"""The CUDA C twins of the CuTe collective kernels (c_twins.cu): compiled by
nvcc into a cubin beside the CuTe ones, entries c_<kernel> in the folder's
manifest.json, launched by the drivers through symm.cubin like the CuTe
kernels, so a row compares the two languages on one algorithm.

    python examples/cute/c_twins.py -o build-cute      # build_cubins.py does it too

Needs nvcc ($SYMM_NVCC, else on PATH, else $CUDA_HOME/bin) and symm's headers;
native backend only (the CuTe kernels of other backends have no twins)."""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))

from symm import _lib  # noqa: E402
from symm.cubin import write_manifest  # noqa: E402

SOURCE = os.path.join(HERE, "c_twins.cu")
CUBIN = "c_twins.cubin"
BLOCK = 512  # COLL_THREADS of kernels.py and c_twins.cu

_P = [("ctx", "i64"), ("dst", "ptr"), ("src", "ptr")]
TWINS = {
    "c_ag_push": _P + [("sig", "ptr"), ("n", "i32")],
    "c_ag_device": _P + [("n", "i32")],
    "c_ar_oneshot": _P + [("flags", "ptr"), ("n", "i32")],
    "c_ar_twoshot": _P + [("flags", "ptr"), ("n", "i32")],
    "c_rs_oneshot": _P + [("flags", "ptr"), ("n", "i32")],
    "c_ar_device": _P + [("n", "i32")],
    "c_rs_device": _P + [("n", "i32")],
}


def nvcc():
    for cand in (os.environ.get("SYMM_NVCC"), shutil.which("nvcc"),
                 os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    raise RuntimeError("c_twins: no nvcc (set SYMM_NVCC, put it on PATH or set CUDA_HOME)")


def build(folder, arch="90"):
    """Compile c_twins.cu into folder/c_twins.cubin and merge its entries into
    folder/manifest.json; returns their names."""
    os.makedirs(folder, exist_ok=True)
    arch = str(arch).rstrip("a")
    cmd = [nvcc(), "-cubin", "-O3", "-std=c++17", "-arch=sm_%s" % arch, "-Werror", "all-warnings",
           "-I", _lib.include_dir(), "-o", os.path.join(folder, CUBIN), SOURCE]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("c_twins: nvcc failed:\n%s\n%s" % (" ".join(cmd), (r.stdout + r.stderr)[-4000:]))
    entries = {name: {"arch": int(arch), "block": [BLOCK, 1, 1], "cubin": CUBIN, "entry": name,
                      "params": [list(p) for p in params], "smem": 0, "backend": "native"}
               for name, params in TWINS.items()}
    write_manifest(folder, entries)
    return sorted(entries)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--out", default=os.path.join(REPO, "build-cute"))
    ap.add_argument("--arch", default="90")
    args = ap.parse_args()
    print("wrote %s: %s" % (os.path.join(args.out, CUBIN), " ".join(build(args.out, args.arch))))


if __name__ == "__main__":
    main()
