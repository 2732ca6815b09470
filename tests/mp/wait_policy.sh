#!/bin/sh
# How long a waiting rank spins, as a real job decides it (core/communicator.cc; the init log
# names the count and why): ranks bound by tutti-run to CPUs of their own spin 100000 passes,
# unbound ranks 1000 with the adaptive budget, more ranks than CPUs 0, and TUTTI_SPIN_COUNT wins
# over all of them. Each job also runs a checked allreduce. Needs 2 CPUs (exit 77 otherwise).
# Usage: wait_policy.sh BINDIR
set -u
cpus=$(nproc)
[ "$cpus" -ge 2 ] || { echo "wait_policy: needs 2 CPUs, this machine has $cpus"; exit 77; }
fail=0
# expect N BIND EXPECTED-COUNT EXPECTED-REASON [ENV...]
expect() {
  n=$1 bind=$2 count=$3 reason=$4
  shift 4
  out=$(env "$@" TUTTI_DEBUG=INFO TUTTI_DEBUG_SUBSYS=INIT "$BIN/tutti-run" -n "$n" --bind-to "$bind" \
        -- "$BIN/tutti-perf" -b 8 -e 64K -f 64 -n 3 -w 1 -c 1 --transport shm 2>&1)
  rc=$?
  got=$(echo "$out" | grep -c "init: a waiting rank spins $count passes, then yields ($reason)")
  wrong=$(echo "$out" | sed -n 's/.*Out of bounds values : \([0-9]*\).*/\1/p' | sort -u | tr '\n' ' ')
  echo "$n ranks, --bind-to $bind $*: $got of $n ranks spin $count ($reason); exit $rc; wrong: $wrong"
  if [ "$rc" -ne 0 ] || [ "$got" -ne "$n" ] || [ "$wrong" != "0 " ]; then echo "$out"; fail=1; fi
}
BIN=$1
expect 2 core 100000 "bound to CPUs of its own"
expect 2 none 1000 "CPUs shared, adaptive"
expect $((cpus + 1)) none 0 "ranks outnumber CPUs"
expect 2 core 7 "TUTTI_SPIN_COUNT" TUTTI_SPIN_COUNT=7
exit $fail
