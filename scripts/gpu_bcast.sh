#!/usr/bin/env bash
# The chained broadcast on GPUs (issue 28, item 1), in one command of about 3 minutes:
#   1. test_coll's chain part (every root, odd sizes, in place and out of place,
#      symmetric and cudaMalloc buffers, chunks of 16 B to 1 MiB, the flags' wrap,
#      70 MiB through the stage, graph capture) on 2, 3, 4 and 8 PEs sharing GPU 0
#      under scripts/with_mps.sh (correctness only; symmrun gives each PE its share
#      of the SMs);
#   1b. test_coll_mismatch bcast_chain, bcast_chain_chunk on 2 PEs sharing GPU 0: a
#      count or a chain chunk that differs on the last PE stops the kernels with a message;
#   2. with 2 GPUs or more: the broadcast forms table
#      (SYMM_BENCH_COLL_FORMS=1, tables only, NCCL beside) on min(4, GPUs) PEs, one
#      per GPU: the chain's columns (16, 32, 128 KiB a block per release) beside direct, CE and NCCL;
#   3. with one GPU: the broadcast forms table on 2 PEs sharing GPU 0 under MPS,
#      labelled shared-GPU (every cell verified; the timings say nothing of NVLink;
#      no NCCL: it refuses two ranks on one GPU).
# Logs under $OUT/bcast/; a table last (also in $OUT/bcast/summary.txt).
#
#   BUILD=build-bcast9 OUT=/dir bash scripts/gpu_bcast.sh
#
# Needs $BUILD built for sm_90 with the targets symm symmrun symm-bench test_coll
# test_coll_mismatch (nothing is built here; without test_coll_mismatch its two
# steps are skipped). Every step runs under timeout -k; a step the machine
# cannot run is skipped and says so. Multicast stays off; SYMM_WAIT_TIMEOUT=15.
# DRY=1 prints the steps instead of running them (no GPU needed).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
T=$OUT/bcast
mkdir -p "$T"
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
unset SYMM_COLL_TUNE SYMM_COLL_ALGO SYMM_COLL_BLOCKS SYMM_COLL_CE_MIN
export PATH="$PATH:/usr/local/cuda/bin"
build=${BUILD:-build-gpu}
dry=${DRY:-0}
# shellcheck source=scripts/_steps.sh
source scripts/_steps.sh
steps_fmt='%-46s %-5s %4s s  %s'
t_all=$(date +%s)
gpu_env_pip_libs

# step NAME LIMIT LOG cmd...: ok on exit 0, skip on 77, else FAIL with the log's first errors.
step() {
  local name=$1 log=$3
  steps_exec "$@" || return 0
  if [ $step_rc -eq 0 ]; then steps_row "$name" ok $step_dt "$(grep -m1 -E 'checked calls with the wrap' "$log" | cut -c1-70)"
  elif [ $step_rc -eq 77 ]; then steps_row "$name" skip $step_dt "$(grep -m1 SKIP "$log" | cut -c1-70)"
  else steps_row "$name" FAIL $step_dt "rc=$step_rc, see bcast/$(basename "$log")"; grep -E 'FAIL|rror|timed out|WRONG' "$log" | head -6
  fi
  return 0
}

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
{ date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; git log -1 --format='tree %H %s'; } >"$T/machine.txt" 2>&1
if [ "$ngpu" -lt 1 ] && [ "$dry" != 1 ]; then
  echo "SKIP: gpu_bcast.sh: no GPU on this machine"
  exit 0
fi
[ "$dry" = 1 ] && [ "$ngpu" -lt 1 ] && ngpu=${DRY_GPUS:-1}
missing=""
for f in tools/symmrun bench/symm-bench tests/coll/test_coll; do
  [ -x "$build/$f" ] || missing="$missing $build/$f"
done
if [ -n "$missing" ] && [ "$dry" != 1 ]; then
  echo "gpu_bcast.sh: MISSING:$missing (targets: symm symmrun symm-bench test_coll)"
  exit 1
fi
run="$build/tools/symmrun"
tc="$build/tests/coll/test_coll"
have_mps=1
command -v nvidia-cuda-mps-control >/dev/null || [ "$dry" = 1 ] || have_mps=0

# ---- 1. the chain part of test_coll, PEs sharing GPU 0 ----
for n in 2 3 4 8; do
  lim=$(( n <= 4 ? 35 : 55 ))
  if [ "$have_mps" = 1 ]; then
    step "test_coll chain, $n PEs sharing GPU 0 (MPS)" $((lim + 15)) "$T/test_chain_$n.log" \
      env CUDA_VISIBLE_DEVICES=0 SYMM_MPS_LOGS="$T/mps_logs_$n" scripts/with_mps.sh --timeout $((lim + 5)) -- \
      "$run" -n $n --timeout $lim "$tc" $n chain
  else
    steps_row "test_coll chain, $n PEs sharing GPU 0 (MPS)" FAIL 0 "no nvidia-cuda-mps-control"
  fi
done

# ---- 1b. mismatches: a count, or a chunk, that differs on the last PE stops every PE's
# kernel with the message (each under a daemon of its own: a trap may leave MPS refusing) ----
for c in bcast_chain bcast_chain_chunk; do
  name="mismatch $c, 2 PEs sharing GPU 0"
  log=$T/mismatch_$c.log
  if [ "$dry" != 1 ] && { [ ! -x "$build/tests/coll/test_coll_mismatch" ] || [ "$have_mps" != 1 ]; }; then
    steps_row "$name" skip 0 "no test_coll_mismatch in $build, or no MPS"
    continue
  fi
  steps_exec "$name" 40 "$log" env CUDA_VISIBLE_DEVICES=0 SYMM_MPS_LOGS="$T/mps_logs_$c" scripts/with_mps.sh \
    --timeout 35 -- "$run" -n 2 --timeout 30 "$build/tests/coll/test_coll_mismatch" 2 $c || continue
  if grep -qE "device collective: PE [0-9]+ called broadcast with [0-9]+ bytes" "$log" &&
    ! grep -q "^FAIL" "$log"; then
    steps_row "$name" ok $step_dt "stopped with its message (rc=$step_rc)"
  else
    steps_row "$name" FAIL $step_dt "rc=$step_rc, no message in bcast/$(basename "$log")"
  fi
done

# ---- 2./3. the forms tables ----
if [ "$ngpu" -ge 2 ]; then
  np=$(( ngpu < 4 ? ngpu : 4 ))
  gpus=$(seq -s, 0 $((np - 1)))
  step "forms bcast, $np PEs on GPUs $gpus" 130 "$T/forms_${np}gpu.log" \
    env CUDA_VISIBLE_DEVICES="$gpus" SYMM_BENCH_COLL_FORMS=1 SYMM_BENCH_COLL_TABLES_ONLY=1 \
    SYMM_BENCH_COLL_FORMS_ONLY=bcast SYMMRUN="$run" \
    "$build/bench/symm-bench" --mode coll --npes $np --no-nvshmem --timeout 120 --phase-timeout 60 \
    --out "$T/forms_${np}gpu.md"
  report=$T/forms_${np}gpu.md
  label="$np PEs, one per GPU (NVLink)"
elif [ "$have_mps" = 1 ]; then
  step "forms bcast, 2 PEs sharing GPU 0 (shared-GPU)" 100 "$T/forms_shared.log" \
    env CUDA_VISIBLE_DEVICES=0 SYMM_BENCH_COLL_FORMS=1 SYMM_BENCH_COLL_TABLES_ONLY=1 \
    SYMM_BENCH_COLL_FORMS_ONLY=bcast SYMMRUN="$run" SYMM_MPS_LOGS="$T/mps_logs_forms" \
    scripts/with_mps.sh --timeout 100 -- \
    "$build/bench/symm-bench" --mode coll --npes 2 --no-nvshmem --timeout 85 --phase-timeout 60 \
    --out "$T/forms_shared.md"
  report=$T/forms_shared.md
  label="shared-GPU: 2 PEs on GPU 0 under MPS, correctness and the kernels' own cost only, no NVLink, no NCCL"
else
  steps_row "forms bcast, 2 PEs sharing GPU 0 (shared-GPU)" FAIL 0 "no nvidia-cuda-mps-control"
  report="" label=""
fi

# ---- summary ----
{
  echo "==== gpu_bcast summary ($T; $ngpu GPU(s), build $build, $(( $(date +%s) - t_all )) s) ===="
  steps_table
  echo
  if [ -n "$report" ] && [ -f "$report" ]; then
    echo "forms tables ($label), graph us per call; chain columns: bytes a block passes on per release:"
    awk '/^###.*(broadcast|reduce-scatter).*forms/ {p=1} p && /^(###|\|)/ {print "  " $0} /^graph us per call/ {p=0}' \
      "$report"
    echo "  cells WRONG: $(grep -o '| WRONG ([^)]*)' "$report" | wc -l)"
    echo "  cells whose call ran another form (x): $(grep -oE '\| \([a-z0-9+-]+\) [0-9.]+' "$report" | wc -l)"
  else
    echo "forms tables: no report${report:+ ($report)}"
  fi
} | tee "$T/summary.txt"
exit $failed
