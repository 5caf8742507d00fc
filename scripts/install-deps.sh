#!/usr/bin/env bash
# Install what a fresh Debian machine with the CUDA toolkit lacks to build and
# test symm: CMake, pkg-config, clang-19 (the device bitcode) with apt, and the
# Python packages the Python/Triton tests use with pip, into the python3 on
# PATH (the system Python unless a virtual environment is active).
# Idempotent; needs root for apt.
set -euo pipefail

apt_need=()
command -v cmake    >/dev/null 2>&1 || apt_need+=(cmake)
command -v pkg-config >/dev/null 2>&1 || apt_need+=(pkg-config)
command -v clang-19 >/dev/null 2>&1 || apt_need+=(clang-19)
command -v llvm-dis-19 >/dev/null 2>&1 || apt_need+=(llvm-19)
if ((${#apt_need[@]})); then
  echo "install-deps: apt-get install ${apt_need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_need[@]}" >/dev/null
fi

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: add /usr/local/cuda/bin to PATH" >&2
fi

if [ -f "$(dirname "$0")/python-requirements.txt" ]; then
  echo "install-deps: pip install -r scripts/python-requirements.txt into $(python3 -c 'import sys; print(sys.prefix)')"
  python3 -m pip install -q -r "$(dirname "$0")/python-requirements.txt"
fi

# The scale-out backends (docs/backends.md): NVSHMEM's and NCCL's headers and
# device libraries for the build (ABI checks, the backend device files, the
# nvshmem/nccl bitcode), their host libraries for the loading tests; libsymm
# opens the libraries at run time and builds without them.
python3 -m pip install -q nvidia-nvshmem-cu13==3.4.5 nvidia-nccl-cu13==2.28.9
