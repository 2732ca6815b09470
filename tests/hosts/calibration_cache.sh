#!/bin/bash
# A calibration cache holds no fit of the network between hosts: one written by an earlier job
# (a lossy or shaped link, TUTTI_CALIBRATE=1) used to be loaded by every later job on hosts of
# the same names, unchecked (with one rank per host there are no host-mates to check it). Here
# each emulated host's cache says tcp takes 100 ms a message and 1 MB/s; 2 hosts x 1 rank,
# calibration on by default, must predict their 8-byte allreduce in microseconds, not seconds,
# and still compute it right.
# usage: calibration_cache.sh TUTTI_RUN TUTTI_PERF
set -u
RUN=$1 PERF=$2
HOSTS=$RUN  # run_hosts runs "$HOSTS" ARGS...
. "$(dirname "$0")/common.sh"
dir=$(mktemp -d "${TMPDIR:-/tmp}/tutti-calib-cache.XXXXXX")
trap 'common_cleanup; rm -rf "$dir"' EXIT
for h in node0 node1; do
  cat > "$dir/calibration-$h-1r.json" <<'JSON'
{"links": {"copy_gbps": 40.0, "reduce_gbps": 15.0,
           "tcp": {"latency_us": 100000, "overhead_us": 2.0, "bandwidth_gbps": 0.001}}}
JSON
done
unset TUTTI_CALIBRATE TUTTI_TOPO_FILE TUTTI_LINK_FILE
export TUTTI_CALIBRATE_DIR=$dir
run_hosts --emulate-hosts 2x1 --timeout 60 -- "$PERF" -b 8 -e 8 -n 5 -w 1 -c 1
echo "tutti-run exited $rc after $elapsed_s s"
[ "$rc" -eq 0 ] || fail "the job failed (exit $rc)"
grep -q "^\[0\] # Out of bounds values : 0 OK" "$out" || fail "no '0 OK' line"
# The row: size count type redop root time algbw busbw #wrong (twice) algorithm pred.
pred=$(awk '$1 == "[0]" && $2 == 8 && $4 == "float" { print $(NF) }' "$out" | head -1)
echo "predicted 8-byte allreduce: $pred us"
awk -v p="$pred" 'BEGIN { exit !(p + 0 > 0 && p + 0 < 1000) }' ||
  fail "the prediction ($pred us) took the cached network fit"
check_no_leftovers hosts
echo "PASS: a cached network fit is not loaded"
