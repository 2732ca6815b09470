#!/bin/sh
# tutti-perf --validate on 2 ranks: every allreduce algorithm that runs on one host (6 forced and
# the selector: 7 rows per size) at 3 sizes gets a measured/predicted row, and the summary counts
# all 21 rows and the 3 cases (the selector's rows, and its choice timed forced).
# Usage: validate.sh BINDIR
set -u
out=$("$1/tutti-run" -n 2 -- "$1/tutti-perf" --validate -b 8 -e 512 -f 8 -n 5 -w 1 --rounds 1 \
      2>&1) || { echo "$out"; exit 1; }
echo "$out"
rows=$(echo "$out" | grep -cE '^ +(8|64|512) +float +sum +[a-z_]+ +(auto|forced) +[0-9.]+ +[0-9.]+ +[0-9.]+')
echo "validation rows: $rows (expected 21)"
test "$rows" -eq 21 || exit 1
echo "$out" | grep -qE '^# validation: [0-9]+ of 21 rows within 20% of the prediction' || exit 1
echo "$out" | grep -qE '^# validation: the selector within 15% of the best forced algorithm at [0-3] of 3 cases' || exit 1
echo "$out" | grep -qE '^# validation: the selector.s choice, timed forced, within 15% of the best at [0-3] of 3 cases' || exit 1
