#!/usr/bin/env bash
# The low-latency MoE path on GPUs, in one command, on a build made beforehand
# (it builds nothing): its tests, where its time goes, and its bench rows.
#
#   BUILD=build-sm90 OUT=/some/dir bash scripts/gpu_moe_ll_probe.sh [step...]
#   BASE_BUILD=build-base BUILD=... bash scripts/gpu_moe_ll_probe.sh [step...]
#
# With BASE_BUILD (a build of the tree before a change, made beforehand too), every timing
# step (the probe variants, bench, stampsn) runs on both builds, one right after the other,
# and the table shows both: rows of the base build are named <variant>@base.
#
# steps (default: test probe bench; run in the order given; the final run of issue 27's cut:
#   LL_WALL=60 ... test real stamps testpdl pdl 1pe stamps1 test4):
#   test    test_moe on 2 PEs (one per GPU where there are 2, else sharing one under
#           scripts/with_mps.sh): every part (ll ht graph errors budget) with
#           SYMM_MOE_PACKETS=auto, then ll and graph with 1 and 0
#   probe   symm-bench --mode moe_ll (256 experts top-8 hidden 7168 and 64 experts top-6
#           hidden 2048, each at 1, 8, 128 tokens/PE) once per variant, each row per call (behind
#           a barrier, as --mode moe times it) and as back-to-back pairs (as NCCL is timed):
#             real     the exchange as built (SYMM_MOE_PACKETS=auto), NCCL beside it
#             plain    the same with SYMM_MOE_PACKETS=0 (every row, then a released flag)
#             hop      SYMM_MOE_LL_PROBE=hop: each kernel only exchanges one flag with every PE
#             empty    SYMM_MOE_LL_PROBE=empty: each kernel only starts and ends
#             1pe      the real exchange on 1 PE: every wait local, no link crossed
#             twice    SYMM_MOE_LL_PROBE=twice: each dispatch kernel does its call twice (twice1:
#                      on 1 PE); twice - real: a dispatch with its code and data warm
#             stamps   SYMM_MOE_LL_PROBE=stamps: the real exchange, each block printing its
#                      stage times for one call (on 2 PEs, and stamps1 on 1 PE); summed up
#                      by scripts/moe_ll_stamps.py at the end
#           real - hop: what the exchange adds to one crossing; hop - empty: a crossing
#           and its wait; empty: the launch and timing floor.
#   bench   symm-bench --mode moe_ll on every GPU (up to 4, one PE each; 2 sharing one
#           GPU where there is one): the real rows with the NCCL columns
#   stampsn the stamps variant on the bench's PEs
#   test4   test_moe ll and graph (packets auto) on 4 PEs sharing the GPUs (under
#           scripts/with_mps.sh, every PE on one GPU, where there are fewer than 4); test8,
#           test1: the same on 8 PEs, on 1 PE
#   testpart, testpart1, testpart4: test_moe ll and graph with SYMM_MOE_LL_COMBINE=partial (the
#           cases of 256 routes and more sum on the experts' side) and with partial-all and
#           SYMM_MOE_LL_SMALL=0 (every case does; the budget part too), on 2, 1 and 4 PEs
#   benchpart the bench step's rows with SYMM_MOE_LL_COMBINE=partial (the 128-token shapes sum on
#           the experts' side; NCCL beside them): run "bench benchpart" for both modes' rows
#   testpdl test_moe ll and graph on 2 PEs with SYMM_MOE_PDL=1 (programmatic dependent launch,
#           the default); testnopdl: the same with SYMM_MOE_PDL=0 (plain launches)
#   nsys    the real moe_ll rows (--quick) on 2 PEs under nsys (where the image has it, else SKIP),
#           CUDA graphs traced per node: what each timed call holds on the GPU (kernels, memsets,
#           copies), each one's median time and the idle gaps between consecutive ones, summed
#           up by scripts/moe_ll_nsys.py (nsyspdl / nsysnopdl: with SYMM_MOE_PDL=1 / 0)
#   real plain hop empty 1pe twice twice1 stamps stamps1 stampsnosmall1 pdl nopdl nosmall nosmall1
#   partial partial1 partialall partialall1 stampspart1 stampspart: one
#           variant of probe alone (pdl / nopdl: the real exchange with SYMM_MOE_PDL=1 / 0; nosmall:
#           with SYMM_MOE_LL_SMALL=0, the general kernels where the small ones would run, on 2 PEs and
#           nosmall1 on 1; stampsnosmall1: their stage times on 1 PE; partial: SYMM_MOE_LL_COMBINE=partial
#           on 2 PEs (NCCL beside it where each PE has a GPU), partial1 on 1; partialall(1):
#           partial-all with SYMM_MOE_LL_SMALL=0, every shape summed on the experts' side (compare
#           with nosmall(1)); stampspart1, stampspart: partial's stage times on 1 and 2 PEs; none of these in probe's
#           default list)
#
# Logs and results under $OUT/moe_ll/; the last lines are a table of the steps and the
# rows of every variant. Every step runs under `timeout -k`, each at most what is
# left of LL_WALL (default 240 s). Multicast stays off; SYMM_WAIT_TIMEOUT=15 turns a
# lost flag into a message naming the PE and the word. No GPU: prints SKIP, exits 0.
# DRY=1 prints the commands instead of running them.
set -uo pipefail
cd "$(dirname "$0")/.."
here=$PWD
OUT=${OUT:-$PWD/out}
log=$OUT/moe_ll
mkdir -p "$log"
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
unset SYMM_MOE_LL_PROBE SYMM_MOE_PACKETS SYMM_MOE_PDL SYMM_MOE_LL_SMALL SYMM_MOE_LL_COMBINE
export PATH="$PATH:/usr/local/cuda/bin"
build=${BUILD:-${SYMM_BUILD_DIR:-build-gpu}}
case $build in /*) ;; *) build=$here/$build ;; esac
base=${BASE_BUILD:-}
case $base in /* | '') ;; *) base=$here/$base ;; esac
steps=${*:-test probe bench}
wall=${LL_WALL:-240}
dry=${DRY:-0}
t_all=${LL_T0:-$(date +%s)}
rows=()
# shellcheck source=scripts/_steps.sh
source scripts/_steps.sh
steps_fmt='%-44s %-6s %5s s  %s' steps_dry_form=timeout steps_dry_status=ok
steps_deadline=$((t_all + wall)) steps_spent="the ${wall} s wall is used up"

if [ "$dry" = 1 ]; then
  ngpu=${DRY_GPUS:-2}
else
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
{ date -u; hostname; nvidia-smi -L; nvcc --version | tail -1; echo "build: $build"; echo "base build: ${base:-none}"
  git log -1 --oneline; } \
  >"$log/machine.txt" 2>&1
if [ "$ngpu" -lt 1 ]; then
  echo "SKIP: gpu_moe_ll_probe.sh: no GPU on this machine"
  exit 0
fi

py=$(command -v python3 || true)
gpu_env_pip_libs

# Two PEs on one GPU: rerun this script under a private MPS daemon.
if [ "$dry" != 1 ] && [ -z "${LL_INNER:-}" ] && [ "$ngpu" -lt 2 ] &&
   [ ! -e "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control" ]; then
  LL_INNER=1 LL_T0=$t_all OUT="$OUT" scripts/with_mps.sh --timeout "$(( wall + 30 ))" -- bash "$0" "$@"
  exit $?
fi

# run NAME LIMIT LOGFILE cmd...: bounded by timeout -k and what is left of the wall
run() {
  local name=$1 out=$3
  steps_exec "$@" || return $step_rc
  if [ $step_rc -eq 77 ] || { [ $step_rc -eq 0 ] && grep -q '^SKIP' "$out"; }; then
    steps_row "$name" skip $step_dt "$(grep -m1 -i skip "$out")"
  elif [ $step_rc -eq 0 ]; then
    steps_row "$name" ok $step_dt
  else
    steps_failed "$name" "$out" "moe_ll/$(basename "$out")"
  fi
  return $step_rc
}

need() { # need PATH WHAT: the build has it, else a FAIL line
  if [ -e "$1" ] || [ "$dry" = 1 ]; then return 0; fi
  steps_row "$2" FAIL 0 "$1 missing: build $build first (cmake --build $build -j)"
  return 1
}

# the launcher of build $1, else of the other build (symmrun links nothing of libsymm)
pick_symmrun() {
  local d
  for d in "$1" "$build" "$base"; do
    if [ -n "$d" ] && [ -x "$d/tools/symmrun" ]; then echo "$d/tools/symmrun"; return; fi
  done
  echo "$1/tools/symmrun"
}
symmrun=$(pick_symmrun "$build")
bench=$build/bench/symm-bench

step_test() {
  need "$build/tests/moe/test_moe" "test_moe" && need "$symmrun" "test_moe" || return 0
  run "test_moe all parts, packets auto (2 PEs)" 60 "$log/test_moe_all.log" \
    env SYMM_MOE_PACKETS=auto "$symmrun" -n 2 --timeout 55 "$build/tests/moe/test_moe" 2 all
  for pk in 1 0; do
    for part in ll graph; do
      run "test_moe $part, packets $pk (2 PEs)" 30 "$log/test_moe_${part}_pkt$pk.log" \
        env SYMM_MOE_PACKETS=$pk "$symmrun" -n 2 --timeout 25 "$build/tests/moe/test_moe" 2 "$part"
    done
  done
}

# variant NAME NPES FILE [env...] -- bench args: one moe_ll run, its rows kept for the table
variant() {
  local name=$1 n=$2 file=$3
  shift 3
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local extra=("$@")
  if [ "$n" -gt "$ngpu" ] && [[ " ${extra[*]} " != *" --no-nccl "* ]]; then
    extra+=(--no-nccl) # NCCL refuses two ranks on one GPU
  fi
  name=$name${VTAG:-}
  file=$file${VTAG:+_base}
  rm -f "$log/$file.md"
  run "moe_ll $name ($n PEs)" 60 "$log/$file.log" \
    env SYMMRUN="$(pick_symmrun "${VBUILD:-$build}")" "${envs[@]}" "${VBENCH:-$bench}" --mode moe_ll --npes "$n" --no-nvshmem --timeout 55 --phase-timeout 30 \
    --out "$log/$file.md" "${extra[@]}"
  [ -f "$log/$file.md" ] || return 0
  while IFS= read -r line; do
    rows+=("$(printf '%-11s %s' "$name" "$line")")
  done < <(grep -E '^\| (256|64) \|' "$log/$file.md")
}

# timed NAME ARGS...: one timing step on this build, then (BASE_BUILD) on the base build
timed() {
  "$@"
  [ -n "$base" ] || return 0
  if [ ! -e "$base/bench/symm-bench" ] && [ "$dry" != 1 ]; then
    steps_row "$1 (base build)" FAIL 0 "$base/bench/symm-bench missing"
    return 0
  fi
  VBUILD=$base VBENCH=$base/bench/symm-bench VTAG=@base "$@"
}

# one probe variant by name
probe_one() {
  need "$bench" "symm-bench moe_ll" || return 0
  case $1 in
    real) variant real 2 probe_real SYMM_MOE_PACKETS=auto -- ;;
    plain) variant plain 2 probe_plain SYMM_MOE_PACKETS=0 -- --no-nccl ;;
    hop) variant hop 2 probe_hop SYMM_MOE_LL_PROBE=hop -- --no-nccl ;;
    empty) variant empty 2 probe_empty SYMM_MOE_LL_PROBE=empty -- --no-nccl ;;
    1pe) variant 1pe 1 probe_1pe SYMM_MOE_PACKETS=auto -- --no-nccl ;;
    twice) variant twice 2 probe_twice SYMM_MOE_LL_PROBE=twice -- --no-nccl ;;
    twice1) variant twice1 1 probe_twice1 SYMM_MOE_LL_PROBE=twice -- --no-nccl ;;
    stamps) variant stamps 2 probe_stamps SYMM_MOE_LL_PROBE=stamps -- --no-nccl ;;
    stamps1) variant stamps1 1 probe_stamps1 SYMM_MOE_LL_PROBE=stamps -- --no-nccl ;;
    stampsnosmall1) variant stampsnosmall1 1 probe_stampsnosmall1 SYMM_MOE_LL_PROBE=stamps SYMM_MOE_LL_SMALL=0 -- --no-nccl ;;
    pdl) variant pdl 2 probe_pdl SYMM_MOE_PACKETS=auto SYMM_MOE_PDL=1 -- --no-nccl ;;
    nopdl) variant nopdl 2 probe_nopdl SYMM_MOE_PACKETS=auto SYMM_MOE_PDL=0 -- --no-nccl ;;
    nosmall) variant nosmall 2 probe_nosmall SYMM_MOE_PACKETS=auto SYMM_MOE_LL_SMALL=0 -- --no-nccl ;;
    nosmall1) variant nosmall1 1 probe_nosmall1 SYMM_MOE_PACKETS=auto SYMM_MOE_LL_SMALL=0 -- --no-nccl ;;
    partial) variant partial 2 probe_partial SYMM_MOE_PACKETS=auto SYMM_MOE_LL_COMBINE=partial -- ;;
    partial1) variant partial1 1 probe_partial1 SYMM_MOE_PACKETS=auto SYMM_MOE_LL_COMBINE=partial -- --no-nccl ;;
    partialall) variant partialall 2 probe_partialall SYMM_MOE_PACKETS=auto SYMM_MOE_LL_COMBINE=partial-all \
      SYMM_MOE_LL_SMALL=0 -- --no-nccl ;;
    partialall1) variant partialall1 1 probe_partialall1 SYMM_MOE_PACKETS=auto SYMM_MOE_LL_COMBINE=partial-all \
      SYMM_MOE_LL_SMALL=0 -- --no-nccl ;;
    stampspart1) variant stampspart1 1 probe_stampspart1 SYMM_MOE_LL_PROBE=stamps SYMM_MOE_LL_COMBINE=partial -- \
      --no-nccl ;;
    stampspart) variant stampspart 2 probe_stampspart SYMM_MOE_LL_PROBE=stamps SYMM_MOE_LL_COMBINE=partial -- \
      --no-nccl ;;
  esac
}

step_probe() {
  local v
  for v in real plain hop empty 1pe twice twice1 stamps stamps1; do timed probe_one "$v"; done
}

# the real rows on every GPU (up to 4, one PE each; 2 PEs sharing the GPU where there is one),
# NCCL's all-to-alls of the same bytes beside them where every PE has its own GPU
step_bench() { # step_bench [SUFFIX env...]: SUFFIX names the rows of a run with env set
  need "$bench" "symm-bench moe_ll" || return 0
  local n=$ngpu sfx=${1:-}
  [ $# -gt 0 ] && shift
  [ "$n" -gt 4 ] && n=4
  [ "$n" -lt 2 ] && n=2
  variant "bench$n$sfx" "$n" "bench_${n}pe$sfx" SYMM_MOE_PACKETS=auto "$@" --
}

# stage stamps on the bench's PEs (up to 4, one per GPU)
step_stampsn() {
  need "$bench" "symm-bench moe_ll" || return 0
  local n=$ngpu
  [ "$n" -gt 4 ] && n=4
  [ "$n" -lt 2 ] && n=2
  variant "stamps$n" "$n" probe_stampsn SYMM_MOE_LL_PROBE=stamps -- --no-nccl
}

step_testpdl() { # step_testpdl 0|1: test_moe ll and graph with SYMM_MOE_PDL set so
  need "$build/tests/moe/test_moe" "test_moe" && need "$symmrun" "test_moe" || return 0
  local part v=$1
  for part in ll graph; do
    run "test_moe $part, SYMM_MOE_PDL=$v (2 PEs)" 30 "$log/test_moe_${part}_pdl$v.log" \
      env SYMM_MOE_PACKETS=auto SYMM_MOE_PDL=$v "$symmrun" -n 2 --timeout 25 "$build/tests/moe/test_moe" 2 "$part"
  done
}

# the real rows under nsys: the GPU operations of every timed call and the gaps between them
step_nsys() { # step_nsys NAME [env...]
  local name=$1 ns
  shift
  need "$bench" "symm-bench moe_ll" || return 0
  ns=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
  if [ -z "$ns" ] && [ "$dry" != 1 ]; then
    steps_row "$name" skip 0 "SKIP: no nsys on this machine"
    return 0
  fi
  local extra=()
  [ "$ngpu" -lt 2 ] && extra=(--no-nccl)
  rm -f "$log/$name.nsys-rep" "$log/$name.sqlite"
  run "$name: moe_ll --quick under nsys (2 PEs)" 90 "$log/$name.log" \
    env "$@" "${ns:-nsys}" profile --trace=cuda --cuda-graph-trace=node --sample=none --cpuctxsw=none \
    --force-overwrite=true -o "$log/$name" \
    "$bench" --mode moe_ll --npes 2 --no-nvshmem --quick --timeout 70 --phase-timeout 30 \
    --out "$log/$name.md" "${extra[@]}" || return 0
  [ "$dry" = 1 ] && return 0
  run "$name: nsys stats" 60 "$log/$name.stats.log" \
    "$ns" stats --report cuda_gpu_trace --format csv --force-export=true -o "$log/$name" "$log/$name.nsys-rep" ||
    return 0
  local csvs=("$log/$name"*cuda_gpu_trace*.csv)
  [ -n "$py" ] && [ -f "${csvs[0]}" ] && "$py" scripts/moe_ll_nsys.py "${csvs[@]}" >"$log/$name.ops.txt" 2>&1
}

# test_moe's ll and graph parts on 4 PEs: one per GPU where there are 4, else sharing the GPUs
# under a private MPS daemon (unless this run is already under one)
step_testn() { # step_testn N [TAG env...]: TAG names the rows and logs of a run with env set
  need "$build/tests/moe/test_moe" "test_moe" && need "$symmrun" "test_moe" || return 0
  local wrap=() part n=$1 tag=${2:-}
  shift
  [ $# -gt 0 ] && shift
  if [ "$ngpu" -lt "$n" ] && [ ! -e "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control" ]; then
    wrap=(scripts/with_mps.sh --timeout 50 --)
  fi
  for part in ${TPARTS:-ll graph}; do
    run "test_moe $part, packets auto${tag:+, $tag} ($n PEs)" 55 "$log/test_moe_${part}_${n}pe${tag:+_$tag}.log" \
      env SYMM_MOE_PACKETS=auto "$@" "${wrap[@]}" "$symmrun" -n "$n" --timeout 45 "$build/tests/moe/test_moe" "$n" "$part"
  done
}

for st in $steps; do
  case $st in
    test | probe) "step_$st" ;;
    bench | stampsn) timed "step_$st" ;;
    test1) step_testn 1 ;;
    test4) step_testn 4 ;;
    test8) step_testn 8 ;;
    testpart | testpart1 | testpart4)
      np=${st#testpart}
      step_testn "${np:-2}" partial SYMM_MOE_LL_COMBINE=partial
      TPARTS="ll graph budget" step_testn "${np:-2}" partialall SYMM_MOE_LL_COMBINE=partial-all SYMM_MOE_LL_SMALL=0 ;;
    benchpart) timed step_bench part SYMM_MOE_LL_COMBINE=partial ;;
    testpdl) step_testpdl 1 ;;
    testnopdl) step_testpdl 0 ;;
    nsys) step_nsys nsys SYMM_MOE_PACKETS=auto ;;
    nsyspdl) step_nsys nsyspdl SYMM_MOE_PACKETS=auto SYMM_MOE_PDL=1 ;;
    nsysnopdl) step_nsys nsysnopdl SYMM_MOE_PACKETS=auto SYMM_MOE_PDL=0 ;;
    real | plain | hop | empty | 1pe | twice | twice1 | stamps | stamps1 | stampsnosmall1 | pdl | nopdl | nosmall | nosmall1 | \
      partial | partial1 | partialall | partialall1 | stampspart1 | stampspart) timed probe_one "$st" ;;
    *) steps_row "step $st" FAIL 0 "unknown step (test, test1, test4, test8, testpdl, testnopdl, testpart, testpart1, testpart4, probe, bench, benchpart, stampsn, nsys, nsyspdl, nsysnopdl, or a probe variant)" ;;
  esac
done

echo
echo "== gpu_moe_ll_probe.sh: $ngpu GPU(s), build $build, logs in $log"
steps_table
echo
echo "variant | experts | top-k | hidden | tokens/PE | SMs | rows (dispatch / combine) | dispatch us | combine us |" \
     "NCCL per call us (dispatch / combine) | pair us (back to back) | NCCL us (dispatch) | NCCL us (combine) |" \
     "NCCL pair / symm pair | dispatch us (back to back) | timed |"
if [ ${#rows[@]} -gt 0 ]; then printf '%s\n' "${rows[@]}"; fi
for f in probe_stamps probe_stamps_base probe_stamps1 probe_stamps1_base probe_stampsnosmall1 probe_stampsnosmall1_base \
         probe_stampspart1 probe_stampspart probe_stampsn probe_stampsn_base; do
  if [ -f "$log/$f.log" ] && [ -n "$py" ]; then
    echo
    echo "stage times, $f (per kernel, shape, PE: when the last block reached each stage, us from the first block's start):"
    "$py" scripts/moe_ll_stamps.py "$log/$f.log" | tee "$log/$f.stages.txt"
  fi
done
for f in nsys nsyspdl nsysnopdl; do
  if [ -s "$log/$f.ops.txt" ]; then
    echo
    echo "GPU operations per stream under nsys ($f; every row's calls, --quick):"
    cat "$log/$f.ops.txt"
  fi
done
exit $failed
