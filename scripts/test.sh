#!/usr/bin/env bash
# Build symm with warnings as errors and run every test (CI's command; the
# README's test command). GPU tests skip, each with a SKIP line, where the
# GPUs they need are absent.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
build=${SYMM_BUILD_DIR:-build}
jobs=${SYMM_JOBS:-$(nproc)}
cmake -S . -B "$build" -DSYMM_WERROR=ON
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
