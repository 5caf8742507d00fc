#!/usr/bin/env bash
# The GPU run: build (unless a carried build is usable), the GPU tests on 1,
# 2, 4 and 8 PEs, the Python suite under torchrun on 1, 2 and 4 PEs, the
# Triton examples on 2 and 4 PEs, the benchmarks when asked; logs under $OUT,
# a short table last.
#
#   scripts/gpu_suite.sh [stage...]
#     build       configure and build $SYMM_BUILD_DIR (default build-gpu), or reuse it
#     tests       ctest -L gpu: every GPU test, 1 to 8 PEs (PEs beyond the GPUs share them).
#                 Under MPS the tests labelled traps (a kernel stopped on purpose) run
#                 after the others, outside the suite's daemon, each with a daemon of its
#                 own where its PEs share GPUs: a client's fault can leave an MPS server
#                 refusing new clients for good (TRAPS_WALL s, default 200, kept for them)
#     tests-1gpu  the same with every PE on GPU 0 (machines with several GPUs)
#     tests-timesliced  the 2-PE device, runtime and some coll tests on GPU 0 without MPS
#     python      the Python GPU suite under torchrun: 1 PE (in PY_SHARDS parallel jobs,
#                 which compile the Triton kernels in parallel), then 2 and 4 PEs
#     examples    examples/triton/run_all.py --quick on 2 and 4 PEs
#     examples-c  examples/c/run_all.sh: the C examples built against an install, 2 and 4 PEs
#     cute        scripts/cute_gpu.sh over cubins built ahead of time (build-cute:
#                 examples/cute/build_cubins.py makes it where CuTe DSL is)
#     tilelang    scripts/gpu_tilelang.sh over kernels built ahead of time ($TL_AOT,
#                 default build-tilelang: examples/tilelang/build.py makes it where TileLang is)
#     bench       symm-bench --mode rma and coll;  quick: symm-bench --quick
#     mps-kill    a PE job under scripts/with_mps.sh stopped by its timeout leaves no
#                 process, GPU context or MPS daemon behind
#     fault       scripts/fault_matrix.py: the fault matrix on 4 PEs (about 4-5 min;
#                 FAULT_ARGS adds options, e.g. --quick); its table in $OUT/fault/
#     sanitize    scripts/gpu_sanitize.sh: compute-sanitizer (SAN_TOOLS) over the 1-PE GPU
#                 tests and the 2-PE device tests, sanitizer-sized, without MPS, within
#                 SAN_SUITE_WALL s (default 540); its table in sanitize_summary.txt
#     variants probes   standalone measurement programs
#     backends    scripts/gpu_backends.sh on this build (BACKENDS_STAGES picks its stages): the nvshmem and nccl backends on the
#                 one GPU (about 5 min, BACKENDS_WALL); its table joins the summary, its logs
#                 are $OUT/backends_logs.tar.gz
#   default: build tests python examples examples-c mps-kill
#
# The whole run is bounded by SUITE_WALL seconds (default 570): the GPU stages
# run as a child of this script and get what the build and the later stages leave. When the PEs of a stage can outnumber the
# GPUs (up to 8 PEs), they run under scripts/with_mps.sh: a private MPS daemon
# (own pipe and log folders), stopped at the end also on failure, timeout or a
# signal; mps-kill then checks that such a stop leaves nothing behind.
# Multicast stays off: the three disabling variables are forced on and
# SYMM_ENABLE_MULTICAST is removed, whatever the caller had. No GPU setting is
# ever changed.
set -uo pipefail
cd "$(dirname "$0")/.."
here=$PWD
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
export PATH="$PATH:/usr/local/cuda/bin"
build=${SYMM_BUILD_DIR:-build-gpu}
stages=${*:-build tests python examples examples-c mps-kill}
max_pes=${SUITE_MAX_PES:-8}
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)

stage() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }

summary_file=$OUT/summary.txt
note() { printf '%-30s %s\n' "$1" "$2" >>"$summary_file"; }
since() { echo "$(( $(date +%s) - $1 )) s"; }

gpu_env_pip_libs
# one Triton cache for every stage of the run: later stages reuse what the first compiled
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$here/$build/triton-cache}

run_ctest() { # $1 label for the log, rest: env
  local tag=$1; shift
  local log="$OUT/ctest_$tag.log" t0
  t0=$(date +%s)
  # ctest can wait forever on a stuck grandchild holding its pipe: bound it.
  env "$@" timeout -k 10 "${CTEST_WALL:-300}" \
    ctest --test-dir "$build" -L gpu --output-on-failure --timeout "${CTEST_TIMEOUT:-120}" \
    ${CTEST_ARGS:-} >"$log" 2>&1
  local line skipped
  line=$(grep -E 'tests passed|tests failed' "$log" | tail -1)
  skipped=$(grep -c -E '\*\*\*Skipped|Not Run' "$log")
  note "gpu tests ($tag)" "${line:-no result}, $skipped skipped ($(since "$t0"))"
  grep -E '^\s*[0-9]+/[0-9]+ Test.*(Failed|Timeout|Exception|Not Run|Skipped)' "$log" | head -20
}

# The tests labelled traps, one by one: plain where their PEs have a GPU each, else under a
# private MPS daemon of their own (its logs kept in $OUT/mps_logs), within TRAPS_WALL s.
run_traps() {
  local log="$OUT/ctest_traps.log" t0 name n pass=0 fail=0 skip=0 notrun=0 failed="" rc end
  t0=$(date +%s)
  end=$((t0 + ${TRAPS_WALL:-200}))
  : >"$log"
  for name in $(ctest --test-dir "$build" -N -L traps | sed -nE 's/^ *Test +#[0-9]+: ([^ ]+).*$/\1/p'); do
    if [ $((end - $(date +%s))) -lt 20 ]; then notrun=$((notrun + 1)); continue; fi
    n=${name##*_}
    local wrap=()
    [ "$n" -gt "$ngpu" ] && wrap=(env SYMM_MPS_LOGS="$OUT/mps_logs" scripts/with_mps.sh --timeout $((end - $(date +%s))) --)
    "${wrap[@]}" ctest --test-dir "$build" -R "^$name\$" --output-on-failure --timeout "${CTEST_TIMEOUT:-120}" >>"$log" 2>&1
    rc=$?
    if grep -qE "^1/1 Test.*\*\*\*Skipped|^1/1 Test.*Not Run" <(tail -30 "$log"); then skip=$((skip + 1))
    elif [ $rc = 0 ]; then pass=$((pass + 1))
    else fail=$((fail + 1)); failed="$failed $name"
    fi
  done
  note "gpu tests (traps, apart)" "$pass passed, $fail failed, $skip skipped, $notrun not run ($(since "$t0"))${failed:+:$failed}"
}

# ---- the outer run: build, then the GPU stages (under a private MPS daemon when
# the PEs outnumber the GPUs), then the MPS clean-up check, then the summary ----
if [ "${SYMM_SUITE_INNER:-0}" != 1 ]; then
  t_start=$(date +%s)
  : >"$summary_file"
  { date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; nvcc --version | tail -1; } >"$OUT/machine.txt" 2>&1
  if stage build; then
    t0=$(date +%s)
    if [ -f "$build/CMakeCache.txt" ] && cmake --build "$build" -j "$(nproc)" >"$OUT/build.log" 2>&1; then
      note build "reused $build ($(since "$t0"))"
    else
      rm -rf "$build"
      if cmake -S . -B "$build" -DCMAKE_CUDA_ARCHITECTURES=90 -DSYMM_WERROR=${SYMM_WERROR:-ON} \
           -DSYMM_GPU_TEST_TIMEOUT=${GPU_TEST_TIMEOUT:-120} >"$OUT/build.log" 2>&1 &&
         cmake --build "$build" -j "$(nproc)" >>"$OUT/build.log" 2>&1; then
        note build "fresh ($(since "$t0"))"
      else
        note build "FAILED (see build.log)"; tail -30 "$OUT/build.log"
      fi
    fi
  fi
  inner=""
  for s in $stages; do case $s in build|mps-kill|tests-timesliced|sanitize|backends) ;; *) inner="$inner $s" ;; esac; done
  if [ -n "$inner" ]; then
    # SUITE_WALL bounds the whole run: the GPU stages get what the build left,
    # less what the stages after them need
    reserve=0
    use_mps=0
    [ "${SYMM_SUITE_MPS:-1}" != 0 ] && [ "$ngpu" -gt 0 ] && [ "$ngpu" -lt "$max_pes" ] &&
      [ ! -e "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control" ] && use_mps=1
    stage tests && [ $use_mps = 1 ] && reserve=$((reserve + ${TRAPS_WALL:-200}))
    stage mps-kill && reserve=$((reserve + 30))
    stage tests-timesliced && reserve=$((reserve + 150))
    stage backends && reserve=$((reserve + ${BACKENDS_WALL:-330} + 15))
    wall=$(( ${SUITE_WALL:-570} - ($(date +%s) - t_start) - reserve ))
    if [ $use_mps = 1 ]; then
      env SYMM_SUITE_INNER=1 SYMM_SUITE_TRAPS_APART=1 OUT="$OUT" SYMM_MPS_LOGS="$OUT/mps_logs" \
        scripts/with_mps.sh --timeout "$wall" -- bash "$here/scripts/gpu_suite.sh" $inner
    else
      env SYMM_SUITE_INNER=1 OUT="$OUT" timeout -k 10 "$wall" bash "$here/scripts/gpu_suite.sh" $inner
    fi
    [ $? = 124 ] && note "GPU stages" "STOPPED after ${wall} s (their processes and the MPS daemon stopped)"
    stage tests && [ $use_mps = 1 ] && run_traps
  fi
  if stage tests-timesliced; then
    # two PEs on one GPU without MPS take turns on it: slow, and still correct
    CTEST_ARGS="-R ^(device_.*|coll_(errors|move|every|device)|runtime_gpu_.*)_2$ ${CTEST_ARGS:-}" \
      run_ctest "2pe_timesliced" CUDA_VISIBLE_DEVICES=0
  fi
  if stage backends; then
    # outside the suite's MPS daemon: the script starts one where it needs it
    t0=$(date +%s)
    env OUT="$OUT" SYMM_BUILD_DIR="$build" BACKENDS_WALL="${BACKENDS_WALL:-330}" \
      timeout -k 10 $(( ${BACKENDS_WALL:-330} + 60 )) bash scripts/gpu_backends.sh ${BACKENDS_STAGES:-} >/dev/null 2>&1
    rc=$?
    note "backends" "rc=$rc ($(since "$t0")): table below, logs in backends_logs.tar.gz"
    sed 's/^/  /' "$OUT/backends_summary.txt" >>"$summary_file" 2>/dev/null ||
      echo "  no backends_summary.txt" >>"$summary_file"
  fi
  if stage sanitize; then
    t0=$(date +%s)
    san_wall=${SAN_SUITE_WALL:-540}
    # the script splits SAN_WALL over its runs; the margin covers its last kill and tar
    if OUT="$OUT" SAN_WALL="${SAN_WALL:-$((san_wall - 25))}" timeout -k 10 "$san_wall" \
         scripts/gpu_sanitize.sh "$build" >"$OUT/sanitize.log" 2>&1; then
      note "compute-sanitizer" "clean ($(since "$t0"))"
    else
      note "compute-sanitizer" "NOT CLEAN rc=$? ($(since "$t0"), sanitize.log)"
    fi
    tail -40 "$OUT/sanitize.log"
  fi
  if stage mps-kill && [ -x "$build/tests/device/test_device_deadline" ]; then
    t0=$(date +%s)
    if scripts/test_mps_cleanup.sh "$build" >"$OUT/mps_kill.log" 2>&1; then
      note "mps clean-up on timeout" "ok ($(since "$t0"))"
    else
      note "mps clean-up on timeout" "FAILED (mps_kill.log)"
      tail -20 "$OUT/mps_kill.log"
    fi
  fi
  echo "==== summary ($ngpu GPUs, $(since "$t_start")) ===="
  cat "$summary_file"
  exit 0
fi

# ---- the GPU stages (the inner run) ----
echo "GPU stages:$stages (MPS: ${CUDA_MPS_PIPE_DIRECTORY:-none})" >>"$OUT/machine.txt"

if stage tests; then
  if [ "${SYMM_SUITE_TRAPS_APART:-0}" = 1 ]; then
    CTEST_ARGS="-LE traps ${CTEST_ARGS:-}" run_ctest "${ngpu}gpu" X=1   # the traps: run_traps, after
  else
    run_ctest "${ngpu}gpu" X=1
  fi
fi
if stage tests-1gpu && [ "$ngpu" -gt 1 ]; then
  run_ctest 1gpu CUDA_VISIBLE_DEVICES=0
fi

# The Python package over this build and the carried bitcode (clang-19, which
# builds it, is not on the GPU machines).
bc=${SYMM_BITCODE_DIR:-$here/build-lead/bitcode}
pyenv=(PYTHONPATH="$here/python" SYMM_LIBRARY="$here/$build/src/libsymm.so" SYMM_BITCODE_DIR="$bc"
       PYTHONUNBUFFERED=1)
# torchrun with n PEs: with fewer GPUs, each PE gets its share of the SMs under MPS
torchrun_env() { # $1: PEs
  local per=$(( ($1 + ngpu - 1) / ngpu ))
  if [ "$per" -gt 1 ] && [ -z "${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:-}" ]; then
    echo "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$(( 100 / per ))"
  else
    echo "X=1"
  fi
}

if stage python && [ -d tests/python ]; then
  t0=$(date +%s)
  k=${PY_SHARDS:-12}
  pids=()
  for i in $(seq 0 $((k - 1))); do
    # independent one-PE jobs side by side: each gets its share of the GPU
    env "${pyenv[@]}" CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$(( 100 / k )) timeout -k 10 "${PY_WALL:-240}" \
      torchrun --nproc-per-node 1 --master-port $((29700 + i)) -m pytest -q -p no:cacheprovider \
      tests/python --shard "$i/$k" >"$OUT/pytest_1_shard$i.log" 2>&1 &
    pids+=($!)
  done
  failed=0 res=""
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || failed=$((failed + 1))
    res="$res $(tail -1 "$OUT/pytest_1_shard$i.log" | grep -oE '[0-9]+ (passed|failed|skipped|error)[^,]*' | tr '\n' ' ')"
  done
  if [ "$k" -gt 0 ]; then # PY_SHARDS=0: only the PE counts of PY_NPES
    cat "$OUT"/pytest_1_shard*.log >"$OUT/pytest_1.log"; rm -f "$OUT"/pytest_1_shard*.log
    note "python (1 PE, $k jobs)" "$([ $failed = 0 ] && echo ok || echo "FAILED ($failed jobs)"):$res ($(since "$t0"))"
  fi
  for n in ${PY_NPES:-2 4}; do
    t0=$(date +%s)
    if env "${pyenv[@]}" $(torchrun_env "$n") timeout -k 10 "${PY_WALL:-240}" \
        torchrun --nproc-per-node "$n" --master-port 29690 -m pytest -q -p no:cacheprovider tests/python \
        >"$OUT/pytest_$n.log" 2>&1; then
      note "python ($n PEs)" "$(tail -1 "$OUT/pytest_$n.log") ($(since "$t0"))"
    else
      note "python ($n PEs)" "FAILED: $(tail -1 "$OUT/pytest_$n.log") ($(since "$t0"))"
    fi
  done
fi

if stage examples && [ -f examples/triton/run_all.py ]; then
  for n in ${EX_NPES:-2 4}; do
    t0=$(date +%s)
    if env "${pyenv[@]}" $(torchrun_env "$n") timeout -k 10 "${EXAMPLES_WALL:-180}" \
        torchrun --nproc-per-node "$n" --master-port 29631 examples/triton/run_all.py --quick \
        --out "$OUT/triton_examples_$n.md" >"$OUT/run_all_$n.log" 2>&1; then
      note "triton examples ($n PEs)" "ok ($(since "$t0"))"
    else
      note "triton examples ($n PEs)" "FAILED rc=$? ($(since "$t0"))"
      tail -20 "$OUT/run_all_$n.log"
    fi
  done
fi

if stage tilelang && [ -f "${TL_AOT:-build-tilelang}/manifest.json" ]; then
  t0=$(date +%s)
  env "${pyenv[@]}" SYMM_BUILD_DIR="$build" bash scripts/gpu_tilelang.sh "${TL_AOT:-build-tilelang}" \
    >"$OUT/tilelang.log" 2>&1
  note "tilelang (1, 2, 4 PEs)" "rc=$? ($(since "$t0")): $(grep -E '^tilelang [0-9] PE' "$OUT/tilelang.log" | tr -s ' ' | tr '\n' ';')"
fi

if stage examples-c && [ -f examples/c/run_all.sh ]; then
  t0=$(date +%s)
  SYMM_BUILD_DIR="$build" timeout -k 10 "${EXC_WALL:-180}" bash examples/c/run_all.sh "$OUT/examples_c" \
    >"$OUT/examples_c.log" 2>&1
  note "C examples (2, 4 PEs)" "rc=$? ($(since "$t0")): $(grep -c ' pass ' "$OUT/examples_c/summary.txt" 2>/dev/null) passed, $(grep -c ' FAIL' "$OUT/examples_c/summary.txt" 2>/dev/null) failed"
fi

if stage cute && [ -f "${SYMM_CUTE_CUBINS:-build-cute}/manifest.json" ]; then
  t0=$(date +%s)
  SYMM_BUILD_DIR="$build" bash scripts/cute_gpu.sh >"$OUT/cute.log" 2>&1
  note "cute (1, 2, 4 PEs)" "rc=$? ($(since "$t0")): $(tail -4 "$OUT/cute_summary.txt" 2>/dev/null | tr -s ' ' | tr '\n' ';')"
fi

if stage quick && [ -x "$build/bench/symm-bench" ]; then
  timeout -k 10 "${BENCH_WALL:-240}" "$build/bench/symm-bench" --verbose --quick --timeout 200 \
    --phase-timeout 60 --out "$OUT/bench_quick.md" >"$OUT/bench_quick.log" 2>&1
  note "bench quick" "rc=$?"
  tail -60 "$OUT/bench_quick.log"
fi

if stage fault && [ -x "$build/tests/fault/fault_pe" ]; then
  t0=$(date +%s)
  if python3 scripts/fault_matrix.py --build "$build" --npes 4 --parallel 2 --out "$OUT/fault" ${FAULT_ARGS:-} \
      >"$OUT/fault_matrix.log" 2>&1; then
    note "fault matrix" "ok ($(since "$t0"))"
  else
    note "fault matrix" "FAILED rc=$? ($(since "$t0"), fault_matrix.log)"
  fi
  tail -25 "$OUT/fault_matrix.log"
fi

if stage bench && [ -x "$build/bench/symm-bench" ]; then
  for mode in rma coll; do
    if timeout -k 10 "${BENCH_WALL:-240}" "$build/bench/symm-bench" --verbose --mode $mode --timeout 200 \
        --phase-timeout 60 --out "$OUT/bench_$mode.md" ${BENCH_ARGS:-} >"$OUT/bench_$mode.log" 2>&1; then
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

