#!/bin/bash
# Kills a random rank (SIGKILL) in the middle of a `tutti-run -n 4 -- tutti-perf` sweep with
# TUTTI_TIMEOUT=10 and checks: tutti-run exits nonzero within the timeout + 2 s; every surviving
# rank printed an error naming the killed rank; no rank process is left.
# usage: fault_perf_kill.sh TUTTI_RUN TUTTI_PERF TRANSPORT [SEED]
set -u
RUN=$1 PERF=$2 TRANSPORT=$3
RANDOM=${4:-$$}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; echo "---- output ----"; cat "$out"; exit 1; }

TUTTI_TIMEOUT=10 TUTTI_TRANSPORTS=$TRANSPORT "$RUN" -n 4 --tag-output --timeout 120 -- \
  "$PERF" -b 8 -e 256M -f 2 -n 20 >"$out" 2>&1 &
runpid=$!
# Wait until the sweep reports results (init done), bounded.
for _ in $(seq 1 300); do
  grep -q "float" "$out" && break
  kill -0 $runpid 2>/dev/null || fail "tutti-run ended before the sweep started"
  sleep 0.1
done
grep -q "float" "$out" || { kill $runpid; fail "no results after 30 s"; }
sleep 0.$((RANDOM % 10))
mapfile -t ranks < <(pgrep -P $runpid)
[ ${#ranks[@]} -eq 4 ] || { kill $runpid; fail "expected 4 rank processes, found ${#ranks[@]}"; }
victim_pid=${ranks[$((RANDOM % 4))]}
victim=$(tr '\0' '\n' </proc/$victim_pid/environ | sed -n 's/^TUTTI_RANK=//p')
t0=$(date +%s%N)
kill -9 "$victim_pid"
wait $runpid
rc=$?
t1=$(date +%s%N)
elapsed_ms=$(((t1 - t0) / 1000000))
echo "transport=$TRANSPORT killed rank $victim (pid $victim_pid); tutti-run exited $rc after $elapsed_ms ms"
[ $rc -ne 0 ] || fail "tutti-run exited 0"
[ $elapsed_ms -lt 12000 ] || fail "took $elapsed_ms ms (limit 12000)"
for r in 0 1 2 3; do
  [ "$r" = "$victim" ] && continue
  line=$(grep "^\[$r\] tutti-perf: rank $r:" "$out" | head -1)
  [ -n "$line" ] || fail "rank $r printed no error"
  echo "$line" | grep -q "RemoteError" || fail "rank $r: not a RemoteError: $line"
  echo "$line" | grep -q "rank $victim (" || fail "rank $r does not name rank $victim: $line"
done
for p in "${ranks[@]}"; do
  if kill -0 "$p" 2>/dev/null; then fail "rank process $p is still alive"; fi
done
echo "PASS"
