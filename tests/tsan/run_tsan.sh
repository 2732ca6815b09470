#!/bin/bash
# Builds the tests that exercise threads with ThreadSanitizer and runs them: a data race or a
# lock-order inversion fails the run. usage: run_tsan.sh (build dir: $TUTTI_TSAN_BUILD_DIR,
# default build-tsan). CUDA and ibverbs are left out of this build: the tests need neither.
#   clique_test           the device cliques' protocols on emulated streams (CPU threads only)
#   peer_test             the peer interpreter's FIFO protocols in its host emulator (ranks and
#                         channels as threads), every 5th case of its sweeps
#   peer_executor_test    the peer executor on an emulated device (streams as worker threads)
#   peer_process_test     the same with ranks in forked processes (each process's threads: its
#                         ranks, their streams and channels, attaching to the group at once)
#   collectives_test      asynchronous Work: calls queued on the progress thread, waited on from
#                         the caller ("asynchronous Work ...")
#   fault_hang_test       abort from another thread, the SIGUSR1 hang report (signal handler and
#                         watcher thread), a peer dying under queued async calls
#   nccl_prog_own fork 3  libnccl.so.2's whole suite: groups over several communicators of one
#                         process (ncclCommInitAll, grouped split), nonblocking communicators on
#                         the per-communicator worker, ncclCommAbort from another thread
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${TUTTI_TSAN_BUILD_DIR:-build-tsan}
start=$(date +%s)
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTUTTI_WITH_CUDA=OFF -DTUTTI_WITH_IB=OFF \
  -DTUTTI_BUILD_BENCH=OFF -DTUTTI_BUILD_PYTHON=OFF -DCMAKE_CXX_FLAGS="-fsanitize=thread" \
  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  >/dev/null
cmake --build "$BUILD" -j"${TUTTI_JOBS:-2}" \
  --target clique_test peer_test peer_executor_test peer_process_test collectives_test \
  fault_hang_test nccl_prog_own >/dev/null
echo "run_tsan: built in $(( $(date +%s) - start )) s"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
# name, then the command (Catch2 test names select the cases that run threads).
run() {
  local name=$1 t0
  shift
  t0=$(date +%s)
  "$@" > "$BUILD/$name.log" 2>&1 ||
    { echo "run_tsan: $name FAILED under ThreadSanitizer"; tail -80 "$BUILD/$name.log"; exit 1; }
  echo "run_tsan: $name passed under ThreadSanitizer ($(( $(date +%s) - t0 )) s)"
}
run clique_test "$BUILD/bin/clique_test"
TUTTI_PEER_TEST_STRIDE=5 run peer_test "$BUILD/bin/peer_test"
run peer_executor_test "$BUILD/bin/peer_executor_test"
run peer_process_test "$BUILD/bin/peer_process_test"
# One comma-separated spec per binary; --warn NoTests fails a spec that matches nothing.
run collectives_test "$BUILD/bin/collectives_test" --warn NoTests \
  "asynchronous Work completes in issue order with correct data"
run fault_hang_test "$BUILD/bin/fault_hang_test" --warn NoTests \
  "SIGUSR1 makes every rank write its hang report,abort from another thread*,a peer that dies*"
run nccl_prog_own "$BUILD/bin/nccl_prog_own" fork 3
echo "run_tsan: all passed ($(( $(date +%s) - start )) s)"
