#!/usr/bin/env bash
# CuTe DSL GEMM + reduce-scatter (examples/cute/gemm_rs.py): the copy-engine
# variants (ce; ce-noprefetch; ce-owners on 3+ PEs) against the epilogue-push
# one (push), and all-gather + GEMM (ag_gemm.py), through run_gpu.py; each
# checked against torch with fresh data and timed next to the GEMM alone and
# torch.matmul + NCCL. Runs unchanged on 1, 2 or 4 GPUs (more: 4 are used);
# results under $OUT/gemm_rs/, a summary table last. About 1.5 minutes on
# 4 H200s (each step bounded: RS_SPEED_WALL + RS_SPEED2_WALL + RS_SHARED_WALL, 260 s).
#
#   1. speed (2+ GPUs): one PE per GPU, shapes square (M=K=N=8192) and llm,
#      ag_gemm and every gemm_rs variant; the overlap tables; the copies
#      alone (no GEMM: the copy engines' rate) and one call's schedule per PE
#      (--timeline: when each piece became ready and landed) in the log.
#   1b. speed on GPUs 0-1 where there are 3 or more: 2 PEs, ag_gemm, gemm_rs
#      ce and push, the 2-PE figures beside the 4-PE ones.
#   2. correctness (any GPU count): 2 PEs sharing GPU 0 under a private MPS
#      daemon (scripts/with_mps.sh), shapes small and llm, ag_gemm, ce, push
#      (ce runs as two launches there: peer bands, then the own band).
#
# Nothing is built here: libsymm from $BUILD (src/libsymm.so; default
# build-gpu), the CuTe cubins from $SYMM_CUTE_CUBINS (default build-cute:
# python examples/cute/build_cubins.py -o build-cute where CuTe DSL is).
# Every step runs under timeout -k; device waits stop after SYMM_WAIT_TIMEOUT
# (15) seconds with a message. Multicast stays off.
# Env: RS_SPEED_WALL (110 s), RS_SPEED2_WALL (80 s), RS_SHARED_WALL (70 s), RS_SHAPES (square,llm),
# RS_DRY=1 prints the steps instead of running them (RS_DRY_NGPU=N: as if N
# GPUs were there).
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/_gemm_common.sh
. scripts/_gemm_common.sh
out="$OUT/gemm_rs"
mkdir -p "$out"
shapes=${RS_SHAPES:-square,llm}
dry=${RS_DRY:-0}
rows=()
bad=0

row() { # step, what, status, detail
  rows+=("| $1 | $2 | $3 | $4 |")
  case "$3" in ok|skipped) ;; *) bad=$((bad + 1)) ;; esac
}

ngpu=$(gpu_count "${RS_DRY_NGPU:-}")
if [ "$ngpu" -lt 1 ]; then
  echo "SKIP: scripts/gpu_cute_gemm_rs.sh needs a GPU, found none"
  exit 0
fi
missing=""
[ -f "$lib" ] || missing="$missing libsymm ($lib: build it first)"
[ -f "$cubins/manifest.json" ] || missing="$missing CuTe cubins ($cubins/manifest.json: python examples/cute/build_cubins.py -o $cubins where CuTe DSL is, and carry it)"
if [ -n "$missing" ] && [ "$dry" != 1 ]; then
  echo "gpu_cute_gemm_rs.sh: missing:$missing"
  exit 2
fi
if [ "$dry" != 1 ] && ! grep -q '"wait_report"' "$cubins/manifest.json"; then
  echo "gpu_cute_gemm_rs.sh: $cubins has no wait_report: rebuild it from this branch (build_cubins.py)"
  exit 2
fi
pyenv=(env PYTHONPATH="$here/python" SYMM_LIBRARY="$lib")
nvidia-smi -L >"$out/machine.txt" 2>&1
npes=$ngpu
[ "$npes" -gt 4 ] && npes=4
variants=ce,ce-noprefetch,push
[ "$npes" -gt 2 ] && variants=ce,ce-owners,ce-noprefetch,push

# ---- 1. speed: one PE per GPU ----
if [ "$npes" -ge 2 ]; then
  t0=$(date +%s)
  rm -f "$out/speed.md"
  rc=$(run "$out/speed.log" "${RS_SPEED_WALL:-110}" "${pyenv[@]}" CUDA_VISIBLE_DEVICES="$(seq -s, 0 $((npes - 1)))" \
         torchrun --nproc-per-node "$npes" --master-port 29890 examples/cute/run_gpu.py --cubins "$cubins" \
         --only ag_gemm,gemm_rs --shape "$shapes" --variants "$variants" --iters 3 --timeline --out "$out/speed.md")
  row 1 "$npes PEs, one GPU each: $shapes, ag_gemm, gemm_rs $variants" "$(status "$rc")" \
      "$(cat "$out/speed.md" 2>/dev/null | grep -cE '^\| (ag_gemm|gemm_rs) .*\| ok \|') rows checked ok; $(since "$t0")"
  [ "$rc" = 0 ] || [ "$dry" = 1 ] || tail -30 "$out/speed.log"
else
  row 1 "one PE per GPU" skipped "1 GPU: no NVLink pair (the shared run below checks correctness)"
fi

# ---- 1b. speed on 2 of the GPUs (3+ GPUs): the 2-PE figures beside the 4-PE ones ----
if [ "$npes" -ge 3 ]; then
  t0=$(date +%s)
  rm -f "$out/speed2.md"
  rc=$(run "$out/speed2.log" "${RS_SPEED2_WALL:-80}" "${pyenv[@]}" CUDA_VISIBLE_DEVICES=0,1 \
         torchrun --nproc-per-node 2 --master-port 29892 examples/cute/run_gpu.py --cubins "$cubins" \
         --only ag_gemm,gemm_rs --shape "$shapes" --variants ce,push --iters 3 --out "$out/speed2.md")
  row 1b "2 PEs, one GPU each (GPUs 0-1): $shapes, ag_gemm, gemm_rs ce,push" "$(status "$rc")" \
      "$(cat "$out/speed2.md" 2>/dev/null | grep -cE '^\| (ag_gemm|gemm_rs) .*\| ok \|') rows checked ok; $(since "$t0")"
  [ "$rc" = 0 ] || [ "$dry" = 1 ] || tail -30 "$out/speed2.log"
fi

# ---- 2. correctness: 2 PEs sharing GPU 0 under MPS ----
t0=$(date +%s)
wall=${RS_SHARED_WALL:-70}
rm -f "$out/shared.md"
mps=()
[ -e "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control" ] ||
  mps=(env SYMM_MPS_LOGS="$out/mps_logs" scripts/with_mps.sh --timeout $((wall - 15)) --)
rc=$(run "$out/shared.log" "$wall" "${mps[@]}" "${pyenv[@]}" CUDA_VISIBLE_DEVICES=0 \
       CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 torchrun --nproc-per-node 2 --master-port 29891 \
       examples/cute/run_gpu.py --cubins "$cubins" --only ag_gemm,gemm_rs --shape small,llm --variants ce,push \
       --iters 3 --out "$out/shared.md")
row 2 "2 PEs sharing GPU 0 (MPS): small,llm, ag_gemm, gemm_rs ce,push" "$(status "$rc")" \
    "$(cat "$out/shared.md" 2>/dev/null | grep -cE '^\| (ag_gemm|gemm_rs) .*\| ok \|') rows checked ok; $(since "$t0")"
[ "$rc" = 0 ] || [ "$dry" = 1 ] || tail -30 "$out/shared.log"

# ---- summary ----
echo
for f in speed.md speed2.md shared.md; do
  [ -f "$out/$f" ] && cat "$out/$f"
done
echo
grep -h -E '^(ag_gemm|gemm_rs) ' "$out/speed.log" "$out/speed2.log" "$out/shared.log" 2>/dev/null
{
  echo
  echo "### gpu_cute_gemm_rs.sh: $ngpu GPU(s), $(since "$t_start"), logs in $out"
  echo
  echo "| step | what | result | detail |"
  echo "| --- | --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
} | tee "$out/summary.md"
[ "$bad" = 0 ]
