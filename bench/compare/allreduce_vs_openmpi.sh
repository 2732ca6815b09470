#!/usr/bin/env bash
# Float32 sum allreduce, tutti next to Open MPI (vader shared memory and tcp) in one run, same
# sizes, same columns. Builds the peers' MPI benchmark from ../shared/peers into /tmp.
# Usage: bench/compare/allreduce_vs_openmpi.sh [outdir]   (after tools/build.sh; needs openmpi-bin)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
peers=$(cd "$top/../shared/peers" && pwd)
out=${1:-/tmp/tutti-compare}
mkdir -p "$out" /tmp/tutti-peers-build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo
mpi=/tmp/tutti-peers-build/mpi_coll_perf.openmpi
mpicxx.openmpi -O3 -march=native -std=c++17 -I"$peers" -o "$mpi" "$peers/mpi_coll_perf.cpp"
cd "$out"
mpirun.openmpi -np 2 "$mpi" -b 8 -e 128M -f 4 -o allreduce > ompi_vader_np2.txt 2>&1
mpirun.openmpi -np 2 --mca btl tcp,self --mca btl_tcp_if_include lo "$mpi" -b 8 -e 128M -f 4 \
  -o allreduce > ompi_tcp_np2.txt 2>&1
mpirun.openmpi -np 4 --oversubscribe "$mpi" -b 8 -e 128M -f 4 -o allreduce > ompi_vader_np4.txt 2>&1
T=$top/build/bin
for n in 2 4; do
  for t in shm tcp; do
    "$T/tutti-run" -n $n -- "$T/tutti-perf" -b 8 -e 512K -f 4 -n 1000 -w 50 --transport $t \
      > tutti_${t}_np${n}_small.txt 2>&1
    "$T/tutti-run" -n $n -- "$T/tutti-perf" -b 2M -e 128M -f 4 -n 10 -w 2 --transport $t \
      > tutti_${t}_np${n}_large.txt 2>&1
  done
done
python3 "$here/join_tables.py"
