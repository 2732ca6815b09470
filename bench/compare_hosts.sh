#!/usr/bin/env bash
# compare_hosts.sh - tutti next to Open MPI and Gloo across emulated hosts, in one run.
#
#   bench/compare_hosts.sh            2 hosts x 2 ranks, links of 10 Gbit/s, 8 B .. 64 MiB, factor 2,
#                                     0.2 s per size, allreduce and allgather, 3 launches per library
#   bench/compare_hosts.sh --quick    8 B .. 4 MiB, factor 4, 0.02 s per size, 1 launch
#
# Options:
#   --emulate "HxR ..."   the host layouts to run, e.g. "2x2 2x1" (default 2x2)
#   --link "SPEC ..."     the links to run each layout on: tools/hosts.sh's --link SPEC (rate=10gbit,
#                         loss=1%, rate=1gbit,loss=0.1%), or none for unshaped links (default
#                         rate=10gbit)
#   --out DIR             results (default build/compare-hosts/results)
#   --peers DIR           the peers' harness (default ../shared/peers next to this repository)
#   --no-install          fail instead of installing missing Debian packages
# Environment: LIBS="ompi gloo tutti", COLLS=allreduce,allgather, LAUNCHES=N (default 3, 1 with
# --quick), TARGET (seconds per size), MINB, MAXB, FACTOR, TIMEOUT (seconds per launch, default
# 900), TUTTI_BUILD (tutti's build folder, default build/).
#
# What it does: reuses the peers' harness binaries that bench/compare_peers.sh built
# (<TUTTI_BUILD>/compare-peers/bin: mpi_coll_perf.openmpi, gloo_perf; built into
# <TUTTI_BUILD>/compare-hosts/bin the same way when missing) and builds tutti's driver for it
# (bench/compare/tutti_coll_perf.cc, linked to <TUTTI_BUILD>/lib/libtutti.so). Then, for every
# layout and link, every launch creates the emulated hosts afresh with tools/hosts.sh (network
# namespaces on a bridge inside its own namespace: nothing touches the machine's own network) and
# runs one library with the same sizes:
#   tutti     H*R ranks started by hosts.sh (R per namespace): shm inside a host, tcp across
#   Open MPI  mpirun inside host 0 (hosts.sh -e 1x1 --spare H-1), a hostfile of the hosts'
#             addresses (slots=R), plm_rsh_agent = this script's __rsh mode, which starts orted in
#             the named host's namespace (ip netns exec, host name nodeI); pml ob1, btl
#             tcp,vader,self on eth0 (vader inside a host, tcp across), oob on eth0, --bind-to none,
#             mpi_yield_when_idle 1 when H*R exceeds the machine's CPUs (as --oversubscribe sets;
#             OMPI_YIELD=0|1 decides instead)
#   Gloo      H*R ranks started by hosts.sh, each binding Gloo's tcp device to its host's address,
#             rendezvous through a FileStore in a temporary folder (the namespaces share the file
#             system); allreduce_ring_chunked, allreduce_halving_doubling, allreduce (ring),
#             allgather, allgather_ring
# No rank is pinned (-p 0 for tutti's driver, --bind-to none for Open MPI; Gloo never pins): R
# ranks per host on a machine's cores, as with several emulated hosts there are more ranks than
# cores. The launches go round the libraries (tutti, Open MPI, Gloo, tutti, ...) so that a slow
# spell of the machine hits them alike; each size keeps its fastest launch.
# Output: <out>/<HxR>-<link>/<lib>_tcp_np<N>[.launchK].txt (rank 0's table, as compare_peers.sh
# names them, so bench/compare/report.py's parser reads them), env.txt, and <out>/report.md written
# by bench/compare/report_hosts.py: tutti / best peer at every size, and the targets (busbw >= 1.5x
# the best peer at >= 1 MiB, 8 B time <= 1x the best peer's).
# Every launch is bounded (TIMEOUT); hosts.sh removes its namespaces and processes when a launch
# ends, fails, times out or this script is stopped.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)

# ---- internal modes (run inside the emulated hosts) ----
# __rsh [ssh options] HOST CMD...: Open MPI's rsh agent. HOST is a host's address A.B.C.(I+1);
# runs CMD (a shell command line, as ssh would) in host I's namespace with host name nodeI.
# HOSTS_NS_PREFIX names the namespaces (<prefix>-hI).
if [ "${1:-}" = "__rsh" ]; then
  shift
  while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done
  h=$1; shift
  i=$((${h##*.} - 1))
  # shellcheck disable=SC2016
  exec ip netns exec "$HOSTS_NS_PREFIX-h$i" unshare --uts -- \
    sh -c 'hostname "$0" && exec sh -c "$1"' "node$i" "$*"
fi
# __mpirun H R ARGS...: inside host 0: a hostfile of the H hosts' addresses, then mpirun ARGS.
# Ranks yield the CPU while they wait (mpi_yield_when_idle, what mpirun --oversubscribe sets) when
# the job has more ranks than the machine has CPUs; OMPI_YIELD=0|1 decides instead.
if [ "${1:-}" = "__mpirun" ]; then
  H=$2 R=$3; shift 3
  yield=${OMPI_YIELD:-$([ $((H * R)) -gt "$(nproc)" ] && echo 1 || echo 0)}
  ns=$(ip netns identify $$)
  export HOSTS_NS_PREFIX=${ns%-h0}
  a=$(ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1)
  hf=$(mktemp "${TMPDIR:-/tmp}/compare_hosts.hostfile.XXXXXX") || exit 1
  for ((i = 1; i <= H; i++)); do echo "${a%.*}.$i slots=$R"; done > "$hf"
  mpirun.openmpi --allow-run-as-root -np $((H * R)) --hostfile "$hf" \
    --mca plm_rsh_agent "$0 __rsh" --mca pml ob1 --mca btl tcp,vader,self \
    --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 --bind-to none \
    --mca mpi_yield_when_idle "$yield" "$@"
  rc=$?
  rm -f "$hf"
  exit $rc
fi
# __gloo STORE ARGS...: one Gloo rank, its tcp device on the host's address.
if [ "${1:-}" = "__gloo" ]; then
  store=$2 bin=$3; shift 3
  a=$(ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1)
  exec "$bin" -r "$TUTTI_RANK" -n "$TUTTI_NRANKS" -s "$store" -H "$a" "$@"
fi

# ---- options ----
QUICK=0
INSTALL=1
OUT=""
PEERS=""
LAYOUTS="2x2"
LINKS="rate=10gbit"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --full) QUICK=0 ;;
    --emulate | --emulate-hosts) LAYOUTS=${2//,/ }; shift ;;
    --link) LINKS=$2; shift ;;
    --out) OUT=$2; shift ;;
    --peers) PEERS=$2; shift ;;
    --no-install) INSTALL=0 ;;
    -h|--help) sed -n '2,47p' "$0"; exit 0 ;;
    *) echo "compare_hosts.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for l in $LAYOUTS; do
  [[ $l =~ ^[0-9]+x[0-9]+$ ]] || { echo "compare_hosts.sh: --emulate expects HxR (got '$l')" >&2; exit 2; }
done
[ "$(id -u)" -eq 0 ] || { echo "compare_hosts.sh: SKIP: emulated hosts need root" >&2; exit 77; }
# shellcheck source=bench/compare/work_dirs.sh
. "$here/compare/work_dirs.sh"
setup_work compare-hosts
if [ "$QUICK" = 1 ]; then
  TARGET=${TARGET:-0.02} MAXB=${MAXB:-4M} FACTOR=${FACTOR:-4} LAUNCHES=${LAUNCHES:-1}
else
  TARGET=${TARGET:-0.2} MAXB=${MAXB:-64M} FACTOR=${FACTOR:-2} LAUNCHES=${LAUNCHES:-3}
fi
MINB=${MINB:-8}
LIBS=${LIBS:-tutti ompi gloo}
COLLS=${COLLS:-allreduce,allgather}
TIMEOUT=${TIMEOUT:-900}
COMMON=(-b "$MINB" -e "$MAXB" -f "$FACTOR" -T "$TARGET")
HOSTS=$top/tools/hosts.sh
T0=$(date +%s)
log() { echo "[compare_hosts +$(( $(date +%s) - T0 ))s] $*"; }
FAILS=()

# ---- packages ----
need_packages openmpi-bin libopenmpi-dev libgloo-dev g++ iproute2

# ---- binaries ----
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
CXXFLAGS=${CXXFLAGS:--O3 -march=native -Wall}
B=$WORK/bin
cp "$PEERS"/bench_common.h "$PEERS"/mpi_coll_perf.cpp "$PEERS"/gloo_perf.cpp "$WORK/src/" || exit 1
# stale OUT SRC...: OUT is missing or older than one of the SRCs.
stale() {
  local o=$1 s; shift
  [ -x "$o" ] || return 0
  for s in "$@"; do [ "$s" -nt "$o" ] && return 0; done
  return 1
}
PB=$TB/compare-peers/bin
if [ -x "$PB/mpi_coll_perf.openmpi" ] && [ -x "$PB/gloo_perf" ]; then
  MPI_BIN=$PB/mpi_coll_perf.openmpi GLOO_BIN=$PB/gloo_perf
  log "peers' harness: compare_peers.sh's build in $PB"
else
  MPI_BIN=$B/mpi_coll_perf.openmpi GLOO_BIN=$B/gloo_perf
  if stale "$MPI_BIN" "$PEERS/mpi_coll_perf.cpp" "$PEERS/bench_common.h" ||
     stale "$GLOO_BIN" "$PEERS/gloo_perf.cpp" "$PEERS/bench_common.h"; then
    log "building the peers' harness in $B (as compare_peers.sh does)"
    mpicxx.openmpi $CXXFLAGS -std=c++17 -o "$MPI_BIN" "$WORK/src/mpi_coll_perf.cpp" || exit 1
    g++ $CXXFLAGS -std=c++17 -pthread -o "$GLOO_BIN" "$WORK/src/gloo_perf.cpp" -lgloo || exit 1
  fi
fi
if [ ! -f "$TB/lib/libtutti.so" ]; then
  echo "compare_hosts.sh: $TB/lib/libtutti.so not found: build tutti first (tools/build.sh)" >&2
  exit 1
fi
if stale "$B/tutti_coll_perf" "$here/compare/tutti_coll_perf.cc" "$PEERS/bench_common.h" \
   "$(readlink -f "$TB/lib/libtutti.so")" "$top/include"/tutti/*; then
  log "building tutti's driver in $B"
  g++ $CXXFLAGS -std=c++20 -I"$top/include" -I"$WORK/src" -o "$B/tutti_coll_perf" \
    "$here/compare/tutti_coll_perf.cc" -L"$TB/lib" -ltutti -Wl,-rpath,"$TB/lib" || exit 1
fi

# ---- stopping ----
# The launch in progress runs in the background under timeout(1), so that a signal to this script
# reaches it: timeout passes SIGTERM on to hosts.sh, which removes its namespaces and processes.
CUR="" STORE=""
stop_current() {
  if [ -n "$CUR" ]; then
    kill -TERM "$CUR" 2>/dev/null
    wait "$CUR" 2>/dev/null
    CUR=""
  fi
  [ -z "$STORE" ] || rm -rf "$STORE"
}
trap stop_current EXIT
trap 'log "stopped"; stop_current; exit 130' INT
trap 'log "stopped"; stop_current; exit 143' TERM HUP

# launch <dir> <file> <command...>: one launch, rank 0's lines into <dir>/<file>.txt (the "[0] "
# prefix removed); the other ranks' lines and hosts.sh's own as comments.
launch() {
  local d=$1 f=$2; shift 2
  local raw="$d/.$f.raw" err="$d/.$f.err" rc
  log "run $(basename "$d")/$f"
  timeout -k 10 "$TIMEOUT" "$@" > "$raw" 2> "$err" < /dev/null &
  CUR=$!
  wait "$CUR"
  rc=$?
  CUR=""
  sed -n 's/^\[0\] //p' "$raw" > "$d/$f.txt"
  grep -v '^\[0\] ' "$raw" | head -40 | sed 's/^/# /' >> "$d/$f.txt"
  grep -v -E '^hosts.sh: (host [0-9]+: namespace|[0-9.]+ s: rank [0-9]+ \(host [0-9]+\) exited with code 0$)' \
    "$err" | head -40 | sed 's/^/# stderr: /' >> "$d/$f.txt"
  if [ $rc -ne 0 ]; then
    FAILS+=("$(basename "$d")/$f(rc=$rc)")
    echo "# RUN FAILED rc=$rc" >> "$d/$f.txt"
  fi
  rm -f "$raw" "$err"
}
has() { case " $LIBS " in *" $1 "*) return 0 ;; esac; return 1; }
gloo_colls() {
  local g=()
  case ",$COLLS," in *,allreduce,*) g+=(allreduce_ring_chunked allreduce_halving_doubling allreduce) ;; esac
  case ",$COLLS," in *,allgather,*) g+=(allgather allgather_ring) ;; esac
  local IFS=,; echo "${g[*]}"
}

# ---- runs ----
for layout in $LAYOUTS; do
  H=${layout%x*} R=${layout#*x} N=$((${layout%x*} * ${layout#*x}))
  for link in $LINKS; do
    linkopt=()
    [ "$link" = none ] || linkopt=(--link "$link")
    d="$OUT/$layout-$(echo "$link" | tr -c 'a-zA-Z0-9.=\n' '_' | tr '=' '_')"
    mkdir -p "$d"
    rm -f "$d"/*_tcp_np*.txt
    {
      echo "# date: $(date -Is)  mode: $([ "$QUICK" = 1 ] && echo quick || echo full)  TARGET=$TARGET MINB=$MINB MAXB=$MAXB FACTOR=$FACTOR LAUNCHES=$LAUNCHES"
      echo "# layout: $H hosts x $R ranks  link: $link"
      echo "# uname: $(uname -a)"
      echo "# loadavg at start: $(cat /proc/loadavg)"
      echo "# tutti: $(git -C "$top" rev-parse --short HEAD 2>/dev/null) $(git -C "$top" status --porcelain 2>/dev/null | grep -q . && echo '(uncommitted changes)') ($TB/lib/libtutti.so)"
      lscpu | grep -E 'Model name|^CPU\(s\)'
      dpkg-query -W -f='${Package} ${Version}\n' openmpi-bin libgloo-dev 2>/dev/null
    } > "$d/env.txt"
    for ((k = 1; k <= LAUNCHES; k++)); do
      sfx=""; [ "$k" -gt 1 ] && sfx=".launch$k"
      if has tutti; then
        launch "$d" "tutti_tcp_np$N$sfx" "$HOSTS" -e "$layout" "${linkopt[@]}" --name cmptutti \
          --timeout "$TIMEOUT" -- "$B/tutti_coll_perf" -p 0 "${COMMON[@]}" -o "$COLLS" \
          -t "tutti/$layout/$link"
      fi
      if has ompi; then
        spare=()
        [ "$H" -gt 1 ] && spare=(--spare $((H - 1)))
        launch "$d" "ompi_tcp_np$N$sfx" "$HOSTS" -e 1x1 "${spare[@]}" "${linkopt[@]}" --name cmpompi \
          --timeout "$TIMEOUT" -- "$here/compare_hosts.sh" __mpirun "$H" "$R" \
          "$MPI_BIN" "${COMMON[@]}" -o "$COLLS" -t "openmpi/tcp+vader/$layout/$link"
      fi
      gc=$(gloo_colls)
      if has gloo && [ -n "$gc" ]; then
        STORE=$(mktemp -d "${TMPDIR:-/tmp}/compare_hosts.gloo.XXXXXX")
        launch "$d" "gloo_tcp_np$N$sfx" "$HOSTS" -e "$layout" "${linkopt[@]}" --name cmpgloo \
          --timeout "$TIMEOUT" -- "$here/compare_hosts.sh" __gloo "$STORE" "$GLOO_BIN" \
          "${COMMON[@]}" -o "$gc" -t "gloo/tcp/$layout/$link"
        rm -rf "$STORE"
        STORE=""
      fi
    done
  done
done

# ---- report ----
log "report"
python3 "$here/compare/report_hosts.py" "$OUT" || FAILS+=("report")
log "done in $(( $(date +%s) - T0 )) s; results in $OUT (report.md); failures: ${FAILS[*]:-none}"
[ ${#FAILS[@]} -eq 0 ]
