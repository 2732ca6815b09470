#!/usr/bin/env bash
# Allreduce (float32 sum, shm): the selector's automatic choice next to every forced flat
# algorithm, 8 B to 256 MiB (x4 steps to 512 KiB, then x2), with 2 and 4 ranks on this machine; prints one table per
# rank count (out-of-place us per algorithm, the automatic choice and its ratio to the best forced
# time; "ok" when within 15%).
# Usage: bench/compare/selector_vs_forced.sh [outdir]   (after tools/build.sh)
# Env: NRANKS="2 4", SMALL_ITERS=200 (8 B..512 KiB), LARGE_ITERS=10 (1 MiB..256 MiB), ALGOS (the
# forced algorithms; default every flat allreduce algorithm; ALGOS="" re-runs only auto).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
T=$top/build/bin
out=${1:-/tmp/tutti-selector}
mkdir -p "$out"
algos=${ALGOS-$("$T/tutti-sched" list | awk '$1 == "allreduce" && $2 !~ /^hierarchical/ {print $2}')}
# The machine's cross-CPU handoff speed drifts on a VM (bench/xcore_probe.cc): each run's file
# records it before the run, and selector_table.py lists the range.
# With WAIT_FAST=1 (default) a run waits, up to 10 minutes, for the fast placement (handoff of at
# least FAST_GBPS=4 GB/s) and the probe after the run is kept too.
probe() {
  local line gbps tries=0
  while :; do
    line=$("$T/tutti-xcore-probe" 2>&1 || true)
    gbps=$(sed -n 's/.*handoff_gbps=\([0-9.]*\).*/\1/p' <<< "$line")
    [ "${WAIT_FAST:-1}" = 1 ] && [ -n "$gbps" ] && [ "$tries" -lt 30 ] &&
      awk -v g="$gbps" -v f="${FAST_GBPS:-4}" 'BEGIN {exit !(g < f)}' || break
    tries=$((tries + 1))
    echo "slow placement ($line): waiting 20 s" >&2
    sleep 20
  done
  echo "$line" > "$1.xcore"
}
after() { "$T/tutti-xcore-probe" > "$1.after.xcore" 2>&1 || true; }
for n in ${NRANKS:-2 4}; do
  for a in auto $algos; do
    opt=()
    calib=()
    [ "$a" = auto ] || opt=(--algo "$a")
    # The automatic choice runs on a calibrated model (TUTTI_CALIBRATE; CALIBRATE=0 turns it off).
    [ "$a" = auto ] && calib=(TUTTI_CALIBRATE="${CALIBRATE:-1}" TUTTI_CALIBRATE_DIR="$out/calibration")
    probe "$out/np${n}_${a}_small"
    env "${calib[@]}" "$T/tutti-run" -n "$n" -- "$T/tutti-perf" -b 8 -e 512K -f 4 -n "${SMALL_ITERS:-200}" -w 1000 \
      "${opt[@]}" -J "$out/np${n}_${a}_small.json" > "$out/np${n}_${a}_small.txt" 2>&1
    after "$out/np${n}_${a}_small"
    probe "$out/np${n}_${a}_large"
    env "${calib[@]}" "$T/tutti-run" -n "$n" -- "$T/tutti-perf" -b 1M -e 256M -f 2 -n "${LARGE_ITERS:-10}" -w 3 \
      "${opt[@]}" -J "$out/np${n}_${a}_large.json" > "$out/np${n}_${a}_large.txt" 2>&1
    after "$out/np${n}_${a}_large"
  done
done
python3 "$here/selector_table.py" "$out" ${NRANKS:-2 4}
