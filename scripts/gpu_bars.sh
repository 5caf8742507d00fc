#!/usr/bin/env bash
# The open bars of issues 27-29 on a machine with 4 GPUs (one PE each), one group per
# call, each group within BARS_WALL seconds (default 570: one device call of 10 minutes
# with the unpacking), from builds made beforehand (nothing is built here):
#
#   BUILD=build-sm90 OUT=/dir bash scripts/gpu_bars.sh moe|coll|gemm
#
#   moe   test_moe on 4 PEs (every part: the kernels these figures time are correct
#         there), then scripts/gpu_moe.sh spawn bench host (issue 27: the low-latency
#         rows against NCCL, per call and back to back, the eager host time, pplx's spawn
#         start) and scripts/gpu_moe_ht.sh (the high-throughput rows, 24 SMs and every SM)
#   coll  scripts/gpu_coll.sh with SHORT=1 (issue 28: broadcast, reduce-scatter and
#         all-reduce against NCCL and NVSHMEM), scripts/gpu_pkt.sh (put_signal and the
#         packet puts, 8-64 B one-way), scripts/gpu_bcast.sh (the chained broadcast)
#   gemm  scripts/gpu_gemm.sh (issue 29: Triton and CuTe DSL fused GEMMs, the GEMM-alone and
#         tile-tuning tables left out) and scripts/gpu_gemm_tilelang.sh (TileLang's, Cannon,
#         SUMMA); needs the CuTe cubins ($SYMM_CUTE_CUBINS, default build-cute) and the
#         TileLang kernels ($TL_AOT, default build-tilelang-gemm), both made where the
#         DSLs are (docs/cute.md, docs/tilelang.md)
#
# Each sub-run is a step with its own share of the wall (the step runner cuts the last
# ones to what is left); its whole output goes to $OUT/bars/<group>-<step>.log, and every
# pass/miss line of the group is printed last, after the table of steps (also in
# $OUT/bars/<group>.txt). Fewer than 4 GPUs: the sub-runs do what their own scripts do
# there (some rows skip). Multicast stays off (scripts/_gpu_env.sh). DRY=1 prints the steps.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
# shellcheck source=scripts/_steps.sh
. scripts/_steps.sh
gpu_env_pip_libs

group=${1:-}
case $group in
  moe | coll | gemm) ;;
  *)
    echo "usage: BUILD=<build folder> OUT=<dir> bash scripts/gpu_bars.sh moe|coll|gemm" >&2
    exit 2
    ;;
esac
dry=${DRY:-0}
build=${BUILD:-${SYMM_BUILD_DIR:-build-gpu}}
case $build in /*) ;; *) build=$PWD/$build ;; esac
OUT=${OUT:-$PWD/out}
T=$OUT/bars
mkdir -p "$T"
wall=${BARS_WALL:-570}
steps_fmt="%-44s %-5s %5ss  %s"
steps_deadline=$(( $(date +%s) + wall ))
steps_spent="the group's $wall s are spent"

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "$ngpu" -lt 1 ] && [ "$dry" != 1 ]; then
  echo "SKIP: gpu_bars.sh: no GPU on this machine"
  exit 0
fi
[ "$ngpu" -lt 4 ] && [ "$dry" != 1 ] && echo "gpu_bars.sh: $ngpu GPUs; the bars are defined for 4 (one PE each)"
if [ "$dry" != 1 ] && [ ! -x "$build/tools/symmrun" ]; then
  echo "gpu_bars.sh: no $build/tools/symmrun: build $build first (cmake --build $build -j)" >&2
  exit 1
fi

# step NAME LIMIT CMD...: one sub-run, its log $T/<group>-<n>.log; ok when it exits 0
n=0
step() {
  local name=$1 limit=$2 lg
  shift 2
  n=$((n + 1))
  lg=$T/$group-$n.log
  steps_exec "$name" "$limit" "$lg" env OUT="$OUT" BUILD="$build" "$@" || return 0
  if [ "$step_rc" -eq 0 ]; then
    steps_row "$name" ok "$step_dt" "$lg"
  else
    steps_failed "$name" "$lg" "$lg"
  fi
}

case $group in
  moe)
    step "test_moe, 4 PEs, every part" 60 \
      "$build/tools/symmrun" -n 4 --timeout 50 "$build/tests/moe/test_moe" 4 all
    step "gpu_moe.sh spawn bench host" 290 env MOE_WALL=280 bash scripts/gpu_moe.sh spawn bench host
    step "gpu_moe_ht.sh" 210 env HT_WALL=200 bash scripts/gpu_moe_ht.sh
    ;;
  coll)
    step "gpu_coll.sh (SHORT=1)" 250 env SHORT=1 SHORT_WALL=170 SHARED_WALL=70 bash scripts/gpu_coll.sh
    step "gpu_pkt.sh" 150 bash scripts/gpu_pkt.sh
    step "gpu_bcast.sh" 160 bash scripts/gpu_bcast.sh
    ;;
  gemm)
    step "gpu_gemm.sh (fused, no GEMM-alone table)" 320 \
      env SYMM_CUTE_CUBINS="${SYMM_CUTE_CUBINS:-build-cute}" GEMM_ALONE=0 GEMM_TUNE=0 GEMM_RS_DESIGNS=ce,events \
      bash scripts/gpu_gemm.sh
    step "gpu_gemm_tilelang.sh" 250 env TL_GEMM_WALL=240 bash scripts/gpu_gemm_tilelang.sh \
      "${TL_AOT:-build-tilelang-gemm}"
    ;;
esac

{
  echo "==== gpu_bars.sh $group ($ngpu GPUs, build $build) ===="
  steps_table
  echo "---- bar lines ----"
  for f in "$T/$group"-*.log; do
    [ -f "$f" ] && grep -h -E '(^|[^a-z])bars?[: (]|\b(MISS|PASS)\b|\| (pass|miss)' "$f" | grep -v '^DRY' | cut -c1-240
  done
} | tee "$T/$group.txt"
exit "$failed"
