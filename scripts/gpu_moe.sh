#!/usr/bin/env bash
# The MoE exchange (symm_moe.h, symm.moe) on a GPU machine, in one command, on
# a build made beforehand (it builds nothing):
#
#   BUILD=build-gpu OUT=/some/dir bash scripts/gpu_moe.sh [step...]
#
# steps (default: all, in this order):
#   ctest    tests/moe/test_moe.cu, every part (ll ht graph errors budget) in one
#            process per run, on 2 and 4 PEs (symmrun), SYMM_MOE_PACKETS as set (auto)
#   pkt      test_moe's ll and graph parts again with SYMM_MOE_PACKETS=1 (every row a
#            packet) and =0 (every row plain, then a released flag), on 2 and 4 PEs
#   deepep   tests/python/test_gpu_deepep.py (symm.moe.deep_ep) under torchrun on the
#            largest PE count
#   pypkt    with SYMM_MOE_PACKETS=1 and =0: test_gpu_moe.py's pplx matrix and large
#            shapes and test_gpu_deepep.py's low-latency cases, largest PE count
#   llbench  symm-bench --mode moe --quick with SYMM_MOE_PACKETS=1 and =0 on 4 PEs
#            (2 sharing the GPU on one GPU) -> $OUT/moe/bench_moe_pkt{1,0}.md: the
#            low-latency rows at 1 and 128 tokens/PE by both paths, side by side in
#            the summary
#   python   tests/python/test_gpu_moe.py under torchrun on the largest PE count (the
#            whole pplx matrix, compile, graphs, 1000 calls, errors, SM budgets, high
#            throughput)
#   spawn    tests/python/test_gpu_moe_spawn.py: pplx's start (torch.multiprocessing
#            spawn, gloo group, no launcher variables, nvshmem_init) and its round
#   bench    symm-bench --mode moe on 4 PEs -> $OUT/moe/bench_moe.md (graph timing,
#            SMs used, 24-SM rows, NCCL beside it, the bars as pass/miss lines), and
#            bench/moe/deepep_bench.py beside it (n/a where deep_ep is not installed)
#   host     bench/moe/host_cost.py under torchrun on 4 PEs: host time per eager call
#            (perf_counter over 200 back-to-back pairs, no sync), eager vs graph
#   python2  test_gpu_moe.py on the other PE counts, without its two slowest tests
#            (compile, 1000 calls): last, as what the wall is most likely to cut
#
# Logs and results under $OUT/moe/; the last lines are a table of the steps, the
# low-latency rows by path and the bars' pass/miss lines. Every step runs under
# `timeout -k`, each at most what is left of MOE_WALL (default 540 s); a step that no
# longer fits is reported as such.
# PE counts: MOE_NPES ("2 4"). With fewer GPUs than PEs the PEs share GPUs under a
# private MPS daemon (scripts/with_mps.sh), unless MOE_MPS=0. Multicast stays off;
# SYMM_WAIT_TIMEOUT (default 15 s) turns a lost signal into a message naming the
# PE and the word. No GPU: prints SKIP and exits 0.
set -uo pipefail
cd "$(dirname "$0")/.."
here=$PWD
OUT=${OUT:-$PWD/out}
log=$OUT/moe
mkdir -p "$log"
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
export PATH="$PATH:/usr/local/cuda/bin"
build=${BUILD:-${SYMM_BUILD_DIR:-build-gpu}}
steps=${*:-ctest pkt python deepep pypkt llbench spawn bench host python2}
npes_list=${MOE_NPES:-2 4}
wall=${MOE_WALL:-540}
t_all=${MOE_T0:-$(date +%s)}
# shellcheck source=scripts/_steps.sh
source scripts/_steps.sh
steps_fmt='%-40s %-6s %5s s  %s' steps_deadline=$((t_all + wall)) steps_spent="the ${wall} s wall is used up"

has_step() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
{ date -u; hostname; nvidia-smi -L; nvcc --version | tail -1; echo "build: $build"; git log -1 --oneline; } \
  >"$log/machine.txt" 2>&1
if [ "$ngpu" -lt 1 ]; then
  echo "SKIP: gpu_moe.sh: no GPU on this machine"
  exit 0
fi

gpu_env_pip_libs
export PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}"
case $build in /*) ;; *) build=$here/$build ;; esac
export SYMM_LIBRARY="$build/src/libsymm.so"

# ---- MPS for PEs that share a GPU: rerun this script under scripts/with_mps.sh ------------
max_pes=1
for n in $npes_list; do [ "$n" -gt "$max_pes" ] && max_pes=$n; done
if [ -z "${MOE_INNER:-}" ] && [ "${MOE_MPS:-1}" != 0 ] && [ "$ngpu" -lt "$max_pes" ] &&
   [ ! -e "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control" ]; then
  MOE_INNER=1 MOE_T0=$t_all OUT="$OUT" scripts/with_mps.sh --timeout "$(( wall + 30 ))" -- bash "$0" "$@"
  exit $?
fi

# torchrun's PEs get their MPS share here (symmrun gives its own PEs theirs).
share_env() {
  local per=$(( ($1 + ngpu - 1) / ngpu ))
  if [ "$per" -gt 1 ] && [ -z "${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:-}" ]; then
    echo "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$(( 100 / per ))"
  else
    echo "SYMM_MOE_RUN=1"
  fi
}

# run NAME LIMIT LOGFILE cmd...: bounded by timeout -k and what is left of the wall
run() {
  local name=$1 out=$3
  steps_exec "$@" || return 0
  if [ $step_rc -eq 0 ] && grep -qE '^SKIP|[0-9]+ skipped' "$out" && ! grep -qE '[0-9]+ passed' "$out"; then
    steps_row "$name" skip $step_dt "$(grep -m1 -iE '^SKIP|SKIPPED' "$out")"
  elif [ $step_rc -eq 0 ] && grep -q '^n/a:' "$out"; then
    steps_row "$name" skip $step_dt "$(grep -m1 '^n/a:' "$out")"
  elif [ $step_rc -eq 0 ]; then
    steps_row "$name" ok $step_dt
  elif [ $step_rc -eq 77 ]; then
    steps_row "$name" skip $step_dt "$(grep -m1 -i skip "$out")"
  else
    steps_failed "$name" "$out" "moe/$(basename "$out")"
  fi
}

need() { # need PATH WHAT: the build has it, else a FAIL line
  if [ -e "$1" ]; then return 0; fi
  steps_row "$2" FAIL 0 "$1 missing: build $build first (cmake --build $build -j)"
  return 1
}

symmrun=$build/tools/symmrun

if has_step ctest && need "$build/tests/moe/test_moe" "test_moe" && need "$symmrun" "test_moe"; then
  for n in $npes_list; do
    run "test_moe all parts ($n PEs)" $(( 30 + 10 * n )) "$log/test_moe_$n.log" \
      "$symmrun" -n "$n" --timeout $(( 25 + 10 * n )) "$build/tests/moe/test_moe" "$n" all
  done
fi

if has_step pkt && need "$build/tests/moe/test_moe" "test_moe, packets forced" && need "$symmrun" "test_moe"; then
  for pk in 1 0; do
    for n in $npes_list; do
      for part in ll graph; do
        run "test_moe $part, SYMM_MOE_PACKETS=$pk ($n PEs)" $(( 20 + 5 * n )) "$log/test_moe_${part}_pkt${pk}_$n.log" \
          env SYMM_MOE_PACKETS=$pk "$symmrun" -n "$n" --timeout $(( 15 + 5 * n )) "$build/tests/moe/test_moe" "$n" "$part"
      done
    done
  done
fi

# pytest_moe N [pytest args...]: test_gpu_moe.py under torchrun on N PEs
pytest_moe() {
  local n=$1
  shift
  run "pytest test_gpu_moe ($n PEs)" $(( 20 + 20 * n )) "$log/pytest_$n.log" \
    env $(share_env "$n") torchrun --nproc-per-node "$n" --master-port $((29700 + n)) \
    -m pytest -q -x -p no:cacheprovider tests/python/test_gpu_moe.py "$@"
  tail -2 "$log/pytest_$n.log"
}
py_most=$(echo "$npes_list" | tr ' ' '\n' | sort -rn | head -1)

if has_step python && need "$SYMM_LIBRARY" "pytest test_gpu_moe"; then
  pytest_moe "$py_most"
fi

if has_step deepep && need "$SYMM_LIBRARY" "pytest test_gpu_deepep"; then
  run "pytest test_gpu_deepep ($py_most PEs)" $(( 30 + 20 * py_most )) "$log/pytest_deepep_$py_most.log" \
    env $(share_env "$py_most") torchrun --nproc-per-node "$py_most" --master-port 29720 \
    -m pytest -q -x -p no:cacheprovider tests/python/test_gpu_deepep.py
  tail -2 "$log/pytest_deepep_$py_most.log"
fi

if has_step pypkt && need "$SYMM_LIBRARY" "pytest, packets forced"; then
  for pk in 1 0; do
    for f in moe:"pplx_matrix or large" deepep:low_latency; do
      run "pytest ${f%%:*} ${f#*:}, SYMM_MOE_PACKETS=$pk ($py_most PEs)" $(( 20 + 15 * py_most )) \
        "$log/pytest_${f%%:*}_pkt${pk}_$py_most.log" \
        env $(share_env "$py_most") SYMM_MOE_PACKETS=$pk torchrun --nproc-per-node "$py_most" \
        --master-port $((29730 + pk)) -m pytest -q -x -p no:cacheprovider "tests/python/test_gpu_${f%%:*}.py" \
        -k "${f#*:}"
      tail -2 "$log/pytest_${f%%:*}_pkt${pk}_$py_most.log"
    done
  done
fi

# bench_pes: 4 PEs, on the GPUs there are (sharing them when fewer), and the extra flags
bench_pes() {
  nb=4
  [ "$nb" -gt "$ngpu" ] && nb=$ngpu
  [ "$nb" -lt 2 ] && nb=2
  extra=()
  [ "$nb" -gt "$ngpu" ] && extra=(--no-nccl --no-nvshmem)  # NCCL refuses two ranks on one GPU
  return 0
}

if has_step llbench && need "$build/bench/symm-bench" "symm-bench --mode moe by path"; then
  bench_pes
  for pk in 1 0; do
    run "symm-bench moe --quick, SYMM_MOE_PACKETS=$pk ($nb PEs)" 90 "$log/bench_moe_pkt$pk.log" \
      env SYMM_MOE_PACKETS=$pk "$build/bench/symm-bench" --mode moe --quick --npes "$nb" --no-nvshmem \
      --timeout 85 --phase-timeout 40 ${extra[@]+"${extra[@]}"} --out "$log/bench_moe_pkt$pk.md"
  done
fi

if has_step spawn && need "$SYMM_LIBRARY" "pytest test_gpu_moe_spawn"; then
  run "pplx start: spawn + nvshmem_init" 60 "$log/pytest_spawn.log" \
    python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_gpu_moe_spawn.py
  tail -2 "$log/pytest_spawn.log"
fi

if has_step bench && need "$build/bench/symm-bench" "symm-bench --mode moe"; then
  bench_pes
  run "symm-bench --mode moe ($nb PEs)" 120 "$log/bench_moe.log" \
    "$build/bench/symm-bench" --mode moe --npes "$nb" --no-nvshmem --timeout 110 --phase-timeout 45 \
    ${extra[@]+"${extra[@]}"} ${MOE_BENCH_ARGS:-} --out "$log/bench_moe.md"
  grep -E '^\|' "$log/bench_moe.md" 2>/dev/null | head -40
  run "DeepEP normal kernels ($nb ranks)" 60 "$log/deepep.log" \
    torchrun --nproc-per-node "$nb" --master-port 29790 bench/moe/deepep_bench.py --out "$log/deepep.md"
  head -12 "$log/deepep.log"
fi

if has_step host && need "$SYMM_LIBRARY" "eager host time"; then
  nh=4
  [ "$nh" -gt "$ngpu" ] && nh=$ngpu
  if [ "$nh" -ge 1 ]; then
    run "eager host time ($nh PEs)" 60 "$log/host_cost.log" \
      torchrun --nproc-per-node "$nh" --master-port 29791 bench/moe/host_cost.py --op --out "$log/host_cost.md"
    cat "$log/host_cost.md" 2>/dev/null
  fi
fi

if has_step python2 && need "$SYMM_LIBRARY" "pytest test_gpu_moe"; then
  for n in $npes_list; do
    [ "$n" = "$py_most" ] && continue
    pytest_moe "$n" -k "not thousand_calls and not compile"
  done
fi

echo "==== gpu_moe.sh summary ($ngpu GPU(s), $(( $(date +%s) - t_all )) s of $wall; logs in $log) ===="
steps_table
# the low-latency rows by path: llbench's forced runs, and the bench step's default (auto)
if ls "$log"/bench_moe_pkt[01].md >/dev/null 2>&1; then
  where="$ngpu GPU(s), one PE each"
  [ "$ngpu" -lt 4 ] && where="PEs share one GPU: not a measure of NVLink"
  echo "### $where: low latency by path, SYMM_MOE_PACKETS=1 (packets), 0 (plain), auto (default)"
  echo "| SYMM_MOE_PACKETS | experts | top-k | hidden | tokens/PE | SMs | rows (dispatch / combine) | back to back: dispatch / combine us | per call: dispatch / combine us |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  for pf in 1:bench_moe_pkt1.md 0:bench_moe_pkt0.md auto:bench_moe.md; do
    # low-latency table rows: the only ones whose 6th cell names the rows' path
    grep -E '^\| [0-9]+ \| [0-9]+ \| [0-9]+ \| [0-9]+ \| [0-9]+ \| (packets|plain) ' "$log/${pf#*:}" 2>/dev/null |
      awk -F'|' -v pk="${pf%%:*}" '{ printf "| %s |%s|%s|%s|%s|%s|%s|%s|%s|\n", pk, $2, $3, $4, $5, $6, $7, $9, $12 }'
  done
fi
grep -h -- '- bar:' "$log/bench_moe.md" 2>/dev/null | sed 's/^- //'
grep -h '^bar:' "$log/host_cost.md" 2>/dev/null
exit $failed
