#!/bin/sh
# Runs an NCCL program under Open MPI's mpirun on this host only (loopback, oversubscribed, root
# allowed), forwarding the variables that select tutti's libnccl.so.2.
# Usage: mpirun_nccl.sh N program args...
set -u
n=$1; shift
command -v mpirun >/dev/null 2>&1 || { echo "skipped: mpirun not found"; exit 77; }
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo
exec timeout 240 mpirun -np "$n" --oversubscribe --allow-run-as-root --bind-to none \
  -x LD_LIBRARY_PATH -x TUTTI_EXPECT_LIB -x OMPI_MCA_oob_tcp_if_include -x OMPI_MCA_btl_tcp_if_include \
  "$@"
