// File: tests/gpu/cuda_program_perf_test.cc
// The Program kernels' speed on device 0, printed (not asserted): the throughput of one op of
// 8 leaves and 8 destinations of 64 MiB (float32, bfloat16, float64) and of smaller shapes next
// to a 1 GiB device-to-device cudaMemcpyAsync, counting bytes read and written; and the
// per-launch latency of 8-byte and 64 MiB ops on every kernel path, eager and replayed from a
// graph, next to an empty kernel. Skipped (77) without a GPU by gpu_main.cc.
#include <catch2/catch.hpp>
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "kernels/cuda_program.h"
#include "kernels/program.h"
#include "tests/gpu/program_test_util.h"

namespace tutti::kernels::program {
namespace {

using cuda::detail::ProgramPath;

// ---- throughput ----

double medianMs(std::vector<float> ms) {
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Median of 20 timed runs after 3 warm-up runs, each timed by a pair of events.
template <typename Fn>
double timeMs(cudaStream_t stream, Fn&& fn) {
  cudaEvent_t start, stop;
  REQUIRE(cudaEventCreate(&start) == cudaSuccess);
  REQUIRE(cudaEventCreate(&stop) == cudaSuccess);
  for (int i = 0; i < 3; ++i) fn();
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    REQUIRE(cudaEventRecord(start, stream) == cudaSuccess);
    fn();
    REQUIRE(cudaEventRecord(stop, stream) == cudaSuccess);
    REQUIRE(cudaEventSynchronize(stop) == cudaSuccess);
    float t = 0;
    REQUIRE(cudaEventElapsedTime(&t, start, stop) == cudaSuccess);
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return medianMs(ms);
}

// One op of `nleaves` leaves (a chain) and `ndsts` destinations of `bytes` each.
double programGBps(DataType dtype, int nleaves, int ndsts, size_t bytes, cudaStream_t stream,
                   std::vector<std::unique_ptr<DeviceMemory>>& mem) {
  std::vector<void*> ptrs;
  for (const auto& m : mem) ptrs.push_back(m->p);
  const std::pair<Program, Buffers> op =
      oneOp(dtype, nleaves, ndsts, bytes / dataTypeBytes(dtype), ptrs.data());
  const double ms =
      timeMs(stream, [&] { REQUIRE(cuda::launchProgram(op.first, op.second, stream).isOk()); });
  return static_cast<double>(bytes) * (nleaves + ndsts) / (ms * 1e6);
}

TEST_CASE("throughput: 8 leaves x 8 destinations of 64 MiB float32 vs cudaMemcpyAsync") {
  constexpr size_t kBytes = size_t{64} << 20;
  std::vector<std::unique_ptr<DeviceMemory>> mem;
  for (int k = 0; k < 16; ++k) {
    mem.push_back(std::make_unique<DeviceMemory>(kBytes));
    CUDA_REQUIRE(cudaMemset(mem.back()->p, 0, kBytes));  // zeros: no NaN or inf slow paths
  }
  cudaStream_t stream = nullptr;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  constexpr size_t kCopyBytes = size_t{1} << 30;
  DeviceMemory src(kCopyBytes), dst(kCopyBytes);
  CUDA_REQUIRE(cudaMemset(src.p, 0, kCopyBytes));
  const double copyMs = timeMs(stream, [&] {
    REQUIRE(cudaMemcpyAsync(dst.p, src.p, kCopyBytes, cudaMemcpyDeviceToDevice, stream) ==
            cudaSuccess);
  });
  const double copyGBps = 2.0 * kCopyBytes / (copyMs * 1e6);

  const double f32 = programGBps(DataType::kFloat32, 8, 8, kBytes, stream, mem);
  const double bf16 = programGBps(DataType::kBfloat16, 8, 8, kBytes, stream, mem);
  const double f64 = programGBps(DataType::kFloat64, 8, 8, kBytes, stream, mem);
  const double sum2 = programGBps(DataType::kFloat32, 2, 1, kBytes, stream, mem);
  const double copy8 = programGBps(DataType::kFloat32, 1, 8, kBytes, stream, mem);
  std::printf(
      "cuda_program throughput (read + written, median of 20): program 8 leaves x 8 dsts x 64 MiB "
      "float32 %.0f GB/s = %.2f x cudaMemcpyAsync D2D 1 GiB %.0f GB/s; bfloat16 %.0f GB/s, "
      "float64 %.0f GB/s; 2 leaves x 1 dst float32 %.0f GB/s; copy 1 -> 8 %.0f GB/s\n",
      f32, f32 / copyGBps, copyGBps, bf16, f64, sum2, copy8);
  std::fflush(stdout);
  cudaStreamDestroy(stream);
}

// ---- latency ----

// The baseline: a kernel that does nothing, launched as the programs are. This file is C++, so
// it comes from PTX through the runtime's library API.
constexpr char kEmptyKernelPtx[] = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry tuttiEmptyKernel()
{
  ret;
}
)";

// Microseconds per launch of `launch` (which enqueues one kernel on the stream and returns
// whether it could; checked after each batch, so that Catch stays out of the loop): eager, K
// launches back to back between two events (the median of 5 batches; the host's enqueue time
// per launch beside it), and replayed, 100 launches captured into one graph, the graph replayed
// and timed by events, per kernel.
struct Latency {
  double eagerUs = 0, enqueueUs = 0, graphUs = 0;
};

Latency measureLatency(cudaStream_t stream, int eagerLaunches, int replays,
                       const std::function<bool()>& launch) {
  constexpr int kPerGraph = 100;
  cudaEvent_t start, stop;
  REQUIRE(cudaEventCreate(&start) == cudaSuccess);
  REQUIRE(cudaEventCreate(&stop) == cudaSuccess);
  bool ok = true;
  for (int i = 0; i < 10; ++i) ok &= launch();
  REQUIRE(ok);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  std::vector<float> eager, enqueue;
  for (int batch = 0; batch < 5; ++batch) {
    REQUIRE(cudaEventRecord(start, stream) == cudaSuccess);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < eagerLaunches; ++i) ok &= launch();
    const auto t1 = std::chrono::steady_clock::now();
    REQUIRE(ok);
    REQUIRE(cudaEventRecord(stop, stream) == cudaSuccess);
    REQUIRE(cudaEventSynchronize(stop) == cudaSuccess);
    float ms = 0;
    REQUIRE(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess);
    eager.push_back(ms * 1000.0f / eagerLaunches);
    enqueue.push_back(std::chrono::duration<float, std::micro>(t1 - t0).count() / eagerLaunches);
  }
  Latency l;
  l.eagerUs = medianMs(eager);
  l.enqueueUs = medianMs(enqueue);

  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  for (int i = 0; i < kPerGraph; ++i) ok &= launch();
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  REQUIRE(ok);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  for (int i = 0; i < 2; ++i) REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  std::vector<float> replayed;
  for (int r = 0; r < replays; ++r) {
    REQUIRE(cudaEventRecord(start, stream) == cudaSuccess);
    REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
    REQUIRE(cudaEventRecord(stop, stream) == cudaSuccess);
    REQUIRE(cudaEventSynchronize(stop) == cudaSuccess);
    float ms = 0;
    REQUIRE(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess);
    replayed.push_back(ms * 1000.0f / kPerGraph);
  }
  l.graphUs = medianMs(replayed);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return l;
}

void printLatency(const char* what, const Latency& l) {
  std::printf("  %-46s eager %8.2f us/launch (host enqueue %6.2f)   graph %8.2f us/kernel\n", what,
              l.eagerUs, l.enqueueUs, l.graphUs);
}

TEST_CASE("latency: per launch, eager and graph-replayed, 8-byte and 64 MiB ops") {
  constexpr size_t kBytes = size_t{64} << 20;
  std::vector<std::unique_ptr<DeviceMemory>> mem;
  std::vector<void*> ptrs;
  for (int k = 0; k < 16; ++k) {
    mem.push_back(std::make_unique<DeviceMemory>(kBytes));
    CUDA_REQUIRE(cudaMemset(mem.back()->p, 0, kBytes));  // zeros: no NaN or inf slow paths
    ptrs.push_back(mem.back()->p);
  }
  cudaStream_t stream = nullptr;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  cudaLibrary_t library = nullptr;
  CUDA_REQUIRE(
      cudaLibraryLoadData(&library, kEmptyKernelPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t empty = nullptr;
  CUDA_REQUIRE(cudaLibraryGetKernel(&empty, library, "tuttiEmptyKernel"));
  std::printf(
      "cuda_program latency (median; eager: 2000 launches back to back between events; "
      "graph: 100 launches captured in one graph, replayed):\n");
  printLatency("empty kernel (1 block of 32 threads)", measureLatency(stream, 2000, 20, [&] {
                 return cudaLaunchKernel(reinterpret_cast<const void*>(empty), dim3(1), dim3(32),
                                         nullptr, 0, stream) == cudaSuccess;
               }));

  struct Shape {
    const char* name;
    DataType dtype;
    int nleaves, ndsts;
    size_t bytes;
  };
  const Shape shapes[] = {
      {"8 B float32, 2 leaves x 2 dsts", DataType::kFloat32, 2, 2, 8},
      {"8 B float32, 4 leaves x 4 dsts", DataType::kFloat32, 4, 4, 8},
      {"8 B float32, 8 leaves x 8 dsts", DataType::kFloat32, 8, 8, 8},
      {"8 B bfloat16, 8 leaves x 8 dsts", DataType::kBfloat16, 8, 8, 8},
      {"8 B copy, 1 leaf x 8 dsts", DataType::kFloat32, 1, 8, 8},
      {"64 MiB float32, 8 leaves x 8 dsts", DataType::kFloat32, 8, 8, kBytes},
  };
  for (const Shape& shape : shapes) {
    const std::pair<Program, Buffers> op =
        oneOp(shape.dtype, shape.nleaves, shape.ndsts, shape.bytes / dataTypeBytes(shape.dtype),
              ptrs.data());
    const bool large = shape.bytes >= kBytes;
    for (const ProgramPath path : {ProgramPath::kAuto, ProgramPath::kGrid, ProgramPath::kSmall}) {
      const Latency l = measureLatency(stream, large ? 20 : 2000, large ? 3 : 20, [&] {
        const Result<bool> taken = cuda::detail::launchProgramOn(path, op.first, op.second, stream);
        return taken.isOk() && taken.value();
      });
      const std::string what = std::string(shape.name) + " (" + pathName(path) + ")";
      printLatency(what.c_str(), l);
    }
  }
  std::fflush(stdout);
  cudaLibraryUnload(library);
  cudaStreamDestroy(stream);
}
}  // namespace
}  // namespace tutti::kernels::program
