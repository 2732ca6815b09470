# Sourced by bench/compare_peers.sh and bench/compare_hosts.sh.
#
# setup_work NAME: finds the peers'
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

# need_packages PKG...: installs the Debian packages that are missing (tools/install_deps.sh),
# or with INSTALL=0 names them and exits 1. Needs $top and a log function.
need_packages() {
  local need=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
  done
  [ ${#need[@]} -eq 0 ] && return 0
  if [ "$INSTALL" = 0 ]; then echo "$(basename "$0"): missing packages: ${need[*]}" >&2; exit 1; fi
  log "installing ${need[*]}"
  "$top/tools/install_deps.sh" "${need[@]}" || exit 1
}
