// File: kernels/cuda/launch.h
// Internal interface between the host code (cuda_reduce.cc, compiled as C++) and the kernel
// launchers in the .cu files: plain types only, CUDA errors as the int value of cudaError_t.
#pragma once

#include <cstddef>
#include <tutti/types.hpp>

namespace tutti::kernels::cuda::detail {

/// kernels::cuda::kMaxSourcesPerLaunch (cuda_reduce.h is not included here: nvcc compiles this
/// header, and cuda_reduce.h pulls in fmt through base/status.h).
inline constexpr size_t kSourcesPerLaunch = 8;

/// What one element-wise kernel computes.
enum class DevOp : int { kSum, kProd, kMax, kMin, kPreMulSum };

/// One launch of the reduce kernel: dst = fold(srcs[0..nsrcs)).
struct ReduceLaunch {
  void* dst;
  const void* srcs[kSourcesPerLaunch];
  int nsrcs;
  size_t count;
  DevOp op;
  /// premulsum: srcs[0] already holds a partial sum (a later pass): it is not multiplied.
  bool firstAccumulated;
  /// Bytes of one dtype element at the premulsum scalar.
  unsigned char scalar[8];
  /// Elements before the first 16-byte boundary of dst when every pointer has the same address
  /// modulo 16 (the 16-byte vector path); -1 when they differ (element-wise path).
  long head;
  int blocks;
  int threads;
  void* stream;
};

/// Launchers, one per dtype family (.cu file). Return cudaGetLastError() after the launch.
int launchReduceInt(DataType dtype, const ReduceLaunch& l);     // reduce_int.cu
int launchReduceFloat(DataType dtype, const ReduceLaunch& l);   // reduce_float.cu
int launchReduceNarrow(DataType dtype, const ReduceLaunch& l);  // reduce_narrow.cu

/// buf = buf / divisor, element-wise, for every dtype (reduce_float.cu).
int launchDivide(DataType dtype, void* buf, size_t count, int divisor, int blocks, int threads,
                 void* stream);

/// Enqueues on `stream` one thread that returns once the word at `flag` (device-mapped pinned host
/// memory, cudaHostGetDevicePointer) is not 0 (proxy_wait.cu).
int launchProxyWait(const volatile unsigned* flag, void* stream);

}  // namespace tutti::kernels::cuda::detail
