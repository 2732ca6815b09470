#!/bin/sh
# NCCL_DEBUG output in NCCL's line format: VERSION prints the banner naming the emulated NCCL
# version and tutti's ("host:pid:tid [rank] NCCL INFO NCCL version 2.32.3+... (tutti X ...)");
# INFO adds init lines; without NCCL_DEBUG, nothing is printed even for argument errors.
# Usage: debug_output.sh nccl_prog
set -u
prog=$1
fail=0
out=$(NCCL_DEBUG=VERSION timeout 100 "$prog" fork 2 --quick 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep -Eq '^[^ :]+:[0-9]+:[0-9]+ \[[0-9]+\] NCCL INFO NCCL version 2\.32\.3\+[a-z0-9.]+ \(tutti [0-9.]+ emulating NCCL 2\.32\.3' \
  || { echo "no NCCL-format version banner in:"; echo "$out" | head; fail=1; }
echo "$out" | grep -q "NCCL WARN" || { echo "NCCL_DEBUG=VERSION shows no WARN lines"; fail=1; }
out=$(NCCL_DEBUG=INFO timeout 100 "$prog" fork 2 --quick 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep -Eq '^[^ :]+:[0-9]+:[0-9]+ \[[0-9]+\] NCCL INFO comm .* rank [0-9]+ nranks 2 .*Init COMPLETE' \
  || { echo "no NCCL-format 'Init COMPLETE' line with NCCL_DEBUG=INFO"; fail=1; }
out=$(env -u NCCL_DEBUG -u TUTTI_DEBUG timeout 100 "$prog" fork 2 --quick 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep -q "NCCL" && { echo "output without NCCL_DEBUG:"; echo "$out" | grep NCCL | head -3; fail=1; }
[ $fail -eq 0 ] && echo ok
exit $fail
