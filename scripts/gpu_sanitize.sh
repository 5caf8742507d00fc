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
# 2-PE runs go through symmrun: one PE per GPU where there are two GPUs, the
# two PEs time-sliced on one GPU otherwise (no MPS).
#
# Knobs:
#   SAN_TOOLS         tools, in the order they run (default "memcheck synccheck
#                     racecheck": racecheck, the slowest, last)
#   SAN_TESTS         tests (default: amo ldst barrier signal rma runtime
#                     coll_errors coll_wrap coll_device); every tool runs every
#                     test, 1 PE each and 2 PEs for the device tests (the bar's set)
#   SAN_SLOW_TESTS    tests whose runs go after the others of their tool, 1-PE
#                     runs before 2-PE ones (default "rma": the longest)
#   SAN_WALL          seconds for the whole script (default 520), one pool for all
#                     runs in order: a run may use what is left less SAN_RESERVE s
#                     for each run still after it (so a hung run cannot starve the
#                     rest), but at least SAN_MIN_RUN s (earlier runs come first);
#                     what a quick run leaves goes to the runs after it; once less
#                     than SAN_MIN_RUN s is left, a run is "not run (wall)"
#   SAN_RESERVE       seconds kept for each later run (default 5)
#   SAN_MIN_RUN       shortest limit a run is started with (default 10)
#   SAN_TEST_TIMEOUT  cap of one run (default 120)
#   SAN_WAIT_TIMEOUT  SYMM_WAIT_TIMEOUT of the runs (default 30)
#   SAN_FULL=1        the tests' full size instead (far beyond any wall here)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-${SYMM_BUILD_DIR:-build-gpu}}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PATH="$PATH:/usr/local/cuda/bin"
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
# sanitized kernels run many times slower: a wait on a peer gets room, but a
# lost signal still ends in a message well inside the run's cap (the suite's
# SYMM_WAIT_TIMEOUT is meant for unsanitized runs)
export SYMM_WAIT_TIMEOUT=${SAN_WAIT_TIMEOUT:-30}
if [ "${SAN_FULL:-0}" = 1 ]; then unset SYMM_TEST_SMALL; size="full size"
else export SYMM_TEST_SMALL=1; size="SYMM_TEST_SMALL=1"; fi
t_start=$(date +%s)
wall=${SAN_WALL:-520}
cap=${SAN_TEST_TIMEOUT:-120}
reserve=${SAN_RESERVE:-5}
min_run=${SAN_MIN_RUN:-10}
tools=${SAN_TOOLS:-memcheck synccheck racecheck}
tests=${SAN_TESTS:-amo ldst barrier signal rma runtime coll_errors coll_wrap coll_device}
slow_tests=${SAN_SLOW_TESTS:-rma}

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

# Every run, in order, as "tool name npes command..." lines: per tool the
# quick tests, then the slow ones' 1-PE runs, then their 2-PE runs.
runs_of_test() { # tool test npes-filter (1, 2 or "1 2")
  local tool=$1 t=$2 want=$3 s
  case $t in
    runtime)
      [[ " $want " == *" 1 "* ]] || return 0
      for s in basic growth exhaust graph; do
        echo "$tool runtime_$s 1 $build/tests/runtime/test_runtime_gpu $s 1"
      done ;;
    coll_device) [[ " $want " == *" 1 "* ]] && echo "$tool coll_device 1 $build/tests/coll/test_coll_device 1" ;;
    coll_*) [[ " $want " == *" 1 "* ]] && echo "$tool $t 1 $build/tests/coll/test_coll 1 ${t#coll_}" ;;
    *)
      for s in $want; do echo "$tool $t $s $build/tests/device/test_device_$t $s"; done ;;
  esac
  return 0
}
all_runs() {
  local tool t
  for tool in $tools; do
    for t in $tests; do [[ " $slow_tests " == *" $t "* ]] || runs_of_test "$tool" "$t" "1 2"; done
    for t in $tests; do [[ " $slow_tests " == *" $t "* ]] && runs_of_test "$tool" "$t" 1; done
    for t in $tests; do [[ " $slow_tests " == *" $t "* ]] && runs_of_test "$tool" "$t" 2; done
  done
  return 0
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

# One pool for every run, in order (see SAN_WALL above).
mapfile -t runs < <(all_runs)
total_runs=${#runs[@]}
echo "gpu_sanitize: $tools over $total_runs runs in ${wall} s ($build, $size, each run at most ${cap} s," \
  "${reserve} s kept for each later run)"
for ((i = 0; i < total_runs; i++)); do
  read -r tool name n cmd <<<"${runs[$i]}"
  after=$((total_runs - 1 - i))
  left=$(( wall - ($(date +%s) - t_start) ))
  # earlier runs come first: one gets at least SAN_MIN_RUN s while that is left
  lim=$(( left - reserve * after ))
  [ "$lim" -lt "$min_run" ] && lim=$min_run
  [ "$lim" -gt "$left" ] && lim=$left
  [ "$lim" -gt "$cap" ] && lim=$cap
  if [ "$lim" -lt "$min_run" ]; then
    line "$tool" "$name" "$n" "not run (wall)" 0 "${left} s left for $((after + 1)) runs"; fail=1; continue
  fi
  # shellcheck disable=SC2086
  one "$tool" "$name" "$n" "$lim" $cmd </dev/null
done

# the lines above are the table; last, the count and what was not clean
echo "==== compute-sanitizer ($build, $size, $(( $(date +%s) - t_start )) s, $(nvidia-smi -L 2>/dev/null | grep -c '^GPU ') GPU(s)):" \
  "$(grep -c ' clean ' "$summary") of $(wc -l <"$summary") runs clean ($(basename "$summary"); logs: $(basename "$tarball")) ===="
grep -v ' clean ' "$summary"
exit $fail
