#!/usr/bin/env bash
# run_all.sh [LOG_DIR] - on a GPU machine: install symm into a scratch prefix,
# build examples/c against it (as a user would), and run every example under
# symmrun on 2 and 4 PEs (PEs share the GPUs when there are fewer). Logs go
# to LOG_DIR (default $OUT/examples_c, else out/examples_c): build.log, one
# run_n<N>.log per PE count and summary.txt, the pass/fail table that also
# ends the output; the exit status is non-zero when any run failed.
#   SYMM_BUILD_DIR   an existing symm build to install (default: build one
#                    in build-examples-lib, library and tools only)
#   EXAMPLE_NPES     PE counts to run (default "2 4")
set -uo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/cuda/bin"
logs=${1:-${OUT:+$OUT/examples_c}}
logs=${logs:-out/examples_c}
mkdir -p "$logs"
arch=${CMAKE_CUDA_ARCHITECTURES:-90}
lib=${SYMM_BUILD_DIR:-build-examples-lib}
prefix=$lib/examples-prefix exbuild=$lib/examples-build
export SYMM_WAIT_TIMEOUT=${SYMM_WAIT_TIMEOUT:-15}

: >"$logs/build.log"
step() { # step NAME CMD...: run into build.log, and stop the script on failure
    local name=$1; shift
    echo "== $name: $*" >>"$logs/build.log"
    if ! timeout -k 10 900 "$@" >>"$logs/build.log" 2>&1; then
        echo "run_all: $name failed; see $logs/build.log"; tail -20 "$logs/build.log"; exit 1
    fi
}
if [ -z "${SYMM_BUILD_DIR:-}" ]; then
    step "configure symm" cmake -S . -B "$lib" -DCMAKE_CUDA_ARCHITECTURES="$arch" \
        -DSYMM_BUILD_TESTS=OFF -DSYMM_BUILD_BENCH=OFF
    step "build symm" cmake --build "$lib" -j "$(nproc)"
fi
rm -rf "$prefix"
step "install symm" cmake --install "$lib" --prefix "$prefix"
step "configure examples" cmake -S examples/c -B "$exbuild" \
    -DCMAKE_PREFIX_PATH="$PWD/$prefix" -DCMAKE_CUDA_ARCHITECTURES="$arch"
step "build examples" cmake --build "$exbuild" -j "$(nproc)"

table=() fails=0
for n in ${EXAMPLE_NPES:-2 4}; do
    log=$logs/run_n$n.log
    : >"$log"
    for ex in ring_shift ping_pong all_reduce_kernel put_signal_pipeline; do
        echo "== symmrun -n $n $ex" >>"$log"
        start=$(date +%s)
        timeout -k 10 180 "$prefix/bin/symmrun" -n "$n" "$exbuild/$ex" >>"$log" 2>&1
        rc=$?
        secs=$(($(date +%s) - start))
        if [ $rc -eq 0 ]; then res=pass; else res="FAIL (exit $rc)"; fails=$((fails + 1)); fi
        table+=("$(printf '%-22s %3d PEs  %-16s %4ds  %s' "$ex" "$n" "$res" "$secs" "$log")")
    done
done
{
    echo "examples/c on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs)"
    printf '%s\n' "${table[@]}"
} | tee "$logs/summary.txt"
[ $fails -eq 0 ]
