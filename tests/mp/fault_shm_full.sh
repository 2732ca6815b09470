#!/bin/bash
# /dev/shm too small: init fails with an error naming the segment size and the fixes, or, with
# TUTTI_SHM_FALLBACK=1, the job runs over tcp and its results are right. Runs in a private mount
# namespace with a 1 MiB tmpfs on /dev/shm; skipped (77) where that is not permitted.
# usage: fault_shm_full.sh TUTTI_RUN TUTTI_PERF
set -u
RUN=$1 PERF=$2
unshare -m sh -c 'mount -t tmpfs -o size=1M tmpfs /dev/shm' 2>/dev/null || {
  echo "SKIP: cannot mount a private /dev/shm (needs unshare -m and mount)"; exit 77; }
out=$(unshare -m sh -c "mount -t tmpfs -o size=1M tmpfs /dev/shm &&
  '$RUN' -n 4 --timeout 60 -- '$PERF' -b 8 -e 1K -f 4 -c 1" 2>&1)
rc=$?
echo "$out" | tail -5
[ $rc -ne 0 ] || { echo "FAIL: the job succeeded on a full /dev/shm"; exit 1; }
for want in "No space left on device" "bytes" "TUTTI_SHM_FALLBACK=1" "shm-size" "free in /dev/shm"; do
  echo "$out" | grep -q -- "$want" || { echo "FAIL: the error does not say '$want'"; exit 1; }
done
out=$(unshare -m sh -c "mount -t tmpfs -o size=1M tmpfs /dev/shm &&
  TUTTI_SHM_FALLBACK=1 '$RUN' -n 4 --timeout 60 -- '$PERF' -b 8 -e 1K -f 4 -c 1" 2>&1)
rc=$?
echo "$out" | tail -3
[ $rc -eq 0 ] || { echo "FAIL: TUTTI_SHM_FALLBACK=1 did not fall back (rc=$rc)"; exit 1; }
echo "$out" | grep -q "using tcp instead" || { echo "FAIL: no fallback warning"; exit 1; }
echo PASS
