#!/usr/bin/env bash
# File: tools/hosts.sh
# Emulated hosts on one machine: H network namespaces joined by a bridge (itself inside a
# namespace, so nothing is added to the machine's own network), one address each in a private
# /24, optional shaping of each host's link (rate with tc tbf, random loss with iptables), and R
# ranks of one tutti job per host. Ranks of one host share a host identity (shm between them);
# ranks of different hosts talk over tcp. Everything it created is removed when it exits, fails
# or is stopped. `tutti-run --emulate-hosts` runs this script.
set -u -o pipefail

readonly kUsage='usage: hosts.sh [options] [--] CMD [ARGS...]

Creates H emulated hosts (network namespaces on a bridge) and runs CMD as R ranks on each:
ranks 0..R-1 on host 0 (node0), R..2R-1 on host 1 (node1), and so on. Needs root, ip
(iproute2), and for loss= iptables; exits 77 when the machine cannot make namespaces.

Every rank gets TUTTI_RANK, TUTTI_NRANKS, TUTTI_LOCAL_RANK, TUTTI_LOCAL_SIZE, TUTTI_COMM_ID
(host 0'"'"'s address and --port), TUTTI_COMM_SECRET (random unless already set),
TUTTI_SOCKET_IFNAME=eth0 (the host'"'"'s link) and TUTTI_HOSTS_HOST (its host index). Host I
is the namespace <name>-h<I> with the address A.B.C.(I+1) on eth0 and the host name node<I>.
Each output line is printed as "[rank] line"; the script'"'"'s own lines start with "hosts.sh:"
and, for events, the seconds since launch.

options:
  -e, --emulate HxR     H hosts, R ranks per host (default 2x2)
  --link SPEC           shape every host'"'"'s link: rate=RATE (tc units: 10gbit, 500mbit),
                        loss=P% (each packet into or out of the host is dropped with P%)
  --link-host I:SPEC    the same for host I only (replaces --link there)
  --subnet A.B.C        the hosts'"'"' /24 (default 10.X.Y from the process id)
  --port N              the rendezvous port on host 0 (default 29500)
  --name TAG            namespaces are named tutti-TAG-<pid>-h<I> (default hosts)
  --spare N             N more hosts on the bridge that run no rank (for --exec)
  --timeout SEC         kill every rank after SEC seconds, exit 124 (default 600; 0: none)
  --grace SEC           after the first rank fails, the others get SEC seconds to end on their
                        own before they are killed (default 2)
  --at REGEX            the times of the events below count from the first output line that
                        matches REGEX (grep -E; default: from the launch)
  --cut I@T             take host I'"'"'s link down (its switch port) at T seconds
  --restore I@T         bring host I'"'"'s link back up at T seconds
  --kill-host I@T       SIGKILL every rank of host I at T seconds
  --exec I@T:CMDLINE    run the shell command line CMDLINE in host I at T seconds (output
                        prefixed "[hI]"; TUTTI_HOSTS_ROOT holds the root address)
  --tag-output          accepted for tutti-run compatibility (output is always tagged)
  -h, --help            show this text

The exit status is that of the rank that failed first (128+S for a signal S, 124 for the
timeout), 0 when all passed; 77 when the machine cannot emulate hosts; 2 for bad usage.
'

die_usage() { echo "hosts.sh: $*" >&2; exit 2; }
say() { echo "hosts.sh: $*" >&2; }
now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# Internal mode: the last step into a rank, already inside its namespace and UTS namespace.
if [ "${1:-}" = "__rank" ]; then
  echo "$2" >/proc/sys/kernel/hostname || exit 126
  echo $$ >"$3"
  shift 3
  exec "$@"
fi

# ---- arguments ----
hosts=2 per_host=2 link_all="" subnet="" port=29500 tag=hosts spare=0 timeout=600 grace=2
at_regex="" cmd=()
declare -A link_host=()
events=()  # "T kind host [cmdline]"

parse_event() {  # kind value
  local kind=$1 v=$2 host t rest=""
  if [ "$kind" = exec ]; then
    [[ $v =~ ^([0-9]+)@([0-9.]+):(.+)$ ]] || die_usage "--exec expects I@T:CMDLINE (got '$v')"
    rest=${BASH_REMATCH[3]}
  else
    [[ $v =~ ^([0-9]+)@([0-9.]+)$ ]] || die_usage "--$kind expects HOST@SECONDS (got '$v')"
  fi
  host=${BASH_REMATCH[1]} t=${BASH_REMATCH[2]}
  events+=("$t"$'\t'"$kind"$'\t'"$host"$'\t'"$rest")
}

while [ $# -gt 0 ]; do
  a=$1
  case $a in
    --) shift; cmd=("$@"); break ;;
    -h | --help) printf '%s' "$kUsage"; exit 0 ;;
    -e | --emulate | --emulate-hosts) [ $# -ge 2 ] || die_usage "$a needs HxR"; shift
      [[ $1 =~ ^([0-9]+)x([0-9]+)$ ]] || die_usage "$a expects HxR, e.g. 2x2 (got '$1')"
      hosts=${BASH_REMATCH[1]} per_host=${BASH_REMATCH[2]} ;;
    --link) [ $# -ge 2 ] || die_usage "--link needs a SPEC"; shift; link_all=$1 ;;
    --link-host) [ $# -ge 2 ] || die_usage "--link-host needs I:SPEC"; shift
      [[ $1 =~ ^([0-9]+):(.*)$ ]] || die_usage "--link-host expects I:SPEC (got '$1')"
      link_host[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]} ;;
    --subnet) [ $# -ge 2 ] || die_usage "--subnet needs A.B.C"; shift
      [[ $1 =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die_usage "--subnet expects A.B.C (got '$1')"
      subnet=$1 ;;
    --port) [ $# -ge 2 ] || die_usage "--port needs a number"; shift; port=$1 ;;
    --name) [ $# -ge 2 ] || die_usage "--name needs a tag"; shift; tag=$1 ;;
    --spare) [ $# -ge 2 ] || die_usage "--spare needs a number"; shift; spare=$1 ;;
    --timeout) [ $# -ge 2 ] || die_usage "--timeout needs seconds"; shift; timeout=$1 ;;
    --grace) [ $# -ge 2 ] || die_usage "--grace needs seconds"; shift; grace=$1 ;;
    --at) [ $# -ge 2 ] || die_usage "--at needs a regular expression"; shift; at_regex=$1 ;;
    --cut | --restore | --kill-host | --exec)
      [ $# -ge 2 ] || die_usage "$a needs a value"; parse_event "${a#--}" "$2"; shift ;;
    --tag-output) ;;
    -*) die_usage "unknown option '$a' (see hosts.sh --help)" ;;
    *) cmd=("$@"); break ;;
  esac
  shift
done

[ ${#cmd[@]} -gt 0 ] || die_usage "no command given"
[[ $port =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] ||
  die_usage "--port expects 1..65535 (got '$port')"
[[ $spare =~ ^[0-9]+$ ]] || die_usage "--spare expects a number (got '$spare')"
[[ $timeout =~ ^[0-9]+([.][0-9]+)?$ ]] || die_usage "--timeout expects seconds (got '$timeout')"
[[ $grace =~ ^[0-9]+([.][0-9]+)?$ ]] || die_usage "--grace expects seconds (got '$grace')"
[[ $tag =~ ^[a-z0-9]+$ ]] || die_usage "--name expects lowercase letters and digits (got '$tag')"
[ "$hosts" -ge 1 ] && [ "$per_host" -ge 1 ] || die_usage "--emulate needs H >= 1 and R >= 1"
total_hosts=$((hosts + spare))
[ "$total_hosts" -le 200 ] || die_usage "at most 200 hosts (got $total_hosts)"
nranks=$((hosts * per_host))
for e in "${events[@]}"; do
  IFS=$'\t' read -r _ kind h _ <<<"$e"
  limit=$hosts
  [ "$kind" = exec ] || [ "$kind" = cut ] || [ "$kind" = restore ] && limit=$total_hosts
  [ "$h" -lt "$limit" ] || die_usage "--$kind: there is no host $h"
done

# rate=10gbit,loss=1% -> "RATE LOSSPROB" (either may be empty)
parse_link() {
  local spec=$1 item rate="" loss=""
  local -a items
  IFS=, read -ra items <<<"$spec"
  for item in "${items[@]}"; do
    case $item in
      rate=*) rate=${item#rate=}
        [[ $rate =~ ^[0-9]+([.][0-9]+)?([kmgt]?bit|[kmgt]?bps)$ ]] ||
          die_usage "link rate expects e.g. 10gbit or 500mbit (got '$rate')" ;;
      loss=*) loss=${item#loss=}; loss=${loss%\%}
        [[ $loss =~ ^[0-9]+([.][0-9]+)?$ ]] && awk -v p="$loss" 'BEGIN { exit !(p >= 0 && p < 100) }' ||
          die_usage "link loss expects a percentage below 100, e.g. 1% (got '${item#loss=}')" ;;
      "") ;;
      *) die_usage "unknown link setting '$item' (rate=, loss=)" ;;
    esac
  done
  echo "${rate:--} ${loss:--}"
}
[ -z "$link_all" ] || parse_link "$link_all" >/dev/null || exit 2
for i in "${!link_host[@]}"; do
  [ "$i" -lt "$total_hosts" ] || die_usage "--link-host: there is no host $i"
  parse_link "${link_host[$i]}" >/dev/null || exit 2
done

# ---- can this machine do it? ----
skip() { echo "hosts.sh: SKIP: $*" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
command -v ip >/dev/null || skip "ip (iproute2) is not installed"
command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
command -v setsid >/dev/null || skip "setsid (util-linux) is not installed"
needs_loss=0 needs_rate=0
for s in "$link_all" "${link_host[@]}"; do
  [[ $s == *loss=* ]] && needs_loss=1
  [[ $s == *rate=* ]] && needs_rate=1
done
[ $needs_loss -eq 0 ] || command -v iptables >/dev/null ||
  skip "loss= needs iptables (apt-get install iptables)"
[ $needs_rate -eq 0 ] || command -v tc >/dev/null || skip "rate= needs tc (iproute2)"

# ---- names ----
self=$(readlink -f "${BASH_SOURCE[0]}")
prefix="tutti-$tag-$$"
sw="$prefix-sw"
if [ -z "$subnet" ]; then subnet="10.$((($$ >> 8) % 250 + 1)).$(($$ % 256))"; fi
addr_of() { echo "$subnet.$(($1 + 1))"; }
ns_of() { echo "$prefix-h$1"; }
root_addr="$(addr_of 0):$port"
secret=${TUTTI_COMM_SECRET:-$(od -An -N8 -tx8 /dev/urandom | tr -d ' \n')}
work=$(mktemp -d "${TMPDIR:-/tmp}/tutti-hosts.XXXXXX") || exit 1
log="$work/output.log"
: >"$log"

# Leftovers of an earlier run of this script that was killed (SIGKILL skips the traps): the
# namespaces of a process that no longer exists.
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^tutti-[a-z0-9]+-[0-9]+-(sw|h[0-9]+)$'); do
  owner=${ns%-*}; owner=${owner##*-}
  if ! kill -0 "$owner" 2>/dev/null; then
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null && say "removed $ns, left by process $owner"
  fi
done

# ---- teardown ----
hook_pid="" timer_pid=""
cleaned=0
cleanup() {
  [ $cleaned -eq 0 ] || return 0
  cleaned=1
  trap '' INT TERM HUP
  if [ -n "$hook_pid" ]; then  # the event runner, then the sleep it may be in
    local kids
    kids=$(pgrep -P "$hook_pid")
    kill -KILL "$hook_pid" 2>/dev/null
    # shellcheck disable=SC2086
    [ -z "$kids" ] || kill -KILL $kids 2>/dev/null
  fi
  [ -z "$timer_pid" ] || kill "$timer_pid" 2>/dev/null
  local f p i n
  for f in "$work"/pid.*; do
    [ -e "$f" ] || continue
    p=$(cat "$f" 2>/dev/null)
    [ -n "$p" ] && kill -KILL -- "-$p" 2>/dev/null
  done
  # Anything still inside a namespace (a rank's grandchild that left its session, an --exec).
  for ((i = 0; i < total_hosts; i++)); do
    ip netns pids "$(ns_of "$i")" 2>/dev/null | xargs -r kill -9 2>/dev/null
  done
  wait 2>/dev/null
  for ((i = 0; i < total_hosts; i++)); do
    n=$(ns_of "$i")
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      [ -z "$(ip netns pids "$n" 2>/dev/null)" ] && break
      sleep 0.1
    done
    ip netns del "$n" 2>/dev/null
  done
  ip netns del "$sw" 2>/dev/null  # takes the bridge and the switch ends of the links
  rm -rf "$work"
}
stop_signal=0
on_signal() { stop_signal=$1; }
trap cleanup EXIT
trap 'on_signal 2' INT
trap 'on_signal 15' TERM
trap 'on_signal 1' HUP

# ---- the network ----
run() { "$@" || { say "setup failed: $*"; exit 1; }; }
if ! ip netns add "$sw" 2>"$work/err"; then
  skip "cannot create a network namespace: $(cat "$work/err")"
fi
run ip -n "$sw" link add br0 type bridge
run ip -n "$sw" link set br0 up
for ((i = 0; i < total_hosts; i++)); do
  ns=$(ns_of "$i")
  run ip netns add "$ns"
  run ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$ns"
  run ip -n "$sw" link set "p$i" master br0 up
  run ip -n "$ns" addr add "$(addr_of "$i")/24" dev eth0
  run ip -n "$ns" link set lo up
  run ip -n "$ns" link set eth0 up
  spec=${link_host[$i]:-$link_all}
  [ -n "$spec" ] || continue
  read -r rate loss <<<"$(parse_link "$spec")"
  if [ "$rate" != - ]; then
    # Both directions: out of the host on eth0, into it on the switch port. The burst holds a
    # few GSO segments (veth hands tbf up to 64 KiB at a time); without it tbf drops them all.
    run ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 512kb latency 100ms
    run ip netns exec "$sw" tc qdisc add dev "p$i" root tbf rate "$rate" burst 512kb latency 100ms
  fi
  if [ "$loss" != - ] && [ "$loss" != 0 ]; then
    p=$(awk -v l="$loss" 'BEGIN { printf "%.6f", l / 100 }')
    for dir in "INPUT -i" "OUTPUT -o"; do
      # shellcheck disable=SC2086
      run ip netns exec "$ns" iptables -w -A ${dir% *} ${dir#* } eth0 -m statistic \
        --mode random --probability "$p" -j DROP
    done
  fi
  say "host $i: namespace $ns, address $(addr_of "$i") on eth0, host name node$i${spec:+, link $spec}"
done
# Wait for the addresses to be usable (IPv6 is not used; IPv4 is ready at once, but the bridge
# port may still be in the learning state for a moment).
for _ in $(seq 1 50); do
  [ "$(ip -n "$sw" -br link show master br0 | grep -c 'UP')" -ge "$total_hosts" ] && break
  sleep 0.1
done

# ---- the ranks ----
t_launch=$(now)
live=()          # pipeline pids still running
declare -A rank_of=()
for ((r = 0; r < nranks; r++)); do
  h=$((r / per_host))
  # The rank runs in its own session (its pid is the process group that kill_ranks signals); the
  # braces around it only record its status, which `wait` would not keep for a pipeline (and
  # their stderr is not the rank's: bash reports a rank killed by a signal there).
  {
    env TUTTI_RANK=$r TUTTI_NRANKS=$nranks TUTTI_LOCAL_RANK=$((r % per_host)) \
      TUTTI_LOCAL_SIZE=$per_host TUTTI_COMM_ID="$root_addr" TUTTI_COMM_SECRET="$secret" \
      TUTTI_SOCKET_IFNAME=eth0 TUTTI_HOSTS_HOST=$h \
      setsid -w ip netns exec "$(ns_of $h)" unshare --uts -- \
      "$self" __rank "node$h" "$work/pid.$r" "${cmd[@]}" </dev/null 2>&1
    echo $? >"$work/rc.$r"
  } 2>/dev/null |
    sed -u "s/^/[$r] /" | tee -a "$log" &
  live+=($!)
  rank_of[$!]=$r
done

# ---- events ----
kill_host() {  # host
  local r p
  for ((r = $1 * per_host; r < ($1 + 1) * per_host; r++)); do
    p=$(cat "$work/pid.$r" 2>/dev/null) && kill -KILL -- "-$p" 2>/dev/null
  done
}
run_events() {
  trap - INT TERM HUP EXIT
  local t0=$t_launch e t kind h line
  if [ -n "$at_regex" ]; then
    until grep -q -E -- "$at_regex" "$log"; do sleep 0.05; done
    t0=$(now)
    say "$(since "$t_launch") s: output matched '$at_regex'; event times count from here"
  fi
  while IFS=$'\t' read -r t kind h line; do
    local wait_s
    wait_s=$(awk -v t0="$t0" -v t="$t" -v n="$(now)" 'BEGIN { w = t0 + t - n; printf "%.3f", (w > 0 ? w : 0) }')
    sleep "$wait_s"
    case $kind in
      cut) ip -n "$sw" link set "p$h" down && say "$(since "$t_launch") s: host $h: link down" ;;
      restore) ip -n "$sw" link set "p$h" up && say "$(since "$t_launch") s: host $h: link up" ;;
      kill-host) kill_host "$h"; say "$(since "$t_launch") s: host $h: killed its ranks" ;;
      exec)
        say "$(since "$t_launch") s: host $h: exec: $line"
        (
          TUTTI_SOCKET_IFNAME=eth0 TUTTI_HOSTS_ROOT="$root_addr" TUTTI_HOSTS_HOST=$h \
            ip netns exec "$(ns_of "$h")" unshare --uts -- "$self" __rank "node$h" \
            "$work/exec.$h.$t" sh -c "$line" </dev/null 2>&1 | sed -u "s/^/[h$h] /"
          local erc=$?
          say "$(since "$t_launch") s: host $h: exec exited with code $erc"
        ) &
        ;;
    esac
  done < <(printf '%s\n' "${events[@]}" | sort -t $'\t' -k1,1g)
  wait
}
if [ ${#events[@]} -gt 0 ]; then
  run_events &
  hook_pid=$!
  disown "$hook_pid"  # never waited for; killed at the end
fi

if [ "$timeout" = 0 ]; then sleep infinity & else sleep "$timeout" & fi
timer_pid=$!
timer_kind=timeout

# ---- wait: fail fast, timeout, signals ----
first_rc=0 first_rank=-1
status_text() {
  if [ "$1" -gt 128 ]; then
    echo "was killed by signal $(($1 - 128)) ($(kill -l "$1" 2>/dev/null || echo "?"))"
  else
    echo "exited with code $1"
  fi
}
rank_status() {  # rank; 128+S for a signal, as shells report it
  cat "$work/rc.$1" 2>/dev/null || echo 1
}
kill_ranks() {
  local f p
  for f in "$work"/pid.*; do
    p=$(cat "$f" 2>/dev/null) && kill "-$1" -- "-$p" 2>/dev/null
  done
}
while [ ${#live[@]} -gt 0 ]; do
  done_pid=""
  wait -n -p done_pid "${live[@]}" "$timer_pid" 2>/dev/null
  if [ $stop_signal -ne 0 ]; then
    say "$(since "$t_launch") s: signal $stop_signal received; stopping the ranks"
    kill_ranks TERM
    sleep 1
    kill_ranks KILL
    [ $first_rc -ne 0 ] || first_rc=$((128 + stop_signal))
    break
  fi
  [ -n "$done_pid" ] || continue
  if [ "$done_pid" = "$timer_pid" ]; then
    if [ $timer_kind = timeout ]; then
      say "$(since "$t_launch") s: timed out after $timeout s; killing the ranks still running"
      first_rc=124
    else
      say "$(since "$t_launch") s: $grace s after the first failure; killing the ranks still running"
    fi
    kill_ranks KILL
    timer_pid=""
    break
  fi
  r=${rank_of[$done_pid]}
  rc=$(rank_status "$r")
  rest=()
  for p in "${live[@]}"; do [ "$p" = "$done_pid" ] || rest+=("$p"); done
  live=("${rest[@]}")
  say "$(since "$t_launch") s: rank $r (host $((r / per_host))) $(status_text "$rc")"
  if [ $rc -ne 0 ] && [ $first_rc -eq 0 ]; then
    first_rc=$rc first_rank=$r
    if [ ${#live[@]} -gt 0 ]; then
      kill "$timer_pid" 2>/dev/null
      sleep "$grace" &
      timer_pid=$!
      timer_kind=grace
    fi
  fi
done
for p in "${live[@]}"; do
  wait "$p" 2>/dev/null
  r=${rank_of[$p]}
  rc=$(rank_status "$r")
  say "$(since "$t_launch") s: rank $r (host $((r / per_host))) $(status_text "$rc") (stopped)"
done
if [ $first_rank -ge 0 ]; then
  say "the first rank to fail: rank $first_rank (host $((first_rank / per_host))), $(status_text "$first_rc")"
fi
exit $first_rc
