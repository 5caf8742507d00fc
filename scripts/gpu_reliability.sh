#!/usr/bin/env bash
# Reliability on a machine with 4 GPUs, one PE per GPU (docs/reliability.md):
#   stop    a PE stopped (SIGSTOP) 2 s into a device loop that its GPU keeps
#           answering, under symmrun with default settings, PE 1 and then
#           PE 0: every other PE gone within 10 s of the stop, naming it;
#           symmrun exits non-zero with the stopped PE gone too; no process,
#           GPU memory or MPS daemon left
#           (scripts/fault_matrix.py --symmrun-stop)
#   matrix  scripts/fault_matrix.py on 4 PEs: each kind of work without a
#           fault, then kill -9 / trap / stop / stays-out rows over every kind
#           of work (stream and device collectives, RMA, a device loop, MoE
#           dispatch/combine in both modes, ...), 5 kill runs per kind, about
#           150 runs, 3 jobs at once (MATRIX_PARALLEL), no run started after
#           MATRIX_BUDGET s (default 230)
#
#   BUILD=build-gpu OUT=/path scripts/gpu_reliability.sh [--quick] [stop] [matrix]
#     --quick   about 120 s: the matrix's --quick (one kill run per kind, one
#               trap run, the stopped-while-answered rows, no other SIGSTOP or
#               stays-out rows), budget 60 s
#
# Builds nothing (BUILD must hold tools/symmrun and tests/fault/fault_pe).
# Runs outside any MPS daemon (PEs of a job on separate GPUs; one that is
# running is not used). Every step under timeout -k: at most 90 + 380 s
# (--quick: 90 + 210 s), about 300 s (--quick: 120 s) when all goes well.
# Logs and tables under $OUT/reliability/; a summary table last. Exit 0
# only when every step passed (or skipped: fewer than 2 GPUs).
set -uo pipefail
cd "$(dirname "$0")/.."
quick=0
steps=""
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    stop|matrix) steps="$steps $arg" ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "gpu_reliability: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
steps=${steps:-" stop matrix"}
build=${BUILD:-${SYMM_BUILD_DIR:-build-gpu}}
OUT=${OUT:-$PWD/out}
out=$OUT/reliability
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
# shellcheck source=scripts/_gpu_env.sh
. scripts/_gpu_env.sh
# default liveness settings: what the 10 s promise is about
unset SYMM_PEER_TIMEOUT SYMM_ABORT_GRACE SYMM_BOOTSTRAP_SECRET
export PATH="$PATH:/usr/local/cuda/bin"
t0=$(date +%s)
fail=0
note() { printf '%-22s %-10s %s\n' "$1" "$2" "$3" | tee -a "$summary"; }

# no MPS: an empty private pipe folder, so no PE attaches to a running daemon
nomps=$(mktemp -d /tmp/symm-rel-nomps-XXXXXX)
trap 'rm -rf "$nomps"' EXIT
export CUDA_MPS_PIPE_DIRECTORY=$nomps

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
npes=$(( ngpu < 4 ? ngpu : 4 ))
{
  echo "gpu_reliability: $(date -u +%Y-%m-%dT%H:%M:%SZ) host $(hostname), $ngpu GPU(s), $npes PEs, build $build," \
    "tree $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
  nvidia-smi -L 2>/dev/null
  nvidia-smi topo -m 2>/dev/null | head -8
} >"$out/machine.txt"
cat "$out/machine.txt"

if [ "$npes" -lt 2 ]; then
  note "all" "skipped" "SKIP: needs 2 or more GPUs (found $ngpu)"
  echo "==== gpu_reliability: skipped (no GPUs) ===="
  cat "$summary"
  exit 0
fi
for f in "$build/tools/symmrun" "$build/tests/fault/fault_pe"; do
  if [ ! -x "$f" ]; then
    note "all" "FAILED" "$f is not built (build $build first)"
    echo "==== gpu_reliability ===="
    cat "$summary"
    exit 1
  fi
done

rm -f "$out/symmrun_stop.md" "$out/fault_matrix/fault_matrix.md" # tables of an earlier run
case " $steps " in *" stop "*)
  s0=$(date +%s)
  timeout -k 10 90 python3 scripts/fault_matrix.py --build "$build" --backend native --npes "$npes" \
    --symmrun-stop --out "$out" >"$out/symmrun_stop.log" 2>&1
  rc=$?
  [ $rc = 0 ] || fail=1
  verdict=$([ $rc = 0 ] && echo ok || { [ $rc = 124 ] && echo TIMEOUT || echo FAILED; })
  note "stop (symmrun)" "$verdict" "$(( $(date +%s) - s0 )) s; $(tail -1 "$out/symmrun_stop.log")"
  ;;
esac

case " $steps " in *" matrix "*)
  s0=$(date +%s)
  if [ $quick = 1 ]; then
    budget=${MATRIX_BUDGET:-60}; size=(--quick)
  else
    budget=${MATRIX_BUDGET:-230}; size=(--runs-per-kind 5)
  fi
  # the last runs started before the budget end within MATRIX_MARGIN s (a
  # stays-out run: 5 + 15 s, init, teardown; on GPUs, 3 jobs' CUDA starts);
  # a SIGTERM still leaves 30 s to write the table
  timeout -k 30 $(( budget + ${MATRIX_MARGIN:-120} )) python3 scripts/fault_matrix.py --build "$build" --backend native \
    --npes "$npes" "${size[@]}" --parallel "${MATRIX_PARALLEL:-3}" --budget "$budget" \
    --out "$out/fault_matrix" >"$out/fault_matrix.log" 2>&1
  rc=$?
  [ $rc = 0 ] || fail=1
  verdict=$([ $rc = 0 ] && echo ok || { [ $rc = 124 ] && echo TIMEOUT || echo FAILED; })
  note "fault matrix" "$verdict" "$(( $(date +%s) - s0 )) s; $(tail -1 "$out/fault_matrix.log")"
  ;;
esac

echo
for f in "$out/symmrun_stop.md" "$out/fault_matrix/fault_matrix.md"; do
  [ -f "$f" ] && { cat "$f"; echo; }
done
echo "==== gpu_reliability ($(( $(date +%s) - t0 )) s, $npes PEs on $ngpu GPUs; logs and tables in $out) ===="
cat "$summary"
exit $fail
