#!/usr/bin/env bash
# compare_peers.sh - tutti next to Open MPI, MPICH and Gloo in one run, on this host.
#
#   bench/compare_peers.sh            full mode: 8 B .. 256 MiB, factor 2, 0.2 s per size
#   bench/compare_peers.sh --quick    quick mode: 8 B .. 16 MiB, 0.02 s per size (a few minutes)
#
# Options: --out DIR (results, default build/compare-peers/results), --peers DIR (the peers'
# sources, default ../shared/peers next to this repository or its parent), --no-install.
# Environment filters for development runs: LIBS="ompi mpich gloo tutti", NPS="2 4",
# TRANSPORTS="shm tcp", COLLS="allreduce,allgather,reduce_scatter,bcast,alltoall"; a filtered run
# keeps the other libraries' result files from an earlier run in the same --out folder.
# Also: TARGET, MAXB (override the mode), TUTTI_BUILD (tutti's build folder, default build/).
# WAIT_FAST=0 turns off waiting for the fast vCPU placement (see run_once() below; the ceilings
# wait too), RETRY_SLOW=N.
# LAUNCHES=N (default 1): launch every library N times per configuration; the report takes each
# size's fastest launch (<file>.txt, <file>.launch2.txt, ...), the same rule for every library.
# LOAD=N (default 0): N busy-loop processes run beside every library's runs (a machine that also
# computes: "one busy process per 2 cores" is LOAD=1 here); LOAD_PIN=1 pins busy process k to
# CPU k mod nproc. The ceilings are measured before the load starts; with LOAD > 0, WAIT_FAST
# defaults to 0 (the probe would read the load, not the placement). env.txt records the load.
#
# What it does: copies the peers' harness (bench_common.h, mpi_coll_perf.cpp, gloo_perf.cpp,
# ceilings.cpp) to a build folder (never writes into the peers' folder), builds it against Open
# MPI, MPICH and Gloo (installing the Debian packages when missing), builds tutti's driver for the
# same harness (bench/compare/tutti_coll_perf.cc, linked to build/lib/libtutti.so), measures the
# machine's ceilings, then runs every library with the same sizes and rank counts:
#   shm: Open MPI (vader), MPICH (ch4:ucx shared memory), tutti shm
#   tcp: Open MPI (btl tcp on lo), Gloo (tcp on lo), tutti tcp
# with 2 ranks (pinned one per core, as Open MPI binds by default) and 4 ranks (oversubscribed on
# this 2-core machine, not pinned), for allreduce, allgather, reduce_scatter, broadcast, alltoall.
# Then bench/compare/report.py writes, into the output folder:
#   report.md   ratio tables: tutti / best peer per configuration and size, and the issue's targets
#               (with several launches, each target also lists every launch's value)
#               (a missed target is marked unreachable when a library-free bound from this run,
#               tutti-xcore-probe's exchange or tutti-tcp-ceiling, shows no library could meet it)
#   *.png       busbw against size, one line per library (gnuplot), one plot per configuration
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
QUICK=0
INSTALL=1
OUT=""
PEERS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --full) QUICK=0 ;;
    --out) OUT=$2; shift ;;
    --peers) PEERS=$2; shift ;;
    --no-install) INSTALL=0 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "compare_peers.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=bench/compare/work_dirs.sh
. "$here/compare/work_dirs.sh"
setup_work compare-peers

if [ "$QUICK" = 1 ]; then TARGET=${TARGET:-0.02}; MAXB=${MAXB:-16M}; CEIL=0.2
else TARGET=${TARGET:-0.2}; MAXB=${MAXB:-256M}; CEIL=1.0; fi
LIBS=${LIBS:-ompi mpich gloo tutti}
NPS=${NPS:-2 4}
TRANSPORTS=${TRANSPORTS:-shm tcp}
COLLS=${COLLS:-allreduce,allgather,reduce_scatter,bcast,alltoall}
COMMON=(-b 8 -e "$MAXB" -f 2 -T "$TARGET")
T0=$(date +%s)
[ "${LOAD:-0}" -gt 0 ] && : "${WAIT_FAST:=0}"
log() { echo "[compare_peers +$(( $(date +%s) - T0 ))s] $*"; }
has() { case " $LIBS " in *" $1 "*) return 0 ;; esac; return 1; }
FAILS=()

# ---------------------------------------------------------------- packages
need_packages openmpi-bin libopenmpi-dev mpich libmpich-dev libgloo-dev gnuplot-nox g++

# ---------------------------------------------------------------- build
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# every launcher's own traffic stays on loopback
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo HYDRA_IFACE=lo UCX_NET_DEVICES=lo
cp "$PEERS"/bench_common.h "$PEERS"/mpi_coll_perf.cpp "$PEERS"/gloo_perf.cpp "$PEERS"/ceilings.cpp \
  "$WORK/src/" || exit 1
CXXFLAGS=${CXXFLAGS:--O3 -march=native -Wall}
log "building the peers' harness in $WORK"
B=$WORK/bin
mpicxx.openmpi $CXXFLAGS -std=c++17 -o "$B/mpi_coll_perf.openmpi" "$WORK/src/mpi_coll_perf.cpp" || exit 1
mpicxx.mpich $CXXFLAGS -std=c++17 -o "$B/mpi_coll_perf.mpich" "$WORK/src/mpi_coll_perf.cpp" || exit 1
g++ $CXXFLAGS -std=c++17 -pthread -o "$B/gloo_perf" "$WORK/src/gloo_perf.cpp" -lgloo || exit 1
g++ $CXXFLAGS -std=c++17 -pthread -o "$B/ceilings" "$WORK/src/ceilings.cpp" || exit 1
if [ ! -x "$TB/bin/tutti-run" ] || [ ! -f "$TB/lib/libtutti.so" ] || [ ! -x "$TB/bin/tutti-xcore-probe" ] \
   || [ ! -x "$TB/bin/tutti-tcp-ceiling" ]; then
  log "building tutti (library, tutti-run and the probes) in $TB"
  cmake -S "$top" -B "$TB" -DCMAKE_BUILD_TYPE=Release >/dev/null || exit 1
  cmake --build "$TB" -j"$(nproc)" --target tutti tutti-run tutti-xcore-probe tutti-tcp-ceiling || exit 1
fi
g++ $CXXFLAGS -std=c++20 -I"$top/include" -I"$WORK/src" -o "$B/tutti_coll_perf" \
  "$here/compare/tutti_coll_perf.cc" -L"$TB/lib" -ltutti -Wl,-rpath,"$TB/lib" || exit 1

# ---------------------------------------------------------------- environment
{
  echo "# date: $(date -Is)  mode: $([ "$QUICK" = 1 ] && echo quick || echo full)  TARGET=$TARGET MAXB=$MAXB"
  echo "# uname: $(uname -a)"
  echo "# loadavg at start: $(cat /proc/loadavg)"
  echo "# tutti: $(git -C "$top" rev-parse --short HEAD 2>/dev/null) $(git -C "$top" status --porcelain 2>/dev/null | grep -q . && echo '(uncommitted changes)')"
  lscpu | grep -E 'Model name|^CPU\(s\)|Thread|NUMA node\(s\)|L2|L3'
  dpkg-query -W -f='${Package} ${Version}\n' openmpi-bin mpich libgloo-dev 2>/dev/null
  sysctl kernel.yama.ptrace_scope net.ipv4.tcp_congestion_control 2>&1
} > "$OUT/env.txt"
touch "$OUT/xcore.txt"  # each run replaces its own lines (a filtered run keeps the others)

# ---------------------------------------------------------------- runs
# The VM's cross-CPU speed drifts between a fast and a slow vCPU placement for minutes at a time
# (bench/xcore_probe.cc; shm results follow it 2-4x). With WAIT_FAST=1 (default) every run first
# waits, up to 10 minutes, for the fast placement (handoff >= FAST_GBPS=4 GB/s), and a run after
# which the probe reads slow is run again (up to RETRY_SLOW=2 times), so that libraries are
# compared in the same placement. xcore.txt keeps every probe, before and after each attempt.
probe() { "$TB/bin/tutti-xcore-probe" 2>&1 || true; }
is_slow() {  # <probe line>: its handoff is below FAST_GBPS (never true with WAIT_FAST=0)
  local gbps
  gbps=$(sed -n 's/.*handoff_gbps=\([0-9.]*\).*/\1/p' <<< "$1")
  [ "${WAIT_FAST:-1}" = 1 ] && [ -n "$gbps" ] &&
    awk -v g="$gbps" -v f="${FAST_GBPS:-4}" 'BEGIN {exit !(g < f)}'
}
fast_probe() {  # <label>: probe, waiting (30 x 20 s at most) for the fast placement
  local line tries=0
  [ -x "$TB/bin/tutti-xcore-probe" ] || return 0
  line=$(probe)
  while is_slow "$line" && [ "$tries" -lt 30 ]; do
    tries=$((tries + 1))
    [ "$tries" = 1 ] && log "slow placement ($line): waiting"
    sleep 20
    line=$(probe)
  done
  echo "$1 $line" >> "$OUT/xcore.txt"
}
slow_after() {  # <label>: probe after a run; true when it reads slow
  local line
  [ -x "$TB/bin/tutti-xcore-probe" ] || return 1
  line=$(probe)
  echo "$1 after: $line" >> "$OUT/xcore.txt"
  is_slow "$line"
}
# launches <file>: the result files of every launch of <file>, the first one first.
launch_files() {
  local k
  echo "$1"
  for ((k = 2; k <= ${LAUNCHES:-1}; k++)); do echo "$1.launch$k"; done
}
# run <file> <timeout_s> <command...>: output into $OUT/<file>.txt, stderr appended as comments;
# LAUNCHES times (see launch_files).
run() {
  local f=$1 to=$2; shift 2
  local g
  rm -f "$OUT/$f".launch*.txt
  for g in $(launch_files "$f"); do run_once "$g" "$to" "$@"; done
}
run_once() {
  local f=$1 to=$2; shift 2
  local attempt rc
  sed -i "/^$f /d" "$OUT/xcore.txt"
  for ((attempt = 0; attempt <= ${RETRY_SLOW:-2}; attempt++)); do
    log "run $f$([ "$attempt" -gt 0 ] && echo " (again: the placement turned slow during it)")"
    fast_probe "$f"
    timeout -k 5 "$to" "$@" > "$OUT/$f.txt" 2> "$OUT/.$f.err"
    rc=$?
    slow_after "$f" || break
  done
  if [ $rc -ne 0 ]; then FAILS+=("$f(rc=$rc)"); echo "# RUN FAILED rc=$rc" >> "$OUT/$f.txt"; fi
  [ -s "$OUT/.$f.err" ] && sed 's/^/# stderr: /' "$OUT/.$f.err" | head -40 >> "$OUT/$f.txt"
  rm -f "$OUT/.$f.err"
}
# gloo <file> <nranks> <timeout_s> <args...>: Gloo ranks are plain processes with a FileStore;
# LAUNCHES times, like run.
gloo() {
  local f=$1 g
  shift
  rm -f "$OUT/$f".launch*.txt
  for g in $(launch_files "$f"); do gloo_once "$g" "$@"; done
}
gloo_once() {
  local f=$1 n=$2 to=$3; shift 3
  local store; store=$(mktemp -d /tmp/tutti_gloo_store.XXXXXX)
  local pids=() rc=0 r
  log "run $f"
  sed -i "/^$f /d" "$OUT/xcore.txt"
  fast_probe "$f"
  for ((r = 0; r < n; r++)); do
    timeout -k 5 "$to" "$B/gloo_perf" -r $r -n "$n" -s "$store" "$@" \
      > "$OUT/.$f.r$r.out" 2> "$OUT/.$f.r$r.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  cat "$OUT/.$f.r0.out" > "$OUT/$f.txt"
  if [ $rc -ne 0 ]; then FAILS+=("$f(rc=$rc)"); echo "# RUN FAILED rc=$rc" >> "$OUT/$f.txt"; fi
  for ((r = 0; r < n; r++)); do
    [ -s "$OUT/.$f.r$r.err" ] && sed "s/^/# rank $r stderr: /" "$OUT/.$f.r$r.err" | head -20 >> "$OUT/$f.txt"
    rm -f "$OUT/.$f.r$r.out" "$OUT/.$f.r$r.err"
  done
  rm -rf "$store"
}
# Gloo's names for the collectives in $COLLS (it has no reduce_scatter). Every variant for 2 ranks
# in full mode; the usual best ones otherwise (Gloo over loopback is slow: a full sweep of every
# variant at 4 ranks takes more than 15 minutes).
gloo_colls() {  # nranks
  local g=()
  case ",$COLLS," in *,allreduce,*)
    if [ "$QUICK" = 0 ] && [ "$1" -le 2 ]; then
      g+=(allreduce_ring allreduce_ring_chunked allreduce_halving_doubling allreduce_bcube allreduce)
    else g+=(allreduce_ring_chunked allreduce_halving_doubling allreduce); fi ;; esac
  case ",$COLLS," in *,allgather,*) g+=(allgather allgather_ring) ;; esac
  case ",$COLLS," in *,bcast,*) g+=(broadcast broadcast_one_to_all) ;; esac
  case ",$COLLS," in *,alltoall,*) g+=(alltoall) ;; esac
  local IFS=,; echo "${g[*]}"
}

# ---------------------------------------------------------------- ceilings
# Measured like the runs (run_once): in the fast placement, again when the probe after reads slow
# (a bound taken in the slow placement is no bound on runs taken in the fast one).
if [ ! -s "$OUT/ceilings.txt" ] || [ "${CEILINGS:-1}" = 1 ]; then
  run_once ceilings 600 "$B/ceilings" -t "$CEIL"
fi
# The bound on a 2-rank allreduce over TCP loopback at the target sizes (bench/tcp_ceiling.cc).
case " $TRANSPORTS " in *" tcp "*)
  tsz="1M 16M"; [ "$QUICK" = 0 ] && tsz="1M 16M 256M"
  # shellcheck disable=SC2086
  run_once tcp_ceiling 600 "$TB/bin/tutti-tcp-ceiling" -t "$CEIL" $tsz ;;
esac

# ---------------------------------------------------------------- load (LOAD=N)
LOAD_PIDS=()
stop_load() {
  [ ${#LOAD_PIDS[@]} -gt 0 ] || return 0
  kill "${LOAD_PIDS[@]}" 2> /dev/null
  wait "${LOAD_PIDS[@]}" 2> /dev/null
  LOAD_PIDS=()
}
if [ "${LOAD:-0}" -gt 0 ]; then
  trap stop_load EXIT
  for ((k = 0; k < LOAD; k++)); do
    if [ "${LOAD_PIN:-0}" = 1 ]; then
      taskset -c $((k % $(nproc))) sh -c 'while :; do :; done' &
    else
      sh -c 'while :; do :; done' &
    fi
    LOAD_PIDS+=($!)
  done
  log "load: $LOAD busy-loop process(es)$([ "${LOAD_PIN:-0}" = 1 ] && echo ", pinned") beside every run"
  echo "load: $LOAD busy-loop processes beside every run, pinned=${LOAD_PIN:-0}" >> "$OUT/env.txt"
fi

TO=$([ "$QUICK" = 1 ] && echo 300 || echo 900)
TRUN="$TB/bin/tutti-run"
for n in $NPS; do
  ompi=(mpirun.openmpi -np "$n")
  [ "$n" -gt "$(nproc)" ] && ompi+=(--oversubscribe)
  mpich=(mpiexec.mpich -n "$n")
  [ "$n" -le "$(nproc)" ] && mpich=(mpiexec.mpich -bind-to core -n "$n")
  for t in $TRANSPORTS; do
    label="$t/np$n"
    if [ "$t" = shm ]; then
      has ompi && run "ompi_shm_np$n" $TO "${ompi[@]}" "$B/mpi_coll_perf.openmpi" "${COMMON[@]}" -o "$COLLS" -t "openmpi/vader/np$n"
      has mpich && run "mpich_shm_np$n" $TO "${mpich[@]}" "$B/mpi_coll_perf.mpich" "${COMMON[@]}" -o "$COLLS" -t "mpich/ucx-shm/np$n"
    else
      has ompi && run "ompi_tcp_np$n" $TO "${ompi[@]}" --mca btl tcp,self --mca btl_tcp_if_include lo \
        "$B/mpi_coll_perf.openmpi" "${COMMON[@]}" -o "$COLLS" -t "openmpi/tcp-lo/np$n"
      gc=$(gloo_colls "$n")
      has gloo && [ -n "$gc" ] && gloo "gloo_tcp_np$n" "$n" $TO "${COMMON[@]}" -o "$gc" -t "gloo/tcp-lo/np$n"
    fi
    has tutti && TUTTI_TRANSPORTS=$t run "tutti_${t}_np$n" $TO "$TRUN" -n "$n" -- \
      "$B/tutti_coll_perf" "${COMMON[@]}" -o "$COLLS" -t "tutti/$label"
  done
done

stop_load

# ---------------------------------------------------------------- report
log "report"
python3 "$here/compare/report.py" "$OUT" || FAILS+=("report")
log "done in $(( $(date +%s) - T0 )) s; results in $OUT (report.md, *.png); failures: ${FAILS[*]:-none}"
[ ${#FAILS[@]} -eq 0 ]
