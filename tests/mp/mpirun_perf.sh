#!/usr/bin/env bash
# tutti-perf under Open MPI's mpirun (rank and root address from OMPI_* variables).
# Usage: mpirun_perf.sh <tutti-perf> [tutti-perf args...]; exits 77 (skip) without mpirun.
set -euo pipefail
command -v mpirun >/dev/null || { echo "mpirun not found: skipped"; exit 77; }
perf="$1"; shift
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo
root=()
[ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
exec timeout 300 mpirun "${root[@]}" --oversubscribe -np 4 "$perf" "$@"
