#!/bin/bash
# Builds the libFuzzer targets with clang (when available) and runs each for a fixed number of
# iterations. usage: run_fuzz.sh [RUNS_PER_TARGET] (default 100000). Exit 0 when clang is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-100000}
CXX=$(command -v clang++-14 || command -v clang++ || true)
if [ -z "$CXX" ]; then echo "run_fuzz: no clang++, fuzzing skipped"; exit 0; fi
BUILD=${TUTTI_FUZZ_BUILD_DIR:-build-fuzz}
cmake -S tests/fuzz -B "$BUILD" -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$BUILD" -j"${TUTTI_JOBS:-2}" >/dev/null
for bin in "$BUILD"/fuzz_*; do
  [ -x "$bin" ] || continue
  start=$(date +%s)
  "$bin" -runs="$RUNS" -max_len=512 -rss_limit_mb=512 -print_final_stats=0 2>"$BUILD/$(basename "$bin").log" ||
    { echo "run_fuzz: $(basename "$bin") FAILED"; tail -40 "$BUILD/$(basename "$bin").log"; exit 1; }
  echo "run_fuzz: $(basename "$bin"): $RUNS runs ok ($(( $(date +%s) - start )) s)"
done
