// File: kernels/reduce.h
// CPU reduction and copy kernels over the 12 NCCL dtypes x {sum, prod, max, min, avg, premulsum}:
// SIMD through Google Highway with the instruction set chosen at run time (kernels/README.md).
// The engine looks a kernel up once per plan (reduce2Fn) and calls it on the hot path; the
// convenience wrappers check their arguments and return a Status. The CUDA kernels with the same
// contracts are in kernels/cuda_reduce.h. All kernels are single-threaded and reentrant.
#pragma once

#include <cstddef>
#include <span>

#include "base/status.h"
#include <tutti/types.hpp>

namespace tutti::kernels {

/// dst[i] = a[i] op b[i] for i in [0, count). dst may be the same pointer as a or as b (exact
/// aliasing); partial overlap is not allowed. Pointers need no alignment beyond one byte.
/// kAvg reduces as kSum: the caller divides once at the end (divideFn).
/// float16, bfloat16 and fp8 are converted to float, combined, and rounded to nearest even.
/// max/min: if either input is NaN the result is NaN (IEEE maximum/minimum propagation).
/// Integer sum/prod wrap around modulo 2^bits (computed in unsigned arithmetic).
using Reduce2Fn = void (*)(void* dst, const void* a, const void* b, size_t count);

/// buf[i] = buf[i] / divisor, the avg finalisation. Integer types truncate toward zero;
/// floating types divide in float (float64 in double) and round to nearest even.
using DivideFn = void (*)(void* buf, size_t count, int divisor);

/// dst[i] = src[i] * scalar for i in [0, count): the premulsum pre-scaling (NCCL's
/// ncclRedOpCreatePreMulSum multiplies every input by a scalar before summing). `scalar` points
/// to one element of the same dtype (as in NCCL). dst may equal src (exact aliasing only).
/// Integer products wrap modulo 2^bits; narrow floats multiply in float and round to nearest even.
using ScaleFn = void (*)(void* dst, const void* src, size_t count, const void* scalar);

/// dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[nsrcs-1][i] (left to right) for i in
/// [0, count), nsrcs >= 1, in one pass over memory whatever nsrcs is. Narrow floats accumulate
/// all sources in float and round to nearest even once per stored element (so N sources round
/// once, where N-1 chained reduce2 calls round N-1 times). dst may alias any source exactly;
/// partial overlap is not allowed. kAvg reduces as kSum. Other rules as for Reduce2Fn.
using ReduceNFn = void (*)(void* dst, const void* const* srcs, size_t nsrcs, size_t count);

/// dst[i] = srcs[0][i] * s + srcs[1][i] * s + ... (left to right; a multiply then an add, never
/// fused) where s is the element of the same dtype at `scalar`: NCCL's premulsum
/// (ncclRedOpCreatePreMulSum with ncclScalarHostImmediate). Narrow floats compute in float and
/// round once per stored element; integers wrap. nsrcs >= 1; aliasing as for ReduceNFn.
using PreMulSumFn = void (*)(void* dst, const void* const* srcs, size_t nsrcs, size_t count,
                             const void* scalar);

/// The kernel for (dtype, op); nullptr when dtype or op is outside its enum. Thread-safe. The
/// pointers stay valid for the life of the process.
Reduce2Fn reduce2Fn(DataType dtype, RedOp op);
ReduceNFn reduceNFn(DataType dtype, RedOp op);
PreMulSumFn preMulSumFn(DataType dtype);
DivideFn divideFn(DataType dtype);
ScaleFn scaleFn(DataType dtype);

/// dst = src, `bytes` bytes (no overlap), written with non-temporal stores on x86-64 (SSE2): the
/// destination lines go to memory without being read first (no read for ownership) and without
/// evicting what the cache holds. For a copy larger than the last-level cache whose destination
/// nothing reads back soon; slower than memcpy when it is read back. Below 4 KiB a plain copy. It
/// ends with a store fence, so its stores are ordered before the caller's later ones. Elsewhere
/// (other architectures) memcpy. Measured on the development VM (AMD EPYC, 64 MiB copy past the
/// caches): memcpy 10-11 GB/s, these stores 14.6-15.1 GB/s.
void copyStreaming(void* dst, const void* src, size_t bytes);

/// The instruction set the CPU kernels run with ("AVX3" = AVX-512, "AVX2", "SSE4", "EMU128" or
/// "SCALAR"; Highway's target names), chosen once per process: the best this CPU supports unless
/// TUTTI_CPU_TARGET names another. For logs and benchmarks.
const char* cpuTargetName();

/// Checked wrappers. InvalidArgument (naming the argument) for an invalid dtype/op, a null
/// pointer with count > 0. No side effect on error.
Status reduce2(void* dst, const void* a, const void* b, size_t count, DataType dtype, RedOp op);
/// dst = srcs[0] op srcs[1] op ... (left to right, one pass: reduceNFn); srcs.size() >= 1; dst
/// may alias any source exactly. One source copies it. InvalidArgument (naming the argument) for
/// an invalid dtype/op, empty srcs, a null pointer with count > 0, or a source partially
/// overlapping dst. No side effect on error.
Status reduce(void* dst, std::span<const void* const> srcs, size_t count, DataType dtype,
              RedOp op);
/// Checked preMulSumFn: dst = sum over k of srcs[k] * (*scalar). Errors as for reduce, plus a
/// null scalar with count > 0.
Status preMulSum(void* dst, std::span<const void* const> srcs, size_t count, DataType dtype,
                 const void* scalar);
/// dst = src, count elements of dtype (memmove: any overlap is fine). InvalidArgument for an
/// invalid dtype or a null pointer with count > 0.
Status copy(void* dst, const void* src, size_t count, DataType dtype);
Status divide(void* buf, size_t count, DataType dtype, int divisor);
/// Checked scaleFn: InvalidArgument for an invalid dtype, a null dst/src/scalar with count > 0, or
/// src partially overlapping dst.
Status scale(void* dst, const void* src, size_t count, DataType dtype, const void* scalar);

}  // namespace tutti::kernels
