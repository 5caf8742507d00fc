#!/usr/bin/env bash
# The high-throughput MoE exchange (DeepEP's normal layout) on a GPU machine:
# its dispatch forms (SYMM_MOE_HT_DISPATCH) and combine schedules
# (SYMM_MOE_HT_COMBINE), checked and timed on a build made beforehand (it
# builds nothing):
#
#   BUILD=build-sm90 OUT=/some/dir bash scripts/gpu_moe_ht.sh
#
# A variant is FORM/SCHEDULE, e.g. warps/auto, batches/overlap:4,
# warps/overlap-ring:6 (auto: the defaults, warps/overlap with 3 sending warps).
# 1. tests/moe/test_moe's ht and budget parts (budgets 1, 2, 8, 24, every SM)
#    on 2 PEs and on N PEs, once per variant of HT_TEST_VARIANTS, and its
#    graph part for the first of them and for pull variants (their own
#    protocol): every received row and every combined token exact.
# 2. symm-bench --mode moe --moe-rows ht --npes N, once per variant of
#    HT_VARIANTS: DeepEP's shape (4096 tokens/PE, hidden 7168, top-8, 256
#    experts), 24 SMs and every SM, fp8 and bf16 dispatch, bf16 combine.
# 3. bench/moe/deepep_api_bench.py on N PEs under torchrun (one PE per GPU
#    only; variant: the defaults): symm's own Python API and DeepEP's API over
#    it; before the benches, tests/python/test_gpu_deepep.py and
#    test_gpu_moe.py under torchrun the same way (the defaults).
# 4. A table: every variant's rows (dispatch and combine us and GB/s as DeepEP
#    counts them), the fastest variant per column at 24 SMs, and issue 27's
#    bars against it (defined for 4 GPUs, one PE each).
#
# N: 4 PEs, one per GPU, with 4 GPUs or more; 2 with 2 or 3 GPUs; on one GPU 2
# PEs share it under a private MPS daemon (scripts/with_mps.sh): then the
# figures say nothing about NVLink (the table says so) and step 3 is skipped.
# HT_TEST_PES sets step 1's PE counts instead of "2 N" (e.g. "2 4" on one GPU).
# Every step runs under `timeout -k`, each at most what is left of HT_WALL
# (default 270 s). Multicast stays off; SYMM_WAIT_TIMEOUT=15 turns a lost
# signal into a message naming the PE and the word. What comes back: files
# under $OUT/moe_ht/: machine.txt, summary.txt (what is printed last),
# bench.md (every variant's bench markdown), deepep_api.md and logs.txt
# (every step's log, in order). No GPU: prints SKIP and exits 0. Exit 1 when
# a step failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
here=$PWD
OUT=${OUT:-$PWD/out}
res=$OUT/moe_ht
mkdir -p "$res"
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
unset SYMM_MOE_HT_COMBINE SYMM_MOE_HT_DISPATCH
export PATH="$PATH:/usr/local/cuda/bin"
build=${BUILD:-build-sm90}
case $build in /*) ;; *) build=$here/$build ;; esac
variants=${HT_VARIANTS:-warps/auto batches/auto warps/split warps/overlap:4 warps/overlap:6 warps/overlap:8 warps/overlap-ring warps/overlap-ring:4 warps/overlap-ring:6 warps/overlap-ring:8 warps/overlap-async warps/pull warps/pull:6 warps/pull-lanes}
tvariants=${HT_TEST_VARIANTS:-warps/auto batches/auto warps/overlap-ring warps/overlap-ring:8 warps/pull}
wall=${HT_WALL:-270}
t_all=${HT_T0:-$(date +%s)}
# shellcheck source=scripts/_steps.sh
source scripts/_steps.sh
steps_fmt='%-50s %-6s %4s s  %s' steps_deadline=$((t_all + wall)) steps_min_left=10
steps_spent="the ${wall} s wall is used up"

tag() { local t=${1//\//_}; echo "${t//:/-}"; } # a variant's name in file names
# FORM/SCHEDULE -> the environment of a step; a bad variant stops the script before anything runs
venv() {
  local f=${1%%/*} c=${1#*/}
  case "$1" in */*) ;; *) echo "gpu_moe_ht.sh: variant '$1' is not FORM/SCHEDULE" >&2; exit 2 ;; esac
  case $f in warps|batches) ;; *) echo "gpu_moe_ht.sh: variant '$1': the form is warps or batches" >&2; exit 2 ;; esac
  echo "SYMM_MOE_HT_DISPATCH=$f SYMM_MOE_HT_COMBINE=$c"
}
for v in $variants $tvariants; do venv "$v" >/dev/null || exit 2; done

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${ngpu:-0}" -lt 1 ]; then
  echo "SKIP: gpu_moe_ht.sh: no GPU on this machine"
  exit 0
fi

symmrun=$build/tools/symmrun test=$build/tests/moe/test_moe bench=$build/bench/symm-bench
for f in "$symmrun" "$test" "$bench"; do
  if [ ! -x "$f" ]; then
    echo "gpu_moe_ht.sh: $f missing: build $build first (cmake --build $build -j)"
    exit 1
  fi
done

# one GPU: the PEs share it under a private MPS daemon (this script again, inside it)
if [ -z "${HT_INNER:-}" ] && [ "$ngpu" -lt 2 ] && [ ! -e "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control" ]; then
  HT_INNER=1 HT_T0=$t_all OUT="$OUT" scripts/with_mps.sh --timeout "$(( wall + 20 ))" -- bash "$0" "$@"
  exit $?
fi
if [ "$ngpu" -ge 4 ]; then npes=4; export CUDA_VISIBLE_DEVICES=0,1,2,3
elif [ "$ngpu" -ge 2 ]; then npes=2; export CUDA_VISIBLE_DEVICES=0,1
else npes=2; fi
pecounts=2; [ "$npes" -gt 2 ] && pecounts="2 $npes"
pecounts=${HT_TEST_PES:-$pecounts} # step 1's PE counts, e.g. "2 4" on one GPU (the PEs share it under MPS)

{ date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; nvcc --version | tail -1; echo "build: $build"
  echo "PEs: $npes ($ngpu GPU(s))"; echo "variants: $variants"; echo "test variants: $tvariants"
  git log -1 --oneline; } >"$res/machine.txt" 2>&1

log=$(mktemp -d /tmp/gpu_moe_ht.XXXXXX) || exit 1 # one file per step, gathered into $res at the end
trap 'rm -rf "$log"' EXIT

gpu_env_pip_libs

# run NAME LIMIT LOGFILE cmd...: bounded by timeout -k and what is left of the wall
run() {
  local name=$1 out=$3
  steps_exec "$@" || return 1
  if [ $step_rc -eq 0 ]; then
    steps_row "$name" ok $step_dt
  elif [ $step_rc -eq 77 ]; then
    steps_row "$name" skip $step_dt "$(grep -m1 -i skip "$out")"
  else
    steps_err_lines=6 steps_failed "$name" "$out" "logs.txt: $(basename "$out")"
  fi
  return $step_rc
}

# 1. correctness: every received row and combined token, budgets 1, 2, 8, 24 and all SMs
first=1
for v in $tvariants; do
  for p in $pecounts; do
    parts="ht budget"; { [ $first = 1 ] || [[ $v == */pull* ]]; } && parts="ht budget graph"
    for part in $parts; do
      # shellcheck disable=SC2046 # venv's words are NAME=VALUE pairs
      run "test_moe $part, $v ($p PEs)" 45 "$log/test_${part}_$(tag "$v")_$p.log" \
        env $(venv "$v") "$symmrun" -n "$p" --timeout 40 "$test" "$p" "$part"
    done
  done
  first=0
done

# 1b. the Python front ends' GPU tests (symm.moe and DeepEP's API over it), defaults, one PE per GPU
if [ "$ngpu" -ge 2 ] && python3 -c "import torch, pytest" 2>/dev/null && command -v torchrun >/dev/null; then
  run "pytest test_gpu_deepep + test_gpu_moe ($npes PEs)" 90 "$log/pytest_$npes.log" \
    env PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}" SYMM_LIBRARY="$build/src/libsymm.so" \
    torchrun --nproc-per-node "$npes" --master-port 29733 -m pytest -q -rs -p no:cacheprovider \
    tests/python/test_gpu_deepep.py tests/python/test_gpu_moe.py
  tail -3 "$log/pytest_$npes.log"
else
  steps_row "pytest test_gpu_deepep + test_gpu_moe" skip 0 "one GPU, or no torch / pytest / torchrun here"
fi

# 2. the high-throughput rows per variant
for v in $variants; do
  # shellcheck disable=SC2046
  run "bench moe ht, $v ($npes PEs)" 60 "$log/bench_$(tag "$v").log" \
    env $(venv "$v") "$bench" --mode moe --npes "$npes" --no-nvshmem --no-nccl --moe-rows ht \
    --timeout 55 --phase-timeout 30 --out "$log/bench_$(tag "$v").md"
done

# 3. the Python APIs (symm's own and DeepEP's over it), one PE per GPU
if [ "$ngpu" -ge 2 ]; then
  if python3 -c "import torch" 2>/dev/null && command -v torchrun >/dev/null; then
    run "deepep_api_bench ($npes PEs, one per GPU)" 70 "$log/deepep_api.log" \
      env PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}" SYMM_LIBRARY="$build/src/libsymm.so" \
      torchrun --nproc-per-node "$npes" --master-port 29731 bench/moe/deepep_api_bench.py --reps 20 \
      --out "$log/deepep_api.md"
  else
    steps_row "deepep_api_bench" skip 0 "no torch or torchrun here"
  fi
else
  steps_row "deepep_api_bench" skip 0 "one GPU: the PEs would share it"
fi

# 4. the table: each variant's rows of its markdown, the fastest per column at 24 SMs, the bars
{
echo
echo "== gpu_moe_ht.sh: steps"
steps_table
echo
echo "== high-throughput rows by variant ($npes PEs; GB/s as DeepEP counts: received rows x row bytes / time)"
printf '%-26s %-6s %-4s %-13s %-8s %-9s %-8s %-9s %-9s\n' "variant (form/schedule)" budget SMs "dispatch x" "disp us" "disp GB/s" "comb us" "comb GB/s" "comb+w us"
b8="" b8v="" b16="" b16v="" bc="" bcv="" ac="" acv=""
gt() { [ -z "$2" ] || awk "BEGIN{exit !($1 > $2)}"; } # is $1 more than $2 (or $2 unset)
for v in $variants; do
  md=$log/bench_$(tag "$v").md
  [ -s "$md" ] || { printf '%-26s (no results)\n' "$v"; continue; }
  # | budget | SMs | dispatch x | rows | dispatch us | dispatch GB/s | combine us | combine GB/s | combine + weights us | ...
  while IFS='|' read -r _ bud sms x _ dus dgbs cus cgbs cwus _; do
    bud=$(echo $bud) sms=$(echo $sms) x=$(echo $x) dus=$(echo $dus) dgbs=$(echo $dgbs) cus=$(echo $cus) cgbs=$(echo $cgbs)
    cwus=$(echo $cwus)
    printf '%-26s %-6s %-4s %-13s %-8s %-9s %-8s %-9s %-9s\n' "$v" "$bud" "$sms" "$x" "$dus" "$dgbs" "$cus" "$cgbs" "$cwus"
    if [ "$bud" = 24 ]; then
      case $x in
        fp8*) gt "$dgbs" "$b8" && b8=$dgbs b8v=$v ;;
        bf16) gt "$dgbs" "$b16" && b16=$dgbs b16v=$v ;;
      esac
      gt "$cgbs" "$bc" && bc=$cgbs bcv=$v
    elif [ "$bud" = all ]; then
      gt "$cgbs" "$ac" && ac=$cgbs acv=$v
    fi
  done < <(grep -E '^\| (24|all) \| [0-9]+ \| (fp8|bf16)' "$md")
done
echo
bar() { # what, got, need, variant
  if [ -z "$2" ]; then printf '%-44s n/a (no rows)\n' "$1"; return; fi
  awk -v w="$1" -v g="$2" -v n="$3" -v v="$4" 'BEGIN{printf "%-44s %s (%.1f GB/s, bar %d, %s)\n", w, (g >= n ? "pass" : "MISS"), g, n, v}'
}
bar "24 SMs: dispatch fp8 >= 305 GB/s" "$b8" 305 "$b8v"
bar "24 SMs: dispatch bf16 >= 312 GB/s" "$b16" 312 "$b16v"
bar "24 SMs: combine >= 389 GB/s" "$bc" 389 "$bcv"
bar "every SM: combine >= 380 GB/s" "$ac" 380 "$acv"
[ "$npes" -ne 4 ] && echo "note: the bars are defined for 4 GPUs, one PE each; this run had $npes PEs on $ngpu GPU(s)"
[ "$ngpu" -lt 2 ] && echo "note: the PEs shared one GPU: not an NVLink figure"
if [ -s "$log/deepep_api.md" ]; then
  echo
  echo "== bench/moe/deepep_api_bench.py (Python, rank 0, eager calls; defaults warps/auto)"
  grep -E '^\| (own|api cached|api views)' "$log/deepep_api.md" | head -8
fi
} | tee "$res/summary.txt"
for f in $(ls -tr "$log"); do echo "==== $f"; tail -c 20000 "$log/$f"; done >"$res/logs.txt" 2>&1
for v in $variants; do
  md=$log/bench_$(tag "$v").md
  [ -s "$md" ] && { echo "<!-- SYMM_MOE_HT_DISPATCH=${v%%/*} SYMM_MOE_HT_COMBINE=${v#*/} -->"; cat "$md"; echo; }
done >"$res/bench.md"
[ -s "$log/deepep_api.md" ] && cp "$log/deepep_api.md" "$res/deepep_api.md"
exit $failed
