// File: kernels/convert.h
// Bit-exact conversions between float and the narrow floating types (IEEE binary16, bfloat16,
// OCP FP8 E4M3 and E5M2), the DataType -> C++ element type map, and dtype-generic element access
// (loadAsDouble / storeFromDouble) for tests and the benchmark. Header-only and constexpr so the
// CPU kernels inline the conversions into their loops.
#pragma once

#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>
#include <tutti/types.hpp>
#include <utility>

namespace tutti::kernels {

// Storage-only wrappers: arithmetic goes through float (toFloat / fromFloat<T>).
struct Half {  // IEEE 754 binary16: 1.5.10, bias 15, max 65504, has inf and NaN
  uint16_t bits;
  friend constexpr bool operator==(Half, Half) = default;
};
struct BFloat16 {  // the upper half of a float32: 1.8.7, bias 127
  uint16_t bits;
  friend constexpr bool operator==(BFloat16, BFloat16) = default;
};
struct Fp8E4M3 {  // OCP E4M3: 1.4.3, bias 7, max 448, no inf, NaN = S.1111.111
  uint8_t bits;
  friend constexpr bool operator==(Fp8E4M3, Fp8E4M3) = default;
};
struct Fp8E5M2 {  // OCP E5M2: 1.5.2, bias 15, max 57344, inf = S.11111.00, NaN = S.11111.{01,10,11}
  uint8_t bits;
  friend constexpr bool operator==(Fp8E5M2, Fp8E5M2) = default;
};

template <typename T>
concept NarrowFloat = std::same_as<T, Half> || std::same_as<T, BFloat16> ||
    std::same_as<T, Fp8E4M3> || std::same_as<T, Fp8E5M2>;

namespace detail {

// A binary format with one sign bit, used for float16 and both fp8 formats (bfloat16 is the
// truncated float32 and has a shorter path below). A template argument of the codecs, so that
// every field folds into constants.
struct NarrowFormat {
  int expBits;
  int manBits;
  int bias;
  uint32_t maxFiniteBits;  // magnitude bits of the largest finite value
  uint32_t nanBits;        // magnitude bits we produce for NaN
  bool hasInf;             // exponent all-ones with mantissa 0 is infinity (IEEE style)
  bool saturate;           // finite overflow gives +-max instead of +-inf
};
// float16 follows IEEE: overflow rounds to infinity, as __float2half does.
inline constexpr NarrowFormat kHalfFormat{5, 10, 15, 0x7BFF, 0x7E00, true, false};
// E4M3 follows __nv_cvt_float_to_fp8(__NV_SATFINITE, __NV_E4M3): +-inf and finite overflow give
// +-448 (0x7E/0xFE); NaN gives S.1111.111.
inline constexpr NarrowFormat kE4M3Format{4, 3, 7, 0x7E, 0x7F, false, true};
// E5M2: finite overflow saturates to +-57344 (0x7B/0xFB), but +-inf stays +-inf (0x7C/0xFC):
// an infinity is an input, not a rounding artefact (NVIDIA's satfinite would give 57344 here).
inline constexpr NarrowFormat kE5M2Format{5, 2, 15, 0x7B, 0x7E, true, true};

constexpr uint32_t infBits(NarrowFormat fmt) { return ((1u << fmt.expBits) - 1u) << fmt.manBits; }

// c ? a : b without a branch, so that GCC if-converts (and vectorises) the loops that use it.
constexpr uint32_t selectBits(bool c, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(c);
  return (a & mask) | (b & ~mask);
}

constexpr float powerOfTwo(int e) {  // exact for -126 <= e <= 127
  return std::bit_cast<float>(static_cast<uint32_t>(e + 127) << 23);
}

// The FPU does the rounding. With e = max(exponent of |f|, the format's smallest normal
// exponent), magic = 2^(e + 23 - manBits) has a float ulp equal to the format's quantum at e, so
// |f| + magic rounds |f| to nearest, ties to even, and bits(|f| + magic) - bits(magic) is the
// rounded |f| in quanta, q (implicit bit included). The encoding is ((e - eMin) << manBits) + q:
// a carry out of the mantissa moves to the next binade, subnormals need no special case.
// Branch-free so that the reduction loops vectorise. Exact in the default rounding mode; FTZ/DAZ
// only flush float subnormal inputs, which round to zero in every format anyway.
template <NarrowFormat fmt>
constexpr uint32_t encodeNarrow(float f) {
  constexpr uint32_t kMinField = 127 + 1 - fmt.bias;  // float exponent field of the smallest normal
  constexpr uint32_t kCapField = 127 + (1 << fmt.expBits) - fmt.bias;  // above the largest binade
  constexpr uint32_t kOverflow = fmt.saturate ? fmt.maxFiniteBits : infBits(fmt);
  constexpr uint32_t kInf = fmt.hasInf ? infBits(fmt) : fmt.maxFiniteBits;
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t absx = x & 0x7FFFFFFFu;
  uint32_t field = absx >> 23;
  field = selectBits(field < kMinField, kMinField, field);
  // Capping keeps magic finite; everything at or above the cap overflows anyway.
  field = selectBits(field > kCapField, kCapField, field);
  const uint32_t magic = (field + 23 - fmt.manBits) << 23;
  const float sum = std::bit_cast<float>(absx) + std::bit_cast<float>(magic);
  const uint32_t q = std::bit_cast<uint32_t>(sum) - magic;
  uint32_t bits = ((field - kMinField) << fmt.manBits) + q;
  bits = selectBits(bits > fmt.maxFiniteBits, kOverflow, bits);
  bits = selectBits(absx == 0x7F800000u, kInf, bits);
  bits = selectBits(absx > 0x7F800000u, fmt.nanBits, bits);
  return ((x >> 31) << (fmt.expBits + fmt.manBits)) | bits;
}

// Exact; NaN decodes to a quiet NaN with the payload moved up, and keeps its sign.
template <NarrowFormat fmt>
constexpr float decodeNarrow(uint32_t bits) {
  constexpr int kWidth = fmt.expBits + fmt.manBits;
  constexpr int kShift = 23 - fmt.manBits;
  const uint32_t sign = ((bits >> kWidth) & 1u) << 31;
  const uint32_t mag = bits & ((1u << kWidth) - 1u);
  const uint32_t man = mag & ((1u << fmt.manBits) - 1u);
  // Normal: re-bias the exponent in place. Subnormal or zero: man * 2^(1 - bias - manBits).
  const uint32_t normal = (mag << kShift) + (static_cast<uint32_t>(127 - fmt.bias) << 23);
  const float subnormal =
      static_cast<float>(static_cast<int32_t>(man)) * powerOfTwo(1 - fmt.bias - fmt.manBits);
  uint32_t out = selectBits(mag < (1u << fmt.manBits), std::bit_cast<uint32_t>(subnormal), normal);
  if constexpr (fmt.hasInf) {
    const uint32_t special = 0x7F800000u | (man << kShift) | selectBits(man != 0, 0x00400000u, 0u);
    out = selectBits(mag >= infBits(fmt), special, out);
  } else {
    out = selectBits(mag == fmt.nanBits, 0x7FC00000u | (man << kShift), out);
  }
  return std::bit_cast<float>(sign | out);
}

// fp8 decodes by table lookup (256 floats each, built at compile time).
template <NarrowFormat fmt>
constexpr std::array<float, 256> decodeTable() {
  std::array<float, 256> table{};
  for (uint32_t bits = 0; bits < 256; ++bits) table[bits] = decodeNarrow<fmt>(bits);
  return table;
}
inline constexpr std::array<float, 256> kE4M3ToFloat = decodeTable<kE4M3Format>();
inline constexpr std::array<float, 256> kE5M2ToFloat = decodeTable<kE5M2Format>();

}  // namespace detail

constexpr float toFloat(Half v) { return detail::decodeNarrow<detail::kHalfFormat>(v.bits); }
constexpr float toFloat(BFloat16 v) {
  return std::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16);
}
constexpr float toFloat(Fp8E4M3 v) { return detail::kE4M3ToFloat[v.bits]; }
constexpr float toFloat(Fp8E5M2 v) { return detail::kE5M2ToFloat[v.bits]; }

/// Rounds a float to T, to nearest with ties to even, including into T's subnormals. NaN stays
/// NaN (quiet). Overflow: float16 and bfloat16 give +-inf (IEEE); E4M3 saturates +-inf and finite
/// overflow to +-448; E5M2 saturates finite overflow to +-57344 and keeps +-inf.
template <NarrowFloat T>
constexpr T fromFloat(float f) {
  if constexpr (std::same_as<T, BFloat16>) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    // The carry of the rounding moves into the exponent, and overflow reaches inf.
    const uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
    const uint32_t quietNaN = (x >> 16) | 0x40u;
    return T{static_cast<uint16_t>(
        detail::selectBits((x & 0x7FFFFFFFu) > 0x7F800000u, quietNaN, rounded))};
  } else if constexpr (std::same_as<T, Half>) {
    return T{static_cast<uint16_t>(detail::encodeNarrow<detail::kHalfFormat>(f))};
  } else if constexpr (std::same_as<T, Fp8E4M3>) {
    return T{static_cast<uint8_t>(detail::encodeNarrow<detail::kE4M3Format>(f))};
  } else {
    return T{static_cast<uint8_t>(detail::encodeNarrow<detail::kE5M2Format>(f))};
  }
}

/// The C++ element type of each DataType, in enum order: ElementType<DataType::kFloat16> is Half.
using ElementTypes = std::tuple<int8_t, uint8_t, int32_t, uint32_t, int64_t, uint64_t, Half, float,
                                double, BFloat16, Fp8E4M3, Fp8E5M2>;
template <DataType D>
using ElementType = std::tuple_element_t<static_cast<size_t>(D), ElementTypes>;
static_assert(std::tuple_size_v<ElementTypes> == kNumDataTypes);
static_assert(std::same_as<ElementType<DataType::kUint64>, uint64_t> &&
              std::same_as<ElementType<DataType::kFloat16>, Half> &&
              std::same_as<ElementType<DataType::kBfloat16>, BFloat16> &&
              std::same_as<ElementType<DataType::kFp8E5M2>, Fp8E5M2>);

namespace detail {

// Truncates toward zero and wraps modulo 2^bits (C++20 integral conversions are modular).
// NaN gives 0; magnitudes beyond the 64-bit range saturate (only to avoid undefined behaviour).
template <std::integral T>
constexpr T wrapToInteger(double v) {
  if (v != v) return 0;
  if (v >= -9223372036854775808.0 && v < 9223372036854775808.0) {
    return static_cast<T>(static_cast<int64_t>(v));
  }
  if (v >= 0 && v < 18446744073709551616.0) return static_cast<T>(static_cast<uint64_t>(v));
  return v < 0 ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
}

// Calls fn(T{}) with T = ElementType<dtype>; returns false for a dtype outside the enum.
template <typename Fn, size_t... I>
constexpr bool withElementType(DataType dtype, Fn&& fn, std::index_sequence<I...>) {
  const auto index = static_cast<size_t>(dtype);
  return ((index == I && (fn(std::tuple_element_t<I, ElementTypes>{}), true)) || ...);
}
template <typename Fn>
constexpr bool withElementType(DataType dtype, Fn&& fn) {
  return withElementType(dtype, fn, std::make_index_sequence<kNumDataTypes>{});
}

}  // namespace detail

/// Element `index` of a `dtype` array at `base` (any alignment) as a double; exact for every
/// dtype except 64-bit integers beyond 2^53. NaN for a dtype outside the enum.
inline double loadAsDouble(DataType dtype, const void* base, size_t index) {
  double out = std::numeric_limits<double>::quiet_NaN();
  detail::withElementType(dtype, [&]<typename T>(T) {
    T v;
    std::memcpy(&v, static_cast<const unsigned char*>(base) + index * sizeof(T), sizeof(T));
    if constexpr (NarrowFloat<T>) {
      out = static_cast<double>(toFloat(v));
    } else {
      out = static_cast<double>(v);
    }
  });
  return out;
}

/// Stores v into element `index` of a `dtype` array at `base` (any alignment). Integers truncate
/// toward zero and wrap; float32 and the narrow types round to nearest even (narrow ones through
/// float, so a double can round twice). No-op for a dtype outside the enum.
inline void storeFromDouble(DataType dtype, void* base, size_t index, double v) {
  detail::withElementType(dtype, [&]<typename T>(T) {
    T out;
    if constexpr (NarrowFloat<T>) {
      out = fromFloat<T>(static_cast<float>(v));
    } else if constexpr (std::integral<T>) {
      out = detail::wrapToInteger<T>(v);
    } else {
      out = static_cast<T>(v);
    }
    std::memcpy(static_cast<unsigned char*>(base) + index * sizeof(T), &out, sizeof(T));
  });
}

}  // namespace tutti::kernels
