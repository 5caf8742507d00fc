#!/usr/bin/env bash
# The device trace on GPUs (docs/trace.md), in one command: its GPU tests on 1
# and 2 PEs, traces (JSON, summary, PNG where matplotlib is) of the Triton
# AG+GEMM and GEMM+RS, the MoE low-latency dispatch and a stream all-reduce on
# up to 4 PEs, and what the trace costs (the Triton fused examples and
# symm-bench --mode moe, without and with it, in this one run). Everything
# under $OUT/trace/; a table last.
#
#   BUILD=build-gpu [TRACE_BUILD=build-trace] OUT=/dir bash scripts/gpu_trace.sh [stage...]
#     build     configure and build the traced libsymm variant ($TRACE_BUILD, default
#               $BUILD-trace: -DSYMM_TRACE=ON, targets symm symm-bench), unless it has
#               them already (a trace build dir made elsewhere and carried: nothing is
#               built; TRACE_REBUILD=1 rebuilds)
#     tests     ctest -R '^trace_gpu' in $BUILD (1 and 2 PEs: packet ring, ring, lanes,
#               overflow, JSON checked), then test_trace_gpu on $NPES PEs over the traced
#               libsymm (its stream all-reduce and packet all-reduces traced too)
#     pkt       the packet ring of test_trace_gpu alone (test_trace_gpu N PREFIX pkt: symm_put_pkt
#               and symm_pkt_wait in their thread, warp and block forms traced, payloads checked)
#               on GPU 0: 1 PE, then 2 PEs sharing it under scripts/with_mps.sh; each JSON
#               checked with check_trace_json.py --ring 4 5 --pkt. Over $TRACE_BUILD's libsymm
#               when it has one (a carried trace build dir), else $BUILD's
#     examples  scripts/trace_run.py: ag_gemm and gemm_rs in one process each time: plain
#               bitcode, then traced bitcode recording the timed run, then a small traced
#               call (the picture)
#     moe       the MoE low-latency dispatch + combine traced (symm.moe over the traced libsymm)
#     bench     symm-bench --mode moe --quick: $BUILD's (plain) against $TRACE_BUILD's with a
#               trace recording the whole run (SYMM_TRACE_FILE=-: recorded, not written)
#     plots     every trace made checked (tests/trace/check_trace_json.py: well formed, counts
#               match; under 8 MiB), then symm-trace summary (and plot, where matplotlib is)
#   default: all of them, in that order
#
# Needs (printed first, each run): $BUILD built for the GPU with the targets symm symmrun
# test_trace_gpu symm-bench; $TRACE_BUILD configured with -DSYMM_TRACE=ON for sm_90 with
# the targets symm symm-bench (and symm_device_bitcode where clang-19 is: its bitcode/
# holds the traced bitcode); the device bitcode with its traced files
# (libsymm_device_sm90.bc and libsymm_device_sm90_trace.bc), looked for in
# $SYMM_BITCODE_DIR, $TRACE_BUILD/bitcode, build-lead/bitcode, build/bitcode,
# $BUILD/bitcode; PyTorch and Triton for the examples and moe. NPES (default: the GPUs,
# at most 4) PEs, one per GPU; with fewer GPUs than 2 the 2-PE test shares one
# (time-sliced). Every step runs under timeout -k, its limit cut to what is left of
# TOTAL_S (default 300) seconds counted from the end of the build stage: a step with
# under 10 s left is skipped and says so. Multicast stays off; SYMM_WAIT_TIMEOUT=15.
# DRY=1 prints the steps instead of running them (checks the script's logic without a
# GPU).
set -uo pipefail
cd "$(dirname "$0")/.."
here=$PWD
OUT=${OUT:-$PWD/out}
T=$OUT/trace
mkdir -p "$T"
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
unset SYMM_TRACE SYMM_TRACE_FILE SYMM_TRACE_CAPACITY
export PATH="$PATH:/usr/local/cuda/bin"
export PYTHONUNBUFFERED=1
build=${BUILD:-${SYMM_BUILD_DIR:-build-gpu}}
tbuild=${TRACE_BUILD:-$build-trace}
# absolute, so the paths handed to the steps hold whether BUILD was given relative or not
case $build in /*) ;; *) build=$here/$build ;; esac
case $tbuild in /*) ;; *) tbuild=$here/$tbuild ;; esac
stages=${*:-build tests pkt examples moe bench plots}
total_s=${TOTAL_S:-300}
dry=${DRY:-0}
py=$(command -v python3)
# shellcheck source=scripts/_steps.sh
source scripts/_steps.sh
steps_fmt='%-36s %-6s %5s s  %s' steps_min_left=10 steps_spent="the ${total_s} s of the run are spent (TOTAL_S)"
t_all=$(date +%s)

stage() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }

# run NAME LIMIT LOG cmd...: bounded by timeout -k, the limit cut to what is left of the
# run's time (steps_deadline, set after the build stage); the result goes into the table.
run() {
  local name=$1 log=$3
  steps_exec "$@" || return $step_rc
  if [ $step_rc -eq 0 ]; then
    steps_row "$name" ok $step_dt
  elif [ $step_rc -eq 77 ]; then
    steps_row "$name" skip $step_dt "$(grep -m1 SKIP "$log")"
  else
    steps_row "$name" FAIL $step_dt "rc=$step_rc, see trace/$(basename "$log")"
    grep -E 'FAIL|Error|error|timed out|assert' "$log" | head -8
  fi
  return $step_rc
}

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
{ date -u; hostname; nvidia-smi -L; nvcc --version | tail -1; git -C "$here" log -1 --format='%H %s'; } \
  >"$T/machine.txt" 2>&1
if [ "$ngpu" -lt 1 ] && [ "$dry" != 1 ]; then
  echo "SKIP: gpu_trace.sh: no GPU on this machine"
  exit 0
fi
[ "$dry" = 1 ] && [ "$ngpu" -lt 1 ] && ngpu=4
npes=${NPES:-$(( ngpu < 4 ? ngpu : 4 ))}

echo "gpu_trace.sh needs: $build built with the targets symm symmrun test_trace_gpu symm-bench;" \
     "$tbuild (-DSYMM_TRACE=ON, sm_90) with symm symm-bench; traced bitcode" \
     "(libsymm_device_sm90{,_trace}.bc) in \$SYMM_BITCODE_DIR, $tbuild/bitcode, build-lead/bitcode," \
     "build/bitcode or $build/bitcode"
for f in src/libsymm.so tools/symmrun tests/trace/test_trace_gpu bench/symm-bench; do
  [ -e "$build/$f" ] || echo "gpu_trace.sh: WARNING: no $build/$f (steps that use it fail)"
done

# the carried bitcode, with its traced files
bc=""
for d in ${SYMM_BITCODE_DIR:-} "$tbuild/bitcode" build-lead/bitcode build/bitcode "$build/bitcode"; do
  if [ -n "$d" ] && [ -f "$d/libsymm_device_sm90_trace.bc" ] && [ -f "$d/libsymm_device_sm90.bc" ]; then
    bc=$(cd "$d" && pwd)
    break
  fi
done
if [ -z "$bc" ]; then
  echo "gpu_trace.sh: no traced device bitcode (libsymm_device_sm90_trace.bc) in \$SYMM_BITCODE_DIR," \
       "$tbuild/bitcode, build-lead/bitcode, build/bitcode or $build/bitcode: build it where clang-19 is" \
       "(cmake --build build --target symm_device_bitcode) and carry <build>/bitcode"
  [ "$dry" = 1 ] || exit 2
fi
gpu_env_pip_libs
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$build/triton-cache}
plain_env=(PYTHONPATH="$here/python" SYMM_LIBRARY="$build/src/libsymm.so" SYMM_BITCODE_DIR="$bc")
traced_lib_env=(PYTHONPATH="$here/python" SYMM_LIBRARY="$tbuild/src/libsymm.so" SYMM_BITCODE_DIR="$bc"
                LD_LIBRARY_PATH="$tbuild/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
check="$py tests/trace/check_trace_json.py"
port=29610 # each torchrun gets a port of its own (next_port)
next_port() { port=$((port + 1)); }

# ---- build: the traced libsymm --------------------------------------------------------
if stage build; then
  if [ -f "$tbuild/src/libsymm.so" ] && [ -x "$tbuild/bench/symm-bench" ] && [ "${TRACE_REBUILD:-0}" != 1 ]; then
    if grep -q '^SYMM_TRACE:BOOL=ON' "$tbuild/CMakeCache.txt" 2>/dev/null; then
      steps_row "build $tbuild" ok 0 "there already (SYMM_TRACE=ON)"
    else
      steps_row "build $tbuild" FAIL 0 "there, but its CMakeCache.txt has no SYMM_TRACE=ON"
    fi
  else
    run "build $tbuild (SYMM_TRACE=ON)" "${BUILD_WALL:-420}" "$T/build.log" bash -c \
      "cmake -S . -B '$tbuild' -DSYMM_TRACE=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DSYMM_BUILD_TESTS=OFF \
       -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build '$tbuild' -j --target symm symm-bench symmrun"
  fi
fi

steps_deadline=$(( $(date +%s) + total_s )) # every later step within TOTAL_S

# ---- tests ----------------------------------------------------------------------------------
if stage tests; then
  run "ctest trace_gpu (1, 2 PEs)" 90 "$T/ctest_trace_gpu.log" \
    ctest --test-dir "$build" -R '^trace_gpu' --output-on-failure --timeout 80
  [ "$dry" = 1 ] || cp -f "$build"/tests/trace/trace_gpu_*.json "$T/" 2>/dev/null
  if [ -f "$tbuild/src/libsymm.so" ] || [ "$dry" = 1 ]; then
    run "test_trace_gpu $npes PEs, traced libsymm" 60 "$T/test_trace_gpu_${npes}.log" \
      env LD_LIBRARY_PATH="$tbuild/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "$build/tools/symmrun" -n "$npes" --timeout 50 "$build/tests/trace/test_trace_gpu" "$npes" "$T/lib${npes}"
    drops=""
    for p in $(seq 0 $((npes - 1))); do drops="$drops --dropped $p:64"; done
    run "check its JSON (packets, ring, overflow)" 30 "$T/check_lib${npes}.log" bash -c \
      "$check '$T/lib${npes}_pkt.json' --pes $npes --ring 4 5 --pkt && \
       $check '$T/lib${npes}_ring.json' --pes $npes --ring 4 5 && $check '$T/lib${npes}_overflow.json' --pes $npes $drops"
    if [ "$dry" = 1 ] || grep -q "stream all-reduce:" "$T/test_trace_gpu_${npes}.log"; then
      run "check the all-reduce trace" 30 "$T/check_allreduce.log" $check "$T/lib${npes}_allreduce.json" --pes "$npes"
    else
      steps_row "all-reduce trace" FAIL 0 "test_trace_gpu did not see a traced libsymm ($tbuild)"
    fi
  else
    steps_row "test_trace_gpu $npes PEs, traced libsymm" skip 0 "no $tbuild/src/libsymm.so (stage build)"
  fi
fi

# ---- packet puts traced: 1 PE, then 2 PEs sharing GPU 0 ----------------------------------------
if stage pkt; then
  lib_dir="$build/src"
  [ -f "$tbuild/src/libsymm.so" ] && lib_dir="$tbuild/src"
  for n in 1 2; do
    wrap=()
    [ "$n" -gt 1 ] && wrap=(env SYMM_MPS_LOGS="$T/mps_logs" scripts/with_mps.sh --timeout 70 --)
    run "packet trace, $n PE(s) on GPU 0" 80 "$T/pkt_${n}.log" \
      env CUDA_VISIBLE_DEVICES=0 LD_LIBRARY_PATH="$lib_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "${wrap[@]}" \
      "$build/tools/symmrun" -n "$n" --timeout 60 "$build/tests/trace/test_trace_gpu" "$n" "$T/pkt${n}" pkt
    if [ "$dry" = 1 ] || [ -f "$T/pkt${n}_pkt.json" ]; then
      run "check packet trace JSON, $n PE(s)" 30 "$T/check_pkt_${n}.log" \
        $check "$T/pkt${n}_pkt.json" --pes "$n" --ring 4 5 --pkt
      [ "$dry" = 1 ] || PYTHONPATH="$here/python" timeout -k 5 30 $py -m symm.trace_tools summary \
        "$T/pkt${n}_pkt.json" >"$T/pkt${n}_pkt.summary.txt" 2>&1
    else
      steps_row "check packet trace JSON, $n PE(s)" FAIL 0 "no $T/pkt${n}_pkt.json (the test did not write it)"
    fi
  done
fi

# ---- the Triton fused examples: plain, traced + recording, and a small trace --------------
if stage examples; then
  next_port
  run "ag_gemm+gemm_rs plain ($npes PEs)" 90 "$T/examples_plain.log" \
    env "${plain_env[@]}" SYMM_TRACE=0 torchrun --nproc-per-node "$npes" --master-port "$port" \
    scripts/trace_run.py example ag_gemm gemm_rs --iters "${EX_ITERS:-10}"
  next_port
  run "ag_gemm+gemm_rs traced, recording" 100 "$T/examples_traced.log" \
    env "${plain_env[@]}" SYMM_TRACE=1 torchrun --nproc-per-node "$npes" --master-port "$port" \
    scripts/trace_run.py example ag_gemm gemm_rs --iters "${EX_ITERS:-10}" --record \
    --artifact-dir "$T" --artifact-size "${EX_TRACE_SIZE:-4096}"
fi

# ---- the MoE low-latency dispatch -----------------------------------------------------------
if stage moe; then
  next_port
  run "moe low-latency trace ($npes PEs)" 60 "$T/moe_ll.log" \
    env "${traced_lib_env[@]}" torchrun --nproc-per-node "$npes" --master-port "$port" \
    scripts/trace_run.py moe --artifact "$T/moe_ll.json" --tokens "${MOE_TOKENS:-16}"
fi

# ---- symm-bench --mode moe without and with the trace ----------------------------------------
if stage bench; then
  run "symm-bench moe, plain ($npes PEs)" 60 "$T/moe_bench_plain.log" \
    "$build/bench/symm-bench" --mode moe --quick --npes "$npes" --no-nvshmem --timeout 55 --phase-timeout 30 \
    --out "$T/moe_bench_plain.md"
  # recorded and not written (a whole bench run makes millions of events); each PE logs its counts
  run "symm-bench moe, traced + recording" 75 "$T/moe_bench_traced.log" \
    env SYMMRUN="$build/tools/symmrun" SYMM_TRACE_FILE=- SYMM_LOG_LEVEL=info \
    LD_LIBRARY_PATH="$tbuild/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    SYMM_TRACE_CAPACITY="${BENCH_TRACE_CAPACITY:-8388608}" \
    "$tbuild/bench/symm-bench" --mode moe --quick --npes "$npes" --no-nvshmem --timeout 70 --phase-timeout 30 \
    --out "$T/moe_bench_traced.md"
  [ "$dry" = 1 ] || grep -h "SYMM_TRACE_FILE=-" "$T/moe_bench_traced.log" | tee "$T/moe_bench_trace_counts.txt"
fi

# ---- pictures and summaries ------------------------------------------------------------------
if stage plots; then
  have_mpl=0
  PYTHONPATH="$here/python" $py -c "import matplotlib" 2>/dev/null && have_mpl=1
  for f in ag_gemm gemm_rs moe_ll "lib${npes}_allreduce" "lib${npes}_ring"; do
    j="$T/$f.json"
    if [ ! -f "$j" ] && [ "$dry" != 1 ]; then
      steps_row "picture $f" skip 0 "no $f.json (its step failed or did not run)"
      continue
    fi
    run "check $f.json" 20 "$T/$f.check.txt" $check "$j" --pes "$npes"
    if [ "$have_mpl" = 1 ]; then
      run "picture $f" 40 "$T/$f.summary.txt" env PYTHONPATH="$here/python" \
        $py -m symm.trace_tools plot "$j" -o "$T/$f.png"
    else
      run "summary $f" 20 "$T/$f.summary.txt" env PYTHONPATH="$here/python" $py -m symm.trace_tools summary "$j"
    fi
  done
  [ "$have_mpl" = 1 ] || echo "NOTE: no matplotlib here: PNGs not drawn; on a machine with it:" \
    "for f in $T/*.json; do symm-trace plot \$f -o \${f%.json}.png; done"
fi

# ---- what it costs, and the table -----------------------------------------------------------
echo
if [ "$dry" != 1 ]; then
  PYTHONPATH="$here/python" timeout -k 5 30 $py scripts/trace_run.py overhead "$T"/examples_plain.log "$T"/examples_traced.log \
    --bench "$T/moe_bench_plain.md" "$T/moe_bench_traced.md" 2>&1 | tee "$T/overhead.txt"
  echo
  ls -l "$T"/*.json 2>/dev/null | awk '{ printf "%9.2f MiB  %s\n", $5 / 1048576, $9 }' | tee "$T/sizes.txt"
  big=$(find "$T" -maxdepth 1 -name '*.json' -size +8M -printf '%f ' 2>/dev/null)
  if [ -n "$big" ]; then
    steps_row "traces under 8 MiB" FAIL 0 "over: $big(EX_TRACE_SIZE, MOE_TOKENS make them smaller)"
  else
    steps_row "traces under 8 MiB" ok 0
  fi
fi
echo
echo "gpu_trace.sh: $npes PEs on $ngpu GPUs, $(( $(date +%s) - t_all )) s; logs and traces in $T"
printf '%-36s %-6s %5s    %s\n' step result time note
steps_table | tee "$T/summary.txt"
exit $failed
