// File: nccl/device_bench.cc
// tutti-nccl-device-perf: an nccl-tests-style sweep on CUDA device memory, written against the
// NCCL API only, so the same binary runs on tutti's libnccl.so.2 or NVIDIA's (pick one with
// LD_LIBRARY_PATH; it prints the library's version and path). Forks -n ranks on this host, all
// on device 0 (rank 0 makes the unique id and pipes it to the others; NVIDIA's NCCL refuses
// more than one rank per GPU, tutti allows it). Per size: -w warm-up calls, then -i calls
// between two CUDA events on rank 0's stream; time = elapsed / iters (microseconds, rank 0),
// algbw = size / time, busbw = algbw x the nccl-tests factor of the collective. Out of place,
// float32 sum; after the timed calls every rank checks its output against the exact result and
// the #wrong column sums the wrong elements of all ranks.
// Usage: tutti-nccl-device-perf [-c allreduce|allgather|reducescatter|broadcast|alltoall]
//        [-n ranks=1] [-b bytes=8] [-e bytes=256M] [-f factor=4] [-i iters=20] [-w warmup=5]
#include <dlfcn.h>
#include <sys/wait.h>
#include <tutti/nccl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <string>
#include <vector>

#include "bench_check.h"  // this folder: the benchmarks see only the public headers

namespace {

struct Options {
  std::string coll = "allreduce";
  int nranks = 1;
  size_t minBytes = 8, maxBytes = size_t{256} << 20;
  double factor = 4;
  int iters = 20, warmup = 5;
};

#define CUDA_OK(call)                                                                         \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "rank %d: %s failed: %s\n", rank, #call, cudaGetErrorString(e_)); \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

// Elements per rank of the send and receive buffers for `count` (the API count), and the
// nccl-tests bus bandwidth factor.
void shape(const std::string& coll, size_t count, int p, size_t* in, size_t* out, double* bus) {
  *in = *out = count;
  *bus = 1;
  if (coll == "allreduce") {
    *bus = 2.0 * (p - 1) / p;
  } else if (coll == "allgather") {
    *out = count * p;
    *bus = double(p - 1) / p;
  } else if (coll == "reducescatter") {
    *in = count * p;
    *bus = double(p - 1) / p;
  } else if (coll == "alltoall") {
    *in = *out = count * p;
    *bus = double(p - 1) / p;
  }
}

ncclResult_t call(const std::string& coll, const float* in, float* out, size_t count,
                  ncclComm_t comm, cudaStream_t s) {
  if (coll == "allgather") return ncclAllGather(in, out, count, ncclFloat32, comm, s);
  if (coll == "reducescatter")
    return ncclReduceScatter(in, out, count, ncclFloat32, ncclSum, comm, s);
  if (coll == "broadcast") return ncclBroadcast(in, out, count, ncclFloat32, 0, comm, s);
  if (coll == "alltoall") return ncclAlltoAll(in, out, count, ncclFloat32, comm, s);
  return ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, s);
}

// Input element i of `rank` and the exact output element i (p ranks, count per block).
float inputValue(int rank, size_t i) { return float(rank + 1 + int(i % 3)); }
float expected(const std::string& coll, int rank, int p, size_t count, size_t i) {
  if (coll == "allgather") return inputValue(int(i / count), i % count);
  if (coll == "broadcast") return inputValue(0, i);
  if (coll == "alltoall") return inputValue(int(i / count), rank * count + i % count);
  const size_t at = coll == "reducescatter" ? rank * count + i : i;
  float sum = 0;
  for (int r = 0; r < p; ++r) sum += inputValue(r, at);
  return sum;
}

int runRank(const Options& o, int rank, const ncclUniqueId& id, int resultFd) {
  CUDA_OK(cudaSetDevice(0));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  ncclComm_t comm;
  NCCL_BENCH_OK(ncclCommInitRank(&comm, o.nranks, id, rank));
  const int p = o.nranks;
  size_t inMax, outMax;
  double bus;
  shape(o.coll, o.maxBytes / 4, p, &inMax, &outMax, &bus);
  float *in = nullptr, *out = nullptr;
  CUDA_OK(cudaMalloc(&in, inMax * 4 + 4));
  CUDA_OK(cudaMalloc(&out, outMax * 4 + 4));
  std::vector<float> host(std::max(inMax, outMax) + 1);
  for (size_t i = 0; i < inMax; ++i) host[i] = inputValue(rank, i);
  CUDA_OK(cudaMemcpy(in, host.data(), inMax * 4, cudaMemcpyHostToDevice));
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  if (rank == 0) {
    std::printf("#\n# %-12s %12s %6s %6s %12s %10s %10s %8s\n", "size(B)", "count", "type",
                "redop", "time(us)", "algbw", "busbw", "#wrong");
  }
  for (size_t bytes = o.minBytes; bytes <= o.maxBytes;
       bytes = std::max(bytes + 1, size_t(double(bytes) * o.factor))) {
    // size = the larger buffer's bytes (nccl-tests); count = the API count.
    size_t in1, out1;
    shape(o.coll, 1, p, &in1, &out1, &bus);
    const size_t count = std::max<size_t>(1, bytes / 4 / std::max(in1, out1));
    size_t inCount, outCount;
    shape(o.coll, count, p, &inCount, &outCount, &bus);
    for (int k = 0; k < o.warmup; ++k) NCCL_BENCH_OK(call(o.coll, in, out, count, comm, stream));
    CUDA_OK(cudaEventRecord(start, stream));
    for (int k = 0; k < o.iters; ++k) NCCL_BENCH_OK(call(o.coll, in, out, count, comm, stream));
    CUDA_OK(cudaEventRecord(stop, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
    CUDA_OK(cudaMemcpy(host.data(), out, outCount * 4, cudaMemcpyDeviceToHost));
    long wrong = 0;
    for (size_t i = 0; i < outCount; ++i)
      wrong += host[i] != expected(o.coll, rank, p, count, i);
    if (rank != 0) {
      if (write(resultFd, &wrong, sizeof wrong) != sizeof wrong) return 1;
      continue;
    }
    long others = 0;
    for (int r = 1; r < p; ++r) {
      long w = 0;
      if (read(resultFd, &w, sizeof w) != sizeof w) return 1;
      others += w;
    }
    const size_t size = std::max(inCount, outCount) * 4;
    const double us = 1000.0 * ms / o.iters;
    const double algbw = double(size) / us / 1e3;
    std::printf("  %12zu %12zu %6s %6s %12.2f %10.2f %10.2f %8ld\n", size, count, "float",
                o.coll == "allgather" || o.coll == "broadcast" || o.coll == "alltoall" ? "none"
                                                                                       : "sum",
                us, algbw, algbw * bus, wrong + others);
    std::fflush(stdout);
  }
  NCCL_BENCH_OK(ncclCommDestroy(comm));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"tutti-nccl-device-perf: an nccl-tests-style sweep on device memory"};
  app.add_option("-c,--coll", o.coll, "allreduce allgather reducescatter broadcast alltoall")
      ->check(CLI::IsMember({"allreduce", "allgather", "reducescatter", "broadcast", "alltoall"}));
  app.add_option("-n,--nranks", o.nranks, "ranks (processes, all on device 0)")
      ->check(CLI::Range(1, 64));
  app.add_option("-b,--minbytes", o.minBytes, "smallest size in bytes")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("-e,--maxbytes", o.maxBytes, "largest size in bytes")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("-f,--stepfactor", o.factor, "size step factor")->check(CLI::Range(1.01, 1e6));
  app.add_option("-i,--iters", o.iters, "timed calls per size")->check(CLI::Range(1, 1000000));
  app.add_option("-w,--warmup", o.warmup, "warm-up calls per size")->check(CLI::Range(0, 1000000));
  CLI11_PARSE(app, argc, argv);
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  int version = 0;
  ncclGetVersion(&version);
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(&ncclGetVersion), &info);
  std::printf("# tutti-nccl-device-perf: %s, %d rank(s) on device 0, NCCL version %d from %s\n",
              o.coll.c_str(), o.nranks, version, info.dli_fname ? info.dli_fname : "?");
  int idPipe[2], resultPipe[2];
  if (pipe(idPipe) != 0 || pipe(resultPipe) != 0) return 1;
  std::vector<pid_t> pids;
  for (int r = 1; r < o.nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(600);
      ncclUniqueId id;
      if (read(idPipe[0], &id, sizeof id) != sizeof id) _exit(1);
      _exit(runRank(o, r, id, resultPipe[1]));
    }
    pids.push_back(pid);
  }
  alarm(600);
  int rank = 0;
  ncclUniqueId id;
  NCCL_BENCH_OK(ncclGetUniqueId(&id));
  for (int r = 1; r < o.nranks; ++r)
    if (write(idPipe[1], &id, sizeof id) != sizeof id) return 1;
  int rc = runRank(o, 0, id, resultPipe[0]);
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  return rc;
}
