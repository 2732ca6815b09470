// File: nccl/device_bench.cc
// tutti-nccl-device-perf: an nccl-tests-style sweep on CUDA device memory, written against the
// NCCL API only, so the same binary runs on tutti's libnccl.so.2 or NVIDIA's (pick one with
// LD_LIBRARY_PATH; it prints the library's version and path). All ranks use device 0 (NVIDIA's
// NCCL refuses more than one rank per GPU, tutti allows it), laid out by -m:
//   procs   (default) -n processes forked on this host; rank 0 makes the unique id and pipes it
//   group   -n ranks of this process (ncclCommInitAll with device 0 repeated), driven by one
//           thread: every step is ncclGroupStart, one call per rank on its own stream,
//           ncclGroupEnd (what CuPy's NcclCommunicator.initAll users write)
//   threads -n ranks of this process, one thread each, calling independently
// Per size: -w warm-up steps, then -i steps between two CUDA events on rank 0's stream; time =
// elapsed / iters (microseconds), algbw = size / time, busbw = algbw x the nccl-tests factor of
// the collective. With --graph (group mode) the -i steps are captured once in a CUDA graph and
// the graph's replay is timed. Out of place, float32 sum; after the timed steps every rank checks
// its output against the exact result and the #wrong column sums the wrong elements of all ranks.
// Usage: tutti-nccl-device-perf [-c allreduce|allgather|reducescatter|broadcast|alltoall]
//        [-n ranks=1] [-m procs|group|threads] [--graph] [-b bytes=8] [-e bytes=256M]
//        [-f factor=4] [-i iters=20] [-w warmup=5]
#include <dlfcn.h>
#include <sys/wait.h>
#include <tutti/nccl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "bench_check.h"  // this folder: the benchmarks see only the public headers

namespace {

struct Options {
  std::string coll = "allreduce";
  std::string mode = "procs";
  bool graph = false;
  bool window = false;  // procs: the buffers in windows (ncclCommWindowRegister)
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

// The sizes of the sweep: minBytes, then times factor (at least +1) up to maxBytes.
std::vector<size_t> sweep(const Options& o) {
  std::vector<size_t> out;
  for (size_t b = o.minBytes; b <= o.maxBytes; b = std::max(b + 1, size_t(double(b) * o.factor)))
    out.push_back(b);
  return out;
}

// The API count for a size of `bytes` (nccl-tests: the larger buffer's bytes), the elements per
// rank of the send and receive buffers, and the bus bandwidth factor.
size_t countFor(const std::string& coll, size_t bytes, int p, size_t* in, size_t* out,
                double* bus) {
  size_t in1, out1;
  shape(coll, 1, p, &in1, &out1, bus);
  const size_t count = std::max<size_t>(1, bytes / 4 / std::max(in1, out1));
  shape(coll, count, p, in, out, bus);
  return count;
}

void printHeader() {
  std::printf("#\n# %-12s %12s %6s %6s %12s %10s %10s %8s\n", "size(B)", "count", "type",
              "redop", "time(us)", "algbw", "busbw", "#wrong");
}

// One row: `ms` is the time of o.iters calls.
void printRow(const Options& o, size_t inCount, size_t outCount, size_t count, double bus,
              float ms, long wrong) {
  const size_t size = std::max(inCount, outCount) * 4;
  const double us = 1000.0 * ms / o.iters;
  const double algbw = double(size) / us / 1e3;
  const bool moves = o.coll == "allgather" || o.coll == "broadcast" || o.coll == "alltoall";
  std::printf("  %12zu %12zu %6s %6s %12.2f %10.2f %10.2f %8ld\n", size, count, "float",
              moves ? "none" : "sum", us, algbw, algbw * bus, wrong);
  std::fflush(stdout);
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
  ncclWindow_t windows[2] = {};
  if (o.window) {  // collective, on every rank
    NCCL_BENCH_OK(ncclCommWindowRegister(comm, in, inMax * 4 + 4, &windows[0], NCCL_WIN_DEFAULT));
    NCCL_BENCH_OK(
        ncclCommWindowRegister(comm, out, outMax * 4 + 4, &windows[1], NCCL_WIN_DEFAULT));
  }
  std::vector<float> host(std::max(inMax, outMax) + 1);
  for (size_t i = 0; i < inMax; ++i) host[i] = inputValue(rank, i);
  CUDA_OK(cudaMemcpy(in, host.data(), inMax * 4, cudaMemcpyHostToDevice));
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  if (rank == 0) printHeader();
  for (const size_t bytes : sweep(o)) {
    size_t inCount, outCount;
    const size_t count = countFor(o.coll, bytes, p, &inCount, &outCount, &bus);
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
    printRow(o, inCount, outCount, count, bus, ms, wrong + others);
  }
  for (ncclWindow_t w : windows)
    if (w) NCCL_BENCH_OK(ncclCommWindowDeregister(comm, w));
  NCCL_BENCH_OK(ncclCommDestroy(comm));
  return 0;
}


// Ranks of this process (-m group | threads): one communicator per rank from ncclCommInitAll on
// device 0 repeated, one stream per rank.
int runInProcess(const Options& o) {
  const int rank = 0, p = o.nranks;  // `rank` for CUDA_OK's messages
  CUDA_OK(cudaSetDevice(0));
  std::vector<int> devs(p, 0);
  std::vector<ncclComm_t> comms(p);
  NCCL_BENCH_OK(ncclCommInitAll(comms.data(), p, devs.data()));
  std::vector<cudaStream_t> streams(p);
  std::vector<float*> in(p), out(p);
  size_t inMax, outMax;
  double bus;
  shape(o.coll, o.maxBytes / 4, p, &inMax, &outMax, &bus);
  std::vector<float> host(std::max(inMax, outMax) + 1);
  for (int r = 0; r < p; ++r) {
    CUDA_OK(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc(&in[r], inMax * 4 + 4));
    CUDA_OK(cudaMalloc(&out[r], outMax * 4 + 4));
    for (size_t i = 0; i < inMax; ++i) host[i] = inputValue(r, i);
    CUDA_OK(cudaMemcpy(in[r], host.data(), inMax * 4, cudaMemcpyHostToDevice));
  }
  cudaEvent_t start, stop, fork;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  CUDA_OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  std::vector<cudaEvent_t> joins(p);
  for (auto& e : joins) CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  printHeader();
  for (const size_t bytes : sweep(o)) {
    size_t inCount, outCount;
    const size_t count = countFor(o.coll, bytes, p, &inCount, &outCount, &bus);
    // `steps` steps of every rank from one thread, a group per step.
    auto grouped = [&](int steps) -> int {
      for (int k = 0; k < steps; ++k) {
        NCCL_BENCH_OK(ncclGroupStart());
        for (int r = 0; r < p; ++r)
          NCCL_BENCH_OK(call(o.coll, in[r], out[r], count, comms[r], streams[r]));
        NCCL_BENCH_OK(ncclGroupEnd());
      }
      return 0;
    };
    float ms = 0;
    if (o.mode == "threads") {
      // One thread per rank for the whole size: warm-up, then (once every thread's warm-up has
      // run) rank 0's thread records the start event on its stream, every thread makes
      // its timed calls, and rank 0's thread records the stop event. Rank 0's stream waits for
      // every step's result, so the stop event follows every rank's work.
      std::vector<int> rcs(p, 0);
      std::atomic<int> warmed{0};
      std::vector<std::thread> threads;
      for (int r = 0; r < p; ++r)
        threads.emplace_back([&, r] {
          if (cudaSetDevice(0) != cudaSuccess) rcs[r] = 1;
          for (int k = 0; k < o.warmup && rcs[r] == 0; ++k)
            if (call(o.coll, in[r], out[r], count, comms[r], streams[r]) != ncclSuccess) rcs[r] = 1;
          if (cudaStreamSynchronize(streams[r]) != cudaSuccess) rcs[r] = 1;
          warmed.fetch_add(1);
          while (warmed.load() < p) std::this_thread::yield();
          if (r == 0 && cudaEventRecord(start, streams[0]) != cudaSuccess) rcs[r] = 1;
          for (int k = 0; k < o.iters && rcs[r] == 0; ++k)
            if (call(o.coll, in[r], out[r], count, comms[r], streams[r]) != ncclSuccess) rcs[r] = 1;
          if (r == 0 && cudaEventRecord(stop, streams[0]) != cudaSuccess) rcs[r] = 1;
        });
      for (auto& t : threads) t.join();
      for (int rc : rcs)
        if (rc) return 1;
    } else if (o.graph) {
      if (grouped(o.warmup)) return 1;
      for (int r = 0; r < p; ++r) CUDA_OK(cudaStreamSynchronize(streams[r]));
      // Fork every rank's stream from stream 0, capture the steps, join them back.
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CUDA_OK(cudaStreamBeginCapture(streams[0], cudaStreamCaptureModeThreadLocal));
      CUDA_OK(cudaEventRecord(fork, streams[0]));
      for (int r = 1; r < p; ++r) CUDA_OK(cudaStreamWaitEvent(streams[r], fork, 0));
      if (grouped(o.iters)) return 1;
      for (int r = 1; r < p; ++r) {
        CUDA_OK(cudaEventRecord(joins[r], streams[r]));
        CUDA_OK(cudaStreamWaitEvent(streams[0], joins[r], 0));
      }
      CUDA_OK(cudaStreamEndCapture(streams[0], &graph));
      CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
      CUDA_OK(cudaGraphLaunch(exec, streams[0]));  // warm-up replay
      CUDA_OK(cudaEventRecord(start, streams[0]));
      CUDA_OK(cudaGraphLaunch(exec, streams[0]));
      CUDA_OK(cudaEventRecord(stop, streams[0]));
      CUDA_OK(cudaStreamSynchronize(streams[0]));
      CUDA_OK(cudaGraphExecDestroy(exec));
      CUDA_OK(cudaGraphDestroy(graph));
    } else {
      if (grouped(o.warmup)) return 1;
      for (int r = 0; r < p; ++r) CUDA_OK(cudaStreamSynchronize(streams[r]));
      CUDA_OK(cudaEventRecord(start, streams[0]));
      if (grouped(o.iters)) return 1;
      CUDA_OK(cudaEventRecord(stop, streams[0]));
    }
    for (int r = 0; r < p; ++r) CUDA_OK(cudaStreamSynchronize(streams[r]));
    CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
    long wrong = 0;
    for (int r = 0; r < p; ++r) {
      CUDA_OK(cudaMemcpy(host.data(), out[r], outCount * 4, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < outCount; ++i) wrong += host[i] != expected(o.coll, r, p, count, i);
    }
    printRow(o, inCount, outCount, count, bus, ms, wrong);
  }
  for (int r = 0; r < p; ++r) NCCL_BENCH_OK(ncclCommDestroy(comms[r]));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"tutti-nccl-device-perf: an nccl-tests-style sweep on device memory"};
  app.add_option("-c,--coll", o.coll, "allreduce allgather reducescatter broadcast alltoall")
      ->check(CLI::IsMember({"allreduce", "allgather", "reducescatter", "broadcast", "alltoall"}));
  app.add_option("-n,--nranks", o.nranks, "ranks, all on device 0")->check(CLI::Range(1, 64));
  app.add_option("-m,--mode", o.mode,
                 "procs: one process per rank; group: ranks of this process driven by one thread "
                 "in groups; threads: one thread per rank")
      ->check(CLI::IsMember({"procs", "group", "threads"}));
  app.add_flag("--graph", o.graph, "group mode: time the replay of the steps captured in a graph");
  app.add_flag("--window", o.window,
               "procs mode: register the buffers as windows (ncclCommWindowRegister), which the "
               "peer executor reads in place across processes");
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
  std::printf("# tutti-nccl-device-perf: %s, %d rank(s) on device 0 (%s%s), NCCL version %d from "
              "%s\n",
              o.coll.c_str(), o.nranks, o.mode.c_str(), o.graph ? ", graph replay" : "", version,
              info.dli_fname ? info.dli_fname : "?");
  if (o.graph && o.mode != "group") {
    std::fprintf(stderr, "--graph needs -m group\n");
    return 1;
  }
  if (o.mode != "procs") return runInProcess(o);
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
