#!/bin/sh
# libnccl.so.2 opens hwloc at run time (topology/hwloc_loader.cc). With FAKE_DIR first on
# LD_LIBRARY_PATH, dlopen("libhwloc.so.15") finds a library without hwloc's functions, as on a
# machine where hwloc is unusable: the library must say so (NCCL_DEBUG=INFO), fall back to a bare
# host topology, and every collective of the program must still pass.
# Usage: no_hwloc.sh nccl_prog FAKE_DIR
set -u
prog=$1; fake=$2
out=$(LD_LIBRARY_PATH="$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" NCCL_DEBUG=INFO \
      timeout 200 "$prog" fork 3 --quick 2>&1) || { echo "$out" | tail -20; echo FAILED; exit 1; }
fail=0
echo "$out" | grep -q "libhwloc.so.15 has API version 0x0, tutti was built for" ||
  { echo "no line saying that the fake libhwloc.so.15 was not used"; fail=1; }
echo "$out" | grep -q "topology probe failed, using a bare host" ||
  { echo "no line saying that the probe fell back to a bare host"; fail=1; }
[ "$(echo "$out" | grep -c 'passed (0 failed checks)')" -eq 3 ] ||
  { echo "not every rank passed:"; echo "$out" | grep -E 'passed|FAILED'; fail=1; }
[ $fail -eq 0 ] && echo ok || echo "$out" | grep -iE "hwloc|topolog" | head
exit $fail
