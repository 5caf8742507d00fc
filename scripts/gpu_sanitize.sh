#!/usr/bin/env bash
# compute-sanitizer (memcheck, racecheck, synccheck) over the 1-PE GPU tests
# (device tests, runtime scenarios, cheap collective parts) and the 2-PE
# device tests, in their sanitizer-sized mode (SYMM_TEST_SMALL=1: every kind
# of case, fewer repetitions and sizes).
#   scripts/gpu_sanitize.sh [build-dir]        (default build-gpu; logs under $OUT)
#
# Output under $OUT: sanitize_summary.txt, one line per (tool, test, PEs):
# clean / N errors / timeout / test failed / not run (wall); and
# sanitize_logs.tar.gz with every run's log (both kept current after each run,
# so a run stopped from outside still leaves them). Exit 0 only if all clean.
#
# Knobs:
#   SAN_TOOLS         tools to run (default "memcheck racecheck synccheck")
#   SAN_TESTS         tests (default: amo ldst barrier signal rma rma_tma runtime
#                     coll_errors coll_wrap coll_device)
#   SAN_RACE_TESTS    the tests racecheck runs: racecheck looks only at shared
#                     memory, which only these kernels use (test_rma's staging
#                     kernel, the bulk-copy (TMA) put's staging buffer, the
#                     stream collectives' push kernel); default "rma rma_tma
#                     coll_errors coll_wrap"
#   SAN_WALL          seconds for the whole script (default 520); each tool gets
#                     a share in proportion to its runs, and what a tool leaves
#                     goes to the next; a run may not take the last ~10 s of its
#                     tool's share per run still to come; a run that no longer
#                     fits is "not run (wall)"
#   SAN_TEST_TIMEOUT  cap of one run (default 75)
#   SAN_WAIT_TIMEOUT  SYMM_WAIT_TIMEOUT of the runs (default 30)
#   SAN_FULL=1        the tests' full size instead (far beyond any wall here)
# The PEs never use MPS here (compute-sanitizer does not run under it):
# CUDA_MPS_PIPE_DIRECTORY points at an empty folder; 2 PEs time-slice the GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-${SYMM_BUILD_DIR:-build-gpu}}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PATH="$PATH:/usr/local/cuda/bin"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
unset SYMM_ENABLE_MULTICAST
# sanitized kernels run many times slower: a wait on a peer gets room, but a
# lost signal still ends in a message well inside the run's cap (the suite's
# SYMM_WAIT_TIMEOUT is meant for unsanitized runs)
export SYMM_WAIT_TIMEOUT=${SAN_WAIT_TIMEOUT:-30}
if [ "${SAN_FULL:-0}" = 1 ]; then unset SYMM_TEST_SMALL; size="full size"
else export SYMM_TEST_SMALL=1; size="SYMM_TEST_SMALL=1"; fi
t_start=$(date +%s)
wall=${SAN_WALL:-520}
cap=${SAN_TEST_TIMEOUT:-75}
tools=${SAN_TOOLS:-memcheck racecheck synccheck}
tests=${SAN_TESTS:-amo ldst barrier signal rma rma_tma runtime coll_errors coll_wrap coll_device}
race_tests=${SAN_RACE_TESTS:-rma rma_tma coll_errors coll_wrap}

work=$(mktemp -d /tmp/symm-san-XXXXXX)
nomps=$work/nomps
mkdir -p "$nomps" "$work/logs"
export CUDA_MPS_PIPE_DIRECTORY=$nomps
trap 'rm -rf "$work"' EXIT
summary=$OUT/sanitize_summary.txt
tarball=$OUT/sanitize_logs.tar.gz
: >"$summary"
rm -f "$tarball"
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$san" ] || { echo "gpu_sanitize: compute-sanitizer not found" | tee -a "$summary"; exit 2; }
fail=0

# The runs of one tool: "name npes command..." per line.
runs_of() {
  local tool=$1 t
  for t in $tests; do
    if [ "$tool" = racecheck ] && [[ " $race_tests " != *" $t "* ]]; then continue; fi
    case $t in
      runtime)
        for s in basic growth exhaust graph; do
          echo "runtime_$s 1 $build/tests/runtime/test_runtime_gpu $s 1"
        done ;;
      coll_device) echo "coll_device 1 $build/tests/coll/test_coll_device 1" ;;
      coll_*) echo "$t 1 $build/tests/coll/test_coll 1 ${t#coll_}" ;;
      *)
        echo "$t 1 $build/tests/device/test_device_$t 1"
        echo "$t 2 $build/tests/device/test_device_$t 2" ;;
    esac
  done
}

line() { # tool name npes verdict seconds note
  printf '%-10s %-16s %d PE  %-24s %4s s  %s\n' "$1" "$2" "$3" "$4" "$5" "$6" | tee -a "$summary"
}

# $1 tool, $2 test name, $3 npes, $4 seconds allowed, rest: the test's command
one() {
  local tool=$1 name=$2 n=$3 lim=$4; shift 4
  local log="$work/logs/san_${tool}_${name}_${n}pe.log" t0 rc verdict errs warns sums first
  t0=$(date +%s)
  if [ ! -x "$1" ]; then line "$tool" "$name" "$n" "missing" 0 "$1 not built"; fail=1; return; fi
  if [ "$n" = 1 ]; then
    timeout -k 10 "$lim" "$san" --tool "$tool" --error-exitcode 99 "$@" >"$log" 2>&1
  else
    timeout -k 10 "$lim" "$build/tools/symmrun" -n "$n" --timeout "$((lim - 5))" \
      "$san" --tool "$tool" --error-exitcode 99 "$@" >"$log" 2>&1
  fi
  rc=$?
  # one summary per process: "ERROR SUMMARY: N errors", racecheck's "(N errors, M warnings)"
  sums=$(grep -c -E '(ERROR|RACECHECK) SUMMARY' "$log")
  errs=$(grep -o -E 'ERROR SUMMARY: [0-9]+ error' "$log" | awk '{s += $3} END {print s + 0}')
  errs=$((errs + $(grep -o -E 'RACECHECK SUMMARY: .*\([0-9]+ error' "$log" | grep -o -E '[0-9]+ error' |
                   awk '{s += $1} END {print s + 0}')))
  warns=$(grep -o -E 'RACECHECK SUMMARY: .*[0-9]+ warning' "$log" | grep -o -E '[0-9]+ warning' |
          awk '{s += $1} END {print s + 0}')
  first=$(grep -m1 -E '=+ +(Invalid|Error|Warning|Race|Barrier|Program hit|Uninitialized|Leaked|Misaligned|Out-of-range)' "$log" |
          sed -E 's/^(\[[0-9]+\] )?=+ +//' | cut -c1-90)
  if [ $rc = 124 ] || [ $rc = 137 ] || grep -q "symmrun: timeout" "$log"; then
    verdict="timeout"
    [ -n "$first" ] && verdict="timeout, errors before it"
  elif [ $rc = 77 ] || grep -q -E '^(\[[0-9]+\] )?SKIP:' "$log"; then verdict="skipped"
  elif [ "$errs" -gt 0 ]; then verdict="$errs errors"
  elif [ "$warns" -gt 0 ]; then verdict="$warns race warnings"
  elif [ $rc != 0 ]; then verdict="test failed (rc $rc)"
  elif [ "$sums" -lt "$n" ]; then verdict="no sanitizer summary"
  else verdict="clean"; fi
  [ "$verdict" = clean ] || fail=1
  [ "$verdict" = "test failed (rc $rc)" ] && first=$(grep -m1 -E 'FAIL|error|Error' "$log" | cut -c1-90)
  line "$tool" "$name" "$n" "$verdict" "$(( $(date +%s) - t0 ))" "$first"
  tar -czf "$tarball.part" -C "$work/logs" . && mv -f "$tarball.part" "$tarball"
}

# wall shares: each tool in proportion to its runs
declare -A nruns
total_runs=0
for tool in $tools; do
  nruns[$tool]=$(runs_of "$tool" | wc -l)
  total_runs=$((total_runs + nruns[$tool]))
done
echo "gpu_sanitize: $tools over $total_runs runs in ${wall} s ($build, $size, each run at most ${cap} s)"
runs_left=$total_runs
for tool in $tools; do
  left=$(( wall - ($(date +%s) - t_start) ))
  [ "$runs_left" -gt 0 ] || break
  tool_end=$(( $(date +%s) + left * nruns[$tool] / runs_left ))
  runs_left=$((runs_left - nruns[$tool]))
  after=${nruns[$tool]}
  while read -r name n cmd; do
    after=$((after - 1))
    # a hung run leaves ~10 s to each run after it in this tool's share
    lim=$(( tool_end - $(date +%s) - 10 * after ))
    [ "$lim" -gt "$cap" ] && lim=$cap
    if [ "$lim" -lt 15 ]; then line "$tool" "$name" "$n" "not run (wall)" 0 ""; fail=1; continue; fi
    # shellcheck disable=SC2086
    one "$tool" "$name" "$n" "$lim" $cmd </dev/null
  done < <(runs_of "$tool")
done

# the lines above are the table; last, the count and what was not clean
echo "==== compute-sanitizer ($build, $size, $(( $(date +%s) - t_start )) s): $(grep -c ' clean ' "$summary") of" \
  "$(wc -l <"$summary") runs clean ($(basename "$summary"); logs: $(basename "$tarball")) ===="
grep -v ' clean ' "$summary"
exit $fail
