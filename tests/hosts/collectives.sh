#!/bin/bash
# Every collective across emulated hosts, results checked: HxR ranks (R per host, shm inside a
# host, tcp between hosts), tutti-perf sweeps with -c 1 over every dtype and op, and every
# algorithm (tutti-perf exits nonzero on any wrong element). Each sweep must report 0 wrong
# values, rank 0's transports line must read self/shm to the ranks of its host and tcp to the
# others, and every rank must run on the host it was placed on. Last, the pipelined hierarchical
# allreduce at 4 and 12 MiB (below 4 MiB it declines), every row checked to have run it.
# usage: collectives.sh HOSTS_SH TUTTI_PERF HxR SUBNET [tutti-perf args...]
set -u
HOSTS=$1 PERF=$2 SHAPE=$3 SUBNET=$4
shift 4
. "$(dirname "$0")/common.sh"
[[ $SHAPE =~ ^([0-9]+)x([0-9]+)$ ]] || { echo "bad shape $SHAPE"; exit 2; }
H=${BASH_REMATCH[1]} R=${BASH_REMATCH[2]} N=$((H * R))
tag="coll$H$R"

# Each rank logs the transport to every peer ("init: rank 2/4 on node1 connected: 0:tcp 1:tcp
# 2:self 3:shm"); rank 0's header repeats its own ("# Using transports: 0:self 1:shm ...").
export TUTTI_DEBUG=INFO TUTTI_DEBUG_SUBSYS=INIT
transports_of() {  # rank
  local p s=""
  for ((p = 0; p < N; p++)); do
    if [ $p -eq "$1" ]; then s+=" $p:self"; elif [ $((p / R)) -eq $(($1 / R)) ]; then s+=" $p:shm"; else s+=" $p:tcp"; fi
  done
  echo "${s# }"
}
want="# Using transports: $(transports_of 0)"

# Per collective, two jobs: the selector's choice over every dtype and op, then every algorithm
# of the collective (--algo all) over a few.
colls=(allreduce reducescatter reduce allgather broadcast alltoall gather scatter sendrecv)
runs=0
# Then the pipelined hierarchical allreduce, which needs 4 MiB and more (the sweeps stop below).
for run in "${colls[@]/%/:auto}" "${colls[@]/%/:all}" allreduce:pipelined; do
  coll=${run%:*}
  case ${run#*:} in
    auto) args=(-d all -o all) ;;
    all) args=(--algo all --rounds 1 -d int8,float,bfloat16 -o sum,max) ;;
    pipelined) args=(--algo hierarchical_pipelined -d float,int32 -o sum,max) ;;
  esac
  # Rooted collectives: root 0 and the last rank, on the last host.
  case $coll in reduce | broadcast | gather | scatter) args+=(-r "0,$((N - 1))") ;; esac
  sizes=("$@")
  [ "${run#*:}" = pipelined ] && sizes=(-b 4M -e 12M -f 3)
  run_hosts --emulate "$SHAPE" --subnet "$SUBNET" --name "$tag" --timeout 120 -- \
    "$PERF" --coll "$coll" -c 1 -n 1 -w 0 "${args[@]}" "${sizes[@]}"
  echo "$coll ${args[*]}: harness exited $rc after $elapsed_s s"
  [ "$rc" -eq 0 ] || fail "$coll: the job failed (exit $rc)"
  runs=$((runs + 1))
  grep -q "^\[0\] # Out of bounds values : 0 OK" "$out" || fail "$coll: no '0 OK' line"
  if [ "${run#*:}" = pipelined ]; then  # 4 and 12 MiB, each dtype and op: every row ran it
    n=$(grep -cE "^\[0\] +[0-9]+ .* hierarchical_pipelined " "$out")
    [ "$n" -eq 8 ] || fail "allreduce: $n rows ran hierarchical_pipelined, expected 8"
  fi
  got=$(grep "^\[0\] # Using transports:" "$out" | sed 's/^\[0\] //')
  [ "$got" = "$want" ] || fail "$coll: transports line '$got', expected '$want'"
  for ((r = 0; r < N; r++)); do
    grep -qE "^\[0\] #  Rank +$r Pid +[0-9]+ on +node$((r / R)) " "$out" ||
      fail "$coll: rank $r is not reported on node$((r / R))"
    grep -qE "^\[$r\] .* init: rank $r/$N on node$((r / R)) connected: $(transports_of $r)\$" "$out" ||
      fail "$coll: rank $r did not log 'on node$((r / R)) connected: $(transports_of $r)'"
  done
  check_no_leftovers "$tag"
done
echo "PASS: $runs jobs, ${#colls[@]} collectives at $SHAPE, shm inside a host, tcp across"
