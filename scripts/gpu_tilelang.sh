#!/usr/bin/env bash
# symm.tilelang on a GPU machine without TileLang: every primitive and
# example (examples/tilelang/run_all.py) on 1, 2 and 4 PEs, from kernels
# built ahead of time (examples/tilelang/build.py, carried as build-tilelang/).
#   scripts/gpu_tilelang.sh [build folder]      logs and tables under $OUT
# SYMM_BACKEND=nccl|nvshmem runs on that backend over a folder built for it
# (build.py --backend B --only prim_), TL_ONLY=primitives only those examples.
# PEs beyond the GPU count share GPUs; above 2 per GPU under a private MPS
# daemon (scripts/with_mps.sh) with an equal share of the SMs each. Multicast
# stays off. The fused GEMM examples at speed, on 4 GPUs from a small folder
# of their own: scripts/gpu_gemm_tilelang.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
aot=${1:-build-tilelang}
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
export PATH="$PATH:/usr/local/cuda/bin"
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
build=${SYMM_BUILD_DIR:-build-gpu}
backend=${SYMM_BACKEND:-native}
tag=$([ "$backend" = native ] || echo "_$backend")
summary=()

if [ ! -f "$aot/manifest.json" ]; then
  echo "gpu_tilelang: no $aot/manifest.json: run python3 examples/tilelang/build.py --out $aot where TileLang is installed" >&2
  exit 2
fi
if [ -z "${SYMM_LIBRARY:-}" ]; then
  if [ ! -f "$build/src/libsymm.so" ]; then
    { cmake -S . -B "$build" -DCMAKE_CUDA_ARCHITECTURES=90 -DSYMM_BUILD_TESTS=OFF -DSYMM_BUILD_BENCH=OFF &&
      cmake --build "$build" -j "$(nproc)" --target symm; } >"$OUT/tilelang_build.log" 2>&1 ||
      { echo "gpu_tilelang: building libsymm failed (see tilelang_build.log)"; exit 2; }
  fi
  export SYMM_LIBRARY=$PWD/$build/src/libsymm.so
fi

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
most=0
for n in ${TL_PES:-1 2 4}; do [ "$n" -gt "$most" ] && most=$n; done
# more than two PEs per GPU run side by side only under MPS: a private daemon
# for the whole script (scripts/with_mps.sh always stops it), unless one is there
if [ "$ngpu" -gt 0 ] && [ $(( (most + ngpu - 1) / ngpu )) -gt 2 ] &&
   [ ! -e "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control" ]; then
  exec scripts/with_mps.sh -- bash "$PWD/scripts/gpu_tilelang.sh" "$aot"
fi

for n in ${TL_PES:-1 2 4}; do
  per_gpu=$(( (n + ngpu - 1) / (ngpu > 0 ? ngpu : 1) ))
  share=X=1
  [ "$per_gpu" -gt 1 ] && share=CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$(( 100 / per_gpu ))
  t0=$(date +%s)
  env "$share" timeout -k 10 "${TL_WALL:-200}" torchrun --nproc-per-node "$n" --master-port $((29700 + n)) \
    examples/tilelang/run_all.py --aot "$aot" --iters "${TL_ITERS:-10}" --checks "${TL_CHECKS:-2}" \
    ${TL_ONLY:+--only $TL_ONLY} --out "$OUT/tilelang${tag}_${n}pe.md" >"$OUT/tilelang${tag}_${n}pe.log" 2>&1
  rc=$?
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$OUT/tilelang${tag}_${n}pe.log" | tail -1)
  summary+=("$(printf '%-30s rc=%-3s %-24s %ss' "tilelang${tag:+ $backend} ${n} PE" "$rc" "${line:-no result}" $(( $(date +%s) - t0 )))")
done

for n in ${TL_PES:-1 2 4}; do
  [ -f "$OUT/tilelang${tag}_${n}pe.md" ] && cat "$OUT/tilelang${tag}_${n}pe.md"
done
echo "==== symm.tilelang summary ($ngpu GPUs, symm backend $backend) ===="
printf '%s\n' "${summary[@]}"
