#!/usr/bin/env bash
# The fused GEMM examples of symm.tilelang on 4 GPUs, one PE each, from
# kernels built ahead of time (no TileLang, no compiler needed here):
#   gemm            the TileLang GEMM alone vs torch.matmul at every per-PE shape, every
#                   tile configuration, all on the same random operands, replays interleaved
#   ag_gemm         all-gather + GEMM, communication on the copy engines: every variant
#                   (tile configuration x pieces x side-stream plan) checked and timed
#                   briefly, the fastest kept and timed next to the GEMM alone, the fused
#                   kernel without communication and the copies without the GEMM
#   gemm_rs         GEMM + reduce-scatter, the same way
#   cannon, summa   2x2 grids of 4096^2 blocks, blocks on the copy engines (Cannon's blocks
#                   that stay on their PE are copied before the GEMM, not beside it)
#   seq_all_to_all  the sequence-parallel all-to-alls (unchanged; they keep their lead)
# each checked against torch with fresh data and timed (graph and stream) next to
# the GEMM alone and torch.matmul + NCCL; tables and logs under $OUT/tilelang/,
# a summary last (per fused example: the variant kept and where its time goes).
#
#   where TileLang is (no GPU; 49 kernels, 3-6 minutes on 2 cores; the cubins and
#   manifest.json are all the GPU machine needs):
#     python3 examples/tilelang/build.py --out build-tilelang-gemm --pes 4 --only gemm ag_gemm grid2d seq_
#   here (carry build-tilelang-gemm/; libsymm built in $BUILD, default build-gpu):
#     OUT=/tmp/out BUILD=build-gpu bash scripts/gpu_gemm_tilelang.sh [build-tilelang-gemm]
#
# TL_GEMM_PES (default 4) PEs, one per GPU: fewer GPUs than that skips the run
# (no sharing: these are timings). TL_GEMM_WALL (default 250; under 300 s with the kill margin) bounds the whole
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
wall=${TL_GEMM_WALL:-250}
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
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
steps="gemm:40 ag_gemm:55 gemm_rs:55 cannon:30 summa:30 seq_all_to_all:25"
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
  # the fused rows: the variant kept and where the time goes
  [ -f "$dir/$ex.md" ] && python3 - "$dir/$ex.md" <<'PY' | tee -a "$summary" >/dev/null
import sys
cols, out = None, []
for line in open(sys.argv[1]):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if not line.startswith("|") or line.startswith("|---"):
        cols = None if not line.startswith("|") else cols
        continue
    if cols is None:
        cols = cells
        continue
    r = dict(zip(cols, cells))
    if "fused graph us" in r and r.get("fused / GEMM alone"):
        alone = r.get("GEMM alone us")
        def rel(k):
            try:
                return "%s us (%.2f)" % (r[k], float(r[k]) / float(alone))
            except (KeyError, ValueError):
                return None
        parts = ["%s: %s" % (r["case"], r["check"]), r.get("variant") or r.get("config", ""),
                 "fused %s / %s us graph / stream" % (r["fused graph us"], r.get("fused stream us")),
                 "GEMM alone %s us" % alone, "fused / GEMM %s" % r["fused / GEMM alone"]]
        for k, tag in (("fused kernel only us", "kernel only"), ("copies only us", "copies only")):
            if rel(k):
                parts.append("%s %s" % (tag, rel(k)))
        out.append("    " + "; ".join(p for p in parts if p))
    elif "(used)" in r.get("config", ""):   # the GEMM alone: the configuration the examples use
        out.append("    %s: %s, torch.matmul / tilelang %s, %s" % (r["case"], r["config"],
                   r.get("torch.matmul / tilelang"), r.get("bar (>= 0.90)")))
if out:
    print("\n".join(out))
PY
done
finish "$rc_all"
