#!/bin/sh
# The TUNING log of a real job: TUTTI_DEBUG=INFO TUTTI_DEBUG_SUBSYS=TUNING logs one line per rank
# and new call shape, listing every candidate with its prediction and the winner. An 8-byte
# allreduce run out of place and in place on 2 ranks is 1 decision x 2 ranks = 2 lines (the choice
# may not depend on in-place, which ranks need not share); repeated calls (and tutti-perf's
# algorithmFor) add none. Switching between the selector and a forced algorithm (tutti-perf
# --algo auto,ring, 3 rounds: setAlgorithm before every timing) decides each once per rank: the
# decisions are cached per override, not simulated again after every switch.
# Usage: tuning_log.sh BINDIR
set -u
out=$(TUTTI_DEBUG=INFO TUTTI_DEBUG_SUBSYS=TUNING "$1/tutti-run" -n 2 -- \
      "$1/tutti-perf" -b 8 -e 8 -n 3 -w 1 2>&1) || { echo "$out"; exit 1; }
echo "$out"
shape='\[TUNING\].*allreduce bytes=8 count=2 nranks=2:.* ring=[0-9.]* .*-> [a-z_]* [0-9.]*us'
lines=$(echo "$out" | grep -c "$shape (model)")
echo "TUNING decision lines: $lines (expected 2)"
test "$lines" -eq 2 || exit 1

out=$(TUTTI_DEBUG=INFO TUTTI_DEBUG_SUBSYS=TUNING "$1/tutti-run" -n 2 -- \
      "$1/tutti-perf" -b 8 -e 8 -n 3 -w 1 --algo auto,ring --rounds 3 2>&1) || { echo "$out"; exit 1; }
echo "$out"
model=$(echo "$out" | grep -c "$shape (model)")
forced=$(echo "$out" | grep -c "$shape (forced by setAlgorithm")
echo "with --algo auto,ring --rounds 3: $model model and $forced forced decision lines (expected 2 and 2)"
test "$model" -eq 2 && test "$forced" -eq 2
