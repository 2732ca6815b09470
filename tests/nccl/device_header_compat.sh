#!/bin/sh
# Compiles tests/nccl/device_header_compat.cc: tutti's include/tutti/nccl.h, seen as <nccl.h>,
# beside NVIDIA's nccl_device.h, with the host compiler (MODE=host) or nvcc (MODE=nvcc), with
# TUTTI_NCCL_COMPAT_2_28 too, and (nvcc only) with nccl_device.h included first: in that order
# NVIDIA's own headers need the CUDA runtime header that nvcc includes implicitly (with g++ they
# fail even beside NVIDIA's nccl.h: nccl_device/utility.h uses size_t before anything declares it). MODE=host also compiles tutti's own
# <tutti/nccl_device_host.h> as C99 and C++11 (it needs no NVIDIA header).
# Usage: device_header_compat.sh MODE TUTTI_INCLUDE_DIR WORK_DIR COMPILER [NVIDIA_INCLUDE_DIR]
# Exit 77 (skipped) when the compiler or NVIDIA's nccl_device.h is absent.
set -u
mode=$1; inc=$2; work=$3; cc=$4; nvinc=${5:-/usr/local/cuda/include}
src=$(dirname "$0")/device_header_compat.cc
mkdir -p "$work/as_nccl" || exit 1
cp "$inc/tutti/nccl.h" "$work/as_nccl/nccl.h" || exit 1  # what a build pointing NCCL_HOME at tutti sees
fail=0
run() { echo "+ $*"; "$@" || fail=1; }

if [ "$mode" = host ]; then
  command -v "$cc" >/dev/null 2>&1 || { echo "skipped: no host compiler '$cc'"; exit 77; }
  printf '#include <tutti/nccl_device_host.h>\nint main(void) { ncclTeam_t t = ncclTeamWorld(NULL); return t.nRanks + ncclLLA2ACalcSlots(1, 1); }\n' > "$work/own.c"
  cp "$work/own.c" "$work/own.cc"
  run gcc -std=c99 -Wall -Wextra -Werror -I"$inc" -fsyntax-only "$work/own.c"
  run "$cc" -std=c++11 -Wall -Wextra -Werror -I"$inc" -fsyntax-only "$work/own.cc"
fi
[ -f "$nvinc/nccl_device.h" ] || {
  echo "skipped: $nvinc/nccl_device.h not found (NVIDIA's device API headers: CUDA 13 toolkit or NCCL 2.28+)"
  [ $fail -eq 0 ] && exit 77; exit 1; }
for defs in "" "-DTUTTI_NCCL_COMPAT_2_28" "-DTUTTI_TEST_DEVICE_FIRST"; do
  if [ "$mode" = nvcc ]; then
    command -v "$cc" >/dev/null 2>&1 || { echo "skipped: nvcc '$cc' not found"; exit 77; }
    run "$cc" -std=c++17 $defs -I"$work/as_nccl" -I"$nvinc" -x cu -c "$src" -o "$work/compat.o"
  elif [ "$defs" != "-DTUTTI_TEST_DEVICE_FIRST" ]; then
    run "$cc" -std=c++17 -Wall $defs -I"$work/as_nccl" -I"$nvinc" -fsyntax-only "$src"
  fi
done
[ $fail -eq 0 ] && echo ok
exit $fail
