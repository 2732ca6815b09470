#!/usr/bin/env bash
# The layer rule of docs/ARCHITECTURE.md, checked on the build's include roots: a file of layer L
# compiles with L's include root only (build/layers/L), so including a header of any folder above
# L must fail with "No such file or directory", and including the ground floor must work.
# usage: layers_test.sh <c++ compiler> <build dir> <source dir> <layer>... (lowest first)
set -euo pipefail
cxx=$1 build=$2 src=$3
shift 3
layers=("$@")
upper=(nccl tools bench python)  # folders above every layer
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
compile() {  # compile <layer> <header>: stderr in $tmp/err, status returned
  printf '#include "%s"\n' "$2" > "$tmp/probe.cc"
  "$cxx" -std=c++20 -fsyntax-only -I "$build/layers/$1" -I "$src/include" -I "$build/generated" \
    "$tmp/probe.cc" 2> "$tmp/err"
}
for i in "${!layers[@]}"; do
  layer=${layers[$i]}
  if ! compile "$layer" base/status.h; then
    echo "FAIL: $layer cannot include base/status.h:"; cat "$tmp/err"; failures=$((failures + 1))
  fi
  for folder in "${layers[@]:$((i + 1))}" "${upper[@]}"; do
    header=$(cd "$src" && find "$folder" -name "*.h" | sort | head -1)
    if compile "$layer" "$header"; then
      echo "FAIL: $layer/ may include $header (a higher layer)"; failures=$((failures + 1))
    elif ! grep -q "$header: No such file or directory" "$tmp/err"; then
      echo "FAIL: $layer including $header failed for another reason:"; cat "$tmp/err"
      failures=$((failures + 1))
    else
      echo "ok: $layer/ cannot include $header: $(grep -o "fatal error.*" "$tmp/err")"
    fi
  done
done
# The NCCL layer reaches core through one seam header, core/batch.h (docs/ARCHITECTURE.md).
others=$(cd "$src" && grep -rhoE '#include "core/[^"]+"' nccl | sort -u | grep -vF '"core/batch.h"' || true)
if [ -n "$others" ]; then
  echo "FAIL: nccl/ includes core headers other than the seam core/batch.h:"; echo "$others"
  failures=$((failures + 1))
else
  echo "ok: nccl/ includes no core header but core/batch.h"
fi
[ "$failures" -eq 0 ] && echo "layers_test: every layer includes only the layers below it"
exit $(( failures > 0 ))
