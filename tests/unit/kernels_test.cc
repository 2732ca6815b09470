// File: tests/unit/kernels_test.cc
// The CPU reduction kernels (kernels/reduce.h) against float64 references: every dtype x op x
// odd counts x misaligned pointers, in-place aliasing, multi-source reduce, divide, the error
// paths, and the narrow-float conversions of kernels/convert.h against known bit patterns.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "kernels/reduce.h"

namespace tutti::kernels {
namespace {

constexpr RedOp kAllOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

bool isSignedInt(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64;
}
bool isUnsignedInt(DataType t) {
  return t == DataType::kUint8 || t == DataType::kUint32 || t == DataType::kUint64;
}

// Tolerance for one correct rounding: the unit roundoff 2^-(mantissa bits + 1), relative to the
// exact result (no results here are subnormal). Integers compare exactly.
double relTolerance(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return std::ldexp(1.0, -11);
    case DataType::kFloat32:
      return std::ldexp(1.0, -24);
    case DataType::kFloat64:
      return std::ldexp(1.0, -53);
    case DataType::kBfloat16:
      return std::ldexp(1.0, -8);
    case DataType::kFp8E4M3:
      return std::ldexp(1.0, -4);
    case DataType::kFp8E5M2:
      return std::ldexp(1.0, -3);
    default:
      return 0.0;
  }
}

bool closeEnough(DataType t, double got, double ref) {
  if (!isFloating(t)) return got == ref;
  return std::abs(got - ref) <= relTolerance(t) * std::abs(ref);
}

// Input values, exactly representable in every dtype of their class. prod uses values whose
// products are exact; the float set for the other ops makes fp8 sums round (e.g. 3.5 + 0.25).
std::span<const double> valueSet(DataType t, RedOp op) {
  static constexpr double kSigned[] = {-2, -1, 0, 1, 2, 3};
  static constexpr double kUnsigned[] = {0, 1, 2, 3, 5, 7};
  static constexpr double kFloat[] = {-3, -1.5, -0.5, 0, 0.25, 1, 2, 3.5};
  static constexpr double kSignedProd[] = {-2, -1, 1, 2};
  static constexpr double kUnsignedProd[] = {1, 2, 3};
  static constexpr double kFloatProd[] = {-2, -1, -0.5, 0.5, 1, 2};
  const bool prod = op == RedOp::kProd;
  if (isSignedInt(t)) return prod ? std::span<const double>(kSignedProd) : kSigned;
  if (isUnsignedInt(t)) return prod ? std::span<const double>(kUnsignedProd) : kUnsigned;
  return prod ? std::span<const double>(kFloatProd) : kFloat;
}

double refOp(RedOp op, double a, double b) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
      return a + b;  // avg reduces as sum
    case RedOp::kProd:
      return a * b;
    case RedOp::kMax:
      return a > b ? a : b;
    case RedOp::kMin:
      return a < b ? a : b;
  }
  return 0;
}

// Wraps an exact integer result modulo 2^bits, as the kernels must (independent of convert.h).
double wrapLike(DataType t, double v) {
  const auto i = static_cast<int64_t>(v);
  switch (t) {
    case DataType::kInt8:
      return static_cast<int8_t>(i);
    case DataType::kUint8:
      return static_cast<uint8_t>(i);
    case DataType::kInt32:
      return static_cast<int32_t>(i);
    case DataType::kUint32:
      return static_cast<uint32_t>(i);
    case DataType::kInt64:
      return static_cast<double>(i);
    case DataType::kUint64:
      return static_cast<double>(static_cast<uint64_t>(i));
    default:
      return v;
  }
}

// A heap buffer whose data() is 64-byte aligned plus `misalign` bytes, with guard bytes around.
class Buffer {
 public:
  static constexpr unsigned char kGuard = 0xA5;
  Buffer(size_t bytes, size_t misalign) : bytes_(bytes), storage_(bytes + 192, kGuard) {
    auto base = reinterpret_cast<uintptr_t>(storage_.data()) + 64;
    base = (base + 63) & ~uintptr_t{63};
    data_ = reinterpret_cast<unsigned char*>(base) + misalign;
  }
  unsigned char* data() { return data_; }
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

template <size_t N>
struct Elem {
  unsigned char b[N];
  bool operator==(const Elem&) const = default;
};

using Indices = std::vector<uint8_t>;  // element i holds vals[indices[i]]

template <typename Fn>
Indices makeIndices(size_t count, Fn fn) {
  Indices idx(count);
  for (size_t i = 0; i < count; ++i) idx[i] = static_cast<uint8_t>(fn(i));
  return idx;
}

// The a and b patterns over n values: a = i mod n, b = (i + i / n) mod n, so every ordered pair
// occurs in the first n*n elements. Built incrementally (no division per element).
std::pair<Indices, Indices> pairPattern(size_t count, size_t n) {
  Indices a(count), b(count);
  size_t r = 0, q = 0;  // i = (some multiple of n) + r; q = (i / n) mod n
  for (size_t i = 0; i < count; ++i) {
    a[i] = static_cast<uint8_t>(r);
    b[i] = static_cast<uint8_t>(r + q < n ? r + q : r + q - n);
    if (++r == n) {
      r = 0;
      if (++q == n) q = 0;
    }
  }
  return {std::move(a), std::move(b)};
}

// dst[i] = vals[idx[i]], through a table of encoded values (fast for a million elements).
template <size_t N>
void fillT(DataType t, unsigned char* dst, std::span<const double> vals, const Indices& idx) {
  std::vector<Elem<N>> table(vals.size());
  for (size_t k = 0; k < vals.size(); ++k) {
    storeFromDouble(t, table.data(), k, vals[k]);
    REQUIRE(loadAsDouble(t, table.data(), k) == vals[k]);  // the value set is representable
  }
  for (size_t i = 0; i < idx.size(); ++i) std::memcpy(dst + i * N, &table[idx[i]], N);
}
void fill(DataType t, void* dst, std::span<const double> vals, const Indices& idx) {
  auto* d = static_cast<unsigned char*>(dst);
  switch (dataTypeBytes(t)) {
    case 1:
      fillT<1>(t, d, vals, idx);
      break;
    case 2:
      fillT<2>(t, d, vals, idx);
      break;
    case 4:
      fillT<4>(t, d, vals, idx);
      break;
    default:
      fillT<8>(t, d, vals, idx);
      break;
  }
}

struct Mismatch {
  size_t count = 0;
  std::string first;
};

// Checks dst[i] against refOp(vals[ia[i]], vals[ib[i]]). A result already checked for the
// same input pair is accepted by a byte compare, which keeps 10^6 elements cheap.
template <size_t N>
Mismatch checkT(DataType t, RedOp op, const unsigned char* dst, std::span<const double> vals,
                const Indices& idxA, const Indices& idxB) {
  const size_t n = vals.size();
  std::vector<Elem<N>> okBytes(n * n);
  std::vector<char> okValid(n * n, 0);
  Mismatch m;
  for (size_t i = 0; i < idxA.size(); ++i) {
    const size_t ia = idxA[i], ib = idxB[i], pair = ia * n + ib;
    Elem<N> got;
    std::memcpy(&got, dst + i * N, N);
    if (okValid[pair] && okBytes[pair] == got) continue;
    const double ref = refOp(op, vals[ia], vals[ib]);
    const double g = loadAsDouble(t, dst, i);
    if (closeEnough(t, g, ref)) {
      okBytes[pair] = got;
      okValid[pair] = 1;
    } else if (m.count++ == 0) {
      m.first = "i=" + std::to_string(i) + " a=" + std::to_string(vals[ia]) +
                " b=" + std::to_string(vals[ib]) + " got=" + std::to_string(g) +
                " ref=" + std::to_string(ref);
    }
  }
  return m;
}
Mismatch check(DataType t, RedOp op, const void* dst, std::span<const double> vals,
               const Indices& idxA, const Indices& idxB) {
  const auto* d = static_cast<const unsigned char*>(dst);
  switch (dataTypeBytes(t)) {
    case 1:
      return checkT<1>(t, op, d, vals, idxA, idxB);
    case 2:
      return checkT<2>(t, op, d, vals, idxA, idxB);
    case 4:
      return checkT<4>(t, op, d, vals, idxA, idxB);
    default:
      return checkT<8>(t, op, d, vals, idxA, idxB);
  }
}

TEST_CASE("reduce2 matches a float64 reference for every dtype, op, count and alignment") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  const size_t count = GENERATE(as<size_t>{}, 0, 1, 15, 16, 17, 1000003);
  const size_t esize = dataTypeBytes(dtype);
  CAPTURE(dataTypeName(dtype), count, relTolerance(dtype));
  const auto patterns = pairPattern(count, valueSet(dtype, RedOp::kSum).size());
  const auto prodPatterns = pairPattern(count, valueSet(dtype, RedOp::kProd).size());
  // Offsets {0,1} for each of dst, a, b; one byte is no misalignment for 1-byte types.
  for (int offsets = 0; offsets < (esize > 1 ? 8 : 1); ++offsets) {
    const size_t dOff = offsets & 1, aOff = (offsets >> 1) & 1, bOff = (offsets >> 2) & 1;
    Buffer dst(count * esize, dOff), a(count * esize, aOff), b(count * esize, bOff);
    for (RedOp op : kAllOps) {
      CAPTURE(redOpName(op), dOff, aOff, bOff);
      const auto vals = valueSet(dtype, op);
      const auto& [idxA, idxB] = op == RedOp::kProd ? prodPatterns : patterns;
      fill(dtype, a.data(), vals, idxA);
      fill(dtype, b.data(), vals, idxB);
      REQUIRE(reduce2(dst.data(), a.data(), b.data(), count, dtype, op).isOk());
      const Mismatch m = check(dtype, op, dst.data(), vals, idxA, idxB);
      INFO("first mismatch: " << m.first);
      REQUIRE(m.count == 0);
      REQUIRE(dst.guardsIntact());
      if (count < 100) {  // the raw table entry is the same kernel
        reduce2Fn(dtype, op)(dst.data(), a.data(), b.data(), count);
        REQUIRE(check(dtype, op, dst.data(), vals, idxA, idxB).count == 0);
      }
    }
  }
}

TEST_CASE("reduce2 in place: dst aliases a, b or both") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  const size_t count = GENERATE(as<size_t>{}, 1, 17, 1003);
  const size_t esize = dataTypeBytes(dtype);
  const size_t misalign = GENERATE(as<size_t>{}, 0, 1);
  if (misalign == 1 && esize == 1) return;
  CAPTURE(dataTypeName(dtype), count, misalign);
  for (RedOp op : kAllOps) {
    CAPTURE(redOpName(op));
    const auto vals = valueSet(dtype, op);
    const auto [idxA, idxB] = pairPattern(count, vals.size());
    Buffer x(count * esize, misalign), y(count * esize, misalign);

    fill(dtype, x.data(), vals, idxA);  // dst == a
    fill(dtype, y.data(), vals, idxB);
    REQUIRE(reduce2(x.data(), x.data(), y.data(), count, dtype, op).isOk());
    REQUIRE(check(dtype, op, x.data(), vals, idxA, idxB).count == 0);

    fill(dtype, x.data(), vals, idxA);  // dst == b
    fill(dtype, y.data(), vals, idxB);
    REQUIRE(reduce2(y.data(), x.data(), y.data(), count, dtype, op).isOk());
    REQUIRE(check(dtype, op, y.data(), vals, idxA, idxB).count == 0);

    fill(dtype, x.data(), vals, idxA);  // dst == a == b
    REQUIRE(reduce2(x.data(), x.data(), x.data(), count, dtype, op).isOk());
    for (size_t i = 0; i < count; ++i) {
      const double v = vals[idxA[i]];
      REQUIRE(closeEnough(dtype, loadAsDouble(dtype, x.data(), i), refOp(op, v, v)));
    }
    REQUIRE(x.guardsIntact());
    REQUIRE(y.guardsIntact());
  }
}

// Sources use {-1, 0, 1} ({0, 1} unsigned), or {-1, 1, 2} ({1, 2}) for prod, so every partial
// result of up to 8 sources is exact in every dtype (|sum| <= 8, |prod| <= 256, integer products
// wrap): the comparison is exact for the floating types too.
TEST_CASE("reduce with 1 to 8 sources matches a left-to-right float64 reference") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  const size_t nsrcs = GENERATE(range<size_t>(1, 9));
  const size_t count = GENERATE(as<size_t>{}, 1, 1003, 70001);  // 70001: several blocks
  const bool inPlace = GENERATE(false, true);
  const size_t esize = dataTypeBytes(dtype);
  CAPTURE(dataTypeName(dtype), nsrcs, count, inPlace);
  static constexpr double kSmall[] = {-1, 0, 1};
  static constexpr double kSmallUnsigned[] = {0, 1};
  static constexpr double kProd[] = {-1, 1, 2};
  static constexpr double kProdUnsigned[] = {1, 2};
  for (RedOp op : kAllOps) {
    CAPTURE(redOpName(op));
    const bool prod = op == RedOp::kProd;
    std::span<const double> vals = prod ? std::span<const double>(kProd) : kSmall;
    if (isUnsignedInt(dtype)) {
      vals = prod ? std::span<const double>(kProdUnsigned) : kSmallUnsigned;
    }
    const size_t n = vals.size();
    std::vector<Indices> index;
    std::vector<Buffer> bufs;
    bufs.reserve(nsrcs);
    std::vector<const void*> srcs;
    for (size_t k = 0; k < nsrcs; ++k) {
      index.push_back(
          makeIndices(count, [n, k](size_t i) { return (i * 7 + k * 13 + (i >> 2) * k) % n; }));
      bufs.emplace_back(count * esize, k % 2);  // odd sources misaligned
      fill(dtype, bufs.back().data(), vals, index.back());
      srcs.push_back(bufs.back().data());
    }
    Buffer out(count * esize, 0);
    void* dst = inPlace ? bufs[0].data() : out.data();
    REQUIRE(reduce(dst, srcs, count, dtype, op).isOk());
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) {
      double ref = vals[index[0][i]];
      for (size_t k = 1; k < nsrcs; ++k) ref = refOp(op, ref, vals[index[k][i]]);
      if (loadAsDouble(dtype, dst, i) != wrapLike(dtype, ref)) ++bad;
    }
    REQUIRE(bad == 0);
    REQUIRE(out.guardsIntact());
    for (const Buffer& b : bufs) REQUIRE(b.guardsIntact());
  }
}

TEST_CASE("integer sum and prod wrap; max and min order signed values") {
  int8_t a8[] = {100, -128, 127, -1}, b8[] = {100, -1, 1, -1}, d8[4];
  REQUIRE(reduce2(d8, a8, b8, 4, DataType::kInt8, RedOp::kSum).isOk());
  CHECK(d8[0] == -56);
  CHECK(d8[1] == 127);
  CHECK(d8[2] == -128);
  CHECK(d8[3] == -2);
  REQUIRE(reduce2(d8, a8, b8, 4, DataType::kInt8, RedOp::kProd).isOk());
  CHECK(d8[0] == 16);  // 10000 mod 256
  CHECK(d8[1] == -128);
  REQUIRE(reduce2(d8, a8, b8, 4, DataType::kInt8, RedOp::kMax).isOk());
  CHECK(d8[1] == -1);
  REQUIRE(reduce2(d8, a8, b8, 4, DataType::kInt8, RedOp::kMin).isOk());
  CHECK(d8[1] == -128);
  uint8_t au[] = {200}, bu[] = {100}, du[1];
  REQUIRE(reduce2(du, au, bu, 1, DataType::kUint8, RedOp::kSum).isOk());
  CHECK(du[0] == 44);
  int32_t a32[] = {INT32_MAX, INT32_MIN}, b32[] = {1, -1}, d32[2];
  REQUIRE(reduce2(d32, a32, b32, 2, DataType::kInt32, RedOp::kSum).isOk());
  CHECK(d32[0] == INT32_MIN);
  CHECK(d32[1] == INT32_MAX);
  uint32_t a32u[] = {0x10000u}, d32u[1];
  REQUIRE(reduce2(d32u, a32u, a32u, 1, DataType::kUint32, RedOp::kProd).isOk());
  CHECK(d32u[0] == 0u);
  int64_t a64[] = {INT64_MAX}, b64[] = {2}, d64[1];
  REQUIRE(reduce2(d64, a64, b64, 1, DataType::kInt64, RedOp::kProd).isOk());
  CHECK(d64[0] == -2);
  uint64_t a64u[] = {UINT64_MAX}, b64u[] = {UINT64_MAX - 1}, d64u[1];
  REQUIRE(reduce2(d64u, a64u, b64u, 1, DataType::kUint64, RedOp::kMin).isOk());
  CHECK(d64u[0] == UINT64_MAX - 1);
}

TEST_CASE("floating max and min propagate NaN; sum saturates or overflows per format") {
  const auto dtype = GENERATE(DataType::kFloat16, DataType::kFloat32, DataType::kFloat64,
                              DataType::kBfloat16, DataType::kFp8E4M3, DataType::kFp8E5M2);
  CAPTURE(dataTypeName(dtype));
  unsigned char a[32], b[32], d[32];
  storeFromDouble(dtype, a, 0, kNaN);
  storeFromDouble(dtype, b, 0, 1.0);
  storeFromDouble(dtype, a, 1, 1.0);
  storeFromDouble(dtype, b, 1, kNaN);
  storeFromDouble(dtype, a, 2, -2.0);
  storeFromDouble(dtype, b, 2, 0.5);
  for (RedOp op : kAllOps) {
    CAPTURE(redOpName(op));
    REQUIRE(reduce2(d, a, b, 3, dtype, op).isOk());
    CHECK(std::isnan(loadAsDouble(dtype, d, 0)));
    CHECK(std::isnan(loadAsDouble(dtype, d, 1)));
    CHECK(loadAsDouble(dtype, d, 2) == refOp(op, -2.0, 0.5));
  }
  // The largest finite value plus itself.
  const double maxFinite = dtype == DataType::kFloat16   ? 65504.0
                           : dtype == DataType::kFp8E4M3 ? 448.0
                           : dtype == DataType::kFp8E5M2 ? 57344.0
                           : dtype == DataType::kBfloat16
                               ? static_cast<double>(std::bit_cast<float>(0x7F7F0000u))
                           : dtype == DataType::kFloat32 ? std::numeric_limits<float>::max()
                                                         : std::numeric_limits<double>::max();
  storeFromDouble(dtype, a, 0, maxFinite);
  REQUIRE(loadAsDouble(dtype, a, 0) == maxFinite);
  REQUIRE(reduce2(d, a, a, 1, dtype, RedOp::kSum).isOk());
  const bool saturates = dtype == DataType::kFp8E4M3 || dtype == DataType::kFp8E5M2;
  CHECK(loadAsDouble(dtype, d, 0) == (saturates ? maxFinite : double{kInf}));
  if (dtype != DataType::kFp8E4M3) {  // inf is an input, kept by every format that has one
    storeFromDouble(dtype, a, 0, -kInf);
    storeFromDouble(dtype, b, 0, 1.0);
    REQUIRE(reduce2(d, a, b, 1, dtype, RedOp::kSum).isOk());
    CHECK(loadAsDouble(dtype, d, 0) == -double{kInf});
  }
}

TEST_CASE("divide truncates integers toward zero and rounds floats") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  const int divisor = GENERATE(1, 2, 3, 8);
  const size_t misalign = GENERATE(as<size_t>{}, 0, 1);
  CAPTURE(dataTypeName(dtype), divisor, misalign);
  static constexpr double kSigned[] = {-127, -7, -6, -1, 0, 1, 5, 7, 127};
  static constexpr double kUnsigned[] = {0, 1, 5, 7, 200, 255};
  static constexpr double kFloat[] = {-3.5, -1.5, -0.25, 0, 1, 3, 7, 12};
  std::span<const double> vals = kFloat;
  if (isSignedInt(dtype)) vals = kSigned;
  if (isUnsignedInt(dtype)) vals = kUnsigned;
  const size_t count = 37;
  Buffer buf(count * dataTypeBytes(dtype), misalign);
  const Indices index = makeIndices(count, [&vals](size_t i) { return i % vals.size(); });
  fill(dtype, buf.data(), vals, index);
  REQUIRE(divide(buf.data(), count, dtype, divisor).isOk());
  for (size_t i = 0; i < count; ++i) {
    const double v = vals[index[i]];
    const double ref = isFloating(dtype) ? v / divisor : std::trunc(v / divisor);
    CAPTURE(v);
    CHECK(closeEnough(dtype, loadAsDouble(dtype, buf.data(), i), ref));
  }
  REQUIRE(buf.guardsIntact());
}

TEST_CASE("scale multiplies every element by a scalar of the same dtype") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  const size_t misalign = GENERATE(as<size_t>{}, 0, 1);
  const bool inPlace = GENERATE(false, true);
  CAPTURE(dataTypeName(dtype), misalign, inPlace);
  static constexpr double kSigned[] = {-7, -1, 0, 1, 5};
  static constexpr double kUnsigned[] = {0, 1, 5, 7};
  static constexpr double kFloat[] = {-1.5, -0.25, 0, 1, 3};
  std::span<const double> vals = kFloat;
  if (isSignedInt(dtype)) vals = kSigned;
  if (isUnsignedInt(dtype)) vals = kUnsigned;
  const double factor = isFloating(dtype) ? 0.5 : 3;
  const size_t count = 37;
  Buffer src(count * dataTypeBytes(dtype), misalign);
  Buffer dst(count * dataTypeBytes(dtype), misalign);
  Buffer scalar(dataTypeBytes(dtype), 0);
  const Indices index = makeIndices(count, [&vals](size_t i) { return i % vals.size(); });
  fill(dtype, src.data(), vals, index);
  storeFromDouble(dtype, scalar.data(), 0, factor);
  void* out = inPlace ? src.data() : dst.data();
  REQUIRE(scale(out, src.data(), count, dtype, scalar.data()).isOk());
  for (size_t i = 0; i < count; ++i) {
    CAPTURE(i);
    CHECK(closeEnough(dtype, loadAsDouble(dtype, out, i), vals[index[i]] * factor));
  }
  REQUIRE(src.guardsIntact());
  REQUIRE(dst.guardsIntact());
  CHECK(scale(out, src.data(), 1, dtype, nullptr).code() == Code::kInvalidArgument);
}

TEST_CASE("divide handles the extreme 64-bit integers") {
  int64_t s[] = {INT64_MIN, INT64_MAX, -9};
  REQUIRE(divide(s, 3, DataType::kInt64, 2).isOk());
  CHECK(s[0] == INT64_MIN / 2);
  CHECK(s[1] == INT64_MAX / 2);
  CHECK(s[2] == -4);
  uint64_t u[] = {UINT64_MAX};
  REQUIRE(divide(u, 1, DataType::kUint64, 3).isOk());
  CHECK(u[0] == UINT64_MAX / 3);
}

TEST_CASE("argument errors return InvalidArgument and leave dst untouched") {
  float a[4] = {1, 2, 3, 4}, b[4] = {1, 1, 1, 1}, d[4] = {9, 9, 9, 9};
  const auto bad = static_cast<DataType>(42);
  Status s = reduce2(d, a, b, 4, bad, RedOp::kSum);
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK(s.message() == "kernels::reduce2: dtype is invalid (dtype=42)");
  s = reduce2(d, a, b, 4, DataType::kFloat32, static_cast<RedOp>(7));
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK(s.message() == "kernels::reduce2: op is invalid (op=7)");
  s = reduce2(d, a, b, 4, static_cast<DataType>(-1), RedOp::kSum);
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK(reduce2(nullptr, a, b, 4, DataType::kFloat32, RedOp::kSum).code() ==
        Code::kInvalidArgument);
  CHECK(reduce2(d, nullptr, b, 4, DataType::kFloat32, RedOp::kSum).message() ==
        "kernels::reduce2: a is null (count=4)");
  CHECK(reduce2(d, a, nullptr, 4, DataType::kFloat32, RedOp::kSum).code() ==
        Code::kInvalidArgument);
  CHECK(reduce2(d, d + 1, b, 3, DataType::kFloat32, RedOp::kSum).code() ==  // partial overlap
        Code::kInvalidArgument);
  CHECK(reduce2(nullptr, nullptr, nullptr, 0, DataType::kFloat32, RedOp::kSum).isOk());
  CHECK(reduce2(d, a, b, SIZE_MAX, DataType::kFloat32, RedOp::kSum).code() ==
        Code::kInvalidArgument);

  const void* two[] = {a, b};
  const void* withNull[] = {a, nullptr};
  const void* aliased[] = {a, d};
  CHECK(reduce(d, {}, 4, DataType::kFloat32, RedOp::kSum).code() == Code::kInvalidArgument);
  CHECK(reduce(d, two, 4, bad, RedOp::kSum).code() == Code::kInvalidArgument);
  CHECK(reduce(d, two, 4, DataType::kFloat32, static_cast<RedOp>(5)).code() ==
        Code::kInvalidArgument);
  CHECK(reduce(nullptr, two, 4, DataType::kFloat32, RedOp::kSum).code() == Code::kInvalidArgument);
  s = reduce(d, withNull, 4, DataType::kFloat32, RedOp::kSum);
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK(s.message().find("srcs[1] is null") != std::string::npos);
  CHECK(reduce(d, aliased, 4, DataType::kFloat32, RedOp::kSum).code() == Code::kInvalidArgument);
  CHECK(reduce(nullptr, withNull, 0, DataType::kFloat32, RedOp::kSum).isOk());

  CHECK(divide(d, 4, bad, 2).code() == Code::kInvalidArgument);
  s = divide(d, 4, DataType::kFloat32, 0);
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK(s.message() == "kernels::divide: divisor must be positive (divisor=0)");
  CHECK(divide(d, 4, DataType::kFloat32, -2).code() == Code::kInvalidArgument);
  CHECK(divide(nullptr, 4, DataType::kFloat32, 2).code() == Code::kInvalidArgument);

  for (float v : d) CHECK(v == 9.0f);  // no side effect on any error

  CHECK(reduce2Fn(bad, RedOp::kSum) == nullptr);
  CHECK(reduce2Fn(DataType::kFloat32, static_cast<RedOp>(5)) == nullptr);
  CHECK(divideFn(static_cast<DataType>(12)) == nullptr);
  for (int t = 0; t < kNumDataTypes; ++t) {
    CHECK(divideFn(static_cast<DataType>(t)) != nullptr);
    for (RedOp op : kAllOps) CHECK(reduce2Fn(static_cast<DataType>(t), op) != nullptr);
  }
}

// ---- conversions ----

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
