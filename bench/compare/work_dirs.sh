# Sourced by bench/compare_peers.sh and bench/compare_hosts.sh. setup_work NAME: finds the peers'
# harness (PEERS when set, else ../shared/peers next to this repository or its parent; exits 2
# when it is missing) and makes the folders: TB (tutti's build, $TUTTI_BUILD or build/),
# WORK=$TB/NAME with src/ and bin/, OUT (as given, default $WORK/results; made absolute).
# Needs $top (the repository root).
setup_work() {
  local me
  me=$(basename "$0")
  if [ -z "$PEERS" ]; then
    for d in "$top/../shared/peers" "$top/../../shared/peers"; do
      [ -f "$d/bench_common.h" ] && PEERS=$(cd "$d" && pwd) && break
    done
  fi
  if [ -z "$PEERS" ] || [ ! -f "$PEERS/bench_common.h" ]; then
    echo "$me: peers' harness not found (looked for ../shared/peers; use --peers DIR)" >&2
    exit 2
  fi
  TB=${TUTTI_BUILD:-$top/build}
  WORK=$TB/$1
  OUT=${OUT:-$WORK/results}
  mkdir -p "$WORK/src" "$WORK/bin" "$OUT"
  OUT=$(cd "$OUT" && pwd)
}
