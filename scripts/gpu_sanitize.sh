#!/usr/bin/env bash
# compute-sanitizer (memcheck, racecheck, synccheck) over the device tests on
# one PE and on two PEs sharing the GPU(s), and the runtime test on one PE.
#   scripts/gpu_sanitize.sh [build-dir]        (default build-gpu; logs under $OUT)
# Each run is capped at SAN_WALL seconds (default 150; a capped run is reported
# as TIMEOUT, not as clean) and needs "ERROR SUMMARY: 0 errors" from every
# process. The PEs never use MPS here (compute-sanitizer does not run under
# it): CUDA_MPS_PIPE_DIRECTORY points at an empty folder. SAN_TOOLS and
# SAN_TESTS narrow the runs (e.g. SAN_TOOLS=memcheck SAN_TESTS="signal amo").
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-${SYMM_BUILD_DIR:-build-gpu}}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PATH="$PATH:/usr/local/cuda/bin"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
unset SYMM_ENABLE_MULTICAST
# sanitized kernels run many times slower: waits between PEs get room, but end
export SYMM_WAIT_TIMEOUT=${SYMM_WAIT_TIMEOUT:-120}
nomps=$(mktemp -d /tmp/symm-nomps-XXXXXX)
export CUDA_MPS_PIPE_DIRECTORY=$nomps
trap 'rm -rf "$nomps"' EXIT
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$san" ] || { echo "gpu_sanitize: compute-sanitizer not found"; exit 2; }
wall=${SAN_WALL:-150}
tools=${SAN_TOOLS:-memcheck racecheck synccheck}
tests=${SAN_TESTS:-signal amo ldst barrier rma runtime}
summary=()
fail=0

# $1 tool, $2 npes, $3 test name, rest: the command after compute-sanitizer
one() {
  local tool=$1 n=$2 name=$3; shift 3
  local log="$OUT/san_${tool}_${name}_${n}pe.log" t0=$(date +%s) rc verdict
  if [ "$n" = 1 ]; then
    timeout -k 10 "$wall" "$san" --tool "$tool" --error-exitcode 99 "$@" >"$log" 2>&1
  else
    timeout -k 10 "$wall" "$build/tools/symmrun" -n "$n" --timeout "$((wall - 5))" \
      "$san" --tool "$tool" --error-exitcode 99 "$@" >"$log" 2>&1
  fi
  rc=$?
  local clean; clean=$(grep -c "ERROR SUMMARY: 0 errors" "$log")
  if [ $rc = 124 ] || [ $rc = 137 ] || grep -q "symmrun: timeout" "$log"; then verdict="TIMEOUT"
  elif [ $rc = 77 ]; then verdict="skipped"
  elif [ $rc = 0 ] && [ "$clean" -ge "$n" ]; then verdict="clean"
  else verdict="ERRORS (rc $rc)"; fi
  [ "$verdict" = clean ] || [ "$verdict" = skipped ] || fail=1
  summary+=("$(printf '%-10s %-8s %d PE  %-16s %4d s  %s' "$tool" "$name" "$n" "$verdict" $(( $(date +%s) - t0 )) "$(grep -m1 -E '^(=+|\[[0-9]\] =+) .*(Invalid|Race|Barrier|Error|error)' "$log" | cut -c1-100)")")
}

for tool in $tools; do
  for t in $tests; do
    if [ "$t" = runtime ]; then
      one "$tool" 1 runtime "$build/tests/runtime/test_runtime_gpu" basic 1
      continue
    fi
    exe="$build/tests/device/test_device_$t"
    [ -x "$exe" ] || continue
    one "$tool" 1 "$t" "$exe" 1
    one "$tool" 2 "$t" "$exe" 2
  done
done

echo "==== compute-sanitizer ($build) ===="
printf '%s\n' "${summary[@]}"
exit $fail
