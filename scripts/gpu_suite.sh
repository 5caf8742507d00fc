#!/usr/bin/env bash
# The GPU run: build (unless a carried build is usable), run the GPU tests on
# 1, 2 and all GPUs, then the benchmarks; logs under $OUT, a short table last.
#   scripts/gpu_suite.sh [stage...]   stages: build tests tests-2gpu tests-1gpu quick bench
#   variants probes examples python (default: build tests tests-2gpu tests-1gpu bench python)
# Multicast stays off: the three disabling variables are forced on and
# SYMM_ENABLE_MULTICAST is removed, whatever the caller had.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
unset SYMM_ENABLE_MULTICAST
# a lost signal stops its kernel with a message instead of hanging the stage
export SYMM_WAIT_TIMEOUT=${SYMM_WAIT_TIMEOUT:-15}
export PATH="$PATH:/usr/local/cuda/bin"
build=${SYMM_BUILD_DIR:-build-gpu}
stages=${*:-build tests tests-2gpu tests-1gpu bench python}
summary=()

py=$(command -v python3)
for pkg in nccl nvshmem; do
  d=$($py -c "import nvidia.$pkg as m; print(m.__path__[0])" 2>/dev/null) && \
    export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
{ date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; nvcc --version | tail -1; } >"$OUT/machine.txt" 2>&1

stage() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }
note() { summary+=("$(printf '%-28s %s' "$1" "$2")"); }

if stage build; then
  t0=$(date +%s)
  if [ -f "$build/CMakeCache.txt" ] && cmake --build "$build" -j "$(nproc)" >"$OUT/build.log" 2>&1; then
    note build "reused $build ($(( $(date +%s) - t0 )) s)"
  else
    rm -rf "$build"
    if cmake -S . -B "$build" -DCMAKE_CUDA_ARCHITECTURES=90 -DSYMM_WERROR=${SYMM_WERROR:-ON} \
         -DSYMM_GPU_TEST_TIMEOUT=${GPU_TEST_TIMEOUT:-120} >"$OUT/build.log" 2>&1 &&
       cmake --build "$build" -j "$(nproc)" >>"$OUT/build.log" 2>&1; then
      note build "fresh ($(( $(date +%s) - t0 )) s)"
    else
      note build "FAILED (see build.log)"; tail -30 "$OUT/build.log"
    fi
  fi
fi

run_ctest() { # $1 label for the log, rest: env
  local tag=$1; shift
  local log="$OUT/ctest_$tag.log"
  # ctest can wait forever on a stuck grandchild holding its pipe: bound it.
  env "$@" timeout -k 10 "${CTEST_WALL:-400}" \
    ctest --test-dir "$build" -L gpu --output-on-failure --timeout "${CTEST_TIMEOUT:-120}" >"$log" 2>&1
  local line
  line=$(grep -E 'tests passed|tests failed' "$log" | tail -1)
  note "gpu tests ($tag)" "${line:-no result}"
  grep -E '^\s*[0-9]+/[0-9]+ Test.*(Failed|Timeout|Exception|Not Run)' "$log" | head -20
}

if stage tests; then
  run_ctest "${ngpu}gpu" X=1
fi
if stage tests-2gpu && [ "$ngpu" -gt 2 ]; then
  run_ctest 2gpu CUDA_VISIBLE_DEVICES=0,1
fi
if stage tests-1gpu && [ "$ngpu" -gt 1 ]; then
  run_ctest 1gpu CUDA_VISIBLE_DEVICES=0
fi

if stage quick && [ -x "$build/bench/symm-bench" ]; then
  timeout -k 10 "${BENCH_WALL:-240}" "$build/bench/symm-bench" --verbose --quick --timeout 200 --phase-timeout 60 --out "$OUT/bench_quick.md" \
    >"$OUT/bench_quick.log" 2>&1
  note "bench quick" "rc=$?"
  tail -60 "$OUT/bench_quick.log"
fi

if stage bench && [ -x "$build/bench/symm-bench" ]; then
  for mode in rma coll; do
    if timeout -k 10 "${BENCH_WALL:-240}" "$build/bench/symm-bench" --verbose --mode $mode --timeout 200 --phase-timeout 60 \
        --out "$OUT/bench_$mode.md" ${BENCH_ARGS:-} >"$OUT/bench_$mode.log" 2>&1; then
      note "bench $mode" "ok"
    else
      note "bench $mode" "FAILED rc=$?"
    fi
    tail -40 "$OUT/bench_$mode.log"
  done
fi

if stage variants && [ -x "$build/tests/device/device_put_variants" ]; then
  timeout -k 10 "${VARIANTS_WALL:-120}" "$build/tools/symmrun" -n 2 --timeout 110 \
    "$build/tests/device/device_put_variants" ${VARIANTS_ARGS:-} >"$OUT/put_variants.log" 2>&1
  note "put variants" "rc=$?"
  tail -40 "$OUT/put_variants.log"
fi

if stage probes; then
  # standalone probes (bench/probes): copy engines vs SM stores, flag ping-pong by memory kind
  for p in ce_probe pingpong_probe; do
    [ -x "$build/bench/$p" ] || continue
    timeout -k 5 "${PROBE_WALL:-90}" "$build/bench/$p" >"$OUT/$p.md" 2>&1
    note "probe $p" "rc=$?"
    cat "$OUT/$p.md"
  done
fi

if stage examples && [ -f examples/triton/run_all.py ]; then
  bc=${SYMM_BITCODE_DIR:-$PWD/build-lead/bitcode}
  if PYTHONPATH=$PWD/python SYMM_LIBRARY=$PWD/$build/src/libsymm.so SYMM_BITCODE_DIR=$bc \
      timeout -k 10 "${EXAMPLES_WALL:-240}" torchrun --nproc-per-node "$ngpu" --master-port 29631 \
      examples/triton/run_all.py --out "$OUT/triton_examples.md" >"$OUT/run_all.log" 2>&1; then
    note "triton examples" "ok"
  else
    note "triton examples" "FAILED rc=$?"
  fi
  grep -E '^\| ' "$OUT/triton_examples.md" 2>/dev/null | head -14
fi

if stage python && [ -d tests/python ]; then
  # The bitcode needs clang-19, which the GPU machine lacks: it is built on the
  # build machine and carried (SYMM_BITCODE_DIR); Triton compiles on first use.
  bc=${SYMM_BITCODE_DIR:-$PWD/build-lead/bitcode}
  for n in ${PY_NPES:-2 4}; do
    [ "$ngpu" -ge "$n" ] || continue
    if PYTHONPATH=$PWD/python SYMM_LIBRARY=$PWD/$build/src/libsymm.so SYMM_BITCODE_DIR=$bc \
        timeout -k 10 "${PY_WALL:-480}" torchrun --nproc-per-node "$n" -m pytest -q -x tests/python \
        >"$OUT/pytest_$n.log" 2>&1; then
      note "python tests ($n gpu)" "$(tail -1 "$OUT/pytest_$n.log")"
    else
      note "python tests ($n gpu)" "FAILED: $(tail -1 "$OUT/pytest_$n.log")"
    fi
  done
fi

echo "==== summary ($ngpu GPUs) ===="
printf '%s\n' "${summary[@]}"
