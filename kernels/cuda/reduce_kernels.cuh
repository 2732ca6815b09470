// File: kernels/cuda/reduce_kernels.cuh
// The CUDA reduction kernels as templates over (element type, op), instantiated by the
// reduce_*.cu files. One grid-stride kernel: when every pointer has the same address modulo 16,
// the threads first fold the elements before dst's first 16-byte boundary one by one, then
// 16-byte packs (uint4 loads and stores of every source), then the tail; otherwise element by
// element. Arithmetic follows kernels/reduce.h and kernels/cpu/scalar_ops.h: integers wrap,
// narrow floats compute in float and round to nearest even once (the codecs of kernels/convert.h,
// callable here through --expt-relaxed-constexpr), max/min propagate NaN. Built with
// -fmad=false so no multiply and add fuse.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/convert.h"
#include "kernels/cuda/launch.h"
#include "kernels/wrap_arith.h"

namespace tutti::kernels::cuda::detail {

namespace codec = ::tutti::kernels::detail;

// ---- element <-> compute type ----

template <typename T>
struct DevArith {
  using C = T;
  __device__ static C load(T v) { return v; }
  __device__ static T store(C v) { return v; }
};
template <>
struct DevArith<Half> {
  using C = float;
  __device__ static float load(Half v) { return __half2float(__ushort_as_half(v.bits)); }
  // cvt.rn.f16.f32 rounds to nearest even like fromFloat<Half>; NaN becomes S.11111.1000000000.
  __device__ static Half store(float f) {
    if (f != f) {
      return Half{static_cast<uint16_t>(((__float_as_uint(f) >> 16) & 0x8000u) | 0x7E00u)};
    }
    return Half{__half_as_ushort(__float2half_rn(f))};
  }
};
template <>
struct DevArith<BFloat16> {
  using C = float;
  __device__ static float load(BFloat16 v) {
    return __uint_as_float(static_cast<uint32_t>(v.bits) << 16);
  }
  __device__ static BFloat16 store(float f) { return fromFloat<BFloat16>(f); }
};
template <>
struct DevArith<Fp8E4M3> {
  using C = float;
  __device__ static float load(Fp8E4M3 v) { return codec::decodeNarrow<codec::kE4M3Format>(v.bits); }
  __device__ static Fp8E4M3 store(float f) { return fromFloat<Fp8E4M3>(f); }
};
template <>
struct DevArith<Fp8E5M2> {
  using C = float;
  __device__ static float load(Fp8E5M2 v) { return codec::decodeNarrow<codec::kE5M2Format>(v.bits); }
  __device__ static Fp8E5M2 store(float f) { return fromFloat<Fp8E5M2>(f); }
};

// ---- ops on the compute type ----

// Integer sum and product wrap (kernels/wrap_arith.h, the same functions as on the CPU).
using ::tutti::kernels::wrapAdd;
using ::tutti::kernels::wrapMul;

template <DevOp Op, typename C>
__device__ C foldFirst(C a, C scalar, bool accumulated) {
  if constexpr (Op == DevOp::kPreMulSum) {
    return accumulated ? a : wrapMul(a, scalar);
  } else {
    return a;
  }
}
template <DevOp Op, typename C>
__device__ C foldNext(C acc, C b, C scalar) {
  if constexpr (Op == DevOp::kSum) {
    return wrapAdd(acc, b);
  } else if constexpr (Op == DevOp::kProd) {
    return wrapMul(acc, b);
  } else if constexpr (Op == DevOp::kMax) {
    return (acc > b || acc != acc) ? acc : b;  // NaN propagates; the first NaN wins
  } else if constexpr (Op == DevOp::kMin) {
    return (acc < b || acc != acc) ? acc : b;
  } else {
    return wrapAdd(acc, wrapMul(b, scalar));
  }
}

// ---- the kernel ----

template <typename T>
union Pack {
  uint4 v;
  T e[16 / sizeof(T)];
};

template <typename T, DevOp Op>
__device__ void foldElement(const ReduceLaunch& l, typename DevArith<T>::C scalar, size_t i) {
  using A = DevArith<T>;
  auto acc = foldFirst<Op>(A::load(static_cast<const T*>(l.srcs[0])[i]), scalar,
                           l.firstAccumulated);
#pragma unroll
  for (int k = 1; k < static_cast<int>(kSourcesPerLaunch); ++k) {
    if (k < l.nsrcs) acc = foldNext<Op>(acc, A::load(static_cast<const T*>(l.srcs[k])[i]), scalar);
  }
  static_cast<T*>(l.dst)[i] = A::store(acc);
}

// Elements [i, i + 16 / sizeof(T)) with one 16-byte load per source and one store; every source
// is loaded before dst is written, so dst may alias a source.
template <typename T, DevOp Op>
__device__ void foldPack(const ReduceLaunch& l, typename DevArith<T>::C scalar, size_t i) {
  using A = DevArith<T>;
  constexpr int kPack = 16 / sizeof(T);
  Pack<T> in[kSourcesPerLaunch];
#pragma unroll
  for (int k = 0; k < static_cast<int>(kSourcesPerLaunch); ++k) {
    if (k < l.nsrcs) in[k].v = *reinterpret_cast<const uint4*>(static_cast<const T*>(l.srcs[k]) + i);
  }
  typename A::C acc[kPack];
#pragma unroll
  for (int j = 0; j < kPack; ++j) acc[j] = foldFirst<Op>(A::load(in[0].e[j]), scalar, l.firstAccumulated);
#pragma unroll
  for (int k = 1; k < static_cast<int>(kSourcesPerLaunch); ++k) {
    if (k < l.nsrcs) {
#pragma unroll
      for (int j = 0; j < kPack; ++j) acc[j] = foldNext<Op>(acc[j], A::load(in[k].e[j]), scalar);
    }
  }
  Pack<T> out;
#pragma unroll
  for (int j = 0; j < kPack; ++j) out.e[j] = A::store(acc[j]);
  *reinterpret_cast<uint4*>(static_cast<T*>(l.dst) + i) = out.v;
}

}  // namespace tutti::kernels::cuda::detail

// The kernels live in the global namespace so that their names start with ncclDevKernel_, as
// NCCL's do (profilers and tools classify NCCL kernels by that prefix).
template <typename T, tutti::kernels::cuda::detail::DevOp Op>
__global__ void __launch_bounds__(512)
    ncclDevKernel_Reduce(tutti::kernels::cuda::detail::ReduceLaunch l) {
  using namespace tutti::kernels::cuda::detail;
  using A = DevArith<T>;
  typename A::C scalar{};
  if constexpr (Op == DevOp::kPreMulSum) {
    T s;
    __builtin_memcpy(&s, l.scalar, sizeof(T));
    scalar = A::load(s);
  }
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t nthreads = static_cast<size_t>(gridDim.x) * blockDim.x;
  if (l.head < 0) {
    for (size_t i = tid; i < l.count; i += nthreads) foldElement<T, Op>(l, scalar, i);
    return;
  }
  constexpr size_t kPack = 16 / sizeof(T);
  const size_t head = static_cast<size_t>(l.head) < l.count ? static_cast<size_t>(l.head) : l.count;
  if (tid < head) foldElement<T, Op>(l, scalar, tid);
  const size_t packs = (l.count - head) / kPack;
  for (size_t p = tid; p < packs; p += nthreads) foldPack<T, Op>(l, scalar, head + p * kPack);
  const size_t tail = head + packs * kPack;
  if (tid < l.count - tail) foldElement<T, Op>(l, scalar, tail + tid);
}

namespace tutti::kernels::cuda::detail {

template <typename T>
int launchReduceTyped(const ReduceLaunch& l) {
  const auto stream = static_cast<cudaStream_t>(l.stream);
  switch (l.op) {
    case DevOp::kSum:
      ncclDevKernel_Reduce<T, DevOp::kSum><<<l.blocks, l.threads, 0, stream>>>(l);
      break;
    case DevOp::kProd:
      ncclDevKernel_Reduce<T, DevOp::kProd><<<l.blocks, l.threads, 0, stream>>>(l);
      break;
    case DevOp::kMax:
      ncclDevKernel_Reduce<T, DevOp::kMax><<<l.blocks, l.threads, 0, stream>>>(l);
      break;
    case DevOp::kMin:
      ncclDevKernel_Reduce<T, DevOp::kMin><<<l.blocks, l.threads, 0, stream>>>(l);
      break;
    case DevOp::kPreMulSum:
      ncclDevKernel_Reduce<T, DevOp::kPreMulSum><<<l.blocks, l.threads, 0, stream>>>(l);
      break;
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace tutti::kernels::cuda::detail

// avg finalisation, element by element (global namespace: see above).

template <typename T>
__global__ void __launch_bounds__(512) ncclDevKernel_Divide(T* buf, size_t count, int divisor) {
  using A = tutti::kernels::cuda::detail::DevArith<T>;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t nthreads = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = tid; i < count; i += nthreads) {
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      buf[i] = static_cast<T>(static_cast<int64_t>(buf[i]) / divisor);
    } else if constexpr (std::is_integral_v<T>) {
      buf[i] = static_cast<T>(static_cast<uint64_t>(buf[i]) / static_cast<uint64_t>(divisor));
    } else {
      using C = typename A::C;
      buf[i] = A::store(A::load(buf[i]) / static_cast<C>(divisor));
    }
  }
}


