#!/bin/bash
# tutti-run --emulate-hosts as a user runs it: 2 hosts x 2 ranks, links shaped to 1 Gbit/s, a
# checked allreduce sweep. It must pass with 0 wrong values over shm inside a host and tcp
# across, on node0 and node1, and leave no namespace behind.
# usage: tutti_run.sh TUTTI_RUN TUTTI_PERF
set -u
RUN=$1 PERF=$2
HOSTS=$RUN  # run_hosts runs "$HOSTS" ARGS...
. "$(dirname "$0")/common.sh"
run_hosts --emulate-hosts 2x2 --link rate=1gbit --timeout 120 -- "$PERF" -b 8 -e 4M -f 8 -c 1
echo "tutti-run exited $rc after $elapsed_s s"
[ "$rc" -eq 0 ] || fail "the job failed (exit $rc)"
grep -q "^\[0\] # Out of bounds values : 0 OK" "$out" || fail "no '0 OK' line"
grep -q "^\[0\] # Using transports: 0:self 1:shm 2:tcp 3:tcp$" "$out" || fail "transports line"
grep -qE "^\[0\] #  Rank +3 Pid +[0-9]+ on +node1 " "$out" || fail "rank 3 is not on node1"
grep -qE "^hosts\.sh: host 1: .*link rate=1gbit$" "$out" || fail "host 1's link is not shaped"
check_no_leftovers hosts
echo "PASS: tutti-run --emulate-hosts 2x2"
