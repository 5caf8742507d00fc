#!/usr/bin/env bash
# Build symm with warnings as errors and run every test (CI's command; the
# README's test command). GPU tests skip where the GPUs they need are absent;
# the end of the output lists each skipped test with its SKIP reason (ctest
# itself shows the output of failed tests only).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
build=${SYMM_BUILD_DIR:-build}
jobs=${SYMM_JOBS:-$(nproc)}
cmake -S . -B "$build" -DSYMM_WERROR=ON
cmake --build "$build" -j "$jobs"
set +e
ctest --test-dir "$build" --output-on-failure -j "$jobs" | tee "$build/ctest-summary.txt"
rc=${PIPESTATUS[0]}
set -e
bash scripts/ctest_skips.sh "$build"
exit "$rc"
