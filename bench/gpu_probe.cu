// File: bench/gpu_probe.cu
// tutti-gpu-probe: what the device executor's design rests on, measured on the GPU at hand
// (device 0), with no tutti code. Each wait on the GPU is bounded (2 s, %globaltimer), so a
// pattern that cannot make progress reports "STUCK" instead of hanging.
//
//   tutti-gpu-probe info           device attributes (SMs, stream memory operations, IPC)
//   tutti-gpu-probe copy           device-to-device copy rate, counting bytes read and written:
//                                  cudaMemcpyAsync and a 16-byte-vector copy kernel
//   tutti-gpu-probe threads N...   N ranks as threads of one process, one stream each:
//                                  a barrier of spinning kernels (1 CTA per rank), 2000 rounds
//                                  in one launch; one launch per round (eager); graph replay
//   tutti-gpu-probe procs N        N ranks as processes (forked before CUDA starts), arenas
//                                  shared with cudaIpcGetMemHandle: the spinning barrier, eager
//                                  launches, a barrier of stream memory operations
//                                  (cuStreamWriteValue64 / cuStreamWaitValue64), and whether a
//                                  cudaHostAlloc or cudaMalloc in one process completes while
//                                  another process's kernel spins
//
// Every barrier uses persistent 64-bit counters, one per rank on its own 128-byte line: a rank
// bumps its counter (release) and waits until every peer's counter reaches the same value
// (acquire), so a replayed graph needs no reset.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

namespace {

constexpr int kMaxRanks = 16;
constexpr uint64_t kDeadlineNs = 2'000'000'000ull;
constexpr size_t kLine = 128 / sizeof(uint64_t);  // counters are 128 bytes apart

#define CK(call)                                                                          \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                  \
                   cudaGetErrorString(e_));                                               \
      std::exit(2);                                                                       \
    }                                                                                     \
  } while (0)

double nowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---- device side ----

__device__ __forceinline__ uint64_t ldAcquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void stRelease(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t globalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

struct Peers {
  uint64_t* counter[kMaxRanks];  // counter[r]: rank r's counter (mapped in this context)
};

// What a bounded wait saw when it expired (first expiry only).
struct Stuck {
  int stuck;
  int peer;
  uint64_t expected;
  uint64_t seen;
};

// Set by the first expired wait of this process: later launches return at once, so that a
// stuck pattern costs one deadline, not one per queued launch.
__device__ int gGiveUp = 0;

// `rounds` barriers among `n` ranks. sleepNs > 0: __nanosleep between polls.
__global__ void barrierKernel(Peers peers, int rank, int n, int rounds, int sleepNs,
                              Stuck* stuck) {
  if (threadIdx.x != 0 || *(volatile int*)&gGiveUp) return;
  uint64_t* mine = peers.counter[rank];
  uint64_t v = *mine;
  const uint64_t start = globalTimer();
  for (int r = 0; r < rounds; ++r) {
    ++v;
    stRelease(mine, v);
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      uint64_t seen;
      while ((seen = ldAcquire(peers.counter[p])) < v) {
        if (globalTimer() - start > kDeadlineNs) {
          if (!stuck->stuck) *stuck = Stuck{1, p, v, seen};
          *(volatile int*)&gGiveUp = 1;
          return;
        }
        if (sleepNs) __nanosleep(sleepNs);
      }
    }
  }
}

// Spins until peer's counter exceeds its value at entry (one-sided wait), bounded.
__global__ void waitKernel(const uint64_t* peer, uint64_t target, Stuck* stuck) {
  const uint64_t start = globalTimer();
  uint64_t seen;
  while ((seen = ldAcquire(peer)) < target) {
    if (globalTimer() - start > kDeadlineNs) {
      *stuck = Stuck{1, 0, target, seen};
      return;
    }
  }
}

__global__ void bumpKernel(uint64_t* mine) { stRelease(mine, *mine + 1); }

__global__ void copyKernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

// ---- driver entry points (the library reaches the driver at run time the same way) ----

using WaitValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned);
using WriteValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned);

template <class F>
F driverFn(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    std::fprintf(stderr, "driver entry point %s not found\n", name);
    return nullptr;
  }
  return reinterpret_cast<F>(fn);
}

// ---- info and copy ----

int info() {
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, 0));
  int drv = 0, rt = 0;
  CK(cudaDriverGetVersion(&drv));
  CK(cudaRuntimeGetVersion(&rt));
  std::printf("device: %s, cc %d.%d, %d SMs, %.1f GiB, driver %d, runtime %d\n", p.name, p.major,
              p.minor, p.multiProcessorCount, p.totalGlobalMem / double(1 << 30), drv, rt);
  const std::pair<cudaDeviceAttr, const char*> attrs[] = {
      {cudaDevAttrConcurrentKernels, "concurrentKernels"},
      {cudaDevAttrComputeMode, "computeMode (0 default, 2 prohibited, 3 exclusive process)"},
      {cudaDevAttrCanMapHostMemory, "canMapHostMemory"},
      {cudaDevAttrUnifiedAddressing, "unifiedAddressing"},
      {cudaDevAttrComputePreemptionSupported, "computePreemptionSupported"},
      {cudaDevAttrCooperativeLaunch, "cooperativeLaunch"},
      {cudaDevAttrMemoryPoolsSupported, "memoryPoolsSupported"},
      {cudaDevAttrIpcEventSupport, "ipcEventSupport"},
      {cudaDevAttrMaxBlocksPerMultiprocessor, "maxBlocksPerSM"},
  };
  for (auto [a, name] : attrs) {
    int v = -1;
    cudaDeviceGetAttribute(&v, a, 0);
    std::printf("  %s = %d\n", name, v);
  }
  using GetAttr = CUresult (*)(int*, CUdevice_attribute, CUdevice);
  if (auto get = driverFn<GetAttr>("cuDeviceGetAttribute")) {
    const std::pair<CUdevice_attribute, const char*> dattrs[] = {
        {CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, "streamWaitValueNor"},
        {CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, "canFlushRemoteWrites"},
        {CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, "cuMemPosixFd"},
        {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "vmm"},
        {CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, "multicast"},
    };
    for (auto [a, name] : dattrs) {
      int v = -1;
      get(&v, a, 0);
      std::printf("  %s = %d\n", name, v);
    }
  }
  std::printf("  CUDA_DEVICE_MAX_CONNECTIONS=%s\n",
              std::getenv("CUDA_DEVICE_MAX_CONNECTIONS") ? std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")
                                                         : "(unset: 8)");
  return 0;
}

int copy() {
  for (size_t bytes : {size_t(64) << 20, size_t(1) << 30}) {
    void *a = nullptr, *b = nullptr;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 1, bytes));
    CK(cudaMemset(b, 2, bytes));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int iters = bytes >= (size_t(1) << 30) ? 20 : 200;
    for (int variant = 0; variant < 2; ++variant) {
      auto once = [&] {
        if (variant == 0)
          CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, nullptr));
        else
          copyKernel<<<sms * 4, 512>>>(static_cast<const uint4*>(a), static_cast<uint4*>(b),
                                       bytes / 16);
      };
      for (int i = 0; i < 3; ++i) once();
      CK(cudaEventRecord(e0));
      for (int i = 0; i < iters; ++i) once();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      const double us = ms * 1000.0 / iters;
      std::printf("copy %s %zu MiB: %.1f us, %.0f GB/s (read + write)\n",
                  variant == 0 ? "cudaMemcpyAsync" : "kernel uint4", bytes >> 20, us,
                  2.0 * bytes / us / 1e3);
    }
    CK(cudaFree(a));
    CK(cudaFree(b));
  }
  return 0;
}

// ---- ranks as threads ----

void reportStuck(const char* what, int rank, const Stuck& s) {
  if (s.stuck)
    std::printf("  %s: rank %d STUCK waiting for rank %d: expected %llu, saw %llu\n", what, rank,
                s.peer, (unsigned long long)s.expected, (unsigned long long)s.seen);
}

int threads(int n) {
  if (n < 2 || n > kMaxRanks) return 1;
  uint64_t* counters = nullptr;
  Stuck* stuck = nullptr;
  CK(cudaMalloc(&counters, kMaxRanks * kLine * sizeof(uint64_t)));
  CK(cudaMemset(counters, 0, kMaxRanks * kLine * sizeof(uint64_t)));
  CK(cudaMallocHost(&stuck, kMaxRanks * sizeof(Stuck)));
  std::memset(stuck, 0, kMaxRanks * sizeof(Stuck));
  Peers peers{};
  for (int r = 0; r < n; ++r) peers.counter[r] = counters + r * kLine;
  std::vector<cudaStream_t> streams(n);
  for (auto& s : streams) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  auto runAll = [&](const char* what, auto perRank) {
    std::atomic<int> go{0};
    std::vector<double> us(n);
    std::vector<std::thread> ts;
    for (int r = 0; r < n; ++r)
      ts.emplace_back([&, r] {
        CK(cudaSetDevice(0));
        go.fetch_add(1);
        while (go.load() < n) std::this_thread::yield();
        const double t0 = nowUs();
        const int calls = perRank(r);
        CK(cudaStreamSynchronize(streams[r]));
        us[r] = (nowUs() - t0) / calls;
      });
    for (auto& t : ts) t.join();
    double worst = 0;
    bool any = false;
    for (int r = 0; r < n; ++r) {
      reportStuck(what, r, stuck[r]);
      any |= stuck[r].stuck != 0;
      worst = std::max(worst, us[r]);
    }
    if (any) CK(cudaMemset(counters, 0, kMaxRanks * kLine * sizeof(uint64_t)));
    std::printf("threads n=%d %s: %.2f us per barrier\n", n, what, worst);
    std::memset(stuck, 0, kMaxRanks * sizeof(Stuck));
    const int zero = 0;
    CK(cudaMemcpyToSymbol(gGiveUp, &zero, sizeof zero));
  };

  // Warm-up (module load), then 2000 rounds in one launch per rank.
  runAll("warm-up, 1 launch", [&](int r) {
    barrierKernel<<<1, 32, 0, streams[r]>>>(peers, r, n, 1, 0, stuck + r);
    return 1;
  });
  runAll("spin, 2000 rounds in 1 launch", [&](int r) {
    barrierKernel<<<1, 32, 0, streams[r]>>>(peers, r, n, 2000, 0, stuck + r);
    return 2000;
  });
  runAll("eager, 1 launch per round (1000)", [&](int r) {
    for (int i = 0; i < 1000; ++i)
      barrierKernel<<<1, 32, 0, streams[r]>>>(peers, r, n, 1, 0, stuck + r);
    return 1000;
  });
  // Graph: 100 launches captured per rank, replayed 10 times.
  std::vector<cudaGraphExec_t> execs(n);
  for (int r = 0; r < n; ++r) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(streams[r], cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < 100; ++i)
      barrierKernel<<<1, 32, 0, streams[r]>>>(peers, r, n, 1, 0, stuck + r);
    CK(cudaStreamEndCapture(streams[r], &g));
    CK(cudaGraphInstantiate(&execs[r], g, 0));
    CK(cudaGraphDestroy(g));
  }
  runAll("graph replay, 1 kernel per round (10 x 100)", [&](int r) {
    for (int i = 0; i < 10; ++i) CK(cudaGraphLaunch(execs[r], streams[r]));
    return 1000;
  });
  for (auto e : execs) CK(cudaGraphExecDestroy(e));
  for (auto s : streams) CK(cudaStreamDestroy(s));
  CK(cudaFree(counters));
  CK(cudaFreeHost(stuck));
  return 0;
}

// ---- ranks as processes ----

struct Shared {
  std::atomic<int> arrived[64];
  cudaIpcMemHandle_t handle[kMaxRanks];
};

void hostBarrier(Shared* sh, int slot, int n) {
  sh->arrived[slot].fetch_add(1);
  const double t0 = nowUs();
  while (sh->arrived[slot].load() < n) {
    if (nowUs() - t0 > 20e6) {
      std::printf("host barrier %d timed out\n", slot);
      std::fflush(stdout);
      _exit(3);
    }
    std::this_thread::yield();
  }
}

// Waits up to 5 s for the stream; false if it did not finish.
bool syncBounded(cudaStream_t s) {
  const double t0 = nowUs();
  cudaError_t e;
  while ((e = cudaStreamQuery(s)) == cudaErrorNotReady) {
    if (nowUs() - t0 > 5e6) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  CK(e);
  return true;
}

void procRank(Shared* sh, int rank, int n) {
  int barrier = 0;
  CK(cudaSetDevice(0));
  // Arena: kernel counters at line 0, memop counters at line 1, scratch after.
  uint64_t* arena = nullptr;
  CK(cudaMalloc(&arena, 2 << 20));
  CK(cudaMemset(arena, 0, 2 << 20));
  CK(cudaDeviceSynchronize());
  CK(cudaIpcGetMemHandle(&sh->handle[rank], arena));
  hostBarrier(sh, barrier++, n);
  uint64_t* base[kMaxRanks] = {};
  for (int p = 0; p < n; ++p) {
    if (p == rank) {
      base[p] = arena;
      continue;
    }
    void* q = nullptr;
    CK(cudaIpcOpenMemHandle(&q, sh->handle[p], cudaIpcMemLazyEnablePeerAccess));
    base[p] = static_cast<uint64_t*>(q);
  }
  Peers kpeers{}, mpeers{};
  for (int p = 0; p < n; ++p) {
    kpeers.counter[p] = base[p];
    mpeers.counter[p] = base[p] + kLine;
  }
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Stuck* stuck = nullptr;
  CK(cudaMallocHost(&stuck, sizeof(Stuck)));
  std::memset(stuck, 0, sizeof(Stuck));
  auto say = [&](const char* what, double us, bool done) {
    const bool wasStuck = stuck->stuck != 0;
    if (wasStuck)
      std::printf("procs n=%d rank %d %s: STUCK waiting for rank %d: expected %llu, saw %llu\n",
                  n, rank, what, stuck->peer, (unsigned long long)stuck->expected,
                  (unsigned long long)stuck->seen);
    else if (!done)
      std::printf("procs n=%d rank %d %s: NOT DONE after 5 s\n", n, rank, what);
    else if (rank == 0)
      std::printf("procs n=%d %s: %.2f us per barrier\n", n, what, us);
    std::fflush(stdout);
    std::memset(stuck, 0, sizeof(Stuck));
    const int zero = 0;
    CK(cudaMemcpyToSymbol(gGiveUp, &zero, sizeof zero));
    return wasStuck;
  };
  // A stuck or unfinished pattern leaves the counters out of step: this rank stops there.
  auto timed = [&](const char* what, int rounds, auto enqueue) {
    hostBarrier(sh, barrier++, n);
    const double t0 = nowUs();
    enqueue();
    const bool done = syncBounded(s);
    if (say(what, (nowUs() - t0) / rounds, done) || !done) _exit(4);
  };

  timed("spin warm-up", 1, [&] { barrierKernel<<<1, 32, 0, s>>>(kpeers, rank, n, 1, 0, stuck); });
  timed("spin, 200 rounds in 1 launch", 200,
        [&] { barrierKernel<<<1, 32, 0, s>>>(kpeers, rank, n, 200, 0, stuck); });
  timed("spin + nanosleep(1us), 200 rounds in 1 launch", 200,
        [&] { barrierKernel<<<1, 32, 0, s>>>(kpeers, rank, n, 200, 1000, stuck); });
  timed("spin eager, 1 launch per round (100)", 100, [&] {
    for (int i = 0; i < 100; ++i) barrierKernel<<<1, 32, 0, s>>>(kpeers, rank, n, 1, 0, stuck);
  });

  auto wait64 = driverFn<WaitValue64>("cuStreamWaitValue64");
  auto write64 = driverFn<WriteValue64>("cuStreamWriteValue64");
  if (wait64 && write64) {
    uint64_t v = 0;
    timed("stream memory ops, 1000 rounds", 1000, [&] {
      for (int i = 0; i < 1000; ++i) {
        ++v;
        CUresult r = write64(reinterpret_cast<CUstream>(s),
                             reinterpret_cast<CUdeviceptr>(mpeers.counter[rank]), v, 0);
        for (int p = 0; p < n && r == CUDA_SUCCESS; ++p)
          if (p != rank)
            r = wait64(reinterpret_cast<CUstream>(s),
                       reinterpret_cast<CUdeviceptr>(mpeers.counter[p]), v,
                       CU_STREAM_WAIT_VALUE_GEQ);
        if (r != CUDA_SUCCESS) {
          std::printf("rank %d: stream memory op failed: %d\n", rank, int(r));
          _exit(5);
        }
      }
    });
    // Stream memory ops for the barrier, a small kernel between barriers (no spinning kernel).
    timed("stream memory ops + a bump kernel each round, 1000 rounds", 1000, [&] {
      for (int i = 0; i < 1000; ++i) {
        ++v;
        bumpKernel<<<1, 1, 0, s>>>(base[rank] + 2 * kLine);
        write64(reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(mpeers.counter[rank]),
                v, 0);
        for (int p = 0; p < n; ++p)
          if (p != rank)
            wait64(reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(mpeers.counter[p]),
                   v, CU_STREAM_WAIT_VALUE_GEQ);
      }
    });
  }

  // Allocation while another process's kernel spins: rank 0 waits (bounded) for rank 1's
  // counter; rank 1 first allocates, then bumps it.
  for (int kind = 0; kind < 2; ++kind) {
    const char* what = kind == 0 ? "cudaHostAlloc(64 MiB)" : "cudaMalloc(64 MiB)";
    hostBarrier(sh, barrier++, n);
    if (rank == 0) {
      uint64_t target = 0;
      CK(cudaMemcpy(&target, base[1], sizeof target, cudaMemcpyDeviceToHost));
      waitKernel<<<1, 1, 0, s>>>(base[1], target + 1, stuck);
      CK(cudaGetLastError());
    }
    hostBarrier(sh, barrier++, n);
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0's kernel is spinning
      const double t0 = nowUs();
      void* p = nullptr;
      if (kind == 0)
        CK(cudaHostAlloc(&p, 64 << 20, cudaHostAllocPortable | cudaHostAllocMapped));
      else
        CK(cudaMalloc(&p, 64 << 20));
      std::printf("procs n=%d rank 1: %s while rank 0 spins took %.0f us\n", n, what,
                  nowUs() - t0);
      std::fflush(stdout);
      bumpKernel<<<1, 1, 0, s>>>(base[1]);
      CK(cudaGetLastError());
    }
    const bool done = syncBounded(s);
    if ((rank <= 1 && say(what, 0, done)) || !done) _exit(4);
  }
  hostBarrier(sh, barrier++, n);
  for (int p = 0; p < n; ++p)
    if (p != rank) CK(cudaIpcCloseMemHandle(base[p]));
  hostBarrier(sh, barrier++, n);
  CK(cudaFree(arena));
}

int procs(int n) {
  if (n < 2 || n > kMaxRanks) return 1;
  auto* sh = static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE,
                                       MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (sh == MAP_FAILED) return 2;
  std::memset(static_cast<void*>(sh), 0, sizeof(Shared));
  std::vector<pid_t> kids;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(60);
      procRank(sh, r, n);
      std::fflush(stdout);
      _exit(0);
    }
    kids.push_back(pid);
  }
  int bad = 0;
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      ++bad;
      std::printf("procs n=%d: a rank ended with %s %d\n", n,
                  WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    }
  }
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tutti-gpu-probe info|copy|threads N...|procs N\n");
    return 1;
  }
  const std::string what = argv[1];
  if (what == "info") return info();
  if (what == "copy") return copy();
  int rc = 0;
  for (int i = 2; i < argc; ++i) {
    const int n = std::atoi(argv[i]);
    rc |= what == "threads" ? threads(n) : what == "procs" ? procs(n) : 1;
    std::fflush(stdout);
  }
  return rc;
}
