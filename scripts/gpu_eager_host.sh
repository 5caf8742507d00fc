#!/usr/bin/env bash
# Host time of the eager Python MoE calls (issue 27 item 5), on a build made
# beforehand (it builds nothing): 1 PE, then one PE per GPU (up to 4; on one
# GPU, 2 PEs sharing it under MPS):
#
#   BUILD=build-gpu OUT=/some/dir bash scripts/gpu_eager_host.sh
#
#   launch   bench/probes/launch_probe: host time of one kernel launch, <<<>>> vs
#            cudaLaunchKernelEx with / without the PDL attribute vs the driver's
#            cuLaunchKernelEx, 8-byte vs 784-byte arguments (the MoE kernels' block)
#   symm     bench/moe/host_cost.py: perf_counter over 200 back-to-back eager
#            dispatch + combine pairs (no sync), 64 experts top-6 hidden 2048 bf16,
#            1 token/PE; the C calls alone; the custom-op path; eager vs graph wall;
#            cProfile top 15. Each PE count twice: as is, and with
#            SYMM_MOE_NO_LAUNCH=1 (every check and argument, no kernel): the
#            checks' cost against the launch's
#   correct  tests/moe/test_moe (every part: ll ht graph errors budget) under symmrun
#            on 1 PE and on the PEs above: the launch path the timings use is right
#   deepep   bench/moe/deepep_host_prof.py: symm.moe.deep_ep cached dispatch (fp8,
#            bf16) and combine beside HighThroughput.dispatch; cProfile top 15 each
#
# Logs under $OUT/eager/; the last lines are the figures and the bar's pass/miss
# lines. Each step under `timeout -k`; about 3 minutes. No GPU: SKIP, exit 0.
set -uo pipefail
cd "$(dirname "$0")/.."
here=$PWD
OUT=${OUT:-$PWD/out}
log=$OUT/eager
mkdir -p "$log"
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
build=${BUILD:-${SYMM_BUILD_DIR:-build-gpu}}
case $build in /*) ;; *) build=$here/$build ;; esac
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
{ date -u; hostname; nvidia-smi -L; echo "build: $build"; git log -1 --oneline; } >"$log/machine.txt" 2>&1
if [ "${ngpu:-0}" -lt 1 ]; then
  echo "SKIP: gpu_eager_host.sh: no GPU on this machine"
  exit 0
fi
if [ ! -f "$build/src/libsymm.so" ]; then
  echo "FAIL: gpu_eager_host.sh: no $build/src/libsymm.so (set BUILD to the build directory)"
  exit 1
fi
gpu_env_pip_libs
export PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}"
export SYMM_LIBRARY="$build/src/libsymm.so"
npes=$(( ngpu > 4 ? 4 : ngpu ))
[ "$npes" -lt 2 ] && npes=2   # one GPU: 2 PEs share it (figures for correctness only)
mps=()
[ "$npes" -gt "$ngpu" ] && mps=(bash scripts/with_mps.sh --)
# shellcheck source=scripts/_steps.sh
source scripts/_steps.sh
steps_fmt='%-40s %-10s %4s s'
# step NAME LIMIT LOG MPS(0|1) CMD...: one bounded step (MPS 1: under with_mps.sh where PEs outnumber GPUs)
step() {
  local name=$1 lim=$2 out=$3 pre=()
  [ "$4" = 1 ] && pre=("${mps[@]}")
  shift 4
  steps_exec "$name" "$lim" "$out" "${pre[@]}" "$@"
  if [ $step_rc -eq 0 ]; then steps_row "$name" ok $step_dt; else steps_row "$name" "FAIL rc=$step_rc" $step_dt; fi
}
if [ -x "$build/bench/launch_probe" ]; then
  step "launch probe (1 process)" 60 "$log/launch_probe.log" 0 "$build/bench/launch_probe" 200 9
else
  steps_rows+=("$(printf '%-40s %-10s' "launch probe" "n/a (no $build/bench/launch_probe)")")
fi
step "symm.moe eager (1 PE)" 60 "$log/host_cost_1.log" 0 \
  torchrun --nproc-per-node 1 --master-port 29791 bench/moe/host_cost.py --op --out "$log/host_cost_1.md"
step "symm.moe no launch (1 PE)" 60 "$log/host_cost_1_nolaunch.log" 0 env SYMM_MOE_NO_LAUNCH=1 \
  torchrun --nproc-per-node 1 --master-port 29792 bench/moe/host_cost.py --host-only --out "$log/host_cost_1_nolaunch.md"
step "symm.moe eager ($npes PEs)" 90 "$log/host_cost.log" 1 \
  torchrun --nproc-per-node "$npes" --master-port 29793 bench/moe/host_cost.py --op --profile 15 --out "$log/host_cost.md"
step "symm.moe no launch ($npes PEs)" 60 "$log/host_cost_nolaunch.log" 1 env SYMM_MOE_NO_LAUNCH=1 \
  torchrun --nproc-per-node "$npes" --master-port 29795 bench/moe/host_cost.py --host-only --out "$log/host_cost_nolaunch.md"
if [ -x "$build/tests/moe/test_moe" ] && [ -x "$build/tools/symmrun" ]; then
  step "test_moe all parts (1 PE)" 60 "$log/test_moe_1.log" 0 \
    "$build/tools/symmrun" -n 1 --timeout 50 "$build/tests/moe/test_moe" 1 all
  step "test_moe all parts ($npes PEs)" 90 "$log/test_moe_$npes.log" 1 \
    "$build/tools/symmrun" -n "$npes" --timeout 80 "$build/tests/moe/test_moe" "$npes" all
else
  steps_rows+=("$(printf '%-40s %-10s' "test_moe" "n/a (no $build/tests/moe/test_moe or tools/symmrun)")")
fi
step "deep_ep cached ($npes PEs)" 120 "$log/deepep_host.log" 1 \
  torchrun --nproc-per-node "$npes" --master-port 29794 bench/moe/deepep_host_prof.py
echo "==== cProfile sections: $log/host_cost.log, $log/deepep_host.log"
grep -h -A22 '^==== cProfile' "$log/host_cost.log" "$log/deepep_host.log" 2>/dev/null | cut -c1-150
echo
echo "==== gpu_eager_host.sh on $ngpu GPU(s), 1 PE and $npes PEs$([ "$npes" -gt "$ngpu" ] && echo ' (sharing GPUs under MPS)')"
steps_table
grep -h '^|' "$log/launch_probe.log" 2>/dev/null
for f in host_cost_1 host_cost_1_nolaunch host_cost host_cost_nolaunch; do
  [ -f "$log/$f.md" ] && { grep -h '^###' "$log/$f.md"; grep -h '^|' "$log/$f.md" | grep -v -e '^| what' -e '^| ---'; }
done
grep -h '^host:' "$log/deepep_host.log" 2>/dev/null
for f in host_cost_1 host_cost; do
  grep -h '^bar:' "$log/$f.md" 2>/dev/null | sed "s/^bar:/bar ($f):/" || echo "bar ($f): host time per eager call <= 10 us: n/a (no result)"
done
exit $failed
