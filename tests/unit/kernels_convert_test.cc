// File: tests/unit/kernels_convert_test.cc
// The narrow-float conversions of kernels/convert.h against known bit patterns, every bit
// pattern of each format, ties to even, and the compiler's _Float16; loadAsDouble/storeFromDouble.
#include <catch2/catch.hpp>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/convert.h"

namespace tutti::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

template <typename T>
uint32_t bitsOf(float f) {
  return fromFloat<T>(f).bits;
}

TEST_CASE("float16 conversions: known bit patterns and ties to even") {
  static_assert(toFloat(Half{0x3C00}) == 1.0f);  // constexpr
  CHECK(toFloat(Half{0x7BFF}) == 65504.0f);
  CHECK(toFloat(Half{0x0001}) == std::ldexp(1.0f, -24));
  CHECK(toFloat(Half{0x03FF}) == std::ldexp(1023.0f, -24));
  CHECK(toFloat(Half{0x0400}) == std::ldexp(1.0f, -14));
  CHECK(toFloat(Half{0xC000}) == -2.0f);
  CHECK(std::signbit(toFloat(Half{0x8000})));
  CHECK(toFloat(Half{0x7C00}) == kInf);
  CHECK(toFloat(Half{0xFC00}) == -kInf);
  CHECK(std::isnan(toFloat(Half{0x7E00})));
  CHECK(std::isnan(toFloat(Half{0x7C01})));

  CHECK(bitsOf<Half>(1.0f) == 0x3C00);
  CHECK(bitsOf<Half>(-0.0f) == 0x8000);
  CHECK(bitsOf<Half>(65504.0f) == 0x7BFF);
  CHECK(bitsOf<Half>(65519.99f) == 0x7BFF);
  CHECK(bitsOf<Half>(65520.0f) == 0x7C00);  // tie between 65504 (odd) and 65536: inf
  CHECK(bitsOf<Half>(1e10f) == 0x7C00);
  CHECK(bitsOf<Half>(-kInf) == 0xFC00);
  CHECK((bitsOf<Half>(kNaN) & 0x7C00) == 0x7C00);
  CHECK((bitsOf<Half>(kNaN) & 0x03FF) != 0);
  CHECK(bitsOf<Half>(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(bitsOf<Half>(std::ldexp(1.0f, -25)) == 0x0000);  // tie: to even (zero)
  CHECK(bitsOf<Half>(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 0x0001);
  CHECK(bitsOf<Half>(std::ldexp(3.0f, -25)) == 0x0002);  // tie between 1 and 2 ulps: 2
  CHECK(bitsOf<Half>(std::ldexp(1.0f, -40)) == 0x0000);
  CHECK(bitsOf<Half>(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);  // tie: to even
  CHECK(bitsOf<Half>(1.0f + std::ldexp(3.0f, -11)) == 0x3C02);  // tie: to even
  CHECK(bitsOf<Half>(1.0f + std::ldexp(1.0f, -11) + 1e-7f) == 0x3C01);
  CHECK(bitsOf<Half>(std::ldexp(2047.0f, -25)) == 0x0400);  // subnormal rounds up to normal
}

TEST_CASE("bfloat16 conversions round to nearest even") {
  CHECK(bitsOf<BFloat16>(1.0f) == 0x3F80);
  CHECK(toFloat(BFloat16{0x3F80}) == 1.0f);
  CHECK(toFloat(BFloat16{0xC040}) == -3.0f);
  CHECK(bitsOf<BFloat16>(std::bit_cast<float>(0x3F808000u)) == 0x3F80);  // tie: even
  CHECK(bitsOf<BFloat16>(std::bit_cast<float>(0x3F818000u)) == 0x3F82);  // tie: even
  CHECK(bitsOf<BFloat16>(std::bit_cast<float>(0x3F808001u)) == 0x3F81);
  CHECK(bitsOf<BFloat16>(std::bit_cast<float>(0x3F807FFFu)) == 0x3F80);
  CHECK(bitsOf<BFloat16>(std::numeric_limits<float>::max()) == 0x7F80);  // rounds to inf
  CHECK(bitsOf<BFloat16>(std::bit_cast<float>(0x00018000u)) == 0x0002);  // subnormal tie
  CHECK(bitsOf<BFloat16>(-kInf) == 0xFF80);
  CHECK(std::isnan(toFloat(fromFloat<BFloat16>(kNaN))));
  CHECK(std::isnan(toFloat(fromFloat<BFloat16>(std::bit_cast<float>(0x7F800001u)))));
}

TEST_CASE("fp8 E4M3 conversions: max 448, no inf, saturating") {
  CHECK(toFloat(Fp8E4M3{0x7E}) == 448.0f);
  CHECK(toFloat(Fp8E4M3{0xFE}) == -448.0f);
  CHECK(toFloat(Fp8E4M3{0x38}) == 1.0f);
  CHECK(toFloat(Fp8E4M3{0x01}) == std::ldexp(1.0f, -9));
  CHECK(toFloat(Fp8E4M3{0x08}) == std::ldexp(1.0f, -6));
  CHECK(toFloat(Fp8E4M3{0x78}) == 256.0f);  // exponent 1111 is a normal binade in E4M3
  CHECK(std::isnan(toFloat(Fp8E4M3{0x7F})));
  CHECK(std::isnan(toFloat(Fp8E4M3{0xFF})));
  CHECK(bitsOf<Fp8E4M3>(448.0f) == 0x7E);
  CHECK(bitsOf<Fp8E4M3>(464.0f) == 0x7E);  // tie between 448 and (absent) 480
  CHECK(bitsOf<Fp8E4M3>(500.0f) == 0x7E);
  CHECK(bitsOf<Fp8E4M3>(1e30f) == 0x7E);
  CHECK(bitsOf<Fp8E4M3>(kInf) == 0x7E);
  CHECK(bitsOf<Fp8E4M3>(-kInf) == 0xFE);
  CHECK((bitsOf<Fp8E4M3>(kNaN) & 0x7F) == 0x7F);
  CHECK(bitsOf<Fp8E4M3>(1.0f) == 0x38);
  CHECK(bitsOf<Fp8E4M3>(1.0625f) == 0x38);                // tie: even
  CHECK(bitsOf<Fp8E4M3>(1.1875f) == 0x3A);                // tie: even
  CHECK(bitsOf<Fp8E4M3>(std::ldexp(1.0f, -10)) == 0x00);  // tie: zero
  CHECK(bitsOf<Fp8E4M3>(std::ldexp(3.0f, -10)) == 0x02);
}

TEST_CASE("fp8 E5M2 conversions: max 57344, inf kept, finite overflow saturates") {
  CHECK(toFloat(Fp8E5M2{0x7B}) == 57344.0f);
  CHECK(toFloat(Fp8E5M2{0x7C}) == kInf);
  CHECK(toFloat(Fp8E5M2{0xFC}) == -kInf);
  CHECK(std::isnan(toFloat(Fp8E5M2{0x7D})));
  CHECK(std::isnan(toFloat(Fp8E5M2{0x7E})));
  CHECK(std::isnan(toFloat(Fp8E5M2{0x7F})));
  CHECK(toFloat(Fp8E5M2{0x3C}) == 1.0f);
  CHECK(toFloat(Fp8E5M2{0x01}) == std::ldexp(1.0f, -16));
  CHECK(bitsOf<Fp8E5M2>(57344.0f) == 0x7B);
  CHECK(bitsOf<Fp8E5M2>(61440.0f) == 0x7B);  // would round to 65536 (inf): saturates
  CHECK(bitsOf<Fp8E5M2>(1e30f) == 0x7B);
  CHECK(bitsOf<Fp8E5M2>(-1e30f) == 0xFB);
  CHECK(bitsOf<Fp8E5M2>(kInf) == 0x7C);
  CHECK(bitsOf<Fp8E5M2>(-kInf) == 0xFC);
  CHECK(std::isnan(toFloat(fromFloat<Fp8E5M2>(kNaN))));
  CHECK(bitsOf<Fp8E5M2>(1.125f) == 0x3C);  // tie: even
  CHECK(bitsOf<Fp8E5M2>(1.375f) == 0x3E);  // tie: even
  CHECK(bitsOf<Fp8E5M2>(std::ldexp(1.0f, -17)) == 0x00);
}

// Every non-NaN bit pattern decodes to (-1)^s 2^(e-bias) (1 + m/2^M) (subnormal: 2^(1-bias)
// m/2^M), and encodes back to itself; every midpoint between neighbours rounds to the even one,
// and a hair off the midpoint to the nearer one.
template <typename T>
void checkFormat(int expBits, int manBits, int bias, bool hasInf) {
  const int width = 1 + expBits + manBits;
  const uint32_t maxExpField = (1u << expBits) - 1;
  std::vector<std::pair<float, uint32_t>> finite;  // non-negative, ascending
  for (uint32_t bits = 0; bits < (1u << width); ++bits) {
    const uint32_t e = (bits >> manBits) & maxExpField, m = bits & ((1u << manBits) - 1);
    const bool neg = bits >> (width - 1);
    const T v{static_cast<decltype(T::bits)>(bits)};
    const float f = toFloat(v);
    const bool nan =
        hasInf ? (e == maxExpField && m != 0) : (e == maxExpField && m + 1 == (1u << manBits));
    const bool inf = hasInf && e == maxExpField && m == 0;
    INFO("bits=" << bits);
    if (nan) {
      REQUIRE(std::isnan(f));
      REQUIRE(std::isnan(toFloat(fromFloat<T>(f))));
      continue;
    }
    const double mag = inf      ? std::numeric_limits<double>::infinity()
                       : e == 0 ? std::ldexp(static_cast<double>(m), 1 - bias - manBits)
                                : std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -manBits),
                                             static_cast<int>(e) - bias);
    REQUIRE(static_cast<double>(f) == (neg ? -mag : mag));
    REQUIRE(std::signbit(f) == neg);
    REQUIRE(fromFloat<T>(f).bits == bits);
    if (!neg && !inf) finite.emplace_back(f, bits);
  }
  for (size_t k = 0; k + 1 < finite.size(); ++k) {
    const auto [lo, loBits] = finite[k];
    const auto [hi, hiBits] = finite[k + 1];
    // In double: lo + hi overflows float at the top of bfloat16. Exact: one more bit than T has.
    const double midExact = (static_cast<double>(lo) + hi) / 2;
    const auto mid = static_cast<float>(midExact);
    INFO("lo=" << lo << " hi=" << hi);
    REQUIRE(static_cast<double>(mid) == midExact);
    REQUIRE(fromFloat<T>(mid).bits == ((loBits & 1) ? hiBits : loBits));
    REQUIRE(fromFloat<T>(std::nextafter(mid, kInf)).bits == hiBits);
    REQUIRE(fromFloat<T>(std::nextafter(mid, 0.0f)).bits == loBits);
    const uint32_t signBit = 1u << (width - 1);
    REQUIRE(fromFloat<T>(-mid).bits == (signBit | ((loBits & 1) ? hiBits : loBits)));
  }
}

TEST_CASE("every narrow-float bit pattern decodes exactly, round-trips, and rounds to even") {
  SECTION("float16") { checkFormat<Half>(5, 10, 15, true); }
  SECTION("bfloat16") { checkFormat<BFloat16>(8, 7, 127, true); }
  SECTION("fp8 e4m3") { checkFormat<Fp8E4M3>(4, 3, 7, false); }
  SECTION("fp8 e5m2") { checkFormat<Fp8E5M2>(5, 2, 15, true); }
}

#ifdef __FLT16_MAX__
TEST_CASE("float16 rounding agrees with the compiler's _Float16 on a sweep of floats") {
  size_t bad = 0;
  uint32_t firstBad = 0;
  for (uint64_t x = 0; x <= 0xFFFFFFFFu; x += 4093) {  // ~10^6 patterns, all exponents
    const float f = std::bit_cast<float>(static_cast<uint32_t>(x));
    const auto ref = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    const uint16_t got = fromFloat<Half>(f).bits;
    const bool bothNaN = std::isnan(f) && (got & 0x7C00) == 0x7C00 && (got & 0x3FF) != 0;
    if (got != ref && !bothNaN && bad++ == 0) firstBad = static_cast<uint32_t>(x);
  }
  INFO("first mismatch: float bits " << firstBad);
  CHECK(bad == 0);
}
#endif

TEST_CASE("loadAsDouble and storeFromDouble") {
  unsigned char buf[32] = {};
  storeFromDouble(DataType::kInt8, buf, 0, 200.0);
  CHECK(loadAsDouble(DataType::kInt8, buf, 0) == -56.0);
  storeFromDouble(DataType::kUint8, buf, 0, -1.0);
  CHECK(loadAsDouble(DataType::kUint8, buf, 0) == 255.0);
  storeFromDouble(DataType::kInt32, buf + 1, 0, -2.7);  // misaligned, truncates
  CHECK(loadAsDouble(DataType::kInt32, buf + 1, 0) == -2.0);
  storeFromDouble(DataType::kUint64, buf + 1, 1, 9223372036854775808.0);
  uint64_t u;
  std::memcpy(&u, buf + 9, 8);
  CHECK(u == (uint64_t{1} << 63));
  storeFromDouble(DataType::kFloat16, buf, 3, 1.0);
  CHECK((buf[6] | buf[7] << 8) == 0x3C00);
  storeFromDouble(DataType::kFp8E4M3, buf, 0, 1000.0);
  CHECK(buf[0] == 0x7E);
  storeFromDouble(DataType::kFloat64, buf + 3, 1, 0.1);
  CHECK(loadAsDouble(DataType::kFloat64, buf + 3, 1) == 0.1);
  CHECK(std::isnan(loadAsDouble(static_cast<DataType>(12), buf, 0)));
}

}  // namespace
}  // namespace tutti::kernels
