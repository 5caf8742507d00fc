#!/usr/bin/env bash
# The MoE exchange (symm_moe.h, symm.moe) on a GPU machine, in one command:
# build the targets it needs, run the C tests (tests/moe/test_moe.cu) on 1, 2
# and 4 PEs, the torch test matrix (tests/python/test_gpu_moe.py) on 2 and 4
# PEs, and `symm-bench --mode moe` on 2 and 4 PEs; logs under $OUT, a
# pass/fail table at the end.
#
#   OUT=/some/dir bash scripts/gpu_moe.sh [stage...]   stages: build ctest python bench
#
# PEs share GPUs when there are fewer GPUs than PEs (each PE takes GPU
# LOCAL_RANK % count). Then, unless MOE_MPS=0 or an MPS daemon is running
# already, the script reruns itself under scripts/with_mps.sh (a private MPS
# daemon, always stopped; MOE_WALL bounds it, default 900 s), and every PE
# gets CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = 100 / (PEs per GPU).
# Knobs: MOE_CTEST_NPES ("1 2 4"), MOE_PY_NPES ("2 4"), MOE_BENCH_NPES
# ("2 4"), MOE_BENCH_ARGS (e.g. --quick), SYMM_BUILD_DIR (build-gpu). Multicast stays off; SYMM_WAIT_TIMEOUT (default 15 s) turns a
# lost signal into a message naming the PE and the word.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
unset SYMM_ENABLE_MULTICAST
export SYMM_WAIT_TIMEOUT=${SYMM_WAIT_TIMEOUT:-15}
export PATH="$PATH:/usr/local/cuda/bin"
build=${SYMM_BUILD_DIR:-build-gpu}
stages=${*:-build ctest python bench}
ctest_npes=${MOE_CTEST_NPES:-1 2 4}
py_npes=${MOE_PY_NPES:-2 4}
bench_npes=${MOE_BENCH_NPES:-2 4}
summary=()
failed=0
t_all=$(date +%s)

stage() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }
note() { summary+=("$(printf '%-34s %-6s %5s s  %s' "$1" "$2" "$3" "${4:-}")"); [ "$2" = ok ] || [ "$2" = skip ] || failed=1; }

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
{ date -u; hostname; nvidia-smi -L; nvcc --version | tail -1; } >"$OUT/moe_machine.txt" 2>&1
if [ "$ngpu" -lt 1 ]; then
  echo "SKIP: gpu_moe.sh: no GPU on this machine"
  exit 0
fi

# ---- MPS for PEs that share a GPU: rerun this script under scripts/with_mps.sh -------
max_pes=1
for n in $ctest_npes $py_npes $bench_npes; do [ "$n" -gt "$max_pes" ] && max_pes=$n; done
if [ -z "${MOE_INNER:-}" ] && [ "${MOE_MPS:-1}" != 0 ] && [ "$ngpu" -lt "$max_pes" ] &&
   [ ! -e "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control" ]; then
  MOE_INNER=1 OUT="$OUT" scripts/with_mps.sh --timeout "${MOE_WALL:-900}" -- bash "$0" "$@"
  exit $?
fi

# torchrun's PEs get their MPS share here (symmrun gives its own PEs theirs).
share_env() {
  local per=$(( ($1 + ngpu - 1) / ngpu ))
  if [ "$per" -gt 1 ] && [ -z "${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:-}" ]; then
    echo "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$(( 100 / per ))"
  else
    echo "X_SYMM_MOE=1"
  fi
}

# run NAME LIMIT LOG cmd...: bounded by timeout -k, result into the table.
run() {
  local name=$1 limit=$2 log=$3 t0 rc
  shift 3
  t0=$(date +%s)
  timeout -k 10 "$limit" "$@" >"$log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    note "$name" ok $(( $(date +%s) - t0 ))
  elif [ $rc -eq 77 ]; then
    note "$name" skip $(( $(date +%s) - t0 )) "$(grep -m1 SKIP "$log")"
  else
    note "$name" FAIL $(( $(date +%s) - t0 )) "rc=$rc, see $(basename "$log")"
    grep -E 'FAIL|Error|error|timed out|assert' "$log" | head -8
  fi
}

if stage build; then
  t0=$(date +%s)
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -DCMAKE_CUDA_ARCHITECTURES=90 -DSYMM_WERROR=${SYMM_WERROR:-ON} >"$OUT/moe_build.log" 2>&1
  fi
  if cmake --build "$build" -j "$(nproc)" --target symm symmrun test_moe symm-bench >>"$OUT/moe_build.log" 2>&1; then
    note build ok $(( $(date +%s) - t0 ))
  else
    note build FAIL $(( $(date +%s) - t0 )) "see moe_build.log"
    tail -20 "$OUT/moe_build.log"
  fi
fi
symmrun=$build/tools/symmrun

if stage ctest && [ -x "$build/tests/moe/test_moe" ]; then
  for n in $ctest_npes; do
    for part in ll ht graph errors; do
      run "test_moe $part ($n PEs)" 150 "$OUT/moe_c_${part}_$n.log" \
        "$symmrun" -n "$n" --timeout 140 "$build/tests/moe/test_moe" "$n" "$part"
    done
  done
fi

if stage python; then
  for n in $py_npes; do
    run "pytest test_gpu_moe ($n PEs)" 300 "$OUT/moe_pytest_$n.log" \
      env $(share_env "$n") PYTHONPATH="$PWD/python" SYMM_LIBRARY="$PWD/$build/src/libsymm.so" \
      torchrun --nproc-per-node "$n" --master-port $((29700 + n)) -m pytest -q -x -p no:cacheprovider \
      tests/python/test_gpu_moe.py
    tail -3 "$OUT/moe_pytest_$n.log"
  done
fi

if stage bench && [ -x "$build/bench/symm-bench" ]; then
  for n in $bench_npes; do
    extra=""
    [ "$n" -gt "$ngpu" ] && extra="--no-nccl --no-nvshmem"  # NCCL refuses two ranks on one GPU
    run "symm-bench --mode moe ($n PEs)" 200 "$OUT/moe_bench_$n.log" \
      "$build/bench/symm-bench" --mode moe --npes "$n" --timeout 190 --phase-timeout 60 \
      $extra ${MOE_BENCH_ARGS:-} --out "$OUT/bench_moe_$n.md"
    grep -E '^\|' "$OUT/bench_moe_$n.md" 2>/dev/null | head -40
  done
fi

echo "==== gpu_moe.sh summary ($ngpu GPU(s), $(( $(date +%s) - t_all )) s) ===="
printf '%s\n' "${summary[@]}"
exit $failed
