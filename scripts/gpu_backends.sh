#!/usr/bin/env bash
# The scale-out backends (nvshmem, nccl) on one GPU: what one host can show of
# them (docs/multinode.md). A table of steps is printed last and kept in
# $OUT/backends_summary.txt; every log is in $OUT/backends_logs.tar.gz.
#
#   scripts/gpu_backends.sh [stage...]
#     build   build the targets below in $SYMM_BUILD_DIR (default build-be): reuse a
#             configured build (gpu_suite.sh's), else configure one
#     probe   nccl_probe: NCCL alone, the nccl backend's calls in its order (blocking,
#             non-blocking polled, non-blocking unpolled), each call's result: tells NCCL
#             on this machine apart from symm's use of it (a few seconds)
#     device  the device suites (rma, signal, amo, ldst, barrier) on 1 PE per backend the
#             build made them for (the backend list): native, nvshmem, nvshmem with
#             SYMM_DEBUG_FORCE_REMOTE=1 (every call through NVSHMEM's device library), nccl
#     coll    capabilities, the stream collectives through symm's kernels and through the
#             library's (forced remote), and test_coll's errors/move/matrix parts on
#             each backend the build made them for (native, nvshmem, nccl), 1 PE
#     python  symm.triton kernels on nccl (symm's nccl bitcode) and nvshmem (forced remote:
#             NVSHMEM's libnvshmem_device.bc linked into Triton), 1 PE (PY_BACKENDS picks:
#             "nccl nvshmem_remote"; each shard may take PY_STEP_S, default 220 s); the bitcode is built
#             where clang-19 is (cmake --build build --target symm_device_bitcode) and
#             carried: $SYMM_BITCODE_DIR, else the first of $SYMM_BUILD_DIR/bitcode,
#             build/bitcode, build-lead/bitcode that has it
#     hosts   NCCL with 2 ranks on the GPU: as they are (NCCL refuses), then as two "hosts"
#             (NCCL_HOSTID, scripts/with_hostid.sh): collectives over NCCL's socket
#             transport, and a device put to the other host stopping with the no-GIN message
#     gin     what NCCL answers to GIN on 1 rank (SYMM_DEBUG_NCCL_GIN=1), default type, 2, 3
#     shared  NVSHMEM with 2 PEs on the GPU: time-sliced, then under MPS (what it refuses
#             is recorded)
#     dsl     CuTe DSL and TileLang kernels built ahead of time for a backend, 1 PE:
#             symm.cute's library check on nccl ($CUTE_NCCL, default build-cute-nccl:
#             examples/cute/build_cubins.py --backend nccl --library-only), TileLang's
#             primitives on nccl, on nvshmem, and on nvshmem with every call through
#             NVSHMEM's device library (what needs load/store is then skipped) ($TL_NCCL,
#             $TL_NVSHMEM, default build-tilelang-<backend>: examples/tilelang/build.py
#             --backend B --only prim_ --pes 1); a folder that was not carried is listed
#             as not run. libsymm: $SYMM_LIBRARY, else the build's
#     bench   symm-bench --quick --backend native,nvshmem,nvshmem:remote,nccl,nccl:remote:
#             rma, coll and the side-by-side table in one run (alone on the GPU)
#   default: all of them. They run in this order, NCCL first (the least verified):
#   build, probe, the nccl 1-PE tests (device, coll), then the python shards in the
#   background while hosts and gin (side by side) and the other backends' 1-PE tests
#   run, then dsl and shared (MPS) after the python shards are done, and bench last. All of it
#   is bounded by BACKENDS_WALL seconds (default 330, the build included): the python
#   shards stop BACKENDS_TAIL seconds (default 110) before the end so that shared and
#   bench keep their time; a step that would start too late is listed as not run.
#   The 1-PE tests of a ctest step run side by side (BACKENDS_JOBS, default 4; 1 runs
#   them one by one).
#
# Every step runs under `timeout -k`; SYMM_WAIT_TIMEOUT=15 turns a lost signal into a
# message. Multicast stays off: NVSHMEM_DISABLE_NVLS=1, NCCL_NVLS_ENABLE=0 and
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1 are forced, SYMM_ENABLE_MULTICAST is removed.
# Exit status: 0 when no step failed (refusals that were expected count as passes).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
here=$PWD
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
# NCCL's own reason for a failed call lands in the step's log
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
# one host, no RDMA NIC: NVSHMEM without a remote transport, both bootstraps on loopback
export NVSHMEM_REMOTE_TRANSPORT=${NVSHMEM_REMOTE_TRANSPORT:-none}
export NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=${NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME:-lo}
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
export PATH="$PATH:/usr/local/cuda/bin"
build=${SYMM_BUILD_DIR:-build-be}
case $build in /*) ;; *) build=$here/$build ;; esac
all_stages="build probe device coll python hosts gin dsl shared bench"
stages=${*:-$all_stages}
for s in $stages; do
  case " $all_stages " in *" $s "*) ;; *) echo "gpu_backends.sh: unknown stage '$s' (stages: $all_stages)" >&2; exit 2 ;; esac
done
stage() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }

t_start=$(date +%s)
deadline=$((t_start + ${BACKENDS_WALL:-330}))
logs=$OUT/backends
rm -rf "$logs"
mkdir -p "$logs"
summary=$OUT/backends_summary.txt
order=() # step names in the order of the table
failed=0

since() { echo "$(( $(date +%s) - $1 )) s"; }
left() { echo $((deadline - $(date +%s))); }
result() { printf '%-30s %s\n' "$1" "$2" >"$logs/$1.res"; }
# wall NAME WANT: the seconds step NAME may take (WANT, less when the run's time is
# short), or nothing (and the step is listed as not run) under 15 s
reserve=0 # seconds kept for the steps after the one starting (the python shards leave BACKENDS_TAIL)
wall() {
  local l
  l=$(( $(left) - 5 - reserve ))
  if [ "$l" -lt 15 ]; then
    result "$1" "NOT RUN: out of time (BACKENDS_WALL=${BACKENDS_WALL:-330}$([ "$reserve" = 0 ] || echo ", $reserve s kept for later steps"))"
    return 1
  fi
  [ "$l" -lt "$2" ] && echo "$l" || echo "$2"
}

py=$(command -v python3)
gpu_env_pip_libs
symmrun=$build/tools/symmrun
exe() { echo "$build/$1"; }

# step NAME WANT EXPECT -- command...   (runs in the foreground)
#   EXPECT  pass:        exit 0
#           refuse:RE    a refusal: exit != 0 and the log has a line matching RE
#           stops:RE     the test saw the refusal it wanted (exit 0) and the log has RE
#           report:RE    no verdict: the exit status and the first line matching RE
# The verdict goes to $logs/NAME.res; the log is $logs/NAME.log.
step() {
  local name=$1 want=$2 expect=$3 log="$logs/$1.log" t0 rc line w
  shift 4
  order+=("$name")
  w=$(wall "$name" "$want") || return 0
  t0=$(date +%s)
  timeout -k 10 "$w" "$@" >"$log" 2>&1
  rc=$?
  if [ $rc = 77 ]; then # the test's own skip (no GPU), whatever was expected
    result "$name" "SKIP: $(grep -m1 -E 'SKIP' "$log" | cut -c1-140)"
    return 0
  fi
  case $expect in
    pass)
      if [ $rc = 0 ] && grep -q -m1 -E '^(SKIP|symm-bench: no CUDA GPU)' "$log"; then
        result "$name" "SKIP: $(grep -m1 -E '^(SKIP|symm-bench: no CUDA GPU)' "$log" | cut -c1-140)"
      elif [ $rc = 0 ]; then result "$name" "PASS ($(since "$t0"))"
      elif [ $rc = 124 ] || [ $rc = 137 ]; then result "$name" "TIMEOUT after $w s"
      else result "$name" "FAIL rc=$rc ($(since "$t0")): $(grep -m1 -E 'FAIL|symm: PE|rror' "$log" | cut -c1-140)"
      fi ;;
    refuse:*)
      line=$(grep -m1 -E "${expect#refuse:}" "$log" | cut -c1-140)
      if [ $rc != 0 ] && [ $rc != 124 ] && [ $rc != 137 ] && [ -n "$line" ]; then
        result "$name" "PASS (refused as expected): $line"
      elif [ $rc = 0 ]; then result "$name" "FAIL: accepted (expected a refusal matching '${expect#refuse:}')"
      else result "$name" "FAIL rc=$rc, no line matching '${expect#refuse:}'"
      fi ;;
    stops:*)
      line=$(grep -m1 -E "${expect#stops:}" "$log" | cut -c1-140)
      if [ $rc = 0 ] && [ -n "$line" ]; then result "$name" "PASS (stopped as expected): $line"
      elif [ $rc = 0 ]; then result "$name" "FAIL: ran through (expected a stop matching '${expect#stops:}')"
      else result "$name" "FAIL rc=$rc ($(since "$t0")): $(grep -m1 -E 'FAIL|symm: PE|rror' "$log" | cut -c1-140)"
      fi ;;
    either:*) # passes, or stops with the clean refusal the pattern names
      line=$(grep -m1 -E "${expect#either:}" "$log" | cut -c1-140)
      if [ $rc = 0 ]; then result "$name" "PASS ($(since "$t0"))"
      elif [ $rc != 124 ] && [ $rc != 137 ] && [ -n "$line" ]; then result "$name" "PASS (refused): $line"
      else result "$name" "FAIL rc=$rc ($(since "$t0")): $(grep -m1 -E 'FAIL|symm: PE|rror' "$log" | cut -c1-140)"
      fi ;;
    report:*)
      line=$(grep -m1 -E "${expect#report:}" "$log" | cut -c1-140)
      result "$name" "INFO rc=$rc ($(since "$t0")): ${line:-no line matching '${expect#report:}'}" ;;
  esac
  return 0
}
# bg_step ...: step in the background (the caller waits)
bg_pids=()
bg_step() { order+=("$1"); ( order=(); step "$@" ) & bg_pids+=($!); }
# wait for the bg_steps started since the last call (not for other background work)
wait_bg() { local p; for p in "${bg_pids[@]}"; do wait "$p"; done; bg_pids=(); }

# ctest over REGEX (less EXCLUDE) as one step, the tests side by side (1 PE each on the one GPU)
ctest_step() { # NAME WANT REGEX [JOBS [EXCLUDE]]
  step "$1" "$2" pass -- env CTEST_OUTPUT_ON_FAILURE=1 \
    ctest --test-dir "$build" -R "$3" ${5:+-E "$5"} -j "${BACKENDS_JOBS:-${4:-4}}" --timeout "$2" --no-tests=error
  [ -f "$logs/$1.log" ] || return 0
  local tail total skipped
  tail=$(grep -E 'tests passed|tests failed' "$logs/$1.log" | tail -1)
  total=$(echo "$tail" | grep -oE '[0-9]+$')
  skipped=$(grep -cE '\*\*\*Skipped' "$logs/$1.log")
  if [ -n "$total" ] && [ "$total" = "$skipped" ] && grep -q '^[^ ]* *PASS' "$logs/$1.res"; then
    result "$1" "SKIP: all $total tests skipped (no GPU?)"
  fi
  [ -n "$tail" ] && printf '  %s, %s skipped\n' "$tail" "$skipped" >>"$logs/$1.res"
  grep -E '^\s*[0-9]+/[0-9]+ Test.*(Failed|Timeout|Exception|Not Run)' "$logs/$1.log" | head -8 |
    sed 's/^ */    /' >>"$logs/$1.res"
}

{ date -u; hostname; nvidia-smi -L; nvcc --version | tail -1
  $py -c "import nvidia.nvshmem, nvidia.nccl; print('pip nvshmem/nccl:', nvidia.nvshmem.__path__[0], nvidia.nccl.__path__[0])"
  echo "stages: $stages; build: $build; wall: ${BACKENDS_WALL:-330} s"
} >"$logs/machine.txt" 2>&1

# ---- build -----------------------------------------------------------------------------
if stage build; then
  order+=(build)
  t0=$(date +%s)
  targets="symm symmrun symm-bench test_backend_coll test_backend_load test_coll nccl_probe"
  for t in rma signal amo ldst barrier; do targets="$targets test_device_${t}_be"; done
  w=$(( $(left) - 30 ))
  [ $w -gt 240 ] && w=240
  [ $w -lt 30 ] && w=30
  ok=1
  if [ ! -f "$build/CMakeCache.txt" ]; then
    timeout -k 10 "$w" cmake -S . -B "$build" -DCMAKE_CUDA_ARCHITECTURES=90 -DSYMM_WERROR=ON \
      -DSYMM_GPU_TEST_TIMEOUT=120 >"$logs/build.log" 2>&1 || ok=0
  fi
  w=$(( $(left) - 30 ))
  [ $w -gt 240 ] && w=240
  [ $w -lt 30 ] && w=30
  [ $ok = 1 ] && { timeout -k 10 "$w" cmake --build "$build" -j "$(nproc)" --target $targets \
                     >>"$logs/build.log" 2>&1 || ok=0; }
  # which NCCL and NVSHMEM the build found (none: their tests are not built)
  libs=$(grep -E '^SYMM_(NCCL_LIBRARY|NVSHMEM_HOST_LIBRARY):' "$build/CMakeCache.txt" 2>/dev/null |
         sed 's/:[A-Z]*=/ /; s/^SYMM_//; s/_LIBRARY//; s/_HOST//' | tr '\n' ';')
  if [ $ok = 1 ]; then result build "PASS ($(since "$t0")) $libs"
  else result build "FAIL ($(since "$t0"), build.log): $(grep -m1 -E 'error|Error' "$logs/build.log" | cut -c1-120)"
  fi
fi

# ---- NCCL alone, then symm's nccl backend on 1 PE: first, they are the least verified ----------
if stage probe; then
  step nccl_probe 40 pass -- "$(exe tests/backend/nccl_probe)"
  grep -E '^probe .*(-> nccl[A-Z]|settled: nccl[A-Z][a-z]*Error|without the poll|FAIL)' "$logs/nccl_probe.log" |
    grep -vE '\-> ncclSuccess|settled: ncclSuccess' | head -8 | cut -c1-150 | sed 's/^/  /' >>"$logs/nccl_probe.res"
fi
nccl_re=""
stage device && nccl_re="device_(rma|signal|amo|ldst|barrier)_nccl_1"
stage coll && nccl_re="${nccl_re:+$nccl_re|}backend_(caps|coll)_nccl(_remote)?_1|coll_(errors|move|matrix)_nccl_1"
if [ -n "$nccl_re" ]; then
  ctest_step nccl_1pe 120 "^($nccl_re)\$" 4
  grep -hE '^[0-9]+: (backend |coll \(|world window|.*nccl backend: heap)' "$logs/nccl_1pe.log" 2>/dev/null |
    sed 's/^[0-9]*: /  /' | cut -c1-160 | head -6 >>"$logs/nccl_1pe.res"
fi

# ---- symm.triton on the backends: in the background, while the steps below run ---------------
py_names=()
if stage python; then
  bc=${SYMM_BITCODE_DIR:-}
  if [ -z "$bc" ]; then
    for d in "$build/bitcode" "$here/build/bitcode" "$here/build-lead/bitcode"; do
      [ -f "$d/libsymm_device_nvshmem_sm90.bc" ] && { bc=$d; break; }
    done
  fi
  if [ -z "$bc" ] || [ ! -f "$bc/libsymm_device_nccl_sm90.bc" ]; then
    order+=(python)
    result python "NOT RUN: no nvshmem/nccl bitcode (build it where clang-19 is and carry build/bitcode, or set SYMM_BITCODE_DIR)"
  else
    sel="test_ctx or test_p_and_g or test_put_get or test_put_signal or test_signal_op or test_wait_until \
or test_atomics or test_ld_st or test_fence_quiet or test_device_barriers or test_coll_barrier_grid"
    k=${PY_SHARDS:-6}
    reserve=${BACKENDS_TAIL:-110}
    for cfg in "nccl SYMM_BACKEND=nccl" "nvshmem_remote SYMM_BACKEND=nvshmem SYMM_DEBUG_FORCE_REMOTE=1"; do
      set -- $cfg
      name=$1; shift
      case " ${PY_BACKENDS:-nccl nvshmem_remote} " in *" $name "*) ;; *) continue ;; esac
      py_names+=("$name")
      for ((i = 0; i < k; i++)); do
        bg_step "python_${name}_$i" "${PY_STEP_S:-220}" pass -- env "$@" PYTHONPATH="$here/python" SYMM_BITCODE_DIR="$bc" \
          SYMM_LIBRARY="$build/src/libsymm.so" TRITON_CACHE_DIR="$build/triton-cache-$name" PYTHONUNBUFFERED=1 \
          torchrun --nproc-per-node 1 --master-port $((29810 + i + 10 * ${#name})) \
          -m pytest -q -p no:cacheprovider tests/python/test_gpu_triton.py -k "$sel" --shard "$i/$k"
      done
    done
    reserve=0
  fi
fi
py_pids=("${bg_pids[@]}")
bg_pids=()

# ---- NCCL, 2 ranks on the one GPU, and GIN on 1 rank: side by side -------------------------------
if stage hosts; then
  bg_step nccl_2rank_same_host 60 'refuse:Duplicate GPU|same GPU|busId|NCCL communicator' -- \
    env SYMM_BACKEND=nccl "$symmrun" -n 2 --timeout 50 "$(exe tests/backend/test_backend_coll)" 2 caps
  hostid=(env SYMM_BACKEND=nccl SYMM_LOG_LEVEL=info NCCL_NET=Socket "$symmrun" -n 2 --timeout 80
          scripts/with_hostid.sh)
  bg_step nccl_2host_caps 90 pass -- "${hostid[@]}" "$(exe tests/backend/test_backend_coll)" 2 caps
  bg_step nccl_2host_coll 90 pass -- "${hostid[@]}" "$(exe tests/backend/test_backend_coll)" 2 coll far
  bg_step nccl_2host_put_nogin 60 'stops:only through GIN' -- "${hostid[@]}" "$(exe tests/backend/test_backend_coll)" 2 nogin
fi
if stage gin; then
  for t in default 2 3; do
    ginenv=(env SYMM_BACKEND=nccl SYMM_DEBUG_NCCL_GIN=1)
    [ $t != default ] && ginenv+=("NCCL_GIN_TYPE=$t")
    bg_step "nccl_gin_$t" 60 'report:GIN|ncclDevCommCreate|NCCL.*(WARN|error)|caps' -- \
      "${ginenv[@]}" "$symmrun" -n 1 --timeout 50 "$(exe tests/backend/test_backend_coll)" 1 caps
  done
fi
wait_bg
grep -m1 -hE 'nccl backend: (heap|no device communicator)' "$logs/nccl_2host_caps.log" 2>/dev/null | cut -c1-160 |
  sed 's/^/  /' >>"$logs/nccl_2host_caps.res"

# ---- the other backends, 1 PE: every one the build made tests for (the backend list) -------------
if stage device; then
  ctest_step device_suites 150 '^device_(rma|signal|amo|ldst|barrier)_[a-z0-9_]+_1$' 4 '_nccl_1$'
fi
if stage coll; then
  ctest_step coll_backends 150 '^(backend_(caps|coll)_[a-z0-9]+(_remote)?_1|coll_(errors|move|matrix)_[a-z0-9]+_1)$' 4 \
    '_nccl(_remote)?_1$'
  grep -hE '^[0-9]+: (backend |coll \(|world window)' "$logs/coll_backends.log" | sed 's/^[0-9]*: /  /' |
    cut -c1-160 | head -12 >>"$logs/coll_backends.res" 2>/dev/null
fi

# ---- the python shards' verdicts ------------------------------------------------------------------
for p in "${py_pids[@]}"; do wait "$p"; done
if [ ${#py_names[@]} -gt 0 ]; then
  for name in "${py_names[@]}"; do
    # pytest's closing line ("1 failed, 9 passed, 62 deselected in 122.23s") only
    res=$(cat "$logs"/python_"${name}"_*.log 2>/dev/null | grep -E '(passed|failed|skipped|errors?|deselected).* in [0-9.]+s' |
          grep -E -o '[0-9]+ (passed|failed|skipped|errors?)' |
          awk '{n[$2]+=$1} END {for (k in n) printf "%d %s ", n[k], k}')
    bad=$(cat "$logs"/python_"${name}"_*.res 2>/dev/null | grep -vc '^python_.* PASS')
    order+=("python_$name")
    if [ -z "$res" ]; then result "python_$name" "FAIL: no pytest result (python_${name}_*.log)"
    elif ! echo "$res" | grep -qE 'passed|failed|error'; then result "python_$name" "SKIP: $res"
    else result "python_$name" "$([ "$bad" = 0 ] && echo PASS || echo "FAIL ($bad of $k shards)"): $res"
    fi
    for ((i = 0; i < k; i++)); do
      grep -hE '^python_' "$logs/python_${name}_$i.res" 2>/dev/null | grep -v ' PASS' | cut -c1-150 |
        sed 's/^/    /' >>"$logs/python_$name.res"
      grep -E '^(FAILED|ERROR) ' "$logs/python_${name}_$i.log" 2>/dev/null | head -3 | cut -c1-150 |
        sed 's/^/    /' >>"$logs/python_$name.res"
    done
  done
  # the per-shard lines are folded into the ones above
  rest=()
  for s in "${order[@]}"; do case $s in python_*_[0-9]*) rm -f "$logs/$s.res" ;; *) rest+=("$s") ;; esac; done
  order=("${rest[@]}")
fi

# ---- CuTe DSL and TileLang kernels compiled for nccl / nvshmem, 1 PE ---------------------------------
if stage dsl; then
  lib=${SYMM_LIBRARY:-$build/src/libsymm.so}
  dslenv=(env PYTHONPATH="$here/python" SYMM_LIBRARY="$lib" PYTHONUNBUFFERED=1)
  dir=${CUTE_NCCL:-build-cute-nccl}
  if [ -f "$dir/manifest.json" ]; then
    step cute_nccl 120 pass -- "${dslenv[@]}" SYMM_BACKEND=nccl torchrun --nproc-per-node 1 --master-port 29861 \
      examples/cute/run_gpu.py --cubins "$dir" --only library --out "$logs/cute_nccl.md"
    grep -m1 -hE '[0-9]+ passed, [0-9]+ failed' "$logs/cute_nccl.log" | sed 's/^/  /' >>"$logs/cute_nccl.res"
  else
    order+=(cute_nccl)
    result cute_nccl "NOT RUN: no $dir/manifest.json (examples/cute/build_cubins.py --backend nccl --library-only -o $dir, then carry it)"
  fi
  for cfg in "nccl ${TL_NCCL:-build-tilelang-nccl} SYMM_BACKEND=nccl" \
             "nvshmem ${TL_NVSHMEM:-build-tilelang-nvshmem} SYMM_BACKEND=nvshmem" \
             "nvshmem_remote ${TL_NVSHMEM:-build-tilelang-nvshmem} SYMM_BACKEND=nvshmem SYMM_DEBUG_FORCE_REMOTE=1"; do
    set -- $cfg
    be=${1%_remote} name=tilelang_$1 dir=$2
    shift 2
    if [ -f "$dir/manifest.json" ]; then
      step "$name" 150 pass -- "${dslenv[@]}" "$@" torchrun --nproc-per-node 1 --master-port 29862 \
        examples/tilelang/run_all.py --aot "$dir" --iters 10 --checks 2 --only primitives --out "$logs/$name.md"
      grep -m1 -hE '^[0-9]+ passed, [0-9]+ failed' "$logs/$name.log" | sed 's/^/  /' >>"$logs/$name.res"
      grep -hE '^\| primitives \|.*skipped:' "$logs/$name.log" | cut -d'|' -f3 | sed 's/^ */    skipped: /' >>"$logs/$name.res"
    else
      order+=("$name")
      result "$name" "NOT RUN: no $dir/manifest.json (examples/tilelang/build.py --backend $be --only prim_ --pes 1, then carry it)"
    fi
  done
fi

# ---- NVSHMEM, 2 PEs on the one GPU (MPS: nothing else runs on it now) ------------------------------
if stage shared; then
  nv2=(env SYMM_BACKEND=nvshmem SYMM_LOG_LEVEL=info)
  # NVSHMEM's limited mode: symm's kernels where NVSHMEM maps both PEs both ways, else a clean refusal
  step nvshmem_2pe_timesliced 60 "either:no on-stream collectives" -- "${nv2[@]}" "$symmrun" -n 2 --timeout 50 \
    "$(exe tests/backend/test_backend_coll)" 2 coll
  grep -m2 -hE 'init status|windows differ|coll \(' "$logs/nvshmem_2pe_timesliced.log" 2>/dev/null | cut -c1-160 |
    sed 's/^/  /' >>"$logs/nvshmem_2pe_timesliced.res"
  if [ -e "${CUDA_MPS_PIPE_DIRECTORY:-/nonexistent}/control" ]; then
    mps=() # already under an MPS daemon
  else
    mps=(scripts/with_mps.sh --timeout 55 --)
  fi
  step nvshmem_2pe_mps 60 pass -- "${mps[@]}" "${nv2[@]}" "$symmrun" -n 2 --timeout 50 \
    "$(exe tests/backend/test_backend_coll)" 2 coll
  grep -m2 -hE 'init status|windows differ|coll \(' "$logs/nvshmem_2pe_mps.log" 2>/dev/null | cut -c1-160 |
    sed 's/^/  /' >>"$logs/nvshmem_2pe_mps.res"
  step nvshmem_2pe_mps_signal 60 pass -- "${mps[@]}" env SYMM_BACKEND=nvshmem SYMM_DEBUG_FORCE_REMOTE=1 \
    "$symmrun" -n 2 --timeout 50 "$(exe tests/device/test_device_signal_be)" 2
fi

# ---- symm-bench: rma, coll and the side-by-side table, one run, alone on the GPU --------------------
if stage bench; then
  step bench_backends 100 pass -- "$(exe bench/symm-bench)" --quick --npes 1 --timeout 90 --phase-timeout 40 \
    --backend native,nvshmem,nvshmem:remote,nccl,nccl:remote --out "$logs/bench_backends.md"
  sed -n '/the same calls on each backend/,/^$/p' "$logs/bench_backends.log" 2>/dev/null | head -16 |
    sed 's/^/  /' >>"$logs/bench_backends.res"
fi

# ---- the table, the logs ----------------------------------------------------------------------------
{
  echo "==== scripts/gpu_backends.sh ($(since "$t_start"); stages: $stages)"
  for s in "${order[@]}"; do
    if [ -f "$logs/$s.res" ]; then cat "$logs/$s.res"; else printf '%-30s %s\n' "$s" "NO RESULT"; fi
  done
} >"$summary"
grep -qE '^[^ =][^ ]* +(FAIL|TIMEOUT|NO RESULT)' "$summary" && failed=1
cp "$summary" "$logs/"
tar -C "$OUT" -czf "$OUT/backends_logs.tar.gz" backends && rm -rf "$logs"
echo "logs: $OUT/backends_logs.tar.gz" >>"$summary"
cat "$summary"
exit $failed
