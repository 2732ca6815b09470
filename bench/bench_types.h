// File: bench/bench_types.h
// Element codecs for tutti-perf: every NCCL dtype read as and written from double (float16,
// bfloat16 and fp8 through the header-only kernels/convert.h, round to nearest even), plus the
// exact-value limits and tolerances the patterns and checks need.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <tutti/types.hpp>

#include "kernels/convert.h"
#include <type_traits>

namespace tutti::bench {

// Codec<T>: Storage is the element's bit container; load/store convert through double.
template <DataType T>
struct Codec;

template <typename S>
struct IntCodec {
  using Storage = S;
  static double load(S s) { return double(s); }
  // Values are small integers; wrap like the library (modulo 2^bits) if they ever are not.
  static S store(double v) {
    return static_cast<S>(static_cast<std::make_unsigned_t<S>>(static_cast<int64_t>(v)));
  }
};
// Narrow floats go through float with the library's conversions (kernels/convert.h, header-only;
// kernels_test checks them bit for bit against an independent formula).
template <typename S, typename F>
struct MiniCodec {
  using Storage = S;
  static double load(S s) { return kernels::toFloat(F{s}); }
  static S store(double v) { return kernels::fromFloat<F>(static_cast<float>(v)).bits; }
};

template <>
struct Codec<DataType::kInt8> : IntCodec<int8_t> {};
template <>
struct Codec<DataType::kUint8> : IntCodec<uint8_t> {};
template <>
struct Codec<DataType::kInt32> : IntCodec<int32_t> {};
template <>
struct Codec<DataType::kUint32> : IntCodec<uint32_t> {};
template <>
struct Codec<DataType::kInt64> : IntCodec<int64_t> {};
template <>
struct Codec<DataType::kUint64> : IntCodec<uint64_t> {};
template <>
struct Codec<DataType::kFloat16> : MiniCodec<uint16_t, kernels::Half> {};
template <>
struct Codec<DataType::kBfloat16> : MiniCodec<uint16_t, kernels::BFloat16> {};
template <>
struct Codec<DataType::kFp8E4M3> : MiniCodec<uint8_t, kernels::Fp8E4M3> {};
template <>
struct Codec<DataType::kFp8E5M2> : MiniCodec<uint8_t, kernels::Fp8E5M2> {};
template <>
struct Codec<DataType::kFloat32> {
  using Storage = float;
  static double load(float s) { return s; }
  static float store(double v) { return static_cast<float>(v); }  // round to nearest even
};
template <>
struct Codec<DataType::kFloat64> {
  using Storage = double;
  static double load(double s) { return s; }
  static double store(double v) { return v; }
};

// Calls fn(Codec<T>{}) for the runtime dtype `t`; returns false (fn not called) when invalid.
template <typename Fn>
bool visitDataType(DataType t, Fn&& fn) {
  switch (t) {
    case DataType::kInt8:
      fn(Codec<DataType::kInt8>{});
      return true;
    case DataType::kUint8:
      fn(Codec<DataType::kUint8>{});
      return true;
    case DataType::kInt32:
      fn(Codec<DataType::kInt32>{});
      return true;
    case DataType::kUint32:
      fn(Codec<DataType::kUint32>{});
      return true;
    case DataType::kInt64:
      fn(Codec<DataType::kInt64>{});
      return true;
    case DataType::kUint64:
      fn(Codec<DataType::kUint64>{});
      return true;
    case DataType::kFloat16:
      fn(Codec<DataType::kFloat16>{});
      return true;
    case DataType::kFloat32:
      fn(Codec<DataType::kFloat32>{});
      return true;
    case DataType::kFloat64:
      fn(Codec<DataType::kFloat64>{});
      return true;
    case DataType::kBfloat16:
      fn(Codec<DataType::kBfloat16>{});
      return true;
    case DataType::kFp8E4M3:
      fn(Codec<DataType::kFp8E4M3>{});
      return true;
    case DataType::kFp8E5M2:
      fn(Codec<DataType::kFp8E5M2>{});
      return true;
  }
  return false;
}

// Element `index` of an array of dtype `t`, as double (NaN for an invalid dtype).
inline double loadValue(DataType t, const void* base, size_t index) {
  double out = NAN;
  visitDataType(t, [&](auto codec) {
    using C = decltype(codec);
    typename C::Storage s;
    std::memcpy(&s, static_cast<const char*>(base) + index * sizeof(s), sizeof(s));
    out = C::load(s);
  });
  return out;
}

inline void storeValue(DataType t, void* base, size_t index, double v) {
  visitDataType(t, [&](auto codec) {
    using C = decltype(codec);
    const typename C::Storage s = C::store(v);
    std::memcpy(static_cast<char*>(base) + index * sizeof(s), &s, sizeof(s));
  });
}

// Largest M such that every integer in [0, M] is exact in `t` (capped at 2^20: the patterns
// never need more).
constexpr int64_t exactIntegerLimit(DataType t) {
  switch (t) {
    case DataType::kInt8:
      return 127;
    case DataType::kUint8:
      return 255;
    case DataType::kFloat16:
      return 2048;
    case DataType::kBfloat16:
      return 256;
    case DataType::kFp8E4M3:
      return 16;
    case DataType::kFp8E5M2:
      return 8;
    default:
      return int64_t(1) << 20;
  }
}

// Largest k such that +-2^k is exact and in range in `t` (capped at 16).
constexpr int exactPowerOfTwoLimit(DataType t) {
  switch (t) {
    case DataType::kInt8:
      return 6;
    case DataType::kUint8:
      return 7;
    case DataType::kFp8E4M3:
      return 8;
    case DataType::kFp8E5M2:
      return 15;
    case DataType::kFloat16:
      return 15;
    default:
      return 16;
  }
}

constexpr bool isSigned(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64 || isFloating(t);
}

// Relative tolerance used to compare floating results (absolute when |expected| < 1): a few
// units in the last place, enough for avg's single rounding and a pre-divided sum.
constexpr double relativeTolerance(DataType t) {
  switch (t) {
    case DataType::kFloat64:
      return 1e-12;
    case DataType::kFloat32:
      return 1e-6;
    case DataType::kFloat16:
      return 1e-3;
    case DataType::kBfloat16:
      return 8e-3;
    case DataType::kFp8E4M3:
      return 0.07;
    case DataType::kFp8E5M2:
      return 0.13;
    default:
      return 0;
  }
}

}  // namespace tutti::bench
