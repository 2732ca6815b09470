#!/bin/bash
# Builds the device cliques' protocol test (tests/unit/clique_test.cc: both cliques on emulated
# streams, CPU threads only) with ThreadSanitizer and runs it: a data race or a lock-order
# inversion in core/device fails the run. usage: run_tsan.sh (build dir: $TUTTI_TSAN_BUILD_DIR,
# default build-tsan). CUDA and ibverbs are left out of this build: the test needs neither.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${TUTTI_TSAN_BUILD_DIR:-build-tsan}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTUTTI_WITH_CUDA=OFF -DTUTTI_WITH_IB=OFF \
  -DTUTTI_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS="-fsanitize=thread -O1 -g" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  >/dev/null
cmake --build "$BUILD" -j"${TUTTI_JOBS:-2}" --target clique_test >/dev/null
start=$(date +%s)
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" "$BUILD/bin/clique_test" \
  > "$BUILD/clique_test.log" 2>&1 ||
  { echo "run_tsan: clique_test FAILED under ThreadSanitizer"; tail -60 "$BUILD/clique_test.log"; exit 1; }
echo "run_tsan: clique_test passed under ThreadSanitizer ($(( $(date +%s) - start )) s):" \
  "$(grep -E "^All tests passed" "$BUILD/clique_test.log")"
