// File: tests/gpu/nccl_device_test.cc
// libnccl.so.2 on CUDA device memory, through the NCCL API only, on device 0:
// - every collective x dtype x op (sum, prod, max, min, avg; premulsum for float types), out of
//   place and in place, and a send/recv ring in a group, each result checked on the host against
//   a reference: with 1..4 ranks as separate processes sharing the GPU (the process clique,
//   core/device/process_clique.h; one rank: device copies), and with 1..8 ranks as threads of
//   one process (ncclCommInitAll on device 0 repeated: the thread clique, core/device/clique.h);
// - outputs in pinned host memory (device inputs), 1 and 3 ranks, on the staged path; process
//   ranks refuse such a buffer (CUDA IPC cannot share it) on every rank, leaving no stream waiting;
// - stream semantics: a call returns while its stream is still blocked by earlier work, and the
//   result is right once the stream has run;
// - ranks of one process driven by one thread in groups (allreduce plus a send/recv ring);
// - CUDA graph capture: two allreduces per process (thread-local mode), replayed with new
//   inputs; a mixed group of all thread ranks captured across their forked streams, replayed;
// - 1000 back-to-back calls of alternating sizes on thread ranks, every result checked;
// - ranks whose calls differ get an error, and nothing runs;
// - ncclCommAbort while a rank waits for a peer that never calls: process rank 0 (whose call
//   waits on the host for its peers), a process rank whose stream waits for rank 0, and a thread
//   rank: each is released within about a second.
// The Catch2 process never initialises CUDA: every case forks its ranks (or one process for the
// thread ranks) first (CUDA does not survive fork). Skipped (77) without a GPU by gpu_main.cc.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <tutti/nccl.h>
#include <vector>

#include "kernels/convert.h"

namespace {

using tutti::DataType;
using tutti::kernels::loadAsDouble;
using tutti::kernels::storeFromDouble;

struct Rank {
  int rank = 0, nranks = 1;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int failures = 0;
};

#define EXPECT(R, cond, ...)                                                                  \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "rank %d: %s:%d: %s: ", (R).rank, __FILE__, __LINE__, #cond);      \
      std::fprintf(stderr, __VA_ARGS__);                                                      \
      std::fprintf(stderr, "\n");                                                             \
      ++(R).failures;                                                                         \
    }                                                                                         \
  } while (0)

#define EXPECT_OK(R, call)                                                                     \
  do {                                                                                         \
    ncclResult_t r_ = (call);                                                                  \
    EXPECT(R, r_ == ncclSuccess, "returned %d (%s): %s", static_cast<int>(r_),                 \
           ncclGetErrorString(r_), ncclGetLastError((R).comm));                                \
  } while (0)

#define EXPECT_CUDA(R, call)                                                                   \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    EXPECT(R, e_ == cudaSuccess, "%s", cudaGetErrorString(e_));                                \
  } while (0)

size_t elemBytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}
bool isFloat(ncclDataType_t t) { return t >= ncclFloat16; }
// Relative tolerance of a rounded average (every other result here is exact).
double tolerance(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16:
      return 1e-3;
    case ncclBfloat16:
      return 1e-2;
    case ncclFloat8e4m3:
      return 0.07;
    case ncclFloat8e5m2:
      return 0.13;
    case ncclFloat32:
      return 1e-6;
    case ncclFloat64:
      return 1e-12;
    default:
      return 0;
  }
}
const char* typeName(ncclDataType_t t) {
  static const char* names[] = {"int8",  "uint8",    "int32",  "uint32", "int64",  "uint64",
                                "half",  "float",    "double", "bf16",   "e4m3",   "e5m2"};
  return names[t];
}

// Values exact in every dtype (fp8 e5m2 included): reductions see 1 or 2 (sums <= 8, products
// <= 16 with 4 ranks); data movement sees 0..7, a function of the source rank and position.
double redValue(int rank, size_t i) { return 1 + static_cast<double>((rank + i) % 2); }
double moveValue(int rank, size_t i) { return static_cast<double>((rank * 3 + i * 5) % 8); }

double reduceRef(ncclRedOp_t op, ncclDataType_t t, int nranks, size_t i, double scalar) {
  double acc = 0;
  for (int r = 0; r < nranks; ++r) {
    const double v = redValue(r, i);
    if (r == 0) {
      acc = v;
      continue;
    }
    switch (op) {
      case ncclProd:
        acc *= v;
        break;
      case ncclMax:
        acc = std::max(acc, v);
        break;
      case ncclMin:
        acc = std::min(acc, v);
        break;
      default:
        acc += v;
    }
  }
  if (op == ncclAvg) acc = isFloat(t) ? acc / nranks : std::trunc(acc / nranks);
  if (op >= ncclNumOps) acc *= scalar;  // premulsum
  return acc;
}

struct DevBuf {
  void* p = nullptr;
  size_t bytes = 0;
  DevBuf(size_t b) : bytes(b) { cudaMalloc(&p, b > 0 ? b : 1); }
  ~DevBuf() { cudaFree(p); }
  std::byte* at(size_t byteOffset) const { return static_cast<std::byte*>(p) + byteOffset; }
};

void upload(void* dst, ncclDataType_t t, size_t count, const std::function<double(size_t)>& f) {
  std::vector<std::byte> h(count * elemBytes(t));
  for (size_t i = 0; i < count; ++i) storeFromDouble(static_cast<DataType>(t), h.data(), i, f(i));
  cudaMemcpy(dst, h.data(), h.size(), cudaMemcpyHostToDevice);
}

// Compares count elements at device address src with want(i); reports the first mismatch.
void check(Rank& R, const char* what, const void* src, ncclDataType_t t, size_t count,
           const std::function<double(size_t)>& want, double tol = 0) {
  std::vector<std::byte> h(count * elemBytes(t));
  EXPECT_CUDA(R, cudaMemcpy(h.data(), src, h.size(), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < count; ++i) {
    const double got = loadAsDouble(static_cast<DataType>(t), h.data(), i), w = want(i);
    if (std::fabs(got - w) > tol * std::fabs(w)) {
      EXPECT(R, false, "%s %s: element %zu of %zu is %g, expected %g", what, typeName(t), i,
             count, got, w);
      return;
    }
  }
}

// Every collective on one dtype, count elements per rank, out of place and (where NCCL has one)
// in place. Synchronises the stream after each call.
void collectives(Rank& R, ncclDataType_t t, size_t n) {
  const int P = R.nranks, me = R.rank;
  const size_t e = elemBytes(t);
  DevBuf a(n * P * e), b(n * P * e);
  auto sync = [&] { EXPECT_CUDA(R, cudaStreamSynchronize(R.stream)); };
  const double tol = tolerance(t);
  // Sums of 1s and 2s over more than 4 ranks pass 8, where e5m2 holds only even integers: each
  // binary step of the reduction rounds (on the host path too), so the sum is not exact.
  const bool roughSums = t == ncclFloat8e5m2 && P > 4;
  std::vector<ncclRedOp_t> ops = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  if (roughSums) ops = {ncclProd, ncclMax, ncclMin};
  for (ncclRedOp_t op : ops) {
    // allreduce, out of place then in place
    upload(a.p, t, n, [&](size_t i) { return redValue(me, i); });
    EXPECT_OK(R, ncclAllReduce(a.p, b.p, n, t, op, R.comm, R.stream));
    sync();
    check(R, "allreduce", b.p, t, n, [&](size_t i) { return reduceRef(op, t, P, i, 1); }, tol);
    EXPECT_OK(R, ncclAllReduce(a.p, a.p, n, t, op, R.comm, R.stream));
    sync();
    check(R, "allreduce in place", a.p, t, n, [&](size_t i) { return reduceRef(op, t, P, i, 1); },
          tol);
    // reduce to the last rank
    upload(a.p, t, n, [&](size_t i) { return redValue(me, i); });
    upload(b.p, t, n, [](size_t) { return 0.0; });
    EXPECT_OK(R, ncclReduce(a.p, b.p, n, t, op, P - 1, R.comm, R.stream));
    sync();
    if (me == P - 1)
      check(R, "reduce", b.p, t, n, [&](size_t i) { return reduceRef(op, t, P, i, 1); }, tol);
    // reduce-scatter: element i of rank me's block is position me*n+i of the inputs
    upload(a.p, t, n * P, [&](size_t i) { return redValue(me, i); });
    EXPECT_OK(R, ncclReduceScatter(a.p, b.p, n, t, op, R.comm, R.stream));
    sync();
    check(R, "reduce-scatter", b.p, t, n,
          [&](size_t i) { return reduceRef(op, t, P, me * n + i, 1); }, tol);
    EXPECT_OK(R, ncclReduceScatter(a.p, a.at(me * n * e), n, t, op, R.comm, R.stream));
    sync();
    check(R, "reduce-scatter in place", a.at(me * n * e), t, n,
          [&](size_t i) { return reduceRef(op, t, P, me * n + i, 1); }, tol);
  }
  if (isFloat(t) && !roughSums) {  // premulsum with a host scalar of 2
    std::byte scalar[8] = {};
    storeFromDouble(static_cast<DataType>(t), scalar, 0, 2.0);
    ncclRedOp_t pm;
    EXPECT_OK(R, ncclRedOpCreatePreMulSum(&pm, scalar, t, ncclScalarHostImmediate, R.comm));
    upload(a.p, t, n, [&](size_t i) { return redValue(me, i); });
    EXPECT_OK(R, ncclAllReduce(a.p, b.p, n, t, pm, R.comm, R.stream));
    sync();
    check(R, "premulsum allreduce", b.p, t, n, [&](size_t i) { return reduceRef(pm, t, P, i, 2); },
          tol);
    EXPECT_OK(R, ncclRedOpDestroy(pm, R.comm));
  }
  // allgather, out of place and in place (send = recv + rank*n)
  upload(a.p, t, n, [&](size_t i) { return moveValue(me, i); });
  EXPECT_OK(R, ncclAllGather(a.p, b.p, n, t, R.comm, R.stream));
  sync();
  auto gathered = [&](size_t i) { return moveValue(static_cast<int>(i / n), i % n); };
  check(R, "allgather", b.p, t, n * P, gathered);
  upload(b.at(me * n * e), t, n, [&](size_t i) { return moveValue(me, i); });
  EXPECT_OK(R, ncclAllGather(b.at(me * n * e), b.p, n, t, R.comm, R.stream));
  sync();
  check(R, "allgather in place", b.p, t, n * P, gathered);
  // broadcast from each root, out of place and in place
  for (int root = 0; root < P; ++root) {
    upload(a.p, t, n, [&](size_t i) { return moveValue(me, i); });
    EXPECT_OK(R, ncclBroadcast(a.p, b.p, n, t, root, R.comm, R.stream));
    EXPECT_OK(R, ncclBcast(a.p, n, t, root, R.comm, R.stream));
    sync();
    check(R, "broadcast", b.p, t, n, [&](size_t i) { return moveValue(root, i); });
    check(R, "bcast in place", a.p, t, n, [&](size_t i) { return moveValue(root, i); });
  }
  // all-to-all: block q of rank me's output is block me of rank q's input
  upload(a.p, t, n * P, [&](size_t i) { return moveValue(me, i); });
  EXPECT_OK(R, ncclAlltoAll(a.p, b.p, n, t, R.comm, R.stream));
  sync();
  check(R, "alltoall", b.p, t, n * P,
        [&](size_t i) { return moveValue(static_cast<int>(i / n), me * n + i % n); });
  // gather to and scatter from rank 0
  upload(a.p, t, n, [&](size_t i) { return moveValue(me, i); });
  EXPECT_OK(R, ncclGather(a.p, b.p, n, t, 0, R.comm, R.stream));
  sync();
  if (me == 0) check(R, "gather", b.p, t, n * P, gathered);
  upload(a.p, t, n * P, [&](size_t i) { return moveValue(me, i); });
  EXPECT_OK(R, ncclScatter(a.p, b.p, n, t, 0, R.comm, R.stream));
  sync();
  check(R, "scatter", b.p, t, n, [&](size_t i) { return moveValue(0, me * n + i); });
  // a send/recv ring in one group
  upload(a.p, t, n, [&](size_t i) { return moveValue(me, i); });
  EXPECT_OK(R, ncclGroupStart());
  EXPECT_OK(R, ncclSend(a.p, n, t, (me + 1) % P, R.comm, R.stream));
  EXPECT_OK(R, ncclRecv(b.p, n, t, (me + P - 1) % P, R.comm, R.stream));
  EXPECT_OK(R, ncclGroupEnd());
  sync();
  check(R, "send/recv ring", b.p, t, n, [&](size_t i) { return moveValue((me + P - 1) % P, i); });
}

// A host function that blocks its stream for `ms` milliseconds.
void CUDART_CB sleepHost(void* ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(reinterpret_cast<intptr_t>(ms)));
}

// The call returns while the stream is held by earlier work; the result follows stream order.
void streamOrder(Rank& R) {
  const size_t n = 1 << 20;
  DevBuf a(n * 4), b(n * 4);
  upload(a.p, ncclFloat32, n, [&](size_t i) { return redValue(R.rank, i); });
  // The first call allocates the pinned staging (cudaHostAlloc may wait for the device).
  EXPECT_OK(R, ncclAllReduce(a.p, b.p, n, ncclFloat32, ncclSum, R.comm, R.stream));
  EXPECT_CUDA(R, cudaStreamSynchronize(R.stream));
  EXPECT_CUDA(R, cudaLaunchHostFunc(R.stream, sleepHost, reinterpret_cast<void*>(intptr_t{400})));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_OK(R, ncclAllReduce(a.p, b.p, n, ncclFloat32, ncclSum, R.comm, R.stream));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT(R, ms < 200, "ncclAllReduce on a held stream took %.1f ms to return", ms);
  EXPECT(R, cudaStreamQuery(R.stream) == cudaErrorNotReady, "the stream finished too early");
  EXPECT_CUDA(R, cudaStreamSynchronize(R.stream));
  check(R, "allreduce after a held stream", b.p, ncclFloat32, n,
        [&](size_t i) { return reduceRef(ncclSum, ncclFloat32, R.nranks, i, 1); });
}

// Two allreduces captured in a graph (thread-local mode), replayed three times with new inputs.
void graphReplay(Rank& R) {
  const size_t n = 100000;
  DevBuf a(n * 4), b(n * 4), c(n * 4);
  upload(a.p, ncclFloat32, n, [](size_t) { return 0.0; });
  EXPECT_CUDA(R, cudaStreamSynchronize(R.stream));
  cudaGraph_t graph = nullptr;
  EXPECT_CUDA(R, cudaStreamBeginCapture(R.stream, cudaStreamCaptureModeThreadLocal));
  EXPECT_OK(R, ncclAllReduce(a.p, b.p, n, ncclFloat32, ncclSum, R.comm, R.stream));
  EXPECT_OK(R, ncclAllReduce(b.p, c.p, n, ncclFloat32, ncclMax, R.comm, R.stream));
  EXPECT_CUDA(R, cudaStreamEndCapture(R.stream, &graph));
  cudaGraphExec_t exec = nullptr;
  EXPECT_CUDA(R, cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    upload(a.p, ncclFloat32, n,
           [&](size_t i) { return R.rank + replay + static_cast<double>(i % 7); });
    EXPECT_CUDA(R, cudaGraphLaunch(exec, R.stream));
    EXPECT_CUDA(R, cudaStreamSynchronize(R.stream));
    const int P = R.nranks;
    auto sum = [&](size_t i) { return P * (replay + static_cast<double>(i % 7)) + P * (P - 1) / 2.0; };
    check(R, "graph replay: sum", b.p, ncclFloat32, n, sum);
    check(R, "graph replay: max of sums", c.p, ncclFloat32, n, sum);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// Outputs in pinned host memory (not device memory) on device inputs: the staged path writes
// them from the host, with no copy back.
void hostOutputs(Rank& R) {
  const size_t n = 70000;
  const int P = R.nranks, me = R.rank;
  DevBuf a(n * P * 4);
  void* h = nullptr;
  EXPECT_CUDA(R, cudaMallocHost(&h, n * P * 4));
  upload(a.p, ncclFloat32, n, [&](size_t i) { return redValue(me, i); });
  EXPECT_OK(R, ncclAllReduce(a.p, h, n, ncclFloat32, ncclSum, R.comm, R.stream));
  EXPECT_CUDA(R, cudaStreamSynchronize(R.stream));
  for (size_t i = 0; i < n; ++i)
    if (static_cast<float*>(h)[i] != reduceRef(ncclSum, ncclFloat32, P, i, 1)) {
      EXPECT(R, false, "allreduce into host memory: element %zu is %g", i,
             static_cast<float*>(h)[i]);
      break;
    }
  upload(a.p, ncclFloat32, n, [&](size_t i) { return moveValue(me, i); });
  EXPECT_OK(R, ncclAllGather(a.p, h, n, ncclFloat32, R.comm, R.stream));
  EXPECT_CUDA(R, cudaStreamSynchronize(R.stream));
  for (size_t i = 0; i < n * P; ++i)
    if (static_cast<float*>(h)[i] != moveValue(static_cast<int>(i / n), i % n)) {
      EXPECT(R, false, "allgather into host memory: element %zu is %g", i,
             static_cast<float*>(h)[i]);
      break;
    }
  cudaFreeHost(h);
}

// Buffers in a window (ncclCommWindowRegister) on every rank: an allreduce and an allgather out
// of place and an allreduce in place, 1 MiB elements per rank, checked; then deregistered. With
// the peer executor over process ranks (TUTTI_DEVICE_PATH=peer, under MPS) the calls read their
// peers' windows in place (direct messages across processes); elsewhere the window is a record.
void windowCalls(Rank& R) {
  const size_t n = 1 << 20;
  const int P = R.nranks, me = R.rank;
  DevBuf a((n + n * P) * 4);  // input, then the output: one allocation, one window
  float* in = static_cast<float*>(a.p);
  float* out = in + n;
  ncclWindow_t win = nullptr;
  EXPECT_OK(R, ncclCommWindowRegister(R.comm, a.p, a.bytes, &win, NCCL_WIN_DEFAULT));
  upload(in, ncclFloat32, n, [&](size_t i) { return redValue(me, i); });
  EXPECT_OK(R, ncclAllReduce(in, out, n, ncclFloat32, ncclSum, R.comm, R.stream));
  EXPECT_CUDA(R, cudaStreamSynchronize(R.stream));
  check(R, "allreduce in a window", out, ncclFloat32, n,
        [&](size_t i) { return reduceRef(ncclSum, ncclFloat32, P, i, 1); });
  upload(in, ncclFloat32, n, [&](size_t i) { return moveValue(me, i); });
  EXPECT_OK(R, ncclAllGather(in, out, n, ncclFloat32, R.comm, R.stream));
  EXPECT_CUDA(R, cudaStreamSynchronize(R.stream));
  check(R, "allgather in a window", out, ncclFloat32, n * P,
        [&](size_t i) { return moveValue(static_cast<int>(i / n), i % n); });
  upload(out, ncclFloat32, n, [&](size_t i) { return redValue(me, i); });
  EXPECT_OK(R, ncclAllReduce(out, out, n, ncclFloat32, ncclSum, R.comm, R.stream));
  EXPECT_CUDA(R, cudaStreamSynchronize(R.stream));
  check(R, "allreduce in place in a window", out, ncclFloat32, n,
        [&](size_t i) { return reduceRef(ncclSum, ncclFloat32, P, i, 1); });
  EXPECT_OK(R, ncclCommWindowDeregister(R.comm, win));
}

// Forks nranks processes; rank 0 makes the id and pipes it to the others. Each runs body on a
// communicator over device 0 with its own stream. Returns the number of ranks that failed.
int forkRanks(int nranks, const std::function<void(Rank&)>& body) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  std::vector<int> fds(2 * nranks);
  for (int r = 0; r < nranks; ++r)
    if (pipe(&fds[2 * r]) != 0) return nranks;
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(150);  // a hang becomes a failure
      Rank R;
      R.rank = r;
      R.nranks = nranks;
      ncclUniqueId id;
      if (r == 0) {
        if (ncclGetUniqueId(&id) != ncclSuccess) _exit(2);
        for (int q = 1; q < nranks; ++q)
          if (write(fds[2 * q + 1], &id, sizeof id) != sizeof id) _exit(2);
      } else if (read(fds[2 * r], &id, sizeof id) != sizeof id) {
        _exit(2);
      }
      if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreate(&R.stream) != cudaSuccess) _exit(3);
      if (ncclCommInitRank(&R.comm, nranks, id, r) != ncclSuccess) {
        std::fprintf(stderr, "rank %d: ncclCommInitRank: %s\n", r, ncclGetLastError(nullptr));
        _exit(4);
      }
      body(R);
      EXPECT_OK(R, ncclCommDestroy(R.comm));
      std::fprintf(stderr, "rank %d/%d: %d failed checks\n", r, nranks, R.failures);
      _exit(R.failures ? 1 : 0);
    }
    pids.push_back(pid);
  }
  for (int& fd : fds) close(fd);
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  return failed;
}

// Runs body in one forked process (one-process cases); returns its exit status.
int inChild(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(150);
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs body(R) for `nranks` ranks that are threads of one forked process: one communicator per
// rank from ncclCommInitAll on device 0 repeated, one stream and one thread per rank. Returns
// the child's exit status (0: every check passed).
int threadRanks(int nranks, const std::function<void(Rank&)>& body) {
  return inChild([nranks, &body] {
    std::vector<ncclComm_t> comms(nranks);
    const std::vector<int> devs(nranks, 0);
    if (cudaSetDevice(0) != cudaSuccess) return 3;
    if (ncclCommInitAll(comms.data(), nranks, devs.data()) != ncclSuccess) {
      std::fprintf(stderr, "ncclCommInitAll: %s\n", ncclGetLastError(nullptr));
      return 4;
    }
    std::vector<Rank> ranks(nranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < nranks; ++r) {
      ranks[r].rank = r;
      ranks[r].nranks = nranks;
      ranks[r].comm = comms[r];
      threads.emplace_back([&ranks, &body, r] {
        Rank& R = ranks[r];
        EXPECT_CUDA(R, cudaSetDevice(0));
        EXPECT_CUDA(R, cudaStreamCreateWithFlags(&R.stream, cudaStreamNonBlocking));
        body(R);
        EXPECT_CUDA(R, cudaStreamSynchronize(R.stream));
      });
    }
    for (auto& t : threads) t.join();
    int failures = 0;
    for (Rank& R : ranks) {
      failures += R.failures;
      EXPECT_OK(R, ncclCommDestroy(R.comm));
    }
    std::fprintf(stderr, "%d thread ranks: %d failed checks\n", nranks, failures);
    return failures ? 1 : 0;
  });
}

const ncclDataType_t kTypes[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                 ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                 ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

}  // namespace

TEST_CASE("device memory: every collective x dtype x op, 1 to 4 ranks as processes",
          "[gpu][nccl]") {
  for (int nranks = 1; nranks <= 4; ++nranks) {
    INFO("nranks " << nranks);
    CHECK(forkRanks(nranks, [](Rank& R) {
            for (ncclDataType_t t : kTypes) {
              collectives(R, t, 1);      // one element: the smallest staging
              collectives(R, t, 4099);  // odd count, several KiB
            }
            collectives(R, ncclFloat32, 3 << 20);  // 12 MiB per rank buffer
          }) == 0);
  }
}

TEST_CASE("device memory: buffers in windows, 2 and 3 ranks as processes", "[gpu][nccl]") {
  for (int nranks : {2, 3}) {
    INFO("nranks " << nranks);
    CHECK(forkRanks(nranks, windowCalls) == 0);
  }
}

TEST_CASE("device memory: outputs in host memory (staged path)", "[gpu][nccl]") {
  // Ranks that are processes share buffers by CUDA IPC, which pinned host memory is not: the
  // staged path (TUTTI_DEVICE_PATH=staged) takes such buffers.
  setenv("TUTTI_DEVICE_PATH", "staged", 1);
  for (int nranks : {1, 3}) {
    INFO("nranks " << nranks);
    CHECK(forkRanks(nranks, hostOutputs) == 0);
  }
  unsetenv("TUTTI_DEVICE_PATH");
}

TEST_CASE("device memory: process ranks refuse a buffer CUDA IPC cannot share",
          "[gpu][nccl][clique]") {
  CHECK(forkRanks(2, [](Rank& R) {
          const size_t n = 1000;
          DevBuf a(n * 4);
          void* h = nullptr;
          EXPECT_CUDA(R, cudaMallocHost(&h, n * 4));
          upload(a.p, ncclFloat32, n, [&](size_t i) { return redValue(R.rank, i); });
          const ncclResult_t r = ncclAllReduce(a.p, h, n, ncclFloat32, ncclSum, R.comm, R.stream);
          EXPECT(R, r == ncclInvalidUsage, "returned %d: %s", static_cast<int>(r),
                 ncclGetLastError(R.comm));
          if (R.rank == 1)
            EXPECT(R, std::strstr(ncclGetLastError(R.comm), "CUDA IPC") != nullptr,
                   "last error: %s", ncclGetLastError(R.comm));
          EXPECT_CUDA(R, cudaStreamSynchronize(R.stream));  // no stream is left waiting
          cudaFreeHost(h);
        }) == 0);
}

TEST_CASE("device memory: a call returns before its stream runs it", "[gpu][nccl]") {
  CHECK(forkRanks(2, streamOrder) == 0);
}

TEST_CASE("device memory: graph capture and replay", "[gpu][nccl]") {
  CHECK(forkRanks(2, graphReplay) == 0);
}

TEST_CASE("device memory: ranks of one process (ncclCommInitAll) in one group", "[gpu][nccl]") {
  for (int nranks : {2, 4}) {
    INFO("nranks " << nranks);
    CHECK(inChild([nranks] {
            Rank R[4];
            ncclComm_t comms[4];
            const int devs[4] = {0, 0, 0, 0};
            if (ncclCommInitAll(comms, nranks, devs) != ncclSuccess) return 3;
            const size_t n = 1 << 18;
            std::vector<void*> in(nranks), out(nranks), ring(nranks);
            for (int r = 0; r < nranks; ++r) {
              R[r].rank = r;
              R[r].nranks = nranks;
              R[r].comm = comms[r];
              cudaStreamCreate(&R[r].stream);
              cudaMalloc(&in[r], n * 4);
              cudaMalloc(&out[r], n * 4);
              cudaMalloc(&ring[r], n * 4);
              upload(in[r], ncclFloat32, n, [r](size_t i) { return redValue(r, i); });
            }
            for (int rep = 0; rep < 3; ++rep) {
              EXPECT_OK(R[0], ncclGroupStart());
              for (int r = 0; r < nranks; ++r) {
                EXPECT_OK(R[r], ncclAllReduce(in[r], out[r], n, ncclFloat32, ncclSum, comms[r],
                                              R[r].stream));
                EXPECT_OK(R[r], ncclSend(in[r], n, ncclFloat32, (r + 1) % nranks, comms[r],
                                         R[r].stream));
                EXPECT_OK(R[r], ncclRecv(ring[r], n, ncclFloat32, (r + nranks - 1) % nranks,
                                         comms[r], R[r].stream));
              }
              EXPECT_OK(R[0], ncclGroupEnd());
              for (int r = 0; r < nranks; ++r) {
                EXPECT_CUDA(R[r], cudaStreamSynchronize(R[r].stream));
                const int prev = (r + nranks - 1) % nranks;
                check(R[r], "group: allreduce", out[r], ncclFloat32, n,
                      [nranks](size_t i) { return reduceRef(ncclSum, ncclFloat32, nranks, i, 1); });
                check(R[r], "group: send/recv ring", ring[r], ncclFloat32, n,
                      [prev](size_t i) { return redValue(prev, i); });
              }
            }
            int failures = 0;
            for (int r = 0; r < nranks; ++r) {
              failures += R[r].failures;
              ncclCommDestroy(comms[r]);
            }
            return failures ? 1 : 0;
          }) == 0);
  }
}

TEST_CASE("device memory: every collective x dtype x op, 1 to 8 ranks as threads",
          "[gpu][nccl][clique]") {
  for (int nranks = 1; nranks <= 8; ++nranks) {
    INFO("nranks " << nranks);
    CHECK(threadRanks(nranks, [](Rank& R) {
            for (ncclDataType_t t : kTypes) {
              collectives(R, t, 1);
              collectives(R, t, 4099);
            }
            collectives(R, ncclFloat32, 3 << 20);
          }) == 0);
  }
}

TEST_CASE("device memory: thread ranks, 1000 back-to-back calls of alternating sizes",
          "[gpu][nccl][clique]") {
  CHECK(threadRanks(4, [](Rank& R) {
          const size_t big = 1 << 20;
          DevBuf a(big * 4), b(big * 4);
          upload(a.p, ncclFloat32, big, [&](size_t i) { return redValue(R.rank, i); });
          for (int k = 0; k < 1000; ++k) {
            const size_t n = k % 2 ? big : 1 + k % 13;
            EXPECT_OK(R, ncclAllReduce(a.p, b.p, n, ncclFloat32, ncclSum, R.comm, R.stream));
            if (k % 100 == 99 || k == 998) {
              EXPECT_CUDA(R, cudaStreamSynchronize(R.stream));
              check(R, "back-to-back allreduce", b.p, ncclFloat32, n,
                    [&](size_t i) { return reduceRef(ncclSum, ncclFloat32, R.nranks, i, 1); });
            }
          }
        }) == 0);
}

TEST_CASE("device memory: thread ranks, a mixed group captured across forked streams",
          "[gpu][nccl][clique]") {
  for (int nranks : {2, 8}) {
    INFO("nranks " << nranks);
    CHECK(inChild([nranks] {
            std::vector<Rank> R(nranks);
            std::vector<ncclComm_t> comms(nranks);
            const std::vector<int> devs(nranks, 0);
            if (ncclCommInitAll(comms.data(), nranks, devs.data()) != ncclSuccess) return 3;
            const size_t n = 50000;
            std::vector<DevBuf*> in, sum, gathered, ring;
            for (int r = 0; r < nranks; ++r) {
              R[r].rank = r;
              R[r].nranks = nranks;
              R[r].comm = comms[r];
              cudaStreamCreateWithFlags(&R[r].stream, cudaStreamNonBlocking);
              in.push_back(new DevBuf(n * 4));
              sum.push_back(new DevBuf(n * 4));
              gathered.push_back(new DevBuf(n * nranks * 4));
              ring.push_back(new DevBuf(n * 4));
            }
            cudaEvent_t fork;
            std::vector<cudaEvent_t> join(nranks);
            cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
            for (auto& e : join) cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
            cudaGraph_t graph = nullptr;
            EXPECT_CUDA(R[0], cudaStreamBeginCapture(R[0].stream, cudaStreamCaptureModeThreadLocal));
            EXPECT_CUDA(R[0], cudaEventRecord(fork, R[0].stream));
            for (int r = 1; r < nranks; ++r)
              EXPECT_CUDA(R[r], cudaStreamWaitEvent(R[r].stream, fork, 0));
            EXPECT_OK(R[0], ncclGroupStart());
            for (int r = 0; r < nranks; ++r) {
              EXPECT_OK(R[r], ncclAllReduce(in[r]->p, sum[r]->p, n, ncclFloat32, ncclSum, comms[r],
                                            R[r].stream));
              EXPECT_OK(R[r], ncclAllGather(in[r]->p, gathered[r]->p, n, ncclFloat32, comms[r],
                                            R[r].stream));
              EXPECT_OK(R[r], ncclSend(in[r]->p, n, ncclFloat32, (r + 1) % nranks, comms[r],
                                       R[r].stream));
              EXPECT_OK(R[r], ncclRecv(ring[r]->p, n, ncclFloat32, (r + nranks - 1) % nranks,
                                       comms[r], R[r].stream));
            }
            EXPECT_OK(R[0], ncclGroupEnd());
            for (int r = 1; r < nranks; ++r) {
              EXPECT_CUDA(R[r], cudaEventRecord(join[r], R[r].stream));
              EXPECT_CUDA(R[0], cudaStreamWaitEvent(R[0].stream, join[r], 0));
            }
            EXPECT_CUDA(R[0], cudaStreamEndCapture(R[0].stream, &graph));
            cudaGraphExec_t exec = nullptr;
            EXPECT_CUDA(R[0], cudaGraphInstantiate(&exec, graph, 0));
            for (int replay = 0; replay < 3; ++replay) {
              for (int r = 0; r < nranks; ++r)
                upload(in[r]->p, ncclFloat32, n,
                       [&](size_t i) { return r + replay + static_cast<double>(i % 7); });
              EXPECT_CUDA(R[0], cudaGraphLaunch(exec, R[0].stream));
              EXPECT_CUDA(R[0], cudaStreamSynchronize(R[0].stream));
              auto input = [&](int q, size_t i) { return q + replay + static_cast<double>(i % 7); };
              for (int r = 0; r < nranks; ++r) {
                check(R[r], "graph: allreduce", sum[r]->p, ncclFloat32, n, [&](size_t i) {
                  double t = 0;
                  for (int q = 0; q < nranks; ++q) t += input(q, i);
                  return t;
                });
                check(R[r], "graph: allgather", gathered[r]->p, ncclFloat32, n * nranks,
                      [&](size_t i) { return input(static_cast<int>(i / n), i % n); });
                check(R[r], "graph: send/recv ring", ring[r]->p, ncclFloat32, n,
                      [&](size_t i) { return input((r + nranks - 1) % nranks, i); });
              }
            }
            cudaGraphExecDestroy(exec);
            cudaGraphDestroy(graph);
            int failures = 0;
            for (int r = 0; r < nranks; ++r) {
              failures += R[r].failures;
              ncclCommDestroy(comms[r]);
              delete in[r];
              delete sum[r];
              delete gathered[r];
              delete ring[r];
            }
            return failures ? 1 : 0;
          }) == 0);
  }
}

TEST_CASE("device memory: thread ranks that call different things get an error",
          "[gpu][nccl][clique]") {
  CHECK(threadRanks(3, [](Rank& R) {
          DevBuf a(64 * 4), b(64 * 4);
          const ncclResult_t r = ncclAllReduce(a.p, b.p, R.rank == 2 ? 33 : 32, ncclFloat32,
                                               ncclSum, R.comm, R.stream);
          EXPECT(R, r == ncclInvalidUsage, "returned %d: %s", static_cast<int>(r),
                 ncclGetLastError(R.comm));
          EXPECT(R, std::strstr(ncclGetLastError(R.comm), "differ") != nullptr, "last error: %s",
                 ncclGetLastError(R.comm));
        }) == 0);
}

TEST_CASE("device memory: abort releases process ranks that wait for a silent peer",
          "[gpu][nccl][clique]") {
  // Rank 0 leads: its call waits on the host until every rank has called.
  CHECK(forkRanks(2, [](Rank& R) {
          void* buf = nullptr;
          EXPECT_CUDA(R, cudaMalloc(&buf, 1 << 20));
          if (R.rank == 1) {  // never calls; lives until rank 0 is done
            std::this_thread::sleep_for(std::chrono::seconds(3));
            return;
          }
          std::thread aborter([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
            ncclCommAbort(R.comm);
          });
          const auto t0 = std::chrono::steady_clock::now();
          const ncclResult_t r =
              ncclAllReduce(buf, buf, 1 << 18, ncclFloat32, ncclSum, R.comm, R.stream);
          const double s =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          aborter.join();
          EXPECT(R, r != ncclSuccess, "the leader's allreduce succeeded without its peer");
          EXPECT(R, s > 0.4 && s < 1.5, "the call returned after %.2f s (abort at 0.5 s)", s);
          EXPECT_CUDA(R, cudaStreamSynchronize(R.stream));
          R.comm = nullptr;  // aborted: forkRanks' destroy of NULL is a no-op
        }) == 0);
  // Rank 1's call returns at once; its stream waits for rank 0, which never calls.
  CHECK(forkRanks(2, [](Rank& R) {
          void* buf = nullptr;
          EXPECT_CUDA(R, cudaMalloc(&buf, 1 << 20));
          if (R.rank == 0) {
            std::this_thread::sleep_for(std::chrono::seconds(3));
            return;
          }
          EXPECT_OK(R, ncclAllReduce(buf, buf, 1 << 18, ncclFloat32, ncclSum, R.comm, R.stream));
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
          EXPECT(R, cudaStreamQuery(R.stream) == cudaErrorNotReady,
                 "the allreduce finished without its peer");
          const auto t0 = std::chrono::steady_clock::now();
          EXPECT_OK(R, ncclCommAbort(R.comm));
          EXPECT_CUDA(R, cudaStreamSynchronize(R.stream));
          const double s =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          EXPECT(R, s < 1, "the stream took %.2f s to finish after ncclCommAbort", s);
          R.comm = nullptr;
        }) == 0);
}

TEST_CASE("device memory: abort releases a thread rank's call that waits for a silent peer",
          "[gpu][nccl][clique]") {
  CHECK(inChild([] {
          Rank R;
          ncclComm_t comms[2];
          const int devs[2] = {0, 0};
          if (ncclCommInitAll(comms, 2, devs) != ncclSuccess) return 3;
          R.comm = comms[0];
          cudaStreamCreate(&R.stream);
          void* buf = nullptr;
          cudaMalloc(&buf, 1 << 20);
          std::thread aborter([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
            ncclCommAbort(comms[0]);
          });
          const auto t0 = std::chrono::steady_clock::now();
          const ncclResult_t r =
              ncclAllReduce(buf, buf, 1 << 18, ncclFloat32, ncclSum, comms[0], R.stream);
          const double s =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          aborter.join();
          EXPECT(R, r != ncclSuccess, "the allreduce succeeded without its peer");
          EXPECT(R, s > 0.4 && s < 1.5, "the call returned after %.2f s (abort at 0.5 s)", s);
          EXPECT_CUDA(R, cudaStreamSynchronize(R.stream));
          // The peer's call now fails at once instead of waiting for the aborted rank.
          const ncclResult_t r1 =
              ncclAllReduce(buf, buf, 1 << 18, ncclFloat32, ncclSum, comms[1], R.stream);
          EXPECT(R, r1 != ncclSuccess, "rank 1's call succeeded after rank 0's abort");
          EXPECT_OK(R, ncclCommAbort(comms[1]));
          return R.failures ? 1 : 0;
        }) == 0);
}
