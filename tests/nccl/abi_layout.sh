#!/bin/sh
# Compares the ABI facts (abi_layout.cc) of tutti's nccl.h with those of NVIDIA's: every key both
# headers print must have the same value. Exit 77 when NVIDIA's header is absent.
# Usage: abi_layout.sh OURS_PROG NVIDIA_PROG
set -u
ours=$1; theirs=$2
[ -x "$theirs" ] || { echo "skipped: no program built against NVIDIA's nccl.h"; exit 77; }
a=$(mktemp); b=$(mktemp); trap 'rm -f "$a" "$b"' EXIT
"$ours" | sort > "$a" || exit 1
"$theirs" | sort > "$b" || exit 1
fail=0; n=0
while read -r key value; do
  other=$(awk -v k="$key" '$1 == k {print $2}' "$b")
  [ -z "$other" ] && continue
  n=$((n + 1))
  [ "$other" = "$value" ] || { echo "$key: tutti $value, NVIDIA $other"; fail=1; }
done < "$a"
echo "compared $n facts ($(wc -l < "$a") printed for tutti's header, $(wc -l < "$b") for NVIDIA's)"
[ $fail -eq 0 ] && echo ok
exit $fail
