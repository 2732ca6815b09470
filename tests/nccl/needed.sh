#!/bin/sh
# libnccl.so.2 must load next to PyTorch on a machine that has none of tutti's build dependencies
# (fmt, spdlog, hwloc, Highway, libudev): its DT_NEEDED entries may only name libraries that every
# glibc-based Linux with a C++ runtime has. Allowed, and why:
#   libc.so.6, ld-linux-x86-64.so.2 (ld-linux-aarch64.so.1), libm.so.6, libdl.so.2,
#   libpthread.so.0, librt.so.1   glibc itself (libdl/libpthread/librt are stubs since glibc 2.34;
#                                 older toolchains and the static CUDA runtime may still name them)
#   libstdc++.so.6, libgcc_s.so.1 the GCC C++ runtime, which PyTorch itself needs
# Not allowed: anything else (the CUDA runtime is linked statically; the CUDA driver and
# libibverbs are opened with dlopen when present). The test also loads the library in a clean
# environment with only those libraries resolvable: ldd must find every dependency.
# Usage: needed.sh LIBNCCL
set -u
lib=$1
allowed="libc.so.6 ld-linux-x86-64.so.2 ld-linux-aarch64.so.1 libm.so.6 libdl.so.2 libpthread.so.0
librt.so.1 libstdc++.so.6 libgcc_s.so.1"
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || { echo "no NEEDED entries read from $lib"; exit 1; }
fail=0
for n in $needed; do
  ok=0
  for a in $allowed; do [ "$n" = "$a" ] && ok=1; done
  if [ $ok -eq 1 ]; then echo "  NEEDED $n"; else echo "  NEEDED $n   <- not allowed"; fail=1; fi
done
# No RUNPATH/RPATH into the build tree either: what loads must not depend on where it was built.
rp=$(readelf -d "$lib" | grep -E '\((RUNPATH|RPATH)\)')
[ -z "$rp" ] || { echo "unexpected $rp"; fail=1; }
# Every dependency resolves (ldd names "not found" otherwise).
if ldd "$lib" | grep -q "not found"; then ldd "$lib"; fail=1; fi
[ $fail -eq 0 ] && echo "ok: $lib needs only system libraries" || echo "FAILED"
exit $fail
