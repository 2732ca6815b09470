// File: tests/gpu/cpp_stream_test.cc
// The C++ API's stream-ordered calls on device memory (Communicator's overloads taking a stream):
// 2 and 3 forked process ranks on the machine's first GPU, each with its own stream, run
// allreduce (out of place and in place), allgather, broadcast and send/recv on cudaMalloc'd
// buffers through the staged device executor, and compare with host references. Skipped (77)
// without a GPU (gpu_main.cc).
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <vector>

#include "tests/mp/mp_common.h"

namespace tutti::test {
namespace {

bool cudaOk(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return false;
}

TEST_CASE("stream-ordered C++ calls on device memory match host references", "[gpu]") {
  const int nranks = GENERATE(2, 3);
  runOnRanks(nranks, "shm", [](Communicator& c) {
    const int n = c.size(), r = c.rank();
    const size_t count = 3000;
    TUTTI_CHILD_CHECK(cudaOk(cudaSetDevice(0), "cudaSetDevice"));
    cudaStream_t stream = nullptr;
    TUTTI_CHILD_CHECK(cudaOk(cudaStreamCreate(&stream), "cudaStreamCreate"));
    float *in = nullptr, *out = nullptr;
    TUTTI_CHILD_CHECK(cudaOk(cudaMalloc(&in, count * n * sizeof(float)), "cudaMalloc"));
    TUTTI_CHILD_CHECK(cudaOk(cudaMalloc(&out, count * n * sizeof(float)), "cudaMalloc"));
    std::vector<float> host(count * n), back(count * n);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(r * 100000 + i);
    TUTTI_CHILD_CHECK(cudaOk(cudaMemcpyAsync(in, host.data(), host.size() * sizeof(float),
                                             cudaMemcpyHostToDevice, stream),
                             "cudaMemcpyAsync"));
    auto expectSum = [&](size_t i) {
      double e = 0;
      for (int q = 0; q < n; ++q) e += q * 100000.0 + i;
      return static_cast<float>(e);
    };
    auto fetch = [&](const float* dev, size_t elems) {
      return cudaOk(cudaMemcpyAsync(back.data(), dev, elems * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream),
                    "cudaMemcpyAsync") &&
             cudaOk(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    };

    // Out of place, then in place on `out` (every rank holds the same sums: their max is them).
    TUTTI_CHILD_CHECK(
        c.allReduce(in, out, count, DataType::kFloat32, RedOp::kSum, stream).isOk());
    TUTTI_CHILD_CHECK(fetch(out, count));
    for (size_t i = 0; i < count; ++i) TUTTI_CHILD_CHECK(back[i] == expectSum(i));
    TUTTI_CHILD_CHECK(
        c.allReduce(out, out, count, DataType::kFloat32, RedOp::kMax, stream).isOk());
    TUTTI_CHILD_CHECK(fetch(out, count));
    for (size_t i = 0; i < count; ++i) TUTTI_CHILD_CHECK(back[i] == expectSum(i));

    TUTTI_CHILD_CHECK(c.allGather(in, out, count, DataType::kFloat32, stream).isOk());
    TUTTI_CHILD_CHECK(fetch(out, count * n));
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i)
        TUTTI_CHILD_CHECK(back[q * count + i] == static_cast<float>(q * 100000 + i));

    TUTTI_CHILD_CHECK(c.broadcast(in, out, count, DataType::kFloat32, n - 1, stream).isOk());
    TUTTI_CHILD_CHECK(fetch(out, count));
    for (size_t i = 0; i < count; ++i)
      TUTTI_CHILD_CHECK(back[i] == static_cast<float>((n - 1) * 100000 + i));

    // A ring exchange: each rank's send and receive are separate jobs on its stream.
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    if (r % 2 == 0) {
      TUTTI_CHILD_CHECK(c.send(in, count, DataType::kFloat32, next, stream).isOk());
      TUTTI_CHILD_CHECK(c.recv(out, count, DataType::kFloat32, prev, stream).isOk());
    } else {
      TUTTI_CHILD_CHECK(c.recv(out, count, DataType::kFloat32, prev, stream).isOk());
      TUTTI_CHILD_CHECK(c.send(in, count, DataType::kFloat32, next, stream).isOk());
    }
    TUTTI_CHILD_CHECK(fetch(out, count));
    for (size_t i = 0; i < count; ++i)
      TUTTI_CHILD_CHECK(back[i] == static_cast<float>(prev * 100000 + i));

    TUTTI_CHILD_CHECK(c.asyncError().isOk());
    cudaFree(in);
    cudaFree(out);
    cudaStreamDestroy(stream);
    return 0;
  });
}

}  // namespace
}  // namespace tutti::test
