#!/usr/bin/env bash
# The collectives and put_signal run (issue 28) on one machine with 4 GPUs, one
# PE per GPU, from a build made beforehand (nothing is built here):
#
#   BUILD=build-gpu OUT=/path scripts/gpu_coll.sh
#
#   1. tests     the collective tests on 4 and 2 PEs, new algorithms first (ctest
#                entries coll_pipe_*, coll_move_*, ... one at a time, each bounded),
#                the packet-put tests (device_pkt_*), the put_signal test, and the
#                mismatch traps of the packet broadcasts and of the new algorithms
#                (one-shot reduce-scatter, the copy-engine pipelines); within TESTS_WALL s
#   2. coll      symm-bench --mode coll with SYMM_BENCH_COLL_FORMS=1: every
#                collective against NCCL and NVSHMEM 8 B-256 MiB, the bars (a pass/miss
#                line per collective, graph and stream), then every form of broadcast,
#                reduce-scatter and large all-reduce by size; within COLL_WALL s
#   2b. coll2    the forms tables and the mid-size all-reduce table again on 2 PEs
#                (GPUs 0-1), for the 2-PE column of AUTO's table (COLL2=0 leaves it
#                out); within COLL2_WALL s
#   3. rma       symm-bench --mode rma with SYMM_BENCH_RMA_LAT_ONLY=1: latency, the
#                flag-placement sweep and every put-with-signal form at the same flag
#                pages, with the put_signal bars; within RMA_WALL s
#
#   SHORT=1 BUILD=build-gpu OUT=/path scripts/gpu_coll.sh
#     only issue 28's rows, in about 3 minutes: symm-bench --mode coll with
#     SYMM_BENCH_COLL_SHORT=1 (broadcast, reduce-scatter, all-reduce at the sizes
#     the bars name, graph and stream, NCCL and NVSHMEM beside; its bar lines) on
#     min(4, GPUs) PEs, one per GPU (left out with a line on a one-GPU machine), within
#     SHORT_WALL s (default 180); then the same run as correctness, "PEs share one
#     GPU": 2 PEs on GPU 0 under scripts/with_mps.sh (each PE half the SMs; NCCL and
#     NVSHMEM n/a there), within SHARED_WALL s (default 150). Every result is checked
#     by the bench before and after its timing; a wrong one fails the step.
# Results in $OUT/coll/ (the bench files carry the machine, command and date);
# a short summary last, also in $OUT/coll/summary.txt. Without a GPU every
# step says so and the script exits 0. Multicast stays off.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-gpu}
OUT=${OUT:-$PWD/out}
out=$OUT/coll
mkdir -p "$out"
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
unset SYMM_COLL_TUNE SYMM_COLL_ALGO SYMM_COLL_BLOCKS SYMM_COLL_CE_MIN
export PATH="$PATH:/usr/local/cuda/bin"
TESTS_WALL=${TESTS_WALL:-90}
COLL_WALL=${COLL_WALL:-150}
COLL2_WALL=${COLL2_WALL:-50}
RMA_WALL=${RMA_WALL:-60}
summary=$out/summary.txt
: >"$summary"
note() { printf '%-34s %s\n' "$1" "$2" | tee -a "$summary" >/dev/null; }
since() { echo "$(( $(date +%s) - $1 )) s"; }
# shellcheck source=scripts/_steps.sh
source scripts/_steps.sh

gpu_env_pip_libs

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
{ date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; git log -1 --format='tree %H %s'; } >"$out/machine.txt" 2>&1
note "machine" "$(date -u '+%F %T UTC'), $(hostname), $ngpu GPU(s), build $build"
if [ "$ngpu" -lt 1 ]; then
  note "tests" "SKIP: no GPU"
  note "coll bench" "SKIP: no GPU"
  note "rma bench" "SKIP: no GPU"
  echo "gpu_coll: no GPU on this machine; nothing run (summary in $summary)"
  cat "$summary"
  exit 0
fi
missing=""
need="bench/symm-bench tools/symmrun tests/coll/test_coll tests/device/test_device_pkt"
[ "${SHORT:-0}" = 1 ] && need="bench/symm-bench tools/symmrun"
for f in $need; do
  [ -x "$build/$f" ] || missing="$missing $build/$f"
done
if [ -n "$missing" ]; then
  note "build" "MISSING:$missing (build it first: cmake --build $build -j)"
  cat "$summary"
  exit 1
fi

# ---- SHORT=1: issue 28's rows only, then the same as correctness on one shared GPU ----
if [ "${SHORT:-0}" = 1 ]; then
  SHORT_WALL=${SHORT_WALL:-180}
  SHARED_WALL=${SHARED_WALL:-150}
  rc_all=0
  npes=$(( ngpu < 4 ? ngpu : 4 ))
  if [ "$npes" -ge 2 ]; then
    steps_exec "coll short" "$SHORT_WALL" "$out/bench_coll_short.log" env SYMM_BENCH_COLL_SHORT=1 \
      "$build/bench/symm-bench" --mode coll --npes "$npes" --timeout $((SHORT_WALL - 10)) --phase-timeout 60 \
      --out "$out/bench_coll_short.md"
    [ $step_rc = 0 ] || rc_all=1
    note "coll short, $npes PEs" "exit $step_rc ($step_dt s); $out/bench_coll_short.md"
  else
    note "coll short" "not run: one GPU (the speed rows need one PE per GPU; correctness below)"
  fi
  t0=$(date +%s)
  if command -v nvidia-cuda-mps-control >/dev/null; then
    CUDA_VISIBLE_DEVICES=0 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 SYMM_BENCH_COLL_SHORT=1 \
      SYMM_MPS_LOGS="$out/mps_logs" scripts/with_mps.sh --timeout "$SHARED_WALL" -- \
      "$build/bench/symm-bench" --mode coll --npes 2 --timeout $((SHARED_WALL - 10)) --phase-timeout 60 \
      --out "$out/bench_coll_short_shared.md" >"$out/bench_coll_short_shared.log" 2>&1
    rc=$?
    [ $rc = 0 ] || rc_all=1
    note "PEs share one GPU (2 on GPU 0)" "exit $rc ($(since "$t0")), correctness only; $out/bench_coll_short_shared.md"
  else
    rc_all=1
    note "PEs share one GPU (2 on GPU 0)" "not run: no nvidia-cuda-mps-control"
  fi
  {
    echo
    echo "bars (symm-bench 'bar:' lines of the short run):"
    grep -hE '^(\[[0-9]+\] )?bar: ' "$out/bench_coll_short.log" 2>/dev/null | sed -E 's/^(\[[0-9]+\] )?/  /' ||
      echo "  (none: see $out/bench_coll_short.log)"
    echo "PEs share one GPU (correctness; its bar lines read N/A: no NCCL there):"
    grep -hE 'data (correct|WRONG)|WRONG' "$out/bench_coll_short_shared.log" 2>/dev/null | head -5 |
      sed -E 's/^(\[[0-9]+\] )?/  /' || echo "  (no verdict line: see $out/bench_coll_short_shared.log)"
  } >>"$summary"
  echo "==== gpu_coll summary, SHORT=1 ($out) ===="
  cat "$summary"
  exit $rc_all
fi

[ "$ngpu" -lt 4 ] && note "warning" "$ngpu GPUs: the 4-PE steps share GPUs (timings say nothing of NVLink)"

# ---- 1. tests: one ctest entry at a time, in this order, while the wall allows ----
tests="coll_pipe_4 coll_move_4 coll_graph_4 coll_wrap_4 coll_every_4 device_pkt_4 device_pkt_2
device_pkt_flag0_2 device_signal_4 coll_pipe_2 coll_move_2 coll_graph_2 coll_wrap_2 coll_every_2
coll_errors_4 coll_mismatch_bcast_packet_4 coll_mismatch_bcast_packet2_4 coll_mismatch_bcast_packet_2
coll_mismatch_rs_oneshot_4 coll_mismatch_rs_ce_4 coll_mismatch_ar_ce_4 coll_mismatch_bcast_ce_4
coll_device_4 coll_device_2 coll_matrix_4 coll_matrix_2 coll_b2b_4 coll_big_4 coll_ce_4 coll_big_2 coll_b2b_2
coll_ce_2 coll_errors_2 device_signal_2"
t0=$(date +%s)
end=$((t0 + TESTS_WALL))
pass=0 fail=0 skip=0 notrun=0 failed="" skipped=""
log=$out/tests.log
: >"$log"
for name in $tests; do
  left=$((end - $(date +%s)))
  if [ "$left" -lt 15 ]; then notrun=$((notrun + 1)); skipped="$skipped $name"; continue; fi
  per=$((left < 90 ? left : 90))
  timeout -k 5 $((per + 10)) ctest --test-dir "$build" -R "^$name\$" --output-on-failure --timeout "$per" \
    >>"$log" 2>&1
  rc=$?
  if tail -25 "$log" | grep -qE "^1/1 Test.*(\*\*\*Skipped|Not Run)|No tests were found"; then
    skip=$((skip + 1)); skipped="$skipped $name"
  elif [ $rc = 0 ]; then pass=$((pass + 1))
  else fail=$((fail + 1)); failed="$failed $name"
  fi
done
note "tests" "$pass passed, $fail failed, $skip skipped, $notrun not run ($(since "$t0"))${failed:+; FAILED:$failed}"
[ -n "$skipped" ] && note "tests skipped or not run" "$skipped"

# ---- 2. coll: the collectives against NCCL and NVSHMEM, the bars, the forms ----
steps_exec "coll bench" "$COLL_WALL" "$out/bench_coll.log" env SYMM_BENCH_COLL_FORMS=1 "$build/bench/symm-bench" \
  --mode coll --timeout $((COLL_WALL - 10)) --phase-timeout 60 --out "$out/bench_coll.md"
note "coll bench" "exit $step_rc ($step_dt s); $out/bench_coll.md"

# ---- 2b. the forms again on 2 PEs (GPUs 0-1): the 2-PE column of AUTO's table ----
if [ "${COLL2:-1}" = 1 ]; then
  steps_exec "coll bench, 2 PEs, forms" "$COLL2_WALL" "$out/bench_coll_2pe.log" env SYMM_BENCH_COLL_FORMS=1 \
    SYMM_BENCH_COLL_AR2=1 SYMM_BENCH_COLL_TABLES_ONLY=1 "$build/bench/symm-bench" --mode coll --npes 2 --no-nvshmem \
    --timeout $((COLL2_WALL - 10)) --phase-timeout 60 --out "$out/bench_coll_2pe.md"
  note "coll bench, 2 PEs, forms" "exit $step_rc ($step_dt s); $out/bench_coll_2pe.md"
fi

# ---- 3. rma: latency, flag pages, every put-with-signal form ----
steps_exec "rma bench" "$RMA_WALL" "$out/bench_rma.log" env SYMM_BENCH_RMA_LAT_ONLY=1 "$build/bench/symm-bench" \
  --mode rma --timeout $((RMA_WALL - 10)) --phase-timeout 40 --out "$out/bench_rma.md"
note "rma bench" "exit $step_rc ($step_dt s); $out/bench_rma.md"

# ---- summary: the tests, then every bar line of the two runs ----
{
  echo
  echo "bars (symm-bench 'bar:' lines):"
  # symmrun prefixes each line with "[rank] "
  grep -hE '^(\[[0-9]+\] )?bar: ' "$out/bench_coll.log" "$out/bench_rma.log" 2>/dev/null |
    sed -E 's/^(\[[0-9]+\] )?/  /' || true
  grep -qE '^(\[[0-9]+\] )?bar: ' "$out/bench_coll.log" "$out/bench_rma.log" 2>/dev/null ||
    echo "  (none: see the logs)"
} >>"$summary"
echo "==== gpu_coll summary ($out) ===="
cat "$summary"
