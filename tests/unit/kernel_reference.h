// File: tests/unit/kernel_reference.h
// Reference results for the reduction kernel tests (CPU in tests/unit, CUDA in tests/gpu): the
// contract of kernels/reduce.h restated one element at a time (the "model", compared bit for
// bit), a float64 reference with a stated error bound per dtype, input generators, and a guarded
// buffer. Header-only; no Catch2 dependency, so the GPU test can use it too.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/convert.h"

namespace tutti::kernels::test {

/// The five RedOps plus premulsum (which has no RedOp value).
enum class TestOp { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };
inline constexpr TestOp kAllTestOps[] = {TestOp::kSum, TestOp::kProd, TestOp::kMax,
                                         TestOp::kMin, TestOp::kAvg,  TestOp::kPreMulSum};
inline const char* testOpName(TestOp op) {
  constexpr const char* kNames[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return kNames[static_cast<int>(op)];
}
inline RedOp toRedOp(TestOp op) {  // premulsum has no RedOp; callers use the premulsum kernel
  return op == TestOp::kPreMulSum ? RedOp::kSum : static_cast<RedOp>(static_cast<int>(op));
}

/// A heap buffer whose data() is 64-byte aligned plus `misalign` bytes, with guard bytes around.
class Buffer {
 public:
  static constexpr unsigned char kGuard = 0xA5;
  Buffer(size_t bytes, size_t misalign) : bytes_(bytes), storage_(bytes + 192, kGuard) {
    auto base = reinterpret_cast<uintptr_t>(storage_.data()) + 64;
    base = (base + 63) & ~uintptr_t{63};
    data_ = reinterpret_cast<unsigned char*>(base) + misalign;
  }
  unsigned char* data() { return data_; }
  const unsigned char* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  bool guardsIntact() const {
    const size_t begin = static_cast<size_t>(data_ - storage_.data());
    for (size_t i = 0; i < begin; ++i) {
      if (storage_[i] != kGuard) return false;
    }
    for (size_t i = begin + bytes_; i < storage_.size(); ++i) {
      if (storage_[i] != kGuard) return false;
    }
    return true;
  }

 private:
  size_t bytes_;
  std::vector<unsigned char> storage_;
  unsigned char* data_ = nullptr;
};

/// The DataType whose element type is T.
template <typename T, size_t... I>
constexpr DataType dataTypeOfImpl(std::index_sequence<I...>) {
  int r = -1;
  ((r = std::is_same_v<T, std::tuple_element_t<I, ElementTypes>> ? static_cast<int>(I) : r), ...);
  return static_cast<DataType>(r);
}
template <typename T>
constexpr DataType dataTypeOf() {
  return dataTypeOfImpl<T>(std::make_index_sequence<kNumDataTypes>{});
}

// ---- the model: the contract, element by element ----

template <typename T>
using ComputeType = std::conditional_t<NarrowFloat<T>, float, T>;
template <typename T>
ComputeType<T> widen(T v) {
  if constexpr (NarrowFloat<T>) {
    return toFloat(v);
  } else {
    return v;
  }
}
template <typename T>
T narrow(ComputeType<T> v) {
  if constexpr (NarrowFloat<T>) {
    return fromFloat<T>(v);
  } else {
    return v;
  }
}

/// dst element = xs[0] op xs[1] op ... op xs[n-1]. Integers: exact arithmetic modulo 2^bits
/// (through uint64_t). float32/float64: left to right in that type. Narrow floats: in float,
/// rounded once. max/min: (a > b || a is NaN) ? a : b. premulsum: sum of xs[k] * scalar.
template <typename T>
T modelFold(TestOp op, const T* xs, size_t n, T scalar) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    auto wrap = [](uint64_t v) { return static_cast<T>(static_cast<U>(v)); };
    const auto s = static_cast<uint64_t>(scalar);
    T acc = op == TestOp::kPreMulSum ? wrap(static_cast<uint64_t>(xs[0]) * s) : xs[0];
    for (size_t k = 1; k < n; ++k) {
      const T b = xs[k];
      const auto ua = static_cast<uint64_t>(acc), ub = static_cast<uint64_t>(b);
      switch (op) {
        case TestOp::kSum:
        case TestOp::kAvg:
          acc = wrap(ua + ub);
          break;
        case TestOp::kProd:
          acc = wrap(ua * ub);
          break;
        case TestOp::kMax:
          acc = acc > b ? acc : b;
          break;
        case TestOp::kMin:
          acc = acc < b ? acc : b;
          break;
        case TestOp::kPreMulSum:
          acc = wrap(ua + ub * s);
          break;
      }
    }
    return acc;
  } else {
    using C = ComputeType<T>;
    const C s = widen(scalar);
    C acc = widen(xs[0]);
    if (op == TestOp::kPreMulSum) acc = acc * s;
    for (size_t k = 1; k < n; ++k) {
      const C b = widen(xs[k]);
      switch (op) {
        case TestOp::kSum:
        case TestOp::kAvg:
          acc = acc + b;
          break;
        case TestOp::kProd:
          acc = acc * b;
          break;
        case TestOp::kMax:
          acc = (acc > b || acc != acc) ? acc : b;
          break;
        case TestOp::kMin:
          acc = (acc < b || acc != acc) ? acc : b;
          break;
        case TestOp::kPreMulSum: {
          const C product = b * s;  // rounded on its own: no fused multiply-add
          acc = acc + product;
          break;
        }
      }
    }
    return narrow<T>(acc);
  }
}

/// avg finalisation: integers truncate toward zero; floating types divide in the compute type.
template <typename T>
T modelDivide(T v, int divisor) {
  if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_signed_v<T>) {
      return static_cast<T>(static_cast<int64_t>(v) / divisor);
    } else {
      return static_cast<T>(static_cast<uint64_t>(v) / static_cast<uint64_t>(divisor));
    }
  } else {
    return narrow<T>(widen(v) / static_cast<ComputeType<T>>(divisor));
  }
}

template <typename T>
bool isNaNValue(T v) {
  if constexpr (std::is_integral_v<T>) {
    return false;
  } else {
    const auto c = widen(v);
    return c != c;
  }
}

/// Equal bits, or both NaN (a NaN's payload and sign after sum/prod are not specified: x86
/// keeps the first operand's, which the compiler may reorder).
template <typename T>
bool sameResult(T got, T want) {
  if (std::memcmp(&got, &want, sizeof(T)) == 0) return true;
  return isNaNValue(got) && isNaNValue(want);
}

// ---- the float64 reference and its error bound ----

/// Error bound parameters of a floating dtype: `unit` is the unit roundoff of the stored type
/// (one final rounding), `accUnit` that of the accumulation type, `halfSubnormal` half the
/// smallest subnormal of the stored type (underflow).
struct ErrorModel {
  double unit, accUnit, halfSubnormal;
};
inline ErrorModel errorModel(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return {std::ldexp(1.0, -11), std::ldexp(1.0, -24), std::ldexp(1.0, -25)};
    case DataType::kBfloat16:
      return {std::ldexp(1.0, -8), std::ldexp(1.0, -24), std::ldexp(1.0, -134)};
    case DataType::kFp8E4M3:
      return {std::ldexp(1.0, -4), std::ldexp(1.0, -24), std::ldexp(1.0, -10)};
    case DataType::kFp8E5M2:
      return {std::ldexp(1.0, -3), std::ldexp(1.0, -24), std::ldexp(1.0, -17)};
    case DataType::kFloat32:
      return {0.0, std::ldexp(1.0, -24), std::ldexp(1.0, -150)};
    default:  // float64
      return {0.0, std::ldexp(1.0, -53), 0.0};
  }
}

/// |got - ref| allowed for a floating result of n inputs (x, or x * scalar for premulsum), ref
/// computed in float64. sum/avg/premulsum: unit*|ref| + (n+1)*accUnit*sum|terms| +
/// halfSubnormal. prod: (unit + (n+1)*accUnit)*|ref| + halfSubnormal. max/min: 0 (exact).
inline double allowedError(DataType t, TestOp op, size_t n, double ref, double sumAbsTerms) {
  const ErrorModel e = errorModel(t);
  const double k = static_cast<double>(n + 1);
  switch (op) {
    case TestOp::kMax:
    case TestOp::kMin:
      return 0.0;
    case TestOp::kProd:
      return (e.unit + k * e.accUnit) * std::abs(ref) + e.halfSubnormal;
    default:
      return e.unit * std::abs(ref) + k * e.accUnit * sumAbsTerms + e.halfSubnormal;
  }
}

/// The float64 fold of finite inputs and the sum of |terms| for allowedError.
inline double referenceFold(TestOp op, const double* xs, size_t n, double scalar,
                            double* sumAbsTerms) {
  double acc = op == TestOp::kPreMulSum ? xs[0] * scalar : xs[0];
  double abs = std::abs(acc);
  for (size_t k = 1; k < n; ++k) {
    const double b = op == TestOp::kPreMulSum ? xs[k] * scalar : xs[k];
    abs += std::abs(b);
    switch (op) {
      case TestOp::kProd:
        acc *= b;
        break;
      case TestOp::kMax:
        acc = acc > b ? acc : b;
        break;
      case TestOp::kMin:
        acc = acc < b ? acc : b;
        break;
      default:
        acc += b;
        break;
    }
  }
  *sumAbsTerms = abs;
  return acc;
}

// ---- inputs ----

/// Fills `count` elements at p with random values of T: integers take every bit pattern;
/// floating values are +-m * 2^e with m in [1, 2) and e in {-1, 0} (one in ten e = -8, which
/// reaches the fp8 subnormals), rounded to T. With `specials`, floating values come from
/// {NaN, -NaN, +-inf, +-0, +-max finite, +-smallest subnormal, +-1, 2.5} instead.
template <typename T>
void fillRandom(unsigned char* p, size_t count, std::mt19937_64& rng, bool specials = false) {
  for (size_t i = 0; i < count; ++i) {
    T v;
    if constexpr (std::is_integral_v<T>) {
      v = static_cast<T>(rng());
    } else if (specials) {
      constexpr double kInf = std::numeric_limits<double>::infinity();
      const double maxFinite = std::is_same_v<T, Half>      ? 65504.0
                               : std::is_same_v<T, Fp8E4M3> ? 448.0
                               : std::is_same_v<T, Fp8E5M2> ? 57344.0
                               : std::is_same_v<T, BFloat16>
                                   ? static_cast<double>(std::bit_cast<float>(0x7F7F0000u))
                               : std::is_same_v<T, float> ? std::numeric_limits<float>::max()
                                                          : std::numeric_limits<double>::max();
      const double tiny = std::is_same_v<T, Half>       ? std::ldexp(1.0, -24)
                          : std::is_same_v<T, Fp8E4M3>  ? std::ldexp(1.0, -9)
                          : std::is_same_v<T, Fp8E5M2>  ? std::ldexp(1.0, -16)
                          : std::is_same_v<T, BFloat16> ? std::ldexp(1.0, -133)
                          : std::is_same_v<T, float>    ? std::ldexp(1.0, -149)
                                                        : std::ldexp(1.0, -1074);
      const double set[] = {std::nan(""), -std::nan(""), kInf, -kInf,     0.0, -0.0, maxFinite,
                            -maxFinite,   tiny,          -tiny, 1.0,      -1.0, 2.5};
      const double x = set[rng() % std::size(set)];
      if constexpr (NarrowFloat<T>) {
        v = fromFloat<T>(static_cast<float>(x));
      } else {
        v = static_cast<T>(x);
      }
    } else {
      const uint64_t r = rng();
      const double m = 1.0 + static_cast<double>(r >> 11) * std::ldexp(1.0, -53);
      const int e = (r & 15) < 2 ? -8 : -static_cast<int>((r >> 4) & 1);
      const double x = ((r >> 5) & 1 ? -1.0 : 1.0) * std::ldexp(m, e);
      if constexpr (NarrowFloat<T>) {
        v = fromFloat<T>(static_cast<float>(x));
      } else {
        v = static_cast<T>(x);
      }
    }
    std::memcpy(p + i * sizeof(T), &v, sizeof(T));
  }
}

/// The premulsum scalar of each dtype in the tests: -3 for signed integers, 3 for unsigned ones,
/// 0.75 for floating types.
template <typename T>
T testScalar() {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(std::is_signed_v<T> ? -3 : 3);
  } else if constexpr (NarrowFloat<T>) {
    return fromFloat<T>(0.75f);
  } else {
    return static_cast<T>(0.75);
  }
}

/// The outcome of comparing one kernel output with the model (all elements) and the float64
/// reference (every `sampleStride`-th element with finite inputs and result; floating types
/// only; sampleStride 0: none).
struct Verdict {
  size_t modelMismatches = 0;
  size_t boundViolations = 0;
  std::string first;  ///< the first failure, described
  bool ok() const { return modelMismatches == 0 && boundViolations == 0; }
};

template <typename T>
Verdict verifyReduce(TestOp op, const std::vector<const unsigned char*>& srcs, size_t count,
                     const unsigned char* out, T scalar, size_t sampleStride = 1) {
  Verdict v;
  const size_t n = srcs.size();
  std::vector<T> xs(n);
  std::vector<double> xd(n);
  for (size_t i = 0; i < count; ++i) {
    for (size_t k = 0; k < n; ++k) std::memcpy(&xs[k], srcs[k] + i * sizeof(T), sizeof(T));
    T got;
    std::memcpy(&got, out + i * sizeof(T), sizeof(T));
    const T want = modelFold<T>(op, xs.data(), n, scalar);
    if (!sameResult(got, want) && v.modelMismatches++ == 0) {
      v.first = "model mismatch at i=" + std::to_string(i) + ": got " +
                std::to_string(static_cast<double>(widen(got))) + ", want " +
                std::to_string(static_cast<double>(widen(want)));
    }
    if constexpr (!std::is_integral_v<T>) {
      if (sampleStride == 0 || i % sampleStride != 0) continue;
      bool finite = true;
      for (size_t k = 0; k < n; ++k) {
        xd[k] = static_cast<double>(widen(xs[k]));
        finite = finite && std::isfinite(xd[k]);
      }
      if (!finite) continue;
      double sumAbs = 0;
      const double ref = referenceFold(op, xd.data(), n, static_cast<double>(widen(scalar)), &sumAbs);
      const double g = static_cast<double>(widen(got));
      if (!std::isfinite(ref)) continue;
      const double err = std::abs(g - ref), bound = allowedError(dataTypeOf<T>(), op, n, ref, sumAbs);
      if (!(err <= bound) && v.boundViolations++ == 0) {
        v.first = "float64 bound at i=" + std::to_string(i) + ": got " + std::to_string(g) +
                  ", ref " + std::to_string(ref) + ", |err| " + std::to_string(err) + " > " +
                  std::to_string(bound);
      }
    }
  }
  return v;
}

}  // namespace tutti::kernels::test
