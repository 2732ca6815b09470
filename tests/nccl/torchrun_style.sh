#!/bin/sh
# Runs N copies of a program with the variables torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK,
# LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), as `torchrun --standalone --nproc-per-node N` would,
# and fails when any copy fails or the job outlives 200 s.
# Usage: torchrun_style.sh N MASTER_PORT program args...
set -u
n=$1; port=$2; shift 2
pids=""
r=0
while [ "$r" -lt "$n" ]; do
  RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=$port timeout 200 "$@" &
  pids="$pids $!"
  r=$((r + 1))
done
rc=0
for p in $pids; do
  wait "$p" || rc=1
done
exit $rc
