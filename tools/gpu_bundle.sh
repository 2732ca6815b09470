#!/usr/bin/env bash
# Packs what the lent GPU machine (the device tool; docs/GPU.md) needs to run the gpu tests and
# the device benchmarks, built here: stripped test and benchmark binaries, libnccl.so.2, and the
# shared libraries that machine lacks (hwloc, Highway, udev), plus run.sh, which runs them there.
# Usage: tools/gpu_bundle.sh [bundle dir, default .dev]  (add the dir to .git/info/exclude and
# name it in the device tool's carry list; then run `<dir>/run.sh` there).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.dev}"
build="${TUTTI_BUILD_DIR:-build}"
mkdir -p "$out/lib"
for b in cuda_kernels_test nccl_device_test tutti-kernel-bench tutti-nccl-device-perf; do
  strip -o "$out/$b" "$build/bin/$b"
done
strip -o "$out/lib/libnccl.so.2" "$build/lib/libnccl.so.2"
for l in libhwloc.so.15 libhwy.so.1 libudev.so.1; do
  cp -L "/lib/x86_64-linux-gnu/$l" "$out/lib/"
done
cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs on the GPU machine: the gpu tests, the kernel benchmark, then tutti-nccl-device-perf for
# one rank on tutti and on NVIDIA's NCCL (the pip package's, when present) and for 2 ranks on
# one GPU. Logs go to $OUT (the device tool's folder) or to the bundle dir.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
log="${OUT:-.}"
timeout 120 ./cuda_kernels_test > "$log/cuda_kernels_test.log" 2>&1; echo "cuda_kernels_test rc=$?"
timeout 300 ./nccl_device_test --durations yes > "$log/nccl_device_test.log" 2>&1
echo "nccl_device_test rc=$?"
grep -E "s: device|All tests|test cases" "$log/nccl_device_test.log"
./tutti-kernel-bench --backend cuda -o sum -n 20 | tee "$log/kernel_bench.txt"
nv=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
{
  timeout 60 ./tutti-nccl-device-perf -c allreduce -n 1 -b 8 -e 128M -f 8
  [ -n "$nv" ] && LD_LIBRARY_PATH=$nv timeout 60 ./tutti-nccl-device-perf -c allreduce -n 1 -b 8 -e 128M -f 8
  timeout 60 ./tutti-nccl-device-perf -c allreduce -n 2 -b 8 -e 128M -f 8
} | tee "$log/device_perf.txt"
RUN
chmod +x "$out/run.sh"
du -sh "$out"
