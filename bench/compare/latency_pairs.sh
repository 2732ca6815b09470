#!/bin/bash
# File: bench/compare/latency_pairs.sh
# The 2-rank 8-byte float32 sum allreduce over shared memory: Open MPI and tutti launched in
# turn, ROUNDS times (default 4), each round between two readings of tutti-xcore-probe, so every
# ratio is taken in one vCPU placement (docs/PERFORMANCE.md, "How to reproduce"). Per round it prints
#   <probe before> | ompi_us=A tutti_us=B tutti_latency_min_ns=C | after: <probe after>
# A and B: the peers' harness (mpi_coll_perf / tutti_coll_perf, -b 8 -e 8 -T 0.5), which prints
# two decimals; C: tutti-latency's fastest batch in ns. Needs the binaries of a
# bench/compare_peers.sh run (build/compare-peers/bin) and of build/bin.
# Usage: [ROUNDS=N] bench/compare/latency_pairs.sh      (run from the repository root)
set -u
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
B=build/compare-peers/bin
for f in "$B/mpi_coll_perf.openmpi" "$B/tutti_coll_perf" build/bin/tutti-xcore-probe \
         build/bin/tutti-latency build/bin/tutti-run; do
  [ -x "$f" ] || { echo "latency_pairs.sh: $f is missing (run bench/compare_peers.sh --quick and build tutti first)" >&2; exit 2; }
done
for ((i = 1; i <= ${ROUNDS:-4}; i++)); do
  p=$(build/bin/tutti-xcore-probe)
  o=$(timeout 120 mpirun.openmpi -np 2 "$B/mpi_coll_perf.openmpi" -b 8 -e 8 -T 0.5 -o allreduce 2>&1 |
      awk '$1 == 8 {print $6}')
  t=$(timeout 120 build/bin/tutti-run -n 2 -- "$B/tutti_coll_perf" -b 8 -e 8 -T 0.5 -o allreduce 2>&1 |
      awk '$1 == 8 {print $6}')
  l=$(timeout 120 build/bin/tutti-run -n 2 -- bash -c \
      'exec taskset -c $TUTTI_LOCAL_RANK build/bin/tutti-latency 2 5 200000' |
      sed -n 's/.*min_ns=\([0-9.]*\).*/\1/p')
  q=$(build/bin/tutti-xcore-probe)
  echo "$p | ompi_us=${o:-?} tutti_us=${t:-?} tutti_latency_min_ns=${l:-?} | after: $q"
done
