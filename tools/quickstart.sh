#!/usr/bin/env bash
# New-user entry point: install what is missing, build in build/, and run the main job: a float32
# allreduce sweep (8 B .. 64 MiB) on host memory across 4 local processes, every size verified.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install_deps.sh
./tools/build.sh
echo
echo "+ build/bin/tutti-run -n 4 -- build/bin/tutti-perf -b 8 -e 64M -f 4 -c 1"
exec build/bin/tutti-run -n 4 -- build/bin/tutti-perf -b 8 -e 64M -f 4 -c 1
