#!/bin/sh
# tutti-sched predict on a machine described by a topology file (topology/examples/tcp-4host.json:
# 4 hosts x 4 ranks): every row's selector column names the cheapest algorithm of the row, the
# hierarchical algorithms take part, the summary line covers every size; bad arguments exit 2
# naming the argument, a missing file exits 1 naming it.
# Usage: tutti_sched_predict.sh <tutti-sched> <source dir>
set -u
sched=$1
topo=$2/topology/examples/tcp-4host.json
fail() { echo "FAIL: $*"; exit 1; }

out=$("$sched" predict --coll allreduce --topo "$topo" --sizes 8:16M:8) || fail "predict exited $?: $out"
echo "$out"
echo "$out" | head -1 | grep -q "nranks=16 .*(4 hosts): shm .* tcp (25 us" || fail "header"
echo "$out" | sed -n 2p | grep -q "hierarchical_leader" || fail "hierarchical algorithms missing"
# Rows: the selector (last column) must be the algorithm with the lowest predicted time.
echo "$out" | awk '
  NR == 2 { for (i = 3; i < NF; ++i) name[i] = $i; next }
  /^ *[0-9]/ {
    best = ""; bt = 0
    for (i = 3; i < NF; ++i) if ($i != "-" && (best == "" || $i + 0 < bt)) { bt = $i + 0; best = name[i] }
    if (best != $NF) { print "row " $1 ": cheapest " best " but selector " $NF; bad = 1 }
    rows++
  }
  END { if (rows != 8) { print rows " rows, want 8"; bad = 1 } exit bad }' || fail "selector column"
sel=$(echo "$out" | grep "^# selector: ") || fail "no summary line"
echo "$sel" | grep -q "^# selector: [a-z_]* 8 B\.\." || fail "summary does not start at 8 B: $sel"
echo "$sel" | grep -q "16 MiB$" || fail "summary does not end at 16 MiB: $sel"
echo "$sel" | grep -q "hierarchical" || fail "no hierarchical choice across 4 hosts: $sel"

# A link file on top: a 1000x slower tcp moves the large sizes to whatever crosses hosts least.
lf=$(mktemp)
echo '{"links": {"tcp": {"bandwidth_gbps": 0.0028}}}' > "$lf"
slow=$("$sched" predict --coll allreduce --topo "$topo" --sizes 64M --link-file "$lf") || fail "link file: $slow"
rm -f "$lf"
echo "$slow" | head -1 | grep -q "tcp (25 us, 0.0028 GB/s)" || fail "link file not applied: $slow"

expect() {  # expect <exit code> <text in stderr> <args...>
  code=$1 text=$2; shift 2
  err=$("$sched" predict "$@" 2>&1 >/dev/null); rc=$?
  [ "$rc" = "$code" ] || fail "predict $*: exit $rc, want $code ($err)"
  echo "$err" | grep -q -- "$text" || fail "predict $*: '$err' lacks '$text'"
}
expect 2 "--nranks: .* places 16 ranks, got '3'" --coll allreduce --topo "$topo" --nranks 3
expect 2 "--link does not go with --topo" --coll allreduce --topo "$topo" --link tcp
expect 1 "/nonexistent.json" --coll allreduce --topo /nonexistent.json
expect 2 "--coll: unknown collective 'allreduc'" --coll allreduc --topo "$topo"
echo "tutti-sched predict --topo: ok"
