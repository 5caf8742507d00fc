#!/usr/bin/env bash
# The fused GEMM examples of symm.tilelang on 4 GPUs, one PE each, from
# kernels built ahead of time (no TileLang, no compiler needed here):
#   gemm            the TileLang GEMM alone vs torch.matmul at every per-PE shape,
#                   every tile configuration (the fused examples use the fastest)
#   ag_gemm         all-gather + GEMM, communication on the copy engines
#   gemm_rs         GEMM + reduce-scatter, communication on the copy engines
#   cannon, summa   2x2 grids of 4096^2 blocks, blocks on the copy engines
#   seq_all_to_all  the sequence-parallel all-to-alls (unchanged; they keep their lead)
# each checked against torch with fresh data and timed (graph and stream) next to
# the GEMM alone and torch.matmul + NCCL; tables and logs under $OUT/tilelang/,
# a summary last.
#
#   where TileLang is (no GPU; 54 kernels, 2-4 minutes on 2 cores, 4.7 MiB; the cubins and
#   manifest.json are all the GPU machine needs):
#     python3 examples/tilelang/build.py --out build-tilelang-gemm --pes 4 --only gemm ag_gemm grid2d seq_
#   here (carry build-tilelang-gemm/; libsymm built in $BUILD, default build-gpu):
#     OUT=/tmp/out BUILD=build-gpu bash scripts/gpu_gemm_tilelang.sh [build-tilelang-gemm]
#
# TL_GEMM_PES (default 4) PEs, one per GPU: fewer GPUs than that skips the run
# (no sharing: these are timings). TL_GEMM_WALL (default 200) bounds the whole
# run; each example has its own timeout within it. TL_GEMM_ONLY picks examples.
# Multicast stays off. Nothing is built here.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
dir=$OUT/tilelang
mkdir -p "$dir"
aot=${1:-build-tilelang-gemm}
build=${BUILD:-${SYMM_BUILD_DIR:-build-gpu}}
pes=${TL_GEMM_PES:-4}
wall=${TL_GEMM_WALL:-200}
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
unset SYMM_ENABLE_MULTICAST
export SYMM_WAIT_TIMEOUT=${SYMM_WAIT_TIMEOUT:-15}
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
export SYMM_LIBRARY=${SYMM_LIBRARY:-$PWD/$build/src/libsymm.so}
summary=$dir/summary.txt
: >"$summary"
t_start=$(date +%s)

finish() {
  for f in "$dir"/*.md; do [ -f "$f" ] && cat "$f"; done
  echo "==== symm.tilelang fused GEMM examples ($pes PEs, $ngpu GPUs; $(( $(date +%s) - t_start )) s) ===="
  cat "$summary"
  exit "${1:-0}"
}
note() { printf '%-16s %s\n' "$1" "$2" | tee -a "$summary" >/dev/null; }

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "$ngpu" -lt "$pes" ]; then
  note "all" "skipped: $ngpu GPUs, the run needs $pes (one PE per GPU)"
  finish 0
fi
if [ ! -f "$aot/manifest.json" ]; then
  note "all" "no $aot/manifest.json: build it where TileLang is (see this script's header)"
  finish 2
fi
if [ ! -f "$SYMM_LIBRARY" ]; then
  note "all" "no $SYMM_LIBRARY: build libsymm first (cmake --build $build), or set SYMM_LIBRARY"
  finish 2
fi
nvidia-smi -L >"$dir/gpus.txt" 2>&1
nvidia-smi topo -m >>"$dir/gpus.txt" 2>&1

# example:timeout (s); the fixed costs are the processes' start (torch, NCCL, symm)
steps="gemm:45 ag_gemm:45 gemm_rs:45 cannon:35 summa:35 seq_all_to_all:30"
port=29850
rc_all=0
for step in $steps; do
  ex=${step%%:*} limit=${step##*:}
  if [ -n "${TL_GEMM_ONLY:-}" ] && [[ " $TL_GEMM_ONLY " != *" $ex "* ]]; then
    continue
  fi
  left=$(( wall - ($(date +%s) - t_start) ))
  if [ "$left" -lt 20 ]; then
    note "$ex" "not run: the run's $wall s are spent"
    rc_all=1
    continue
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  port=$((port + 1))
  t0=$(date +%s)
  timeout -k 10 "$limit" torchrun --nproc-per-node "$pes" --master-port "$port" \
    examples/tilelang/run_all.py --aot "$aot" --only "$ex" --iters "${TL_GEMM_ITERS:-20}" \
    --graph-iters "${TL_GEMM_GRAPH_ITERS:-20}" --checks "${TL_GEMM_CHECKS:-2}" --out "$dir/$ex.md" \
    >"$dir/$ex.log" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] && rc_all=1
  res=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$dir/$ex.log" | tail -1)
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && res="timed out after $limit s${res:+ ($res)}"
  # the bars each row met or missed (the last column of the GEMM tables)
  bars=$(grep -oE '(gemm|graph|stream) (pass|MISS)|\| (pass|MISS) \|' "$dir/$ex.md" 2>/dev/null |
         sed -E 's/^\| (pass|MISS) \|$/vs-torch.matmul \1/' | sort | uniq -c |
         awk '{printf "%s%s %s x%s", sep, $2, $3, $1; sep=", "}')
  note "$ex" "rc=$rc $(( $(date +%s) - t0 )) s: ${res:-no result}${bars:+; bars: $bars}"
done
finish "$rc_all"
