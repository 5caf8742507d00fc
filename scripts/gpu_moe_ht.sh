#!/usr/bin/env bash
# The high-throughput MoE combine's schedules (SYMM_MOE_HT_COMBINE) on a GPU
# machine, on a build made beforehand (it builds nothing):
#
#   BUILD=build-sm90 OUT=/some/dir bash scripts/gpu_moe_ht.sh
#
# 1. test_moe's ht and budget parts (budgets 1, 2, 8, 24, all SMs) on 2 PEs,
#    once per schedule of HT_VARIANTS: the combine's results exact.
# 2. symm-bench --mode moe --npes 2 --no-nvshmem --no-nccl --moe-rows ht, once
#    per schedule: DeepEP's shape (4096 tokens/PE, hidden 7168, top-8, 256
#    experts), 24 SMs and every SM, fp8 and bf16 dispatch, bf16 combine.
# 3. A table: schedule, budget, SMs, dispatch x, dispatch us, combine us,
#    combine GB/s (DeepEP's measure), and which schedule's combine was fastest.
#
# HT_VARIANTS (default "auto serial split serial-warps overlap:2 overlap:3 overlap:6
# overlap-async:2 overlap-async:3 overlap-async overlap-async:6"; auto is overlap, whose
# default S is 4).
# One PE per GPU where there are 2 GPUs (or more: the first 2); on one GPU the
# 2 PEs share it under a private MPS daemon (scripts/with_mps.sh), so the
# figures then say nothing about NVLink (the bench's tables say so too).
# Every step runs under `timeout -k`, each at most what is left of HT_WALL
# (default 250 s). Multicast stays off; SYMM_WAIT_TIMEOUT=15 turns a lost
# signal into a message naming the PE and the word. What comes back is four
# files under $OUT/moe_ht/: machine.txt, summary.txt (what is printed last),
# bench.md (every schedule's bench markdown) and logs.txt (every step's log,
# in order). No GPU: prints SKIP and exits 0.
set -uo pipefail
cd "$(dirname "$0")/.."
here=$PWD
OUT=${OUT:-$PWD/out}
res=$OUT/moe_ht
mkdir -p "$res"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
unset SYMM_ENABLE_MULTICAST
export SYMM_WAIT_TIMEOUT=${SYMM_WAIT_TIMEOUT:-15}
export PATH="$PATH:/usr/local/cuda/bin"
build=${BUILD:-build-sm90}
case $build in /*) ;; *) build=$here/$build ;; esac
variants=${HT_VARIANTS:-auto serial split serial-warps overlap:2 overlap:3 overlap:6 overlap-async:2 overlap-async:3 overlap-async overlap-async:6}
wall=${HT_WALL:-250}
t_all=${HT_T0:-$(date +%s)}
summary=()
failed=0

note() { summary+=("$(printf '%-44s %-6s %4s s  %s' "$1" "$2" "$3" "${4:-}")"); [ "$2" = ok ] || [ "$2" = skip ] || failed=1; }
left() { echo $(( wall - ($(date +%s) - t_all) )); }
tag() { echo "${1//:/_}"; } # a schedule's name in file names

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${ngpu:-0}" -lt 1 ]; then
  echo "SKIP: gpu_moe_ht.sh: no GPU on this machine"
  exit 0
fi
{ date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; nvcc --version | tail -1; echo "build: $build"
  git log -1 --oneline; } >"$res/machine.txt" 2>&1

log=$(mktemp -d /tmp/gpu_moe_ht.XXXXXX) || exit 1 # one file per step, gathered into $res at the end
trap 'rm -rf "$log"' EXIT

for pkg in nccl nvshmem; do
  d=$(python3 -c "import nvidia.$pkg as m; print(m.__path__[0])" 2>/dev/null) && \
    export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done

# one GPU: both PEs share it under a private MPS daemon (this script again, inside it)
if [ -z "${HT_INNER:-}" ] && [ "$ngpu" -lt 2 ] && [ ! -e "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control" ]; then
  HT_INNER=1 HT_T0=$t_all OUT="$OUT" scripts/with_mps.sh --timeout "$(( wall + 20 ))" -- bash "$0" "$@"
  exit $?
fi
[ "$ngpu" -gt 2 ] && export CUDA_VISIBLE_DEVICES=0,1

# run NAME LIMIT LOGFILE cmd...: bounded by timeout -k and what is left of the wall
run() {
  local name=$1 limit=$2 out=$3 t0 rc rest
  shift 3
  rest=$(left)
  if [ "$rest" -lt 10 ]; then
    note "$name" FAIL 0 "not run: the ${wall} s wall is used up"
    return 1
  fi
  [ "$limit" -gt "$rest" ] && limit=$rest
  t0=$(date +%s)
  timeout -k 10 "$limit" "$@" >"$out" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    note "$name" ok $(( $(date +%s) - t0 ))
  elif [ $rc -eq 77 ]; then
    note "$name" skip $(( $(date +%s) - t0 )) "$(grep -m1 -i skip "$out")"
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    note "$name" FAIL $(( $(date +%s) - t0 )) "timed out after $limit s, see logs.txt: $(basename "$out")"
  else
    note "$name" FAIL $(( $(date +%s) - t0 )) "rc=$rc, see logs.txt: $(basename "$out")"
    grep -E 'FAIL|Error|error|timed out|assert' "$out" | head -6
  fi
  return $rc
}

symmrun=$build/tools/symmrun test=$build/tests/moe/test_moe bench=$build/bench/symm-bench
for f in "$symmrun" "$test" "$bench"; do
  if [ ! -x "$f" ]; then
    echo "gpu_moe_ht.sh: $f missing: build $build first (cmake --build $build -j)"
    exit 1
  fi
done

# 1. correctness of every schedule (budgets 1, 2, 8, 24 and all SMs in the budget part)
for v in $variants; do
  for part in ht budget; do
    run "test_moe $part, SYMM_MOE_HT_COMBINE=$v" 45 "$log/test_${part}_$(tag "$v").log" \
      env SYMM_MOE_HT_COMBINE="$v" "$symmrun" -n 2 --timeout 40 "$test" 2 "$part"
  done
done

# 2. the high-throughput rows per schedule
for v in $variants; do
  run "bench moe ht, SYMM_MOE_HT_COMBINE=$v" 60 "$log/bench_$(tag "$v").log" \
    env SYMM_MOE_HT_COMBINE="$v" "$bench" --mode moe --npes 2 --no-nvshmem --no-nccl --moe-rows ht \
    --timeout 55 --phase-timeout 30 --out "$log/bench_$(tag "$v").md"
done

# 3. the table: the high-throughput rows of each schedule's markdown
{
echo
echo "== gpu_moe_ht.sh: steps"
printf '%s\n' "${summary[@]}"
echo
echo "== high-throughput combine by schedule (2 PEs; GB/s: rows returned x 14336 B over the call)"
printf '%-16s %-6s %-4s %-13s %-11s %-10s %-12s\n' schedule budget SMs "dispatch x" "dispatch us" "combine us" "combine GB/s"
best24="" best24_us=0 bestall="" bestall_us=0
for v in $variants; do
  md=$log/bench_$(tag "$v").md
  [ -s "$md" ] || { printf '%-16s (no results)\n' "$v"; continue; }
  # | budget | SMs | dispatch x | rows | dispatch us | dispatch GB/s | combine us | combine GB/s | ...
  while IFS='|' read -r _ bud sms x _ dus _ cus cgbs _; do
    bud=$(echo $bud) sms=$(echo $sms) x=$(echo $x) dus=$(echo $dus) cus=$(echo $cus) cgbs=$(echo $cgbs)
    printf '%-16s %-6s %-4s %-13s %-11s %-10s %-12s\n' "$v" "$bud" "$sms" "$x" "$dus" "$cus" "$cgbs"
    if [ "$x" = bf16 ]; then
      if [ "$bud" = 24 ] && { [ -z "$best24" ] || awk "BEGIN{exit !($cus < $best24_us)}"; }; then
        best24=$v best24_us=$cus
      elif [ "$bud" = all ] && { [ -z "$bestall" ] || awk "BEGIN{exit !($cus < $bestall_us)}"; }; then
        bestall=$v bestall_us=$cus
      fi
    fi
  done < <(grep -E '^\| (24|all) \| [0-9]+ \| (fp8|bf16)' "$md")
done
echo "fastest bf16 combine: 24 SMs ${best24:-n/a} (${best24_us} us), every SM ${bestall:-n/a} (${bestall_us} us)"
[ "$ngpu" -lt 2 ] && echo "note: the 2 PEs shared one GPU: not an NVLink figure"
} | tee "$res/summary.txt"
for f in $(ls -tr "$log"); do echo "==== $f"; tail -c 20000 "$log/$f"; done >"$res/logs.txt" 2>&1
for v in $variants; do
  md=$log/bench_$(tag "$v").md
  [ -s "$md" ] && { echo "<!-- SYMM_MOE_HT_COMBINE=$v -->"; cat "$md"; echo; }
done >"$res/bench.md"
exit $failed
