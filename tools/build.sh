#!/usr/bin/env bash
# Configures and builds tutti in build/ (or $TUTTI_BUILD_DIR). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${TUTTI_BUILD_DIR:-build}"
jobs="${TUTTI_JOBS:-$(nproc)}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cmake --build "$build" -j "$jobs"
