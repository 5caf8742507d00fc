#!/usr/bin/env bash
# Install what a fresh Debian machine with the CUDA toolkit lacks to build and
# test symm: CMake, pkg-config, clang-19 (the device bitcode) with apt, and the
# Python packages the Python/Triton tests use with pip, into the python3 on
# PATH (the system Python unless a virtual environment is active).
#
#   bash scripts/install-deps.sh            everything: the C build, the tests, Python, the DSLs
#   bash scripts/install-deps.sh --c-only   the C library and programs built against it: the apt
#                                           part only, no pip (nothing goes into any Python)
#   ... --dry-run                           say what would be installed, install nothing
#
# With --c-only: cmake builds libsymm and the tools, pkg-config serves the
# pkg-config build of your programs, clang-19/llvm-19 build only the device
# bitcode (what Triton, CuTe DSL and TileLang kernels link; the build leaves it
# out, saying so, where clang-19 is missing). The native backend needs nothing
# more; the scale-out backends (SYMM_BACKEND=nccl / nvshmem, docs/backends.md)
# need NCCL 2.28+ / NVSHMEM 3.x found at build time (SYMM_NCCL_HOME /
# SYMM_NVSHMEM_HOME, or the pip packages this script installs without --c-only).
# Idempotent; needs root for apt.
set -euo pipefail

c_only=0
dry=0
for a in "$@"; do
  case "$a" in
    --c-only) c_only=1 ;;
    --dry-run) dry=1 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-deps: unknown option '$a' (--c-only, --dry-run, --help)" >&2; exit 2 ;;
  esac
done

# run a command, or with --dry-run only say it (on stderr: the output may be discarded)
act() {
  if ((dry)); then
    echo "install-deps: would run: $*" >&2
  else
    "$@"
  fi
}

apt_need=()
command -v cmake    >/dev/null 2>&1 || apt_need+=(cmake)
command -v pkg-config >/dev/null 2>&1 || apt_need+=(pkg-config)
command -v clang-19 >/dev/null 2>&1 || apt_need+=(clang-19)
command -v llvm-dis-19 >/dev/null 2>&1 || apt_need+=(llvm-19)
if ((${#apt_need[@]})); then
  echo "install-deps: apt-get install ${apt_need[*]}"
  act apt-get update -qq
  act env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_need[@]}" >/dev/null
fi

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: add /usr/local/cuda/bin to PATH" >&2
fi

((c_only)) && exit 0

if [ -f "$(dirname "$0")/python-requirements.txt" ]; then
  echo "install-deps: pip install -r scripts/python-requirements.txt into $(python3 -c 'import sys; print(sys.prefix)')"
  act python3 -m pip install -q -r "$(dirname "$0")/python-requirements.txt"
fi

# The scale-out backends (docs/backends.md): NVSHMEM's and NCCL's headers and
# device libraries for the build (ABI checks, the backend device files, the
# nvshmem/nccl bitcode), their host libraries for the loading tests; libsymm
# opens the libraries at run time and builds without them.
act python3 -m pip install -q nvidia-nvshmem-cu13==3.4.5 nvidia-nccl-cu13==2.28.9
