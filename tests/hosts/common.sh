# File: tests/hosts/common.sh
# shellcheck shell=bash disable=SC2034
# Shared by the emulated-host tests (sourced): a scratch folder removed on exit, fail/skip
# helpers, and the harness run with its output kept. tools/hosts.sh removes the namespaces it
# made; these tests only start it and read what it printed.

# Needs HOSTS (tools/hosts.sh) set by the caller.
out=$(mktemp "${TMPDIR:-/tmp}/tutti-hosts-test.XXXXXX")
harness_pid=""
common_cleanup() {
  if [ -n "$harness_pid" ] && kill -0 "$harness_pid" 2>/dev/null; then
    kill -TERM "$harness_pid" 2>/dev/null  # the harness tears its namespaces down on TERM
    wait "$harness_pid" 2>/dev/null
  fi
  # KEEP_OUT=path keeps the last harness output for a look after the test.
  [ -z "${KEEP_OUT:-}" ] || cp "$out" "$KEEP_OUT"
  rm -f "$out"
}
trap common_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
  echo "FAIL: $*"
  echo "---- output (last 150 lines) ----"
  tail -n 150 "$out"
  exit 1
}

# Runs the harness with the given arguments, output into $out; sets rc and elapsed_s. Exits 77
# (skip) when the harness cannot emulate hosts here.
run_hosts() {
  local t0 t1
  t0=$EPOCHREALTIME
  "$HOSTS" "$@" >"$out" 2>&1 &
  harness_pid=$!
  wait "$harness_pid"
  rc=$?
  harness_pid=""
  t1=$EPOCHREALTIME
  elapsed_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  if [ "$rc" -eq 77 ]; then
    cat "$out"
    exit 77
  fi
}

# No namespace of this process's harness runs is left (they are named tutti-<tag>-<pid>-*).
check_no_leftovers() {  # tag
  local left
  left=$(ip netns list | awk '{print $1}' | grep -E "^tutti-$1-[0-9]+-" || true)
  [ -z "$left" ] || fail "namespaces left behind: $left"
}

# Seconds at which the harness printed an event line matching a pattern ("hosts.sh: 3.21 s: ...").
event_time() {  # pattern
  grep -E "^hosts\.sh: [0-9.]+ s: .*$1" "$out" | head -1 | sed -E 's/^hosts\.sh: ([0-9.]+) s:.*/\1/'
}
