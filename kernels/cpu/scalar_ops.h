// File: kernels/cpu/scalar_ops.h
// The element-wise arithmetic of the CPU kernels, one element at a time: the scalar tails and
// the (dtype, op) pairs without a SIMD path use it, and it defines the results the SIMD paths must
// reproduce bit for bit. Narrow floats accumulate in float and are rounded once, on store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/convert.h"
#include "kernels/wrap_arith.h"

namespace tutti::kernels::cpu {

// How elements of T are combined: in T itself, or in float for the narrow floating types.
template <typename T>
struct Arith {
  using Compute = T;
  static constexpr T load(T v) { return v; }
  static constexpr T store(T v) { return v; }
};
template <NarrowFloat T>
struct Arith<T> {
  using Compute = float;
  static constexpr float load(T v) { return toFloat(v); }
  static constexpr T store(float v) { return fromFloat<T>(v); }
};

using kernels::wrapAdd;  // kernels/wrap_arith.h, shared with the CUDA kernels
using kernels::wrapMul;

// The ops on the compute type. first() maps the first source, next() folds in the next one.
struct SumOp {
  template <typename C>
  static constexpr C first(C a) {
    return a;
  }
  template <typename C>
  static constexpr C next(C acc, C b) {
    return wrapAdd(acc, b);
  }
};
struct ProdOp {
  template <typename C>
  static constexpr C first(C a) {
    return a;
  }
  template <typename C>
  static constexpr C next(C acc, C b) {
    return wrapMul(acc, b);
  }
};
// NaN propagates and the first NaN wins: `a != a` holds only for a NaN a, and when b is NaN both
// comparisons are false so b is returned. For integers `a != a` folds away. max(-0, +0) returns
// the second operand.
struct MaxOp {
  template <typename C>
  static constexpr C first(C a) {
    return a;
  }
  template <typename C>
  static constexpr C next(C a, C b) {
    return (a > b || a != a) ? a : b;
  }
};
struct MinOp {
  template <typename C>
  static constexpr C first(C a) {
    return a;
  }
  template <typename C>
  static constexpr C next(C a, C b) {
    return (a < b || a != a) ? a : b;
  }
};
// premulsum: every source is multiplied by the scalar, then the products are summed (a
// multiply and an add, never a fused multiply-add, so every target rounds alike).
template <typename C>
struct PreMulSumOp {
  C scalar;
  constexpr C first(C a) const { return wrapMul(a, scalar); }
  constexpr C next(C acc, C b) const { return wrapAdd(acc, wrapMul(b, scalar)); }
};

template <typename T>
inline T loadAt(const void* base, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(base) + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
inline void storeAt(void* base, size_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(base) + i * sizeof(T), &v, sizeof(T));
}

// Elements [begin, end) of dst = fold over the sources, one element at a time. Every source is
// read before dst is written, so dst may alias any source exactly.
template <typename T, typename Op>
inline void foldScalar(const Op& op, void* dst, const void* const* srcs, size_t nsrcs, size_t begin,
                       size_t end) {
  using A = Arith<T>;
  for (size_t i = begin; i < end; ++i) {
    typename A::Compute acc = op.first(A::load(loadAt<T>(srcs[0], i)));
    for (size_t k = 1; k < nsrcs; ++k) acc = op.next(acc, A::load(loadAt<T>(srcs[k], i)));
    storeAt<T>(dst, i, A::store(acc));
  }
}

// avg finalisation of one element. Precondition: divisor >= 1, so the integer division can
// neither trap nor overflow; C++ integer division truncates toward zero.
template <typename T>
inline T divideOne(T v, int divisor) {
  if constexpr (NarrowFloat<T>) {
    return fromFloat<T>(toFloat(v) / static_cast<float>(divisor));
  } else if constexpr (std::is_floating_point_v<T>) {
    return v / static_cast<T>(divisor);
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<T>(static_cast<int64_t>(v) / divisor);
  } else {
    return static_cast<T>(v / static_cast<T>(divisor));
  }
}

}  // namespace tutti::kernels::cpu
