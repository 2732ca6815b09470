#!/bin/sh
# Checks tutti's libnccl.so.2 exports: every nccl*/pnccl* name that NVIDIA's libnccl.so.2 exports
# (nm -D), each ncclX weak and pnccl X strong, SONAME libnccl.so.2, and no name outside nccl*/pnccl*.
# Usage: symbols.sh OUR_LIB [NVIDIA_LIB]   (the NVIDIA comparison is skipped when it is absent)
set -u
ours=$1; theirs=${2:-}
fail=0
defined() { nm -D --defined-only "$1" | awk '{print $2, $3}'; }
soname=$(readelf -d "$ours" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "libnccl.so.2" ] || { echo "SONAME is '$soname', expected libnccl.so.2"; fail=1; }
other=$(defined "$ours" | awk '$2 !~ /^p?nccl/ {print $2}')
[ -z "$other" ] || { echo "exported names outside nccl*/pnccl*:"; echo "$other"; fail=1; }
# Weak ncclX with a strong pncclX for every API function.
for name in $(defined "$ours" | awk '$2 ~ /^nccl/ && $1 == "W" {print $2}'); do
  defined "$ours" | grep -q "^T p$name\$" || { echo "p$name missing or not strong"; fail=1; }
done
count=$(defined "$ours" | awk '$2 ~ /^nccl/ && $1 == "W"' | wc -l)
echo "tutti exports $count weak nccl* functions"
if [ -n "$theirs" ] && [ -f "$theirs" ]; then
  missing=$(defined "$theirs" | awk '$2 ~ /^p?nccl/ {print $2}' | sort -u | while read -r s; do
    defined "$ours" | awk '{print $2}' | grep -qx "$s" || echo "$s"
  done)
  if [ -n "$missing" ]; then echo "missing names that $theirs exports:"; echo "$missing"; fail=1; fi
  echo "compared with $theirs: $(defined "$theirs" | awk '$2 ~ /^p?nccl/' | wc -l) names"
  # Binding (weak/strong) must match too.
  defined "$theirs" | awk '$2 ~ /^p?nccl/' | while read -r bind name; do
    mine=$(defined "$ours" | awk -v n="$name" '$2 == n {print $1}')
    [ "$mine" = "$bind" ] || echo "binding of $name: ours '$mine', NVIDIA's '$bind'"
  done | tee /tmp/tutti_nccl_bind.$$ 
  [ -s /tmp/tutti_nccl_bind.$$ ] && fail=1
  rm -f /tmp/tutti_nccl_bind.$$
  [ $fail -eq 0 ] && echo "ok"
  exit $fail
fi
[ $fail -eq 0 ] || exit 1
echo "skipped the NVIDIA comparison: ${theirs:-no library given} not found"
exit 77
