#!/usr/bin/env bash
# Build symm-bench if needed and run it on the local GPUs; the markdown goes to
# bench/results/archive/<date>-<host>-<n>gpu-<mode>.md (or $OUT/ when OUT is set).
#   scripts/gpu_bench.sh [MODE] [more symm-bench args...]     MODE defaults to rma
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
# No multicast objects, whatever the caller had (docs/design.md decision 7).
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
build=${SYMM_BUILD_DIR:-build-gpu}
mode=${1:-rma}
[ $# -gt 0 ] && shift

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_CUDA_ARCHITECTURES=90 -DSYMM_WERROR=ON
fi
cmake --build "$build" -j "$(nproc)" --target symm-bench symmrun

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
dir=${OUT:-bench/results/archive}
mkdir -p "$dir"
out="$dir/$(date -u +%F)-$(hostname -s)-${ngpu}gpu-$mode.md"
"$build/bench/symm-bench" --mode "$mode" --out "$out" "$@"
echo "gpu_bench: results in $out"
