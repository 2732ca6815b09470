#!/bin/sh
# Checks tutti's libnccl.so.2 exports:
#  - every function of the NCCL release in LIST (tests/nccl/nccl_2_32_3_symbols.txt: NVIDIA's
#    exported names, one per line) as a weak ncclX with a strong pncclX alias
#    (ncclResetDebugInitInternal: strong, no alias), as NVIDIA's library binds them;
#  - every weak ncclX we export has its strong pncclX; SONAME libnccl.so.2; no name outside
#    nccl*/pnccl*;
#  - when NVIDIA_LIB exists (the CUDA toolkit's libnccl.so.2, an older release): every nccl*/pnccl*
#    name it exports, with the same binding.
# Usage: symbols.sh OUR_LIB LIST [NVIDIA_LIB]
set -u
ours=$1; list=$2; theirs=${3:-}
fail=0
defined() { nm -D --defined-only "$1" | awk '{print $2, $3}'; }
mine=$(mktemp); trap 'rm -f "$mine"' EXIT
defined "$ours" > "$mine"
soname=$(readelf -d "$ours" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "libnccl.so.2" ] || { echo "SONAME is '$soname', expected libnccl.so.2"; fail=1; }
other=$(awk '$2 !~ /^p?nccl/ {print $2}' "$mine")
[ -z "$other" ] || { echo "exported names outside nccl*/pnccl*:"; echo "$other"; fail=1; }
# Weak ncclX with a strong pncclX for every API function.
for name in $(awk '$2 ~ /^nccl/ && $1 == "W" {print $2}' "$mine"); do
  grep -qx "T p$name" "$mine" || { echo "p$name missing or not strong"; fail=1; }
done
echo "tutti exports $(awk '$2 ~ /^nccl/ && $1 == "W"' "$mine" | wc -l) weak nccl* functions"

# The release in LIST.
n=0
for name in $(grep -v '^#' "$list"); do
  n=$((n + 1))
  if [ "$name" = ncclResetDebugInitInternal ]; then
    grep -qx "T $name" "$mine" || { echo "$name missing or not strong"; fail=1; }
    continue
  fi
  grep -qx "W $name" "$mine" || { echo "$name missing or not weak"; fail=1; }
  grep -qx "T p$name" "$mine" || { echo "p$name missing or not strong"; fail=1; }
done
echo "checked $n names of $(basename "$list")"

# The NVIDIA library on this machine, when present.
if [ -n "$theirs" ] && [ -f "$theirs" ]; then
  bad=$(defined "$theirs" | awk '$2 ~ /^p?nccl/' | while read -r bind name; do
    grep -qx "$bind $name" "$mine" || echo "$name: NVIDIA's binding '$bind', ours '$(awk -v n="$name" '$2 == n {print $1}' "$mine")'"
  done)
  [ -z "$bad" ] || { echo "differences from $theirs:"; echo "$bad"; fail=1; }
  echo "compared with $theirs: $(defined "$theirs" | awk '$2 ~ /^p?nccl/' | wc -l) names"
else
  echo "no NVIDIA library to compare with (${theirs:-none given})"
fi
[ $fail -eq 0 ] && echo ok
exit $fail
