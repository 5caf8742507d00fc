#!/usr/bin/env bash
# The GPU check of issue 34 items 2 and 6 (no behaviour change expected), from
# a build made beforehand (nothing is built here):
#
#   BUILD=build-gpu OUT=/path scripts/gpu_backend_unit.sh
#
#   1. coll      the stream collectives after the split of coll_host.c into
#                coll_args.c / coll_choose.c / coll_team.c / coll_calls.c: the
#                ctest entries coll_{errors,matrix,move,pipe,ce,wrap,graph,every,
#                b2b,big}_2, then coll_{errors,matrix,move,every}_4 and the
#                device-callable forms, one at a time, each bounded
#   2. moe       the MoE exchange on the native backend (its ops table carries
#                SYMM__BE_KCAP_MOE): moe_{ll,ht,errors,graph}_2
#   3. trace     the device trace (SYMM__BE_KCAP_TRACE): trace_gpu_2 with its JSON
#                check
#   4. backends  symm's collective kernels over the nvshmem and nccl heaps on 1 PE
#                (SYMM__BE_KCAP_COLL): coll_{errors,move}_{nvshmem,nccl}_1; and the
#                MoE exchange refused on nvshmem with the message that names it
#                (test_moe_host under SYMM_BACKEND=nvshmem, 1 PE)
# Works unchanged on one GPU or several: where the PEs outnumber the GPUs, the
# tests run under scripts/with_mps.sh (a private MPS daemon, stopped at the end).
# Everything within WALL s (default 480), each test at most PER s (default 120).
# Logs in $OUT/backend_unit/; a summary table last (also summary.txt there).
# Without a GPU every step says so and the script exits 0. Multicast stays off.
set -uo pipefail
cd "$(dirname "$0")/.."
here=$PWD
build=${BUILD:-build-gpu}
case $build in /*) ;; *) build=$here/$build ;; esac
OUT=${OUT:-$PWD/out}
out=$OUT/backend_unit
mkdir -p "$out"
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
unset SYMM_COLL_TUNE SYMM_COLL_ALGO SYMM_COLL_BLOCKS SYMM_COLL_CE_MIN SYMM_BACKEND
export PATH="$PATH:/usr/local/cuda/bin"
WALL=${WALL:-480}
PER=${PER:-120}
summary=$out/summary.txt

# ---- the inner run: the tests, one ctest entry at a time (under MPS when called so) ----
if [ "${BACKEND_UNIT_INNER:-0}" = 1 ]; then
  end=$(( $(date +%s) + ${INNER_WALL:?} ))
  # $1 step name, rest: ctest entries (a regex alternative each)
  step() {
    local name=$1 t0 pass=0 fail=0 skip=0 notrun=0 failed="" left per rc log
    shift
    log=$out/$name.log
    : >"$log"
    t0=$(date +%s)
    for t in "$@"; do
      left=$((end - $(date +%s)))
      if [ "$left" -lt 20 ]; then notrun=$((notrun + 1)); continue; fi
      per=$((left - 10 < PER ? left - 10 : PER))
      timeout -k 5 $((per + 15)) ctest --test-dir "$build" -R "^($t)\$" --output-on-failure \
        --timeout "$per" >>"$log" 2>&1
      rc=$?
      if tail -30 "$log" | grep -qE "No tests were found"; then notrun=$((notrun + 1)); failed="$failed $t(missing)"
      elif tail -30 "$log" | grep -qE "\*\*\*Skipped|Not Run"; then skip=$((skip + 1))
      elif [ $rc = 0 ]; then pass=$((pass + 1))
      else fail=$((fail + 1)); failed="$failed $t"
      fi
    done
    printf '%-10s %s\n' "$name" "$pass passed, $fail failed, $skip skipped, $notrun not run ($(( $(date +%s) - t0 )) s)${failed:+:$failed}" >>"$out/inner.txt"
  }
  step coll coll_errors_2 coll_matrix_2 coll_move_2 coll_pipe_2 coll_ce_2 coll_wrap_2 coll_graph_2 \
    coll_every_2 coll_b2b_2 coll_big_2 coll_errors_4 coll_matrix_4 coll_move_4 coll_every_4 \
    coll_device_2 coll_device_4
  step moe moe_ll_2 moe_ht_2 moe_errors_2 moe_graph_2
  step trace "trace_gpu_2|trace_gpu_json_2"
  exit 0
fi

# ---- the outer run ----
: >"$summary"
: >"$out/inner.txt"
note() { printf '%-10s %s\n' "$1" "$2" >>"$summary"; }
t_start=$(date +%s)
gpu_env_pip_libs
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
{ date -u; hostname; nvidia-smi -L; git log -1 --format='tree %H %s'; } >"$out/machine.txt" 2>&1
note machine "$(date -u '+%F %T UTC'), $ngpu GPU(s), build $build"
if [ "$ngpu" -lt 1 ]; then
  for s in coll moe trace backends; do note "$s" "SKIP: no GPU"; done
  echo "==== gpu_backend_unit summary ($out) ===="
  cat "$summary"
  exit 0
fi
missing=""
for f in tools/symmrun tests/coll/test_coll tests/coll/test_coll_device tests/moe/test_moe tests/moe/test_moe_host \
         tests/trace/test_trace_gpu; do
  [ -x "$build/$f" ] || missing="$missing $f"
done
if [ -n "$missing" ]; then
  note build "MISSING in $build:$missing (build it first: cmake --build $build -j)"
  echo "==== gpu_backend_unit summary ($out) ===="
  cat "$summary"
  exit 1
fi

# 1-3 under one MPS daemon when 4 PEs outnumber the GPUs; the backends step after it
backends_wall=90
inner_wall=$(( WALL - backends_wall - ($(date +%s) - t_start) ))
inner=(env BACKEND_UNIT_INNER=1 INNER_WALL="$inner_wall" OUT="$OUT" BUILD="$build" PER="$PER"
       bash "$here/scripts/gpu_backend_unit.sh")
if [ "$ngpu" -lt 4 ] && [ ! -e "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control" ]; then
  SYMM_MPS_LOGS="$out/mps_logs" timeout -k 20 $((inner_wall + 40)) \
    scripts/with_mps.sh --timeout $((inner_wall + 20)) -- "${inner[@]}" >"$out/inner.log" 2>&1
  rc=$?
  mode="under MPS, $ngpu GPU(s)"
else
  timeout -k 20 $((inner_wall + 20)) "${inner[@]}" >"$out/inner.log" 2>&1
  rc=$?
  mode="$ngpu GPU(s)"
fi
cat "$out/inner.txt" >>"$summary"
[ "$rc" = 0 ] || note inner "exit $rc ($mode; see inner.log)"
for s in coll moe trace; do grep -q "^$s " "$out/inner.txt" || note "$s" "NOT RUN (inner exit $rc)"; done

# 4. the scale-out heaps, 1 PE each (NCCL refuses two ranks on one GPU)
t0=$(date +%s)
end=$((t0 + backends_wall))
pass=0 fail=0 skip=0 failed=""
log=$out/backends.log
: >"$log"
for t in coll_errors_nvshmem_1 coll_errors_nccl_1 coll_move_nvshmem_1 coll_move_nccl_1; do
  left=$((end - $(date +%s)))
  [ "$left" -lt 15 ] && { failed="$failed $t(not-run)"; continue; }
  timeout -k 5 $((left + 5)) ctest --test-dir "$build" -R "^$t\$" --output-on-failure --timeout "$left" >>"$log" 2>&1
  rc=$?
  if tail -30 "$log" | grep -qE "\*\*\*Skipped|Not Run|No tests were found"; then skip=$((skip + 1))
  elif [ $rc = 0 ]; then pass=$((pass + 1))
  else fail=$((fail + 1)); failed="$failed $t"
  fi
done
# the MoE exchange refused on nvshmem: test_moe_host expects SYMM_ERR_UNSUPPORTED and "native backend"
left=$((end - $(date +%s)))
if [ "$left" -ge 15 ]; then
  SYMM_BACKEND=nvshmem timeout -k 5 "$left" "$build/tools/symmrun" -n 1 "$build/tests/moe/test_moe_host" \
    >"$out/moe_nvshmem.log" 2>&1
  rc=$?
  if grep -q "moe host: pe 0 of 1 passed" "$out/moe_nvshmem.log"; then pass=$((pass + 1))
  elif grep -qiE "cannot load|not found|no such file|libnvshmem" "$out/moe_nvshmem.log"; then skip=$((skip + 1))
  else fail=$((fail + 1)); failed="$failed moe_refused_nvshmem(rc=$rc)"
  fi
else
  failed="$failed moe_refused_nvshmem(not-run)"
fi
note backends "$pass passed, $fail failed, $skip skipped ($(( $(date +%s) - t0 )) s)${failed:+:$failed}"

echo "==== gpu_backend_unit summary ($out, $(( $(date +%s) - t_start )) s) ===="
cat "$summary"
exit 0
