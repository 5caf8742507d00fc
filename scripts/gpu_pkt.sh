#!/usr/bin/env bash
# Packet puts on GPUs (issue 28, item 2), in one command of about 2-3 minutes:
#   1. test_device_pkt (every packet form, the register forms with 1..32 lanes,
#      flags across the wrap, each buffer reused after a reply) on 2 PEs, one
#      per GPU (GPUs 0-1), and on 4 PEs where there are 4 GPUs;
#   2. the same on 2 PEs sharing GPU 0 under scripts/with_mps.sh (correctness);
#   3. the error paths: a put with flag 0, a register-form warp put of 33 words
#      (each must stop with its message);
#   4. SYMM_BENCH_RMA_LAT_ONLY=1 symm-bench --mode rma --npes 2 on GPUs 0-1 (the
#      put-with-signal forms table and the bar lines), and a --quick run of it
#      on 2 PEs sharing GPU 0 (its payload checks only: timings mean nothing there).
# Logs under $OUT/pkt/; a table last.
#
#   BUILD=build-pkt8 OUT=/dir bash scripts/gpu_pkt.sh
#
# Needs $BUILD built for sm_90 with the targets symm symmrun symm-bench test_device_pkt
# (nothing is built here). Every step runs under timeout -k; a step with fewer GPUs
# than it needs is skipped and says so. Multicast stays off; SYMM_WAIT_TIMEOUT=15.
# DRY=1 prints the steps instead of running them.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
T=$OUT/pkt
mkdir -p "$T"
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
export PATH="$PATH:/usr/local/cuda/bin"
build=${BUILD:-build-gpu}
dry=${DRY:-0}
# shellcheck source=scripts/_steps.sh
source scripts/_steps.sh
steps_fmt='%-44s %-5s %4s s  %s'
t_all=$(date +%s)

# step NAME LIMIT LOG EXPECT cmd...: EXPECT is "ok" (exit 0) or a regex the log must
# hold after a non-zero exit (a trap with its message).
step() {
  local name=$1 limit=$2 log=$3 expect=$4
  shift 4
  steps_exec "$name" "$limit" "$log" "$@" || return 0
  if [ "$expect" = ok ]; then
    if [ $step_rc -eq 0 ]; then steps_row "$name" ok $step_dt "$(grep -m1 -E 'OK$' "$log" | cut -c1-80)"
    elif [ $step_rc -eq 77 ]; then steps_row "$name" skip $step_dt "$(grep -m1 SKIP "$log")"
    else steps_row "$name" FAIL $step_dt "rc=$step_rc, see pkt/$(basename "$log")"; grep -E 'FAIL|rror|timed out|WRONG' "$log" | head -6
    fi
  elif [ $step_rc -ne 0 ] && grep -qE "$expect" "$log"; then
    steps_row "$name" ok $step_dt "stopped with its message"
  else
    steps_row "$name" FAIL $step_dt "rc=$step_rc, no '$expect' in pkt/$(basename "$log")"
  fi
  return 0
}

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
{ date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; git log -1 --format='tree %H %s'; } >"$T/machine.txt" 2>&1
if [ "$ngpu" -lt 1 ] && [ "$dry" != 1 ]; then
  echo "SKIP: gpu_pkt.sh: no GPU on this machine"
  exit 0
fi
[ "$dry" = 1 ] && [ "$ngpu" -lt 1 ] && ngpu=2
missing=""
for f in tools/symmrun bench/symm-bench tests/device/test_device_pkt; do
  [ -x "$build/$f" ] || missing="$missing $build/$f"
done
if [ -n "$missing" ] && [ "$dry" != 1 ]; then
  echo "gpu_pkt.sh: MISSING:$missing (targets: symm symmrun symm-bench test_device_pkt)"
  exit 1
fi
run=("$build/tools/symmrun")
pkt=("$build/tests/device/test_device_pkt")
mps=(env CUDA_VISIBLE_DEVICES=0 SYMM_MPS_LOGS="$T/mps_logs" scripts/with_mps.sh)
have_mps=1
command -v nvidia-cuda-mps-control >/dev/null || [ "$dry" = 1 ] || have_mps=0

# ---- 1. tests, one PE per GPU ----
if [ "$ngpu" -ge 2 ]; then
  step "test_device_pkt, 2 PEs on GPUs 0-1" 90 "$T/test_2gpu.log" ok \
    env CUDA_VISIBLE_DEVICES=0,1 "${run[@]}" -n 2 --timeout 80 "${pkt[@]}" 2
else
  steps_row "test_device_pkt, 2 PEs on GPUs 0-1" skip 0 "one GPU"
fi
if [ "$ngpu" -ge 4 ]; then
  step "test_device_pkt, 4 PEs on GPUs 0-3" 90 "$T/test_4gpu.log" ok \
    env CUDA_VISIBLE_DEVICES=0,1,2,3 "${run[@]}" -n 4 --timeout 80 "${pkt[@]}" 4
fi

# ---- 2. tests, 2 PEs sharing GPU 0 ----
if [ "$have_mps" = 1 ]; then
  step "test_device_pkt, 2 PEs sharing GPU 0 (MPS)" 120 "$T/test_mps.log" ok \
    "${mps[@]}" --timeout 110 -- "${run[@]}" -n 2 --timeout 100 "${pkt[@]}" 2
else
  steps_row "test_device_pkt, 2 PEs sharing GPU 0 (MPS)" FAIL 0 "no nvidia-cuda-mps-control"
fi

# ---- 3. error paths (2 PEs where 2 GPUs, else 1 PE: the put then goes to itself) ----
np=$(( ngpu >= 2 ? 2 : 1 ))
step "flag 0 stops with a message ($np PE)" 40 "$T/flag0.log" "symm: PE [0-9]+: symm_put_pkt: flag 0" \
  env CUDA_VISIBLE_DEVICES=0,1 "${run[@]}" -n $np --timeout 30 "${pkt[@]}" $np flag0
step "33 words stop with a message ($np PE)" 40 "$T/nwords33.log" \
  "symm: PE [0-9]+: symm_put_pkt_v64_warp: nwords must be 1..32" \
  env CUDA_VISIBLE_DEVICES=0,1 "${run[@]}" -n $np --timeout 30 "${pkt[@]}" $np nwords33

# ---- 4. the rma bench: the forms table and the bars ----
if [ "$ngpu" -ge 2 ]; then
  step "symm-bench rma, 2 PEs on GPUs 0-1" 170 "$T/bench_rma_2gpu.log" ok \
    env CUDA_VISIBLE_DEVICES=0,1 SYMM_BENCH_RMA_LAT_ONLY=1 SYMMRUN="$build/tools/symmrun" \
    "$build/bench/symm-bench" --mode rma --npes 2 --timeout 160 --phase-timeout 40 --out "$T/bench_rma_2gpu.md"
else
  steps_row "symm-bench rma, 2 PEs on GPUs 0-1" skip 0 "one GPU"
fi
if [ "$have_mps" = 1 ]; then
  step "symm-bench rma --quick, 2 PEs sharing GPU 0" 120 "$T/bench_rma_mps.log" ok \
    env SYMM_BENCH_RMA_LAT_ONLY=1 SYMMRUN="$build/tools/symmrun" "${mps[@]}" --timeout 110 -- \
    "$build/bench/symm-bench" --mode rma --npes 2 --quick --no-nvshmem --timeout 100 --phase-timeout 40 \
    --out "$T/bench_rma_mps.md"
fi

# ---- summary ----
{
  echo "==== gpu_pkt summary ($T; $ngpu GPU(s), build $build, $(( $(date +%s) - t_all )) s) ===="
  steps_table
  echo
  echo "the forms (2 PEs on GPUs 0-1, one-way us, median over flag pages):"
  if [ -f "$T/bench_rma_2gpu.md" ]; then
    grep -E '^\| (raw volatile|symm_put_signal 8 B \(SET\)|symm_put_signal 64 B|symm_put_pkt)' \
      "$T/bench_rma_2gpu.md" | sed 's/^/  /'
  else
    echo "  (no report)"
  fi
  echo "bars:"
  grep -hE '^(\[[0-9]+\] )?bar: ' "$T/bench_rma_2gpu.log" 2>/dev/null | sed -E 's/^(\[[0-9]+\] )?/  /' ||
    echo "  (none: see pkt/bench_rma_2gpu.log)"
  echo "shared GPU payload checks (symm-bench rma --quick under MPS):"
  if [ ! -f "$T/bench_rma_mps.log" ]; then echo "  not run"
  else grep -hE 'WRONG|wrong payloads' "$T/bench_rma_mps.md" "$T/bench_rma_mps.log" 2>/dev/null | head -3 |
    sed 's/^/  /' || echo "  no WRONG DATA"
  fi
} | tee "$T/summary.txt"
exit $failed
