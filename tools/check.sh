#!/usr/bin/env bash
# Installs the dependencies (plus Open MPI for the launcher test), builds (with the Python module,
# in a venv that tools/python_env.sh makes), runs the fuzzers, the ThreadSanitizer build of the
# threaded tests and the AddressSanitizer + UBSan build of the unit, mp and nccl tests, and runs
# the whole test suite with ctest (the Python module's pytest suite is the test python.pytest).
# Tests labelled gpu or ib skip (exit 77) on machines without the device.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install_deps.sh openmpi-bin
# The CUDA code for sm_90 alone (tools/build.sh's default is sm_80 and sm_90): the same sources,
# compiled in half the time, and no GPU runs them here.
# shellcheck disable=SC2046  # python_env.sh prints separate CMake arguments
./tools/build.sh $(./tools/python_env.sh) -DCMAKE_CUDA_ARCHITECTURES=90
# libFuzzer targets of every setup-message parser, a fixed number of runs each (needs clang).
./tests/fuzz/run_fuzz.sh 100000
# The tests that run threads (device cliques, async Work and the progress thread, abort from
# another thread, the hang-report signal, NCCL groups over several communicators) under
# ThreadSanitizer; no GPU needed.
./tests/tsan/run_tsan.sh
# The unit, mp and nccl tests under AddressSanitizer + UndefinedBehaviorSanitizer, leaks checked.
./tests/sanitize/run_asan.sh
cd "${TUTTI_BUILD_DIR:-build}"
# The unit tests (one process each, no timing asserted beyond seconds) two at a time; the others
# (ranks forked 2-8 on 2 cores, namespaces, benchmarks' own checks) one at a time.
ctest --output-on-failure --timeout 900 -j2 -L '^unit$' "$@"
ctest --output-on-failure --timeout 900 -LE '^unit$' "$@"
