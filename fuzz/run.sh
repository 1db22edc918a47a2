#!/usr/bin/env bash
# fuzz/run.sh - a short, bounded libFuzzer run of fuzz_open (no ctest involved).
#
#   fuzz/run.sh [SECONDS] [extra libFuzzer flags...]
#
# Configures and builds build-fuzz/ with clang and KR_FUZZ=ON (which also writes the seed
# corpus to build-fuzz/fuzz/corpus), then fuzzes for SECONDS (default 30). New interesting
# inputs are added to the corpus directory; crashes are written as crash-* files in the
# current directory, and the run exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-30}"
shift || true
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DKR_FUZZ=ON >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target fuzz_open >build-fuzz.log 2>&1 || { cat build-fuzz.log; exit 1; }
exec build-fuzz/fuzz/fuzz_open -max_total_time="$secs" -timeout=30 "$@" build-fuzz/fuzz/corpus
