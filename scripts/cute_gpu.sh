#!/usr/bin/env bash
# symm.cute on the GPU machine: the library check and every CuTe DSL example
# on 1, 2 and 4 PEs, from cubins compiled ahead of time (the GPU machines have
# no CuTe DSL). On the CPU machine first:
#     python examples/cute/build_cubins.py          # -> build-cute/ (carry it)
# then here:
#     scripts/cute_gpu.sh                           # logs and tables under $OUT
# PEs beyond the GPU count share GPUs under a private MPS daemon
# (scripts/with_mps.sh), each with its share of the SMs. Every run is bounded
# (timeout) and device waits stop after SYMM_WAIT_TIMEOUT seconds with a
# message. Multicast stays off. Env: CUTE_NPES (default "1 2 4"),
# SYMM_BUILD_DIR (libsymm, built here if missing; default build-gpu),
# SYMM_CUTE_CUBINS (default build-cute), CUTE_WALL (s per run, default 150).
set -uo pipefail
cd "$(dirname "$0")/.."
here=$PWD
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
unset SYMM_ENABLE_MULTICAST
export SYMM_WAIT_TIMEOUT=${SYMM_WAIT_TIMEOUT:-15} PYTHONUNBUFFERED=1
export PATH="$PATH:/usr/local/cuda/bin"
build=${SYMM_BUILD_DIR:-build-gpu}
cubins=${SYMM_CUTE_CUBINS:-build-cute}
npes_list=${CUTE_NPES:-1 2 4}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
summary_file="$OUT/cute_summary.txt"

if [ "${CUTE_INNER:-0}" != 1 ]; then
  [ "$ngpu" -gt 0 ] || { echo "SKIP: no GPU"; exit 0; }
  [ -f "$cubins/manifest.json" ] || { echo "no $cubins/manifest.json: run examples/cute/build_cubins.py where CuTe DSL is installed and carry $cubins/"; exit 2; }
  : >"$summary_file"
  if [ ! -f "$build/src/libsymm.so" ]; then
    t0=$(date +%s)
    { cmake -S . -B "$build" -DCMAKE_CUDA_ARCHITECTURES=90 -DSYMM_BUILD_TESTS=OFF -DSYMM_BUILD_BENCH=OFF &&
      cmake --build "$build" -j "$(nproc)" --target symm; } >"$OUT/cute_build.log" 2>&1 ||
      { echo "libsymm build FAILED (cute_build.log)"; tail -20 "$OUT/cute_build.log"; exit 1; }
    echo "libsymm built in $(( $(date +%s) - t0 )) s" >>"$summary_file"
  fi
  max=0; for n in $npes_list; do [ "$n" -gt "$max" ] && max=$n; done
  if [ "$ngpu" -lt "$max" ] && [ ! -e "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control" ]; then
    CUTE_INNER=1 OUT="$OUT" scripts/with_mps.sh --timeout $(( ${CUTE_WALL:-150} * 3 + 60 )) -- bash "$here/scripts/cute_gpu.sh"
  else
    CUTE_INNER=1 OUT="$OUT" bash "$here/scripts/cute_gpu.sh"
  fi
  echo "==== symm.cute on $ngpu GPU(s) ===="
  cat "$summary_file"
  exit 0
fi

# ---- inner run (under MPS where PEs share GPUs) ----
for n in $npes_list; do
  per=$(( (n + ngpu - 1) / ngpu ))
  mps=X=1
  [ "$per" -gt 1 ] && mps=CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$(( 100 / per ))
  t0=$(date +%s)
  rm -f "$OUT/cute_$n.md"
  env PYTHONPATH="$here/python" SYMM_LIBRARY="$here/$build/src/libsymm.so" "$mps" \
    timeout -k 10 "${CUTE_WALL:-150}" torchrun --nproc-per-node "$n" --master-port $((29800 + n)) \
    examples/cute/run_gpu.py --cubins "$cubins" --out "$OUT/cute_$n.md" ${CUTE_ARGS:-} \
    >"$OUT/cute_$n.log" 2>&1
  rc=$?
  res=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$OUT/cute_$n.log" | tail -1)
  printf '%-14s %s\n' "cute $n PE(s)" "rc=$rc ${res:-no result} ($(( $(date +%s) - t0 )) s)" >>"$summary_file"
  [ $rc = 0 ] || tail -25 "$OUT/cute_$n.log"
done
