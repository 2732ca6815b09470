#!/usr/bin/env bash
# Forces every registered algorithm through tutti-perf (every dtype and op, checked: #wrong must
# be 0, tutti-perf exits nonzero otherwise) for each nranks and transport given.
# Usage: algo_matrix.sh <bin-dir> "<nranks list>" "<transports>" [tutti-perf args...]
#   e.g. algo_matrix.sh build/bin "2 3 4 5 7 8" "shm tcp" -b 1 -e 1M -f 8
set -uo pipefail
bin=$1 nranks=$2 transports=$3
shift 3
perf_args=("$@")
[ ${#perf_args[@]} -gt 0 ] || perf_args=(-b 1 -e 1M -f 8)
failed=0 runs=0
while read -r coll algo _; do
  [ "$coll" = barrier ] && continue  # no tutti-perf collective; verified by tutti-sched
  for n in $nranks; do
    for t in $transports; do
      runs=$((runs + 1))
      log=$(mktemp)
      if "$bin/tutti-run" -n "$n" --timeout 300 -- "$bin/tutti-perf" --coll "$coll" --algo "$algo" \
          -d all -o all -n 1 -w 0 --transport "$t" "${perf_args[@]}" > "$log" 2>&1; then
        echo "ok    $coll $algo nranks=$n transport=$t"
      else
        failed=$((failed + 1))
        echo "FAIL  $coll $algo nranks=$n transport=$t"
        tail -20 "$log" | sed 's/^/      /'
      fi
      rm -f "$log"
    done
  done
done < <("$bin/tutti-sched" list)
echo "$((runs - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
