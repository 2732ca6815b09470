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
for b in cuda_kernels_test cuda_program_test cuda_program_perf_test nccl_device_test \
         tutti-kernel-bench tutti-nccl-device-perf tutti-gpu-probe; do
  strip -o "$out/$b" "$build/bin/$b"
done
strip -o "$out/lib/libnccl.so.2" "$build/lib/libnccl.so.2"
cp tests/gpu/torch_allreduce.py tests/gpu/cupy_initall.py "$out/"
for l in libhwloc.so.15 libhwy.so.1 libudev.so.1; do
  cp -L "/lib/x86_64-linux-gnu/$l" "$out/lib/"
done
cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs on the GPU machine; logs go to $OUT (the device tool's folder) or to the bundle dir.
#   run.sh tests      the gpu tests (cuda_kernels_test, cuda_program_test, nccl_device_test)
#   run.sh perfs      tutti-nccl-device-perf: 1 rank on tutti and on NVIDIA's NCCL (the pip
#                     package's), ranks as threads (group, graph, threads), other collectives
#   run.sh procperf   tutti-nccl-device-perf with ranks as processes (2 and 4)
#   run.sh external   PyTorch (2 processes on cuda:0) and CuPy (initAll on device 0 x4) on tutti
#   run.sh mps S...   steps S with an MPS daemon running (private pipe directory)
#   run.sh probe      tutti-gpu-probe
#   run.sh peer       the peer executor (TUTTI_DEVICE_PATH=peer): nccl_device_test's thread-rank
#                     cases, then allreduce sweeps of 2 and 4 thread ranks (2 also without
#                     direct messages)
#   run.sh mps peerprocs   the peer executor with ranks as processes on the one GPU (under MPS:
#                     without it they keep the process clique): nccl_device_test's process-rank
#                     cases (windows read in place among them), then allreduce sweeps of 2 and 4
#                     processes
# Several steps may be given; the default is "tests perfs procperf external".
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
log="${OUT:-.}"
nv=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
perf() { timeout 120 ./tutti-nccl-device-perf "$@"; }
tests() {
  timeout 120 ./cuda_kernels_test > "$log/cuda_kernels_test.log" 2>&1; echo "cuda_kernels_test rc=$?"
  timeout 150 ./cuda_program_test > "$log/cuda_program_test.log" 2>&1; echo "cuda_program_test rc=$?"
  timeout 150 ./cuda_program_perf_test > "$log/cuda_program_perf_test.log" 2>&1
  echo "cuda_program_perf_test rc=$?"
  grep -E "latency|throughput|us|GB/s" "$log/cuda_program_perf_test.log" | head -30
  timeout 300 ./nccl_device_test --durations yes > "$log/nccl_device_test.log" 2>&1
  echo "nccl_device_test rc=$?"
  grep -E "s: device|All tests|test cases|FAILED|failed checks" "$log/nccl_device_test.log" | head -40
}
perfs() {
  {
    perf -c allreduce -n 1 -b 8 -e 1G -f 8
    [ -n "$nv" ] && LD_LIBRARY_PATH=$nv perf -c allreduce -n 1 -b 8 -e 1G -f 8
    for n in 2 4 8; do
      perf -c allreduce -n $n -m group -b 8 -e 1G -f 8
      perf -c allreduce -n $n -m group --graph -b 8 -e 64K -f 8 -i 100
      perf -c allreduce -n $n -m threads -b 8 -e 1M -f 8
    done
    for c in allgather reducescatter broadcast alltoall; do perf -c $c -n 4 -m group -b 8 -e 256M -f 32; done
  } 2>&1 | tee "$log/device_perf${1:-}.txt"
}
procperf() {
  for n in 2 4; do perf -c allreduce -n $n -m procs -b 8 -e 1G -f 8; done 2>&1 | tee "$log/proc_perf${1:-}.txt"
}
external() {
  lib=$PWD/lib/libnccl.so.2
  echo "== torch, 2 processes on cuda:0, LD_PRELOAD=$lib"
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT TUTTI_NCCL=$lib LD_PRELOAD=$lib timeout 180 \
    python3 -m torch.distributed.run --standalone --nproc_per_node=2 torch_allreduce.py \
    > "$log/torch${1:-}.log" 2>&1
  echo "torch rc=$?"
  grep -E "clique|libnccl mapped|^ +[0-9]|wrong|Error|error" "$log/torch${1:-}.log" | head -20
  [ -n "$1" ] && return  # under MPS: torch only
  echo "== cupy initAll([0,0,0,0]), LD_PRELOAD=$lib"
  LD_PRELOAD=$lib timeout 120 python3 cupy_initall.py 2>&1 | tee "$log/cupy.log" | tail -4
  echo "== cupy initAll([0,0,0,0]) on NVIDIA's NCCL (expected to refuse)"
  timeout 60 python3 cupy_initall.py 2>&1 | tail -2
}
mps() {
  export CUDA_MPS_PIPE_DIRECTORY=$(mktemp -d /tmp/mpsp.XXXX) CUDA_MPS_LOG_DIRECTORY=$(mktemp -d /tmp/mpsl.XXXX)
  stop() { echo quit | timeout 10 nvidia-cuda-mps-control; sleep 1; }
  trap stop EXIT
  timeout 20 nvidia-cuda-mps-control -d; echo "MPS daemon rc=$?"
  for step in "$@"; do "$step" -mps; done
  stop; trap - EXIT
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
probe() { timeout 300 ./tutti-gpu-probe info; timeout 300 ./tutti-gpu-probe copy; }
peer() {
  # A kernel per rank waits for its peers' kernels: enough hardware queues that none queues
  # behind a spinning peer (docs/GPU.md, the probe), and every wait bounded.
  (
    export TUTTI_DEVICE_PATH=peer CUDA_DEVICE_MAX_CONNECTIONS=32 TUTTI_TIMEOUT=20
    timeout 300 ./nccl_device_test --durations yes \
      "[clique]~*different things*,device memory: ranks of one process*" \
      > "$log/peer_test.log" 2>&1
    echo "nccl_device_test (peer) rc=$?"
    grep -E "s: device|All tests|test cases|FAILED|failed checks" "$log/peer_test.log" | head -40
    for n in 2 4; do
      perf -c allreduce -n $n -m group -b 8 -e 1G -f 8
      perf -c allreduce -n $n -m threads -b 8 -e 1M -f 8
    done 2>&1 | tee "$log/peer_perf.txt"
    echo "# without direct messages (TUTTI_PEER_DIRECT=0), for the A/B" | tee -a "$log/peer_perf.txt"
    TUTTI_PEER_DIRECT=0 perf -c allreduce -n 2 -m group -b 8 -e 1G -f 64 2>&1 |
      tee -a "$log/peer_perf.txt"
  )
}
peerprocs() {
  (
    export TUTTI_DEVICE_PATH=peer TUTTI_TIMEOUT=20 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT
    timeout 300 ./nccl_device_test --durations yes \
      "device memory: every collective x dtype x op, 1 to 4 ranks as processes,device memory: buffers in windows*" \
      > "$log/peer_procs${1:-}.log" 2>&1
    echo "nccl_device_test (peer, processes) rc=$?"
    grep -E "peer executor|s: device|All tests|test cases|FAILED|failed checks" \
      "$log/peer_procs${1:-}.log" | sort | uniq -c | head -40
    for n in 2 4; do perf -c allreduce -n $n -m procs -b 8 -e 1G -f 8; done 2>&1 |
      tee "$log/peer_proc_perf${1:-}.txt"
    {
      echo "# buffers in windows (read in place across processes)"
      perf -c allreduce -n 2 -m procs --window -b 8 -e 1G -f 8 2>&1
    } | tee -a "$log/peer_proc_perf${1:-}.txt"
  )
}
[ $# -eq 0 ] && set -- tests perfs procperf external
while [ $# -gt 0 ]; do
  echo "== $1 ($(date +%T))"
  if [ "$1" = mps ]; then shift; mps "$@"; break; fi
  $1; shift
done
echo "== end ($(date +%T))"
RUN
chmod +x "$out/run.sh"
du -sh "$out"
