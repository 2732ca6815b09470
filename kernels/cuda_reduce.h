// File: kernels/cuda_reduce.h
// Host-side API of the CUDA reduction kernels (kernels/cuda/*.cu): the dtype x op matrix of
// kernels/reduce.h on device memory, enqueued on a caller's stream. No CUDA types appear here:
// a stream is passed as void* (a cudaStream_t; nullptr is the legacy default stream). Built
// only when TUTTI_HAVE_CUDA (base/config.h); link tutti_cuda_kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/status.h"
#include <tutti/types.hpp>

namespace tutti::kernels::cuda {

/// Sources reduced by one kernel launch; a reduce of more sources runs in passes of this many
/// (narrow floats then round once per pass).
inline constexpr size_t kMaxSourcesPerLaunch = 8;

// Common contract of every function below.
// - Pointers are device-accessible memory of the current device (cudaMalloc, managed or mapped
//   host memory), aligned to the element size (CUDA faults on misaligned element accesses);
//   any alignment beyond that works: a prologue and an epilogue handle the elements before the
//   first and after the last 16-byte boundary. When the pointers' addresses differ modulo 16,
//   the kernel falls back to element-wide accesses.
// - `count` is in elements. The work is enqueued on `stream` for the current device and the call
//   returns without waiting (errors of the kernel itself surface on the stream).
// - Results are those of kernels/reduce.h: integers wrap, float32/float64 compute in their own
//   type, narrow floats compute in float and round to nearest even once per stored element,
//   max/min propagate NaN (the first NaN wins), avg reduces as sum (divide afterwards). NaN
//   payloads and signs are not specified. No fused multiply-add is used.
// - fp8 (e4m3, e5m2) reductions, premulsum, scale and divide need compute capability 9.0 or
//   later, as in NCCL (our fp8 arithmetic is in software and would run anywhere; the rule keeps
//   NCCL's behaviour); copies of fp8 (and a one-source reduce, a copy) work everywhere.
// - Errors: InvalidArgument (naming the argument and value) for an invalid dtype/op, a null or
//   misaligned pointer with count > 0, empty srcs, a source partially overlapping dst, or fp8 on
//   a device below sm_90; UnhandledCudaError when the CUDA runtime fails (no device, a launch
//   error). Nothing is enqueued on error.
// - Thread-safe; the device properties are cached per device on first use.

/// dst = srcs[0] op srcs[1] op ... op srcs[n-1] (left to right), srcs.size() >= 1. dst may alias
/// any source exactly. One source copies it.
Status reduce(void* dst, std::span<const void* const> srcs, size_t count, DataType dtype,
              RedOp op, void* stream);

/// dst = sum over k of srcs[k] * s, where s is one element of dtype at `scalar` (a host pointer,
/// read before the call returns): NCCL's premulsum with ncclScalarHostImmediate.
Status preMulSum(void* dst, std::span<const void* const> srcs, size_t count, DataType dtype,
                 const void* scalar, void* stream);

/// dst = src * s (s as for preMulSum). dst may equal src.
Status scale(void* dst, const void* src, size_t count, DataType dtype, const void* scalar,
             void* stream);

/// buf = buf / divisor (avg finalisation): integers truncate toward zero, floating types divide
/// in their compute type. divisor >= 1.
Status divide(void* buf, size_t count, DataType dtype, int divisor, void* stream);

/// dst = src (cudaMemcpyAsync device to device). dst == src is a no-op; partial overlap is an
/// InvalidArgument.
Status copy(void* dst, const void* src, size_t count, DataType dtype, void* stream);

/// Enqueues on `stream` a kernel of one thread (ncclDevKernel_ProxyWait) that returns once the
/// 32-bit word at `flag` is not 0, reading it about every microsecond. `flag` is the device
/// address of mapped pinned host memory (cudaHostAlloc with cudaHostAllocMapped, then
/// cudaHostGetDevicePointer), written by a host thread; the stream's later work starts after the
/// write is seen. It holds the stream (and one SM slot) until then: the host must write the word
/// eventually, an error included. InvalidArgument for a null flag; UnhandledCudaError when the
/// launch fails. Works under stream capture (the kernel becomes a graph node).
Status waitFlag(const volatile uint32_t* flag, void* stream);

}  // namespace tutti::kernels::cuda
