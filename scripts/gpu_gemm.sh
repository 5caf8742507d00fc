#!/usr/bin/env bash
# The GEMM + communication examples (CuTe DSL and Triton) on 2 to 4 GPUs, one
# PE per GPU, against the overlap bars (set for 4 PEs); results under
# $OUT/gemm/, summary last. With one GPU it runs the shared mode below instead.
#
#   1. GEMM alone at the per-PE shapes on GPU 0: CuTe DSL (hopper_gemm.py
#      hgemm, from carried cubins), Triton (the examples' gemm_kernel) and
#      torch.matmul (examples/gemm_alone.py; bar >= 0.90 x torch.matmul);
#      meanwhile GPUs 1-3 time the Triton tile candidates (tune_gemm.py;
#      on 4 GPUs only).
#   2. CuTe DSL ag_gemm and gemm_rs, square (M=K=N=8192) and LLM
#      (M=4096, hidden 8192, intermediate 28672) shapes, checked against
#      torch + NCCL with fresh data, timed in CUDA graphs and on a plain
#      stream next to the GEMM alone and torch.matmul + NCCL.
#   3. The same for Triton (examples/triton/gemm_bars.py), with the host's
#      time per call on the plain stream.
#
# Nothing heavy is built here: libsymm comes from $BUILD (the caller builds
# it: cmake -S . -B build-gpu -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build
# build-gpu -j), the CuTe cubins from $SYMM_CUTE_CUBINS (default build-cute;
# python examples/cute/build_cubins.py -o build-cute where CuTe DSL is) and
# the device bitcode for Triton from $SYMM_BITCODE_DIR (default
# $BUILD/bitcode, else build-lead/bitcode, else build/bitcode). Every step runs under timeout -k;
# device waits stop after SYMM_WAIT_TIMEOUT seconds with a message.
# Multicast stays off. GEMM_DRY=1 prints the steps instead of running them
# (GEMM_DRY_NGPU=N: as if N GPUs were there).
# Env: GEMM_ALONE_WALL (80), GEMM_CUTE_WALL (90), GEMM_TRITON_WALL (150),
# GEMM_TUNE=0 skips step 1's Triton candidates, GEMM_ALONE=0 its GEMM-alone
# table (the bars table times the GEMM alone too), GEMM_SHAPES (square,llm),
# GEMM_RS_DESIGNS (ce: Triton gemm_rs designs, comma-separated: ce,events).
# Without the CuTe cubins (or with GEMM_CUTE=0) the CuTe steps are skipped
# with a line in the summary and the GEMM-alone table has no CuTe row.
#
# Shared mode (one GPU): correctness only, GEMM_SHARED_PES PEs
# (default 2) sharing GPU 0, each step under its own private MPS daemon
# (scripts/with_mps.sh; none is started where one already answers), each PE
# with its share of the SMs. The PEs' pushes land before their GEMMs start
# there (no overlap), so this checks every tile's rows and the waits, not
# speed:
#   S1. CuTe DSL ag_gemm and gemm_rs, shapes small and llm (run_gpu.py; the
#       tables' times are of a shared GPU and not compared with anything);
#   S2. Triton ag_gemm and gemm_rs (both designs: ce and events), shapes
#       small and llm (gemm_bars.py --no-bench);
#   S3. Triton ag_gemm with chunks smaller than a group of row tiles,
#       gemm_rs events with 4 chunks per band (the tile order's groups
#       shrink to a chunk), and gemm_rs ce with N not a multiple of the
#       tile (masked columns) and a side stream per owner, --no-bench.
# Each against the unfused torch result with fresh data; the table "PEs
# share one GPU" last. Env: GEMM_SHARED_SHAPES (small,llm),
# GEMM_SHARED_WALL (240 s per step).
set -uo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/_gemm_common.sh
. scripts/_gemm_common.sh
out="$OUT/gemm"
mkdir -p "$out"
bc=${SYMM_BITCODE_DIR:-}
if [ -z "$bc" ]; then
  # $BUILD's own bitcode first (its build made it with libsymm), then the usual folders
  case "$build" in /*) bc=$build/bitcode ;; *) bc=$here/$build/bitcode ;; esac
  [ -f "$bc/libsymm_device_sm90.bc" ] || bc=$here/build-lead/bitcode
  [ -f "$bc/libsymm_device_sm90.bc" ] || bc=$here/build/bitcode
fi
shapes=${GEMM_SHAPES:-square,llm}
dry=${GEMM_DRY:-0}
summary="$out/summary.txt"
: >"$summary"

note() { printf '%-36s %s\n' "$1" "$2" >>"$summary"; }

ngpu=$(gpu_count "${GEMM_DRY_NGPU:-}")
if [ "$ngpu" -lt 1 ]; then
  echo "SKIP: scripts/gpu_gemm.sh needs a GPU, found none"
  exit 0
fi
missing=""
[ -f "$lib" ] || missing="$missing libsymm ($lib: build it first)"
cute=${GEMM_CUTE:-1}
[ -f "$cubins/manifest.json" ] || cute=0
cubin_args=()
[ "$cute" = 1 ] && cubin_args=(--cubins "$cubins")
designs=${GEMM_RS_DESIGNS:-ce}
[ -f "$bc/libsymm_device_sm90.bc" ] || missing="$missing device bitcode ($bc/libsymm_device_sm90.bc: set SYMM_BITCODE_DIR)"
if [ -n "$missing" ] && [ "$dry" != 1 ]; then
  echo "gpu_gemm.sh: missing:$missing"
  exit 2
fi
pyenv=(env PYTHONPATH="$here/python" SYMM_LIBRARY="$lib" SYMM_BITCODE_DIR="$bc")
nvidia-smi -L >"$out/machine.txt" 2>&1
note "machine" "$ngpu GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
[ "$cute" = 1 ] || note "CuTe DSL steps" "skipped (no $cubins/manifest.json, or GEMM_CUTE=0)"

# ---- shared mode (one GPU): PEs share GPU 0, checks only ----
if [ "$ngpu" -lt 2 ]; then
  npes=${GEMM_SHARED_PES:-2}
  wall=${GEMM_SHARED_WALL:-240}
  sshapes=${GEMM_SHARED_SHAPES:-small,llm}
  # a private MPS daemon per step (a fault in one leaves the next a clean
  # server), unless one already answers; each PE gets its share of the SMs
  mps=()
  [ -e "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control" ] ||
    mps=(env SYMM_MPS_LOGS="$out/mps_logs" scripts/with_mps.sh --timeout $((wall - 15)) --)
  penv=("${pyenv[@]}" CUDA_VISIBLE_DEVICES=0 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$((100 / npes)))
  rows=()
  bad=0
  row() { # step, what, result, detail
    rows+=("| $1 | $2 | $3 | $4 |")
    [ "$3" = ok ] || bad=$((bad + 1))
  }
  port=29880

  t0=$(date +%s)
  port=$((port + 1))
  rm -f "$out/cute_gemm_shared.md"
  if [ "$cute" = 1 ]; then
    rc=$(run "$out/cute_gemm_shared.log" "$wall" "${mps[@]}" "${penv[@]}" \
           torchrun --nproc-per-node "$npes" --master-port "$port" examples/cute/run_gpu.py \
           --cubins "$cubins" --only ag_gemm,gemm_rs --shape "$sshapes" --iters 3 --out "$out/cute_gemm_shared.md")
    res=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/cute_gemm_shared.log" 2>/dev/null | tail -1)
    row S1 "CuTe DSL ag_gemm + gemm_rs ($sshapes)" "$(status "$rc")" "${res:-no result}; $(since "$t0")"
    [ "$rc" = 0 ] || [ "$dry" = 1 ] || tail -25 "$out/cute_gemm_shared.log"
  fi

  t0=$(date +%s)
  port=$((port + 1))
  rm -f "$out/triton_gemm_shared.md"
  rc=$(run "$out/triton_gemm_shared.log" "$wall" "${mps[@]}" "${penv[@]}" \
         torchrun --nproc-per-node "$npes" --master-port "$port" examples/triton/gemm_bars.py \
         --shape "$sshapes" --rs-designs ce,events --no-bench --out "$out/triton_gemm_shared.md")
  res=$(grep -cE '^\| (ag_gemm|gemm_rs) .*\| ok \|' "$out/triton_gemm_shared.md" 2>/dev/null)
  row S2 "Triton ag_gemm + gemm_rs ($sshapes)" "$(status "$rc")" "${res:-0} checks ok; $(since "$t0")"
  [ "$rc" = 0 ] || [ "$dry" = 1 ] || tail -25 "$out/triton_gemm_shared.log"

  # chunks of 256 rows (2 row tiles) against groups of 8: the groups shrink to a chunk
  for ex in "ag_gemm --M 4096 --K 2048 --N 4096 --chunks $((4096 / npes / 256))" \
            "gemm_rs --M 4096 --K 4096 --N 2048 --design events --chunks 4" \
            "gemm_rs --M 4096 --K 4096 --N 2000 --design ce --lanes 0"; do
    name=${ex%% *}
    t0=$(date +%s)
    port=$((port + 1))
    # shellcheck disable=SC2086 # the example's options, split on purpose
    rc=$(run "$out/${name}_chunks_shared.log" "$wall" "${mps[@]}" "${penv[@]}" \
           torchrun --nproc-per-node "$npes" --master-port "$port" examples/triton/"$name".py \
           ${ex#* } --no-bench)
    res=$(grep -m1 -E "^$name \[" "$out/${name}_chunks_shared.log" 2>/dev/null | sed -E 's/^[^]]*\]: //')
    row S3 "Triton ${ex}" "$(status "$rc")" "${res:-no report}; $(since "$t0")"
    [ "$rc" = 0 ] || [ "$dry" = 1 ] || tail -25 "$out/${name}_chunks_shared.log"
  done

  echo
  for f in cute_gemm_shared.md triton_gemm_shared.md; do
    [ -f "$out/$f" ] && cat "$out/$f"
  done
  {
    echo
    echo "### ag_gemm / gemm_rs checks: PEs share one GPU ($npes PEs on GPU 0, MPS; correctness only)"
    echo
    echo "| step | what | result | detail |"
    echo "| --- | --- | --- | --- |"
    printf '%s\n' "${rows[@]}"
  } | tee "$out/shared_summary.md"
  echo
  echo "==== gpu_gemm.sh (PEs share one GPU): $(since "$t_start"), $bad step(s) not ok, logs in $out ===="
  cat "$summary"
  [ "$bad" = 0 ]
  exit
fi

# ---- bars: one PE per GPU, on up to 4 GPUs ----
npes=$((ngpu < 4 ? ngpu : 4))

# ---- 1. the GEMMs alone (GPU 0), Triton tile candidates (GPUs 1-3, on 4 GPUs) ----
t0=$(date +%s)
rm -f "$out/gemm_alone.md"
alone_pid=""
[ "${GEMM_ALONE:-1}" = 1 ] && ( rc=$(run "$out/gemm_alone.log" "${GEMM_ALONE_WALL:-80}" "${pyenv[@]}" CUDA_VISIBLE_DEVICES=0 \
        python examples/gemm_alone.py "${cubin_args[@]}" --out "$out/gemm_alone.md")
  echo "$rc" >"$out/gemm_alone.rc" ) &
[ "${GEMM_ALONE:-1}" = 1 ] && alone_pid=$!
tune_pids=()
if [ "${GEMM_TUNE:-1}" = 1 ] && [ "$npes" -ge 4 ]; then
  # the candidates of tune_gemm.py split over three GPUs, every shape each
  i=0
  for cfgs in 0,1,2,3 4,5,6 7,8,9; do
    i=$((i + 1))
    ( rc=$(run "$out/tune_gemm_$i.log" "${GEMM_ALONE_WALL:-80}" "${pyenv[@]}" CUDA_VISIBLE_DEVICES=$i \
            python examples/triton/tune_gemm.py --configs "$cfgs" --iters 10)
      echo "$rc" >"$out/tune_gemm_$i.rc" ) &
    tune_pids+=($!)
  done
fi
if [ -n "$alone_pid" ]; then
  wait "$alone_pid"
  rc=$(cat "$out/gemm_alone.rc" 2>/dev/null || echo 1)
  note "GEMM alone (GPU 0)" "$(status "$rc") ($(since "$t0"))"
  [ "$rc" = 0 ] || [ "$dry" = 1 ] || tail -15 "$out/gemm_alone.log"
else
  note "GEMM alone (GPU 0)" "skipped (GEMM_ALONE=0; the bars table has the GEMM alone per shape)"
fi
for p in "${tune_pids[@]}"; do wait "$p"; done
if [ "${#tune_pids[@]}" -gt 0 ]; then
  res=""
  for i in 1 2 3; do res="$res $(status "$(cat "$out/tune_gemm_$i.rc" 2>/dev/null || echo 1)")"; done
  note "Triton tile candidates (GPUs 1-3)" "$res"
fi

# ---- 2. CuTe DSL: ag_gemm and gemm_rs, one PE per GPU ----
t0=$(date +%s)
rm -f "$out/cute_gemm.md"
if [ "$cute" = 1 ]; then
  rc=$(run "$out/cute_gemm.log" "${GEMM_CUTE_WALL:-90}" "${pyenv[@]}" \
         torchrun --nproc-per-node "$npes" --master-port 29860 examples/cute/run_gpu.py --cubins "$cubins" \
         --only ag_gemm,gemm_rs --shape "$shapes" --iters 3 --out "$out/cute_gemm.md")
  note "CuTe ag_gemm + gemm_rs ($npes PEs)" "$(status "$rc"): $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/cute_gemm.log" 2>/dev/null | tail -1) ($(since "$t0"))"
  [ "$rc" = 0 ] || [ "$dry" = 1 ] || tail -25 "$out/cute_gemm.log"
fi

# ---- 3. Triton: ag_gemm and gemm_rs, one PE per GPU ----
t0=$(date +%s)
rm -f "$out/triton_gemm.md"
rc=$(run "$out/triton_gemm.log" "${GEMM_TRITON_WALL:-150}" "${pyenv[@]}" \
       torchrun --nproc-per-node "$npes" --master-port 29870 examples/triton/gemm_bars.py --shape "$shapes" \
       --rs-designs "$designs" --iters 20 --out "$out/triton_gemm.md")
note "Triton ag_gemm + gemm_rs ($npes PEs)" "$(status "$rc") ($(since "$t0"))"
[ "$rc" = 0 ] || [ "$dry" = 1 ] || tail -25 "$out/triton_gemm.log"

# ---- summary: the tables, then the steps ----
echo
for f in gemm_alone.md cute_gemm.md triton_gemm.md; do
  [ -f "$out/$f" ] && cat "$out/$f"
done
rm -f "$out/tune_gemm.md"
for i in 1 2 3; do
  [ -f "$out/tune_gemm_$i.log" ] && grep -E '^\| [a-z]' "$out/tune_gemm_$i.log" | grep -v '^| shape' >>"$out/tune_gemm.md"
done
if [ -s "$out/tune_gemm.md" ]; then
  echo
  echo "### Triton tile candidates (tune_gemm.py on GPUs 1-3; x torch.matmul > 1: faster)"
  echo
  echo "| shape | config | us | TFLOP/s | x torch.matmul | check |"
  echo "| --- | --- | --- | --- | --- | --- |"
  sort -u "$out/tune_gemm.md"
fi
echo
echo "==== gpu_gemm.sh: $(since "$t_start"), logs in $out ===="
cat "$summary"
