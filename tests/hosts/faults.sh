#!/bin/bash
# Faults that only a network has, on emulated hosts (tools/hosts.sh), each bounded in time:
#   link_down  host 1's link goes down mid-run: every rank exits nonzero within TUTTI_TIMEOUT
#              + 5 s of the cut, its error naming a rank on the other side, or a peer of its own
#              host whose error does
#   loss       3% of the packets into and out of every host are dropped: results still exact
#   link_flap  host 1's link is down for 3 s of an 8 s soak, within TUTTI_TIMEOUT: the job passes
#   host_dies  all ranks of host 1 (of 3) are killed at once mid-run: every other rank exits
#              nonzero within TUTTI_TIMEOUT + 5 s, naming a rank of host 1 (likewise)
#   intruder   while rank 1 is late, a process on a host outside the job joins as rank 1 with
#              a wrong secret: it is refused (and told so), the root names its address, and
#              the job then passes
# usage: faults.sh HOSTS_SH TUTTI_PERF CASE SUBNET
set -u
HOSTS=$1 PERF=$2 CASE=$3 SUBNET=$4
. "$(dirname "$0")/common.sh"
timeout_s=10
export TUTTI_TIMEOUT=$timeout_s
tag="f${CASE//_/}"
# Each rank logs "init: rank r/N on nodeH connected: ..." when its connections are up; the
# events count from rank 0's line, where the soak (a fixed duration of checked random cases)
# starts.
export TUTTI_DEBUG=INFO TUTTI_DEBUG_SUBSYS=INIT
started='init: rank 0/[0-9]+ on node0 connected:'

# "[r] tutti-perf: rank r: ..." is the line tutti-perf prints when a call fails.
error_line() { grep -E "^\[$1\] tutti-perf: rank $1:" "$out" | head -1; }

# The peers an error line names: "rank X (host nodeY)" -> "X Y", one per line.
named_peers() {
  grep -oE "rank [0-9]+ \(host node[0-9]+\)" | sed -E 's/rank ([0-9]+) \(host node([0-9]+)\)/\1 \2/'
}

# Every rank in $@ exited nonzero on its own (not stopped by the harness), within
# TUTTI_TIMEOUT + 5 s of the event at time $1, and printed an error that leads to a host in
# $bad_hosts (the one cut off or dead): it names a rank there, or a rank of its own host whose
# error does (followed transitively). A rank waiting on a live peer of its own host times out
# as that peer does and names it; the peer's error then names the rank it waited for.
check_ranks_failed() {  # t_event ranks...
  local t_event=$1 r line t_end
  shift
  for r in "$@"; do
    line=$(grep -E "^hosts\.sh: [0-9.]+ s: rank $r \(host [0-9]+\) " "$out" | head -1)
    [ -n "$line" ] || fail "no exit reported for rank $r"
    echo "$line" | grep -q "(stopped)" && fail "rank $r did not end on its own: $line"
    echo "$line" | grep -q "exited with code 0" && fail "rank $r exited 0: $line"
    t_end=$(echo "$line" | sed -E 's/^hosts\.sh: ([0-9.]+) s:.*/\1/')
    awk -v a="$t_event" -v b="$t_end" -v l=$((timeout_s + 5)) 'BEGIN { exit !(b - a <= l) }' ||
      fail "rank $r ended $t_end s after launch, more than $((timeout_s + 5)) s after $t_event s"
    line=$(error_line "$r")
    [ -n "$line" ] || fail "rank $r printed no error"
    echo "rank $r ended at $t_end s: $line"
    local todo=("$r") seen=" $r " found="" x peer host
    while [ ${#todo[@]} -gt 0 ] && [ -z "$found" ]; do
      x=${todo[0]}
      todo=("${todo[@]:1}")
      while read -r peer host; do
        [ -n "$peer" ] || continue
        if [[ " $bad_hosts " == *" $host "* ]]; then
          found="$x -> rank $peer (host node$host)"
          break
        fi
        if [[ $seen != *" $peer "* ]]; then
          seen+="$peer "
          todo+=("$peer")
        fi
      done < <(error_line "$x" | named_peers)
    done
    [ -n "$found" ] || fail "rank $r: no error on the way from it names a rank of host(s) $bad_hosts (ranks looked at:$seen)"
    [[ $found == "$r -> "* ]] || echo "  (rank $r names a live peer; the chain reaches the fault: $found)"
  done
}

case $CASE in
  link_down)
    run_hosts --emulate 2x2 --subnet "$SUBNET" --name $tag --timeout 90 --grace 60 \
      --at "$started" --cut 1@2 -- "$PERF" --soak 60 --seed 1 -b 8 -e 1M
    echo "harness exited $rc after $elapsed_s s"
    [ "$rc" -ne 0 ] || fail "the job passed although host 1 was cut off"
    t_cut=$(event_time "host 1: link down")
    [ -n "$t_cut" ] || fail "the link was never cut (did the sweep start?)"
    echo "host 1 cut off at $t_cut s"
    bad_hosts=1
    check_ranks_failed "$t_cut" 0 1
    bad_hosts=0
    check_ranks_failed "$t_cut" 2 3
    ;;
  loss)
    # Rank 0 of each host prints its host's drop counters after the sweep (the rank runs inside
    # the host's namespace): the loss must have happened.
    run_hosts --emulate 2x2 --subnet "$SUBNET" --name $tag --timeout 150 --link loss=3% -- \
      sh -c '"$0" "$@"; rc=$?; [ "$TUTTI_LOCAL_RANK" != 0 ] ||
             iptables -w -L -v -n -x | awk "/statistic/ { print \"dropped\", \$1 }"; exit $rc' \
      "$PERF" --coll allreduce -b 8 -e 2M -f 4 -c 1 -n 2 -w 1 -d int32,bfloat16 -o sum,max
    echo "harness exited $rc after $elapsed_s s"
    [ "$rc" -eq 0 ] || fail "the job failed under 3% loss (exit $rc)"
    grep -q "^\[0\] # Out of bounds values : 0 OK" "$out" || fail "no '0 OK' line"
    for r in 0 2; do
      drops=$(grep -E "^\[$r\] dropped [0-9]+" "$out" | awk '{ s += $3 } END { print s + 0 }')
      echo "host $((r / 2)): $drops packets dropped"
      [ "$drops" -gt 0 ] || fail "host $((r / 2)) dropped no packet: was the loss applied?"
    done
    ;;
  link_flap)
    export TUTTI_TIMEOUT=30 timeout_s=30
    run_hosts --emulate 2x2 --subnet "$SUBNET" --name $tag --timeout 120 --grace 60 \
      --at "$started" --cut 1@2 --restore 1@5 -- "$PERF" --soak 8 --seed 2 -b 8 -e 1M
    echo "harness exited $rc after $elapsed_s s"
    [ "$rc" -eq 0 ] || fail "the job failed although the link came back within the timeout"
    grep "^\[0\] # soak: PASS" "$out" || fail "no '# soak: PASS' line"
    t_up=$(event_time "host 1: link up")
    [ -n "$t_up" ] || fail "the link was never restored"
    t_end=$(event_time "rank 0 \(host 0\) exited")
    awk -v a="$t_up" -v b="$t_end" 'BEGIN { exit !(b > a) }' ||
      fail "the job ended ($t_end s) before the link came back ($t_up s): the outage missed it"
    ;;
  host_dies)
    run_hosts --emulate 3x2 --subnet "$SUBNET" --name $tag --timeout 90 --grace 60 \
      --at "$started" --kill-host 1@2 -- "$PERF" --soak 60 --seed 3 -b 8 -e 1M
    echo "harness exited $rc after $elapsed_s s"
    [ "$rc" -ne 0 ] || fail "the job passed although host 1 died"
    t_kill=$(event_time "host 1: killed its ranks")
    [ -n "$t_kill" ] || fail "host 1 was never killed (did the sweep start?)"
    for r in 2 3; do
      grep -qE "^hosts\.sh: [0-9.]+ s: rank $r \(host 1\) was killed by signal 9" "$out" ||
        fail "rank $r of host 1 was not killed by the harness"
    done
    bad_hosts=1
    check_ranks_failed "$t_kill" 0 1 4 5
    ;;
  intruder)
    unset TUTTI_DEBUG TUTTI_DEBUG_SUBSYS  # the root's warning is a BOOTSTRAP one
    # Rank 1 starts 4 s late; at 1 s host 2, which is not in the job, runs a rank 1 with another
    # secret against the root.
    run_hosts --emulate 2x1 --spare 1 --subnet "$SUBNET" --name $tag --timeout 90 \
      --exec "2@1:TUTTI_RANK=1 TUTTI_NRANKS=2 TUTTI_COMM_ID=\$TUTTI_HOSTS_ROOT \
              TUTTI_COMM_SECRET=0123456789abcdef $PERF -b 8 -e 8 -n 1" -- \
      sh -c '[ "$TUTTI_RANK" = 0 ] || sleep 4; exec "$0" "$@"' "$PERF" -b 8 -e 64K -f 8 -c 1
    echo "harness exited $rc after $elapsed_s s"
    intruder_addr="$SUBNET.3"
    grep -E "^hosts\.sh: [0-9.]+ s: host 2: exec exited with code [1-9]" "$out" ||
      fail "the intruder was not refused (it exited 0, or never ran)"
    grep -E "^\[h2\] .*refused rank 1: its UniqueId carries another secret" "$out" ||
      fail "the intruder was not told why it was refused"
    grep -E "^\[0\] .*rejected a connection from $intruder_addr:[0-9]+: it did not present the UniqueId's secret" "$out" ||
      fail "the root did not name the intruder's address $intruder_addr"
    [ "$rc" -eq 0 ] || fail "the job failed after refusing the intruder (exit $rc)"
    grep -q "^\[0\] # Out of bounds values : 0 OK" "$out" || fail "no '0 OK' line"
    ;;
  *) echo "unknown case $CASE"; exit 2 ;;
esac
check_no_leftovers "$tag"
echo "PASS: $CASE"
