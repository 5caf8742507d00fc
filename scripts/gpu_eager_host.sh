#!/usr/bin/env bash
# Host time of the eager Python MoE calls (issue 27 item 5), on a build made
# beforehand (it builds nothing), one PE per GPU (up to 4):
#
#   BUILD=build-gpu OUT=/some/dir bash scripts/gpu_eager_host.sh
#
#   symm     bench/moe/host_cost.py: perf_counter over 200 back-to-back eager
#            dispatch + combine pairs (no sync), 64 experts top-6 hidden 2048 bf16,
#            1 token/PE; the custom-op path; eager vs graph wall; cProfile top 15
#   deepep   bench/moe/deepep_host_prof.py: symm.moe.deep_ep cached dispatch (fp8,
#            bf16) and combine beside HighThroughput.dispatch; cProfile top 15 each
#
# Logs under $OUT/eager/; the last lines are the figures and the bar's pass/miss
# line. Each step under `timeout -k`; about 2 minutes. No GPU: SKIP, exit 0.
set -uo pipefail
cd "$(dirname "$0")/.."
here=$PWD
OUT=${OUT:-$PWD/out}
log=$OUT/eager
mkdir -p "$log"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
unset SYMM_ENABLE_MULTICAST
export SYMM_WAIT_TIMEOUT=${SYMM_WAIT_TIMEOUT:-15}
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
for pkg in nccl nvshmem; do
  d=$(python3 -c "import nvidia.$pkg as m; print(m.__path__[0])" 2>/dev/null) &&
    export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}"
export SYMM_LIBRARY="$build/src/libsymm.so"
npes=$(( ngpu > 4 ? 4 : ngpu ))
[ "$npes" -lt 2 ] && npes=2   # one GPU: 2 PEs share it (figures for correctness only)
mps=()
[ "$npes" -gt "$ngpu" ] && mps=(bash scripts/with_mps.sh --)
rows=()
failed=0
step() { local name=$1 lim=$2 out=$3; shift 3; local t0=$(date +%s)
  timeout -k 10 "$lim" "${mps[@]}" "$@" >"$out" 2>&1; local rc=$?
  local st=ok; [ $rc -eq 0 ] || { st="FAIL rc=$rc"; failed=1; }
  rows+=("$(printf '%-34s %-10s %4s s' "$name" "$st" "$(( $(date +%s) - t0 ))")"); }
step "symm.moe eager ($npes PEs)" 90 "$log/host_cost.log" \
  torchrun --nproc-per-node "$npes" --master-port 29793 bench/moe/host_cost.py --op --profile 15 --out "$log/host_cost.md"
step "deep_ep cached ($npes PEs)" 120 "$log/deepep_host.log" \
  torchrun --nproc-per-node "$npes" --master-port 29794 bench/moe/deepep_host_prof.py
echo "==== cProfile sections: $log/host_cost.log, $log/deepep_host.log"
grep -h -A22 '^==== cProfile' "$log/host_cost.log" "$log/deepep_host.log" 2>/dev/null | cut -c1-150
echo
echo "==== gpu_eager_host.sh on $ngpu GPU(s), $npes PEs$([ "$npes" -gt "$ngpu" ] && echo ', sharing GPUs under MPS')"
printf '%s\n' "${rows[@]}"
grep -h '^|' "$log/host_cost.md" 2>/dev/null
grep -h '^host:' "$log/deepep_host.log" 2>/dev/null
grep -h '^bar:' "$log/host_cost.md" 2>/dev/null || echo "bar: host time per eager call <= 10 us: n/a (no result)"
exit $failed
