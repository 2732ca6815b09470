// File: kernels/reduce.h
// Backend-neutral CPU reduction and copy kernels over the 12 NCCL dtypes x {sum, prod, max, min,
// avg}. The engine looks a kernel up once per plan (reduce2Fn) and calls it on the hot path; the
// convenience wrappers check their arguments and return a Status.
#pragma once

#include <cstddef>
#include <span>

#include "core/status.h"
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

/// The kernel for (dtype, op); nullptr when dtype or op is outside its enum. Thread-safe.
Reduce2Fn reduce2Fn(DataType dtype, RedOp op);
DivideFn divideFn(DataType dtype);
ScaleFn scaleFn(DataType dtype);

/// Checked wrappers. InvalidArgument (naming the argument) for an invalid dtype/op, a null
/// pointer with count > 0. No side effect on error.
Status reduce2(void* dst, const void* a, const void* b, size_t count, DataType dtype, RedOp op);
/// dst = srcs[0] op srcs[1] op ... (left to right); srcs.size() >= 1; dst may alias srcs[0].
/// One source copies it. Sources beyond the first must not alias dst.
Status reduce(void* dst, std::span<const void* const> srcs, size_t count, DataType dtype,
              RedOp op);
Status divide(void* buf, size_t count, DataType dtype, int divisor);
/// Checked scaleFn: InvalidArgument for an invalid dtype, a null dst/src/scalar with count > 0, or
/// src partially overlapping dst.
Status scale(void* dst, const void* src, size_t count, DataType dtype, const void* scalar);

}  // namespace tutti::kernels
