#!/usr/bin/env bash
# DeepEP's API over symm (symm.moe.deep_ep) on a GPU machine, in one command, on
# a build made beforehand (it builds nothing):
#
#   BUILD=build-gpu OUT=/some/dir bash scripts/gpu_deepep.sh [step...]
#
# steps (default: all, in this order):
#   moe2     tests/moe/test_moe's ht part on 2 PEs (symmrun): symm_moe_ht_dispatch_into, the
#            rows stored straight into the caller's symmetric buffers, each PE choosing its
#            own per call (none, A, B, A's x with the handle's scales; both halves in one call
#            and split), every row checked, and its argument checks; then test_moe_layout
#            (symm_moe_layout) and test_moe_recv_copy (symm_moe_ht_recv_copy) on 2 PEs
#   test2    tests/python/test_gpu_deepep.py under torchrun on 2 PEs: every tensor of
#            DeepEP's normal and low-latency calls against torch references (bf16 and
#            fp8, cached handles, num_worst_tokens, async_finish and events, hooks,
#            zero-copy combine, two calls in flight, ranks that send or receive
#            nothing), CUDA graph replay, bad inputs, Config SM budgets; the receive
#            buffers (rows returned where the peers stored them, kept tensors intact
#            through later dispatches, copies while every buffer is held, reuse once
#            freed); HighThroughput.dispatch(recv_x=, recv_x_scale=) and its checks
#   test4    the same on 4 PEs
#   bench    bench/moe/deepep_api_bench.py on min(4, GPUs) PEs, one per GPU: DeepEP's
#            intranode shape (4096 tokens, hidden 7168, top-8, 256 experts) through
#            DeepEP's API and through symm's own, GB/s as DeepEP counts them, at 24 SMs
#            and every SM (rows: own, api cached = rows in a free receive buffer, api copy =
#            rows copied out, api views, api full; and a ratio table, api / own time)
#            -> $OUT/deepep/bench.md (machine, command, date in it); DeepEP's
#            own kernels (bench/moe/deepep_bench.py) beside it where deep_ep is
#            installed, else a summary line says the comparison is n/a. On one GPU:
#            1 PE -> bench_1.md and 2 PEs sharing it -> bench_2.md (their ratio
#            tables, API / own time, are what such a run shows)
#   overhead bench/moe/deepep_overhead.py: per call of the DeepEP API and of symm's own,
#            the kernels launched (torch.profiler), host synchronisations, host time and
#            call time, at the same shape; 1 PE -> overhead_1.md, and 2 PEs (one per
#            GPU, or sharing one) -> overhead_2.md
#
# Logs and results under $OUT/deepep/ (machine.txt: the machine, the build, the
# command, the date); the last lines are a table of the steps and the benchmark's
# tables. Every step runs under `timeout -k`, each at most what is left of
# DEEPEP_WALL (default 240 s); a step that no longer fits is reported as such.
# With fewer GPUs than PEs the PEs share GPUs under a private MPS daemon
# (scripts/with_mps.sh), unless DEEPEP_MPS=0 (2 PEs on one GPU also run without
# it). Runs unchanged on one GPU and on several.
# Multicast stays off; SYMM_WAIT_TIMEOUT (default 15 s) turns a lost signal into
# a message naming the PE and the word. No GPU: prints SKIP and exits 0.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
here=$PWD
OUT=${OUT:-$PWD/out}
log=$OUT/deepep
mkdir -p "$log"
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
export PATH="$PATH:/usr/local/cuda/bin"
build=${BUILD:-${SYMM_BUILD_DIR:-build-gpu}}
steps=${*:-moe2 test2 test4 bench overhead}
wall=${DEEPEP_WALL:-240}
t_all=${DEEPEP_T0:-$(date +%s)}
# shellcheck source=scripts/_steps.sh
source scripts/_steps.sh
steps_fmt='%-44s %-6s %5s s  %s' steps_deadline=$((t_all + wall)) steps_spent="the ${wall} s wall is used up"

for s in $steps; do
  case $s in moe2|test2|test4|bench|overhead) ;;
    *) echo "gpu_deepep.sh: unknown step '$s' (moe2 test2 test4 bench overhead)" >&2; exit 2 ;;
  esac
done

has_step() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ -z "${DEEPEP_INNER:-}" ]; then
  { echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"; echo "host: $(hostname)"; nvidia-smi -L;
    nvcc --version | tail -1; echo "build: $build"; git log -1 --oneline;
    echo "command: BUILD=$build OUT=$OUT bash scripts/gpu_deepep.sh $*"; } >"$log/machine.txt" 2>&1
fi
if [ "$ngpu" -lt 1 ]; then
  echo "SKIP: gpu_deepep.sh: no GPU on this machine"
  exit 0
fi

# no stale table in the summary
has_step bench && rm -f "$log/bench.md" "$log/bench_1.md" "$log/bench_2.md" "$log/deepep_own.md"
has_step overhead && rm -f "$log/overhead_1.md" "$log/overhead_2.md"
export PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}"
case $build in /*) ;; *) build=$here/$build ;; esac
export SYMM_LIBRARY="$build/src/libsymm.so"

# ---- MPS for PEs that share a GPU: rerun this script under scripts/with_mps.sh ------------
max_pes=0
has_step moe2 && max_pes=2
has_step test2 && max_pes=2
has_step bench && max_pes=2
has_step overhead && max_pes=2
has_step test4 && max_pes=4
if [ -z "${DEEPEP_INNER:-}" ] && [ "${DEEPEP_MPS:-1}" != 0 ] && [ "$ngpu" -lt "$max_pes" ] &&
   [ ! -e "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control" ]; then
  DEEPEP_INNER=1 DEEPEP_T0=$t_all OUT="$OUT" scripts/with_mps.sh --timeout "$(( wall + 30 ))" -- bash "$0" "$@"
  exit $?
fi

# torchrun's PEs get their MPS share here
share_env() {
  local per=$(( ($1 + ngpu - 1) / ngpu ))
  if [ "$per" -gt 1 ] && [ -z "${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:-}" ] &&
     [ -e "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control" ]; then
    echo "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$(( 100 / per ))"
  else
    echo "SYMM_DEEPEP_RUN=1"
  fi
}

# run NAME LIMIT LOGFILE cmd...: bounded by timeout -k and what is left of the wall
run() {
  local name=$1 out=$3
  steps_exec "$@" || return 0
  if [ $step_rc -eq 77 ]; then  # the C tests' skip status
    steps_row "$name" skip $step_dt "$(grep -m1 -E 'SKIP' "$out")"
  elif [ $step_rc -eq 0 ] && grep -qE '^n/a:' "$out"; then
    steps_row "$name" skip $step_dt "$(grep -m1 '^n/a:' "$out")"
  elif [ $step_rc -eq 0 ] && grep -qE '[0-9]+ skipped' "$out" && ! grep -qE '[0-9]+ passed' "$out"; then
    steps_row "$name" skip $step_dt "$(grep -m1 -E 'SKIPPED|skipped' "$out")"
  elif [ $step_rc -eq 0 ]; then
    steps_row "$name" ok $step_dt "$(grep -m1 -E '[0-9]+ passed' "$out")"
  else
    steps_failed "$name" "$out" "deepep/$(basename "$out")"
  fi
}

if [ ! -e "$SYMM_LIBRARY" ]; then
  steps_row "gpu_deepep.sh" FAIL 0 "$SYMM_LIBRARY missing: build $build first (cmake --build $build -j)"
else
  if has_step moe2; then
    if [ -x "$build/tests/moe/test_moe" ] && [ -x "$build/tools/symmrun" ]; then
      run "test_moe ht, dispatch_into (2 PEs)" 60 "$log/test_moe_ht_2.log" \
        "$build/tools/symmrun" -n 2 --timeout 55 "$build/tests/moe/test_moe" 2 ht
      tail -1 "$log/test_moe_ht_2.log"
    else
      steps_row "test_moe ht (2 PEs)" FAIL 0 "$build/tests/moe/test_moe or tools/symmrun missing: build targets test_moe symmrun"
    fi
    # the two kernels the DeepEP API adds: its layout, and the copy of a dispatch's received metadata
    for t in "test_moe_layout gpu" test_moe_recv_copy; do
      exe=${t%% *} part=${t#"$exe"}
      if [ -x "$build/tests/moe/$exe" ] && [ -x "$build/tools/symmrun" ]; then
        # shellcheck disable=SC2086 # part is empty or one word
        run "$exe (2 PEs)" 40 "$log/${exe}_2.log" "$build/tools/symmrun" -n 2 --timeout 35 "$build/tests/moe/$exe" $part 2
        tail -1 "$log/${exe}_2.log"
      else
        steps_row "$exe (2 PEs)" FAIL 0 "$build/tests/moe/$exe or tools/symmrun missing: build targets $exe symmrun"
      fi
    done
  fi
  for n in 2 4; do
    has_step "test$n" || continue
    run "pytest test_gpu_deepep ($n PEs)" $(( 70 + 10 * n / 2 )) "$log/pytest_$n.log" \
      env "$(share_env "$n")" torchrun --nproc-per-node "$n" --master-port $((29720 + n)) \
      -m pytest -q -x -rs -p no:cacheprovider tests/python/test_gpu_deepep.py
    tail -2 "$log/pytest_$n.log"
  done
  if has_step bench; then
    nb=4
    [ "$nb" -gt "$ngpu" ] && nb=$ngpu
    if [ "$nb" -lt 2 ]; then
      # one GPU: the API against symm's own on 1 PE and on 2 PEs sharing it (ratios; no NVLink traffic)
      for p in 1 2; do
        run "deepep_api_bench ($p PE(s) on one GPU)" 60 "$log/bench_$p.log" \
          env "$(share_env "$p")" torchrun --nproc-per-node "$p" --master-port $((29740 + p)) \
          bench/moe/deepep_api_bench.py --out "$log/bench_$p.md"
      done
    else
      run "deepep_api_bench ($nb PEs, one per GPU)" 60 "$log/bench.log" \
        torchrun --nproc-per-node "$nb" --master-port 29729 bench/moe/deepep_api_bench.py --out "$log/bench.md"
      # DeepEP's own kernels beside it, where deep_ep is installed (found without importing torch)
      if python3 -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("deep_ep") is None)' 2>/dev/null; then
        run "deepep_bench (DeepEP's own kernels)" 45 "$log/deepep_own.log" \
          torchrun --nproc-per-node "$nb" --master-port 29730 bench/moe/deepep_bench.py --out "$log/deepep_own.md"
      else
        steps_row "DeepEP's own kernels" skip 0 "n/a: deep_ep is not installed here; no comparison with its kernels"
      fi
    fi
  fi
  if has_step overhead; then
    for p in 1 2; do
      run "deepep_overhead ($p PE(s), $ngpu GPU(s))" 60 "$log/overhead_$p.log" \
        env "$(share_env "$p")" torchrun --nproc-per-node "$p" --master-port $((29750 + p)) \
        bench/moe/deepep_overhead.py --out "$log/overhead_$p.md"
    done
  fi
fi

echo "==== gpu_deepep.sh summary ($ngpu GPU(s), $(( $(date +%s) - t_all )) s of $wall; logs in $log) ===="
steps_table
for f in bench bench_1 bench_2 deepep_own overhead_1 overhead_2; do
  [ -e "$log/$f.md" ] || continue
  echo "-- deepep/$f.md: $(grep -m1 '^###' "$log/$f.md" | sed 's/^### //')"
  grep -E '^\||^received|^n/a' "$log/$f.md"
done
exit $failed
