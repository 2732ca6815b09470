// File: bench/kernel_bench_cuda.cc
// tutti-kernel-bench's CUDA backend: the kernels of kernels/cuda_reduce.h on device 0, timed
// with CUDA events (best of the iterations), next to a device-to-device cudaMemcpy of the same
// bytes (the ceiling; 2 x bytes moved). Compiled only when TUTTI_HAVE_CUDA.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/kernel_bench.h"
#include "kernels/convert.h"
#include "kernels/cuda_reduce.h"

namespace tutti::bench {
namespace {

struct DeviceBuffers {
  std::vector<void*> ptrs;
  ~DeviceBuffers() {
    for (void* p : ptrs) cudaFree(p);
  }
};

// Milliseconds of the best of `iters` runs of fn (after one warm-up), or a negative value on a
// CUDA error.
template <typename Fn>
float bestMs(int iters, cudaStream_t stream, Fn&& fn) {
  cudaEvent_t start, stop;
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) return -1;
  float best = 1e30f;
  if (!fn()) return -1;
  for (int it = 0; it < iters; ++it) {
    cudaEventRecord(start, stream);
    if (!fn()) return -1;
    cudaEventRecord(stop, stream);
    if (cudaEventSynchronize(stop) != cudaSuccess) return -1;
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    best = std::min(best, ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

}  // namespace

std::vector<Row> runCuda(const Options& o, std::string* why) {
  std::vector<Row> rows;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    *why = "no CUDA device";
    return rows;
  }
  cudaDeviceProp prop{};
  if (cudaSetDevice(0) != cudaSuccess || cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    *why = "cannot open device 0";
    return rows;
  }
  const std::string isa = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + " " +
                          prop.name;
  const size_t maxSources = std::max<size_t>(
      2, *std::max_element(o.sources.begin(), o.sources.end()));
  DeviceBuffers bufs;
  for (size_t k = 0; k <= maxSources; ++k) {
    void* p = nullptr;
    if (cudaMalloc(&p, o.bytes) != cudaSuccess) {
      *why = "cudaMalloc of " + std::to_string(o.bytes) + " bytes failed";
      return rows;
    }
    bufs.ptrs.push_back(p);
  }
  void* dst = bufs.ptrs.back();
  cudaStream_t stream;
  if (cudaStreamCreate(&stream) != cudaSuccess) {
    *why = "cudaStreamCreate failed";
    return rows;
  }
  const float copyMs = bestMs(o.iters, stream, [&] {
    return cudaMemcpyAsync(dst, bufs.ptrs[0], o.bytes, cudaMemcpyDeviceToDevice, stream) ==
           cudaSuccess;
  });
  const double copyGbps = 2.0 * static_cast<double>(o.bytes) / (copyMs * 1e-3) / 1e9;
  std::vector<unsigned char> host;
  for (DataType dtype : o.dtypes) {
    const size_t esize = dataTypeBytes(dtype);
    const size_t count = o.bytes / esize;
    if ((dtype == DataType::kFp8E4M3 || dtype == DataType::kFp8E5M2) && prop.major < 9) continue;
    host.assign(count * esize, 0);
    kernels::storeFromDouble(dtype, host.data(), 0, 1.0);
    for (size_t done = 1; done < count; done *= 2) {
      std::memcpy(host.data() + done * esize, host.data(), std::min(done, count - done) * esize);
    }
    for (size_t k = 0; k < maxSources; ++k) {
      cudaMemcpy(bufs.ptrs[k], host.data(), host.size(), cudaMemcpyHostToDevice);
    }
    unsigned char scalar[8];
    kernels::storeFromDouble(dtype, scalar, 0, 1.0);
    for (BenchOp op : o.ops) {
      for (size_t nsrcs : o.sources) {
        std::vector<const void*> srcs(bufs.ptrs.begin(), bufs.ptrs.begin() + nsrcs);
        Status last = Status::ok();
        const float ms = bestMs(o.iters, stream, [&] {
          last = op == BenchOp::kPreMulSum
                     ? kernels::cuda::preMulSum(dst, srcs, count, dtype, scalar, stream)
                     : kernels::cuda::reduce(dst, srcs, count, dtype,
                                             static_cast<RedOp>(static_cast<int>(op)), stream);
          return last.isOk();
        });
        if (ms < 0) {
          std::fprintf(stderr, "tutti-kernel-bench: cuda %s %s: %s\n",
                       std::string(dataTypeName(dtype)).c_str(), benchOpName(op),
                       last.isOk() ? "CUDA error" : last.message().c_str());
          continue;
        }
        const double moved = static_cast<double>(count * esize * (nsrcs + 1));
        rows.push_back({"cuda", isa, dtype, op, nsrcs, count * esize, moved / (ms * 1e-3) / 1e9,
                        copyGbps, "cudaMemcpy d2d", copyGbps,
                        moved / (ms * 1e-3) / 1e9 / copyGbps});
      }
    }
  }
  cudaStreamDestroy(stream);
  return rows;
}

}  // namespace tutti::bench
