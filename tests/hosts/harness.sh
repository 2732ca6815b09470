#!/bin/bash
# The emulated-host harness itself (tools/hosts.sh): what each rank gets (rank, local rank and
# size, root address, interface, secret, host name, its address), the exit status of the first
# failing rank, the timeout, teardown after a failure, a timeout, SIGTERM and SIGKILL (no
# namespace or process left), and link shaping: rate= limits the bandwidth tutti-perf measures,
# loss= installs the drop rules.
# usage: harness.sh HOSTS_SH TUTTI_PERF SUBNET
set -u
HOSTS=$1 PERF=$2 SUBNET=$3
. "$(dirname "$0")/common.sh"
tag=harness

# 1. Environment, placement and addresses: 3 hosts x 2 ranks.
run_hosts --emulate 3x2 --subnet "$SUBNET" --name $tag --port 29611 -- sh -c \
  'echo "env $TUTTI_RANK $TUTTI_NRANKS $TUTTI_LOCAL_RANK $TUTTI_LOCAL_SIZE $TUTTI_COMM_ID $TUTTI_SOCKET_IFNAME $TUTTI_HOSTS_HOST $(cat /proc/sys/kernel/hostname) $(ip -4 -o addr show dev eth0 | awk "{print \$4}") secret=$TUTTI_COMM_SECRET"'
[ "$rc" -eq 0 ] || fail "a trivial job failed (exit $rc)"
for r in 0 1 2 3 4 5; do
  h=$((r / 2))
  want="[$r] env $r 6 $((r % 2)) 2 $SUBNET.1:29611 eth0 $h node$h $SUBNET.$((h + 1))/24 secret="
  grep -qF "$want" "$out" || fail "rank $r: expected a line starting '$want'"
done
[ "$(grep -o 'secret=[0-9a-f]*' "$out" | sort -u | wc -l)" -eq 1 ] || fail "the ranks got different secrets"
grep -qE 'secret=[0-9a-f]{16}$' "$out" || fail "the secret is not 16 hex digits"
check_no_leftovers $tag
echo "ok: environment and placement"

# 2. The first failing rank's status is the harness's; the others are stopped after --grace.
run_hosts --emulate 2x2 --subnet "$SUBNET" --name $tag --grace 1 -- sh -c \
  'case $TUTTI_RANK in 2) sleep 0.5; exit 3 ;; 1) sleep 1; kill -SEGV $$ ;; *) sleep 30 ;; esac'
[ "$rc" -eq 3 ] || fail "exit $rc, expected 3 (rank 2's)"
grep -q "the first rank to fail: rank 2 (host 1), exited with code 3" "$out" || fail "rank 2 not named first"
grep -qE "rank 1 \(host 0\) was killed by signal 11 \(SEGV\)" "$out" || fail "rank 1's SIGSEGV not reported"
awk -v t="$elapsed_s" 'BEGIN { exit !(t < 10) }' || fail "took $elapsed_s s: the sleepers were not stopped"
check_no_leftovers $tag
echo "ok: first failure ($elapsed_s s)"

# 3. The timeout: 124, every rank killed.
run_hosts --emulate 2x1 --subnet "$SUBNET" --name $tag --timeout 1 -- sleep 60
[ "$rc" -eq 124 ] || fail "exit $rc after the timeout, expected 124"
check_no_leftovers $tag
echo "ok: timeout"

# 4. SIGTERM and SIGKILL to the harness: no namespace and no rank process left (after SIGKILL,
# the next run removes what the dead one left).
for sig in TERM KILL; do
  nap="600.$$"  # the ranks are the processes whose command line is exactly "sleep $nap"
  count() { pgrep -f -c -- "^sleep $nap\$"; }
  "$HOSTS" --emulate 2x1 --subnet "$SUBNET" --name $tag -- sleep "$nap" >"$out" 2>&1 &
  harness_pid=$!
  for _ in $(seq 1 100); do
    [ "$(count)" -ge 2 ] && break
    sleep 0.1
  done
  [ "$(count)" -eq 2 ] || fail "$sig: expected 2 rank processes, found $(count)"
  kill -"$sig" "$harness_pid"
  { wait "$harness_pid"; } 2>/dev/null
  hrc=$?
  harness_pid=""
  if [ "$sig" = KILL ]; then
    run_hosts --emulate 1x1 --subnet "$SUBNET" --name $tag -- true
    grep -q "removed tutti-$tag-[0-9]*-h0, left by process" "$out" || fail "KILL: the leftovers were not removed"
  else
    [ "$hrc" -eq 143 ] || fail "TERM: exit $hrc, expected 143"
  fi
  for _ in $(seq 1 30); do
    [ "$(count)" -eq 0 ] && break
    sleep 0.1
  done
  [ "$(count)" -eq 0 ] || fail "$sig: rank processes left: $(pgrep -f -a -- "^sleep $nap\$")"
  check_no_leftovers $tag
  echo "ok: SIGNAL $sig"
done

# 5. Shaping: loss= installs a drop rule each way; rate=100mbit caps a 4 MiB allreduce of 2
# hosts at 12.5 MB/s of bus bandwidth (tbf's burst lets a little more through).
run_hosts --emulate 2x1 --subnet "$SUBNET" --name $tag --link rate=100mbit,loss=0.5% -- sh -c \
  '"$0" "$@" || exit; [ "$TUTTI_RANK" = 1 ] || { tc qdisc show dev eth0; iptables -w -S; }' \
  "$PERF" --coll allreduce -b 4M -e 4M -n 3 -w 1 -c 1
[ "$rc" -eq 0 ] || fail "the shaped job failed (exit $rc)"
grep -qE "^\[0\] qdisc tbf .* rate 100Mbit" "$out" || fail "no tbf qdisc at 100Mbit on eth0"
[ "$(grep -cE '^\[0\] -A (INPUT -i|OUTPUT -o) eth0 -m statistic --mode random --probability 0.00(5|49)' "$out")" -eq 2 ] ||
  fail "expected two drop rules with probability 0.005"
busbw=$(sed -n 's/^\[0\] # Avg bus bandwidth *: //p' "$out")
echo "busbw at 100mbit: $busbw GB/s"
awk -v b="$busbw" 'BEGIN { exit !(b > 0.003 && b < 0.016) }' || fail "busbw $busbw GB/s is not near 0.0125"
check_no_leftovers $tag
echo "PASS: harness"
