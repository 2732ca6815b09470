// File: tests/unit/kernels_test.cc
// The CPU reduction kernels (kernels/reduce.h) on every instruction set compiled in and
// supported here (cpu::targets(): AVX3, AVX2, SSE4, SCALAR/EMU128): every dtype x op (sum,
// prod, max, min, avg, premulsum) x sources 1..8 x counts x misalignments and in-place aliasing,
// bit for bit against the contract's element-wise model and within a stated bound of a float64
// reference (tests/unit/kernel_reference.h); special values; divide; the checked wrappers.
// Narrow-float conversions are tested in kernels_convert_test.cc.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/reduce.h"
#include "tests/unit/kernel_reference.h"

namespace tutti::kernels {
namespace {

using test::Buffer;
using test::TestOp;

constexpr RedOp kAllOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Byte offsets of dst and of source k from a 64-byte boundary, and whether dst is one of the
// sources (the engine reduces in place into its first operand).
struct Layout {
  const char* name;
  size_t dstOffset;
  size_t srcOffset[8];
  int dstIsSource;  // -1: separate dst; else the index of the source dst aliases
};
constexpr Layout kLayouts[] = {
    {"aligned", 0, {0, 0, 0, 0, 0, 0, 0, 0}, -1},
    {"all odd", 1, {1, 1, 1, 1, 1, 1, 1, 1}, -1},
    {"mixed", 5, {0, 3, 6, 1, 4, 7, 2, 5}, -1},
    {"in place on srcs[0]", 0, {3, 0, 1, 2, 3, 4, 5, 6}, 0},
    {"in place on the last source", 0, {0, 1, 2, 3, 4, 5, 6, 7}, 7},
};

// Runs op over nsrcs random sources of `count` elements with `layout` on one target's kernels
// (through reduce2 for 2 sources, scale for a premulsum of 1, as well as the N-source entries)
// and returns the verdict. `specials` draws floating inputs from NaN/inf/zeros/extremes.
template <typename T>
test::Verdict runCase(const cpu::KernelTable& table, TestOp op, size_t nsrcs, size_t count,
                      const Layout& layout, bool specials, std::mt19937_64& rng,
                      size_t sampleStride = 1) {
  constexpr auto kDtype = test::dataTypeOf<T>();
  const size_t bytes = count * sizeof(T);
  std::vector<Buffer> bufs;
  bufs.reserve(nsrcs + 1);
  for (size_t k = 0; k < nsrcs; ++k) bufs.emplace_back(bytes, layout.srcOffset[k]);
  bufs.emplace_back(bytes, layout.dstOffset);
  const int aliased = layout.dstIsSource < 0
                          ? -1
                          : std::min(layout.dstIsSource, static_cast<int>(nsrcs) - 1);
  test::Verdict verdict;
  const T scalar = test::testScalar<T>();
  // Each entry point sees fresh inputs (an in-place run overwrites one).
  auto runOnce = [&](auto&& call) {
    std::vector<const unsigned char*> srcs;
    std::vector<std::vector<unsigned char>> saved;
    for (size_t k = 0; k < nsrcs; ++k) {
      test::fillRandom<T>(bufs[k].data(), count, rng, specials);
      saved.emplace_back(bufs[k].data(), bufs[k].data() + bytes);
    }
    for (size_t k = 0; k < nsrcs; ++k) srcs.push_back(saved[k].data());
    unsigned char* dst = aliased < 0 ? bufs[nsrcs].data() : bufs[aliased].data();
    std::vector<const void*> ptrs;
    for (size_t k = 0; k < nsrcs; ++k) ptrs.push_back(bufs[k].data());
    call(dst, ptrs);
    test::Verdict v = test::verifyReduce<T>(op, srcs, count, dst, scalar, sampleStride);
    for (const Buffer& b : bufs) {
      if (!b.guardsIntact()) {
        ++v.modelMismatches;
        v.first = "guard bytes overwritten";
      }
    }
    if (!v.ok() && verdict.ok()) verdict = v;
  };
  const int row = static_cast<int>(kDtype);
  if (op == TestOp::kPreMulSum) {
    runOnce([&](void* dst, const std::vector<const void*>& p) {
      table.preMulSum[row](dst, p.data(), nsrcs, count, &scalar);
    });
    if (nsrcs == 1) {
      runOnce([&](void* dst, const std::vector<const void*>& p) {
        table.scale[row](dst, p[0], count, &scalar);
      });
    }
    return verdict;
  }
  const int col = static_cast<int>(test::toRedOp(op));
  runOnce([&](void* dst, const std::vector<const void*>& p) {
    table.reduceN[row][col](dst, p.data(), nsrcs, count);
  });
  if (nsrcs == 2) {
    runOnce([&](void* dst, const std::vector<const void*>& p) {
      table.reduce2[row][col](dst, p[0], p[1], count);
    });
  }
  return verdict;
}

template <typename T>
void checkMatrix(const cpu::Target& target, std::span<const size_t> counts, bool specials) {
  std::mt19937_64 rng(1234);
  for (size_t count : counts) {
    for (const Layout& layout : kLayouts) {
      for (TestOp op : test::kAllTestOps) {
        for (size_t nsrcs = 1; nsrcs <= 8; ++nsrcs) {
          const test::Verdict v = runCase<T>(*target.table, op, nsrcs, count, layout, specials,
                                             rng, specials ? 0 : 1);
          if (v.ok()) continue;
          INFO(target.name << " " << dataTypeName(test::dataTypeOf<T>()) << " "
                           << test::testOpName(op) << " nsrcs=" << nsrcs << " count=" << count
                           << " layout=" << layout.name << ": " << v.first);
          REQUIRE(v.ok());
        }
      }
    }
  }
}

void forEachDtype(DataType dtype, auto&& fn) {
  REQUIRE(detail::withElementType(dtype, fn));
}

TEST_CASE("the CPU targets: best first, the active one is the best unless TUTTI_CPU_TARGET") {
  const auto all = cpu::targets();
  REQUIRE(!all.empty());
  for (const cpu::Target& t : all) {
    CAPTURE(t.name);
    REQUIRE(t.table != nullptr);
    for (int d = 0; d < kNumDataTypes; ++d) {
      for (int o = 0; o < kNumRedOps; ++o) {
        REQUIRE(t.table->reduce2[d][o] != nullptr);
        REQUIRE(t.table->reduceN[d][o] != nullptr);
      }
      REQUIRE(t.table->preMulSum[d] != nullptr);
      REQUIRE(t.table->scale[d] != nullptr);
      REQUIRE(t.table->divide[d] != nullptr);
    }
  }
  for (size_t i = 1; i < all.size(); ++i) CHECK(all[i - 1].bit < all[i].bit);  // lower = better
  if (std::getenv("TUTTI_CPU_TARGET") == nullptr) CHECK(&cpu::activeTarget() == &all.front());
  CHECK(std::string(cpuTargetName()) == cpu::activeTarget().name);
  WARN("CPU kernel targets here: " << [&] {
    std::string s;
    for (const cpu::Target& t : all) s += std::string(s.empty() ? "" : ", ") + t.name;
    return s;
  }() << " (active " << cpuTargetName() << ")");
}

constexpr size_t kMatrixCounts[] = {0, 1, 15, 16, 17, 1003};
constexpr size_t kSpecialCounts[] = {17, 1003};

// Every target x dtype x op x sources 1..8 x counts x layouts. 1003 reaches the 4-vector loop
// of every dtype (AVX-512 int8: 256 elements per step) and leaves a tail.
TEST_CASE("every target, dtype, op, source count, count and layout matches the model") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  CAPTURE(dataTypeName(dtype));
  for (const cpu::Target& target : cpu::targets()) {
    forEachDtype(dtype, [&]<typename T>(T) { checkMatrix<T>(target, kMatrixCounts, false); });
  }
}

// Special floating inputs (NaN, inf, signed zeros, extremes, subnormals) on every target. The
// model fixes the NaN rule (max/min: the first NaN wins); this also asserts it directly.
TEST_CASE("special values: NaN, inf, zeros, extremes on every target") {
  const auto dtype = GENERATE(DataType::kFloat16, DataType::kFloat32, DataType::kFloat64,
                              DataType::kBfloat16, DataType::kFp8E4M3, DataType::kFp8E5M2);
  CAPTURE(dataTypeName(dtype));
  for (const cpu::Target& target : cpu::targets()) {
    forEachDtype(dtype, [&]<typename T>(T) { checkMatrix<T>(target, kSpecialCounts, true); });
  }
  // max/min of {x, NaN} and {NaN, x} are NaN on every target, whatever x is.
  unsigned char a[64 * 8], b[64 * 8], d[64 * 8];
  for (size_t i = 0; i < 64; ++i) {
    storeFromDouble(dtype, i % 2 ? a : b, i, kNaN);
    storeFromDouble(dtype, i % 2 ? b : a, i, i % 3 ? -1.5 * static_cast<double>(i) : kInf);
  }
  for (const cpu::Target& target : cpu::targets()) {
    for (RedOp op : {RedOp::kMax, RedOp::kMin}) {
      CAPTURE(target.name, redOpName(op));
      target.table->reduce2[static_cast<int>(dtype)][static_cast<int>(op)](d, a, b, 64);
      for (size_t i = 0; i < 64; ++i) REQUIRE(std::isnan(loadAsDouble(dtype, d, i)));
    }
  }
}

// The largest count, (1 << 20) + 3, on the active target only (the other targets run the same
// loops, covered by the matrix above): 8 random sources with mixed misalignment, filled once per
// dtype; every op with 2 sources (the reduce2 entry) and 8 (the N-source entry); every
// element against the model, every 97th against the float64 bound. A few seconds in all.
template <typename T>
void checkLargeCount() {
  const size_t count = (size_t{1} << 20) + 3;
  const cpu::KernelTable& table = *cpu::activeTarget().table;
  constexpr int kRow = static_cast<int>(test::dataTypeOf<T>());
  std::mt19937_64 rng(99);
  std::vector<Buffer> bufs;
  std::vector<const void*> srcs;
  std::vector<const unsigned char*> bytes;
  for (size_t k = 0; k < 8; ++k) {
    bufs.emplace_back(count * sizeof(T), kLayouts[2].srcOffset[k]);
    test::fillRandom<T>(bufs.back().data(), count, rng);
    srcs.push_back(bufs.back().data());
    bytes.push_back(bufs.back().data());
  }
  Buffer dst(count * sizeof(T), kLayouts[2].dstOffset);
  const T scalar = test::testScalar<T>();
  for (TestOp op : test::kAllTestOps) {
    for (size_t nsrcs : {2, 8}) {
      CAPTURE(test::testOpName(op), nsrcs);
      const int col = static_cast<int>(test::toRedOp(op));
      if (op == TestOp::kPreMulSum) {
        table.preMulSum[kRow](dst.data(), srcs.data(), nsrcs, count, &scalar);
      } else if (nsrcs == 2) {
        table.reduce2[kRow][col](dst.data(), srcs[0], srcs[1], count);
      } else {
        table.reduceN[kRow][col](dst.data(), srcs.data(), nsrcs, count);
      }
      const std::vector<const unsigned char*> used(bytes.begin(), bytes.begin() + nsrcs);
      const test::Verdict v = test::verifyReduce<T>(op, used, count, dst.data(), scalar, 97);
      INFO(v.first);
      REQUIRE(v.ok());
      REQUIRE(dst.guardsIntact());
    }
  }
}

TEST_CASE("(1 << 20) + 3 elements on the active target") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  CAPTURE(dataTypeName(dtype), cpuTargetName());
  forEachDtype(dtype, [&]<typename T>(T) { checkLargeCount<T>(); });
}

TEST_CASE("divide on every target matches the model for every dtype") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  CAPTURE(dataTypeName(dtype));
  std::mt19937_64 rng(7);
  forEachDtype(dtype, [&]<typename T>(T) {
    for (const cpu::Target& target : cpu::targets()) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{17}, size_t{1003}}) {
        for (int divisor : {1, 2, 3, 7}) {
          for (size_t misalign : {0, 1}) {
            CAPTURE(target.name, count, divisor, misalign);
            Buffer buf(count * sizeof(T), misalign);
            test::fillRandom<T>(buf.data(), count, rng, misalign == 1);
            const std::vector<unsigned char> before(buf.data(), buf.data() + buf.bytes());
            target.table->divide[static_cast<int>(dtype)](buf.data(), count, divisor);
            size_t bad = 0;
            for (size_t i = 0; i < count; ++i) {
              T in, got;
              std::memcpy(&in, before.data() + i * sizeof(T), sizeof(T));
              std::memcpy(&got, buf.data() + i * sizeof(T), sizeof(T));
              if (!test::sameResult(got, test::modelDivide(in, divisor))) ++bad;
            }
            REQUIRE(bad == 0);
            REQUIRE(buf.guardsIntact());
          }
        }
      }
    }
  });
}

// ---- the checked wrappers (kernels/reduce.h) on the active target ----

bool isSignedInt(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64;
}
bool isUnsignedInt(DataType t) {
  return t == DataType::kUint8 || t == DataType::kUint32 || t == DataType::kUint64;
}

// One correct rounding: the unit roundoff relative to the exact result. Integers compare exactly.
bool closeEnough(DataType t, double got, double ref) {
  if (!isFloating(t)) return got == ref;
  return std::abs(got - ref) <= test::errorModel(t).unit * std::abs(ref) +
                                    (t == DataType::kFloat64 ? 0.0 : std::ldexp(std::abs(ref), -24));
}

double refOp(RedOp op, double a, double b) {
  switch (op) {
    case RedOp::kProd:
      return a * b;
    case RedOp::kMax:
      return a > b ? a : b;
    case RedOp::kMin:
      return a < b ? a : b;
    default:
      return a + b;  // sum; avg reduces as sum
  }
}

// p[i] = vals[i % vals.size()] for i in [0, count).
void fillCyclic(DataType t, void* p, std::span<const double> vals, size_t count) {
  for (size_t i = 0; i < count; ++i) storeFromDouble(t, p, i, vals[i % vals.size()]);
}

TEST_CASE("integer sum and prod wrap, max and min order signed values") {
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

TEST_CASE("floating max and min propagate NaN, sum saturates or overflows per format") {
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
  fillCyclic(dtype, buf.data(), vals, count);
  REQUIRE(divide(buf.data(), count, dtype, divisor).isOk());
  for (size_t i = 0; i < count; ++i) {
    const double v = vals[i % vals.size()];
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
  fillCyclic(dtype, src.data(), vals, count);
  storeFromDouble(dtype, scalar.data(), 0, factor);
  void* out = inPlace ? src.data() : dst.data();
  REQUIRE(scale(out, src.data(), count, dtype, scalar.data()).isOk());
  for (size_t i = 0; i < count; ++i) {
    CAPTURE(i);
    CHECK(closeEnough(dtype, loadAsDouble(dtype, out, i), vals[i % vals.size()] * factor));
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
  const void* partial[] = {a, d + 1};
  CHECK(reduce(d, {}, 4, DataType::kFloat32, RedOp::kSum).code() == Code::kInvalidArgument);
  CHECK(reduce(d, two, 4, bad, RedOp::kSum).code() == Code::kInvalidArgument);
  CHECK(reduce(d, two, 4, DataType::kFloat32, static_cast<RedOp>(5)).code() ==
        Code::kInvalidArgument);
  CHECK(reduce(nullptr, two, 4, DataType::kFloat32, RedOp::kSum).code() == Code::kInvalidArgument);
  s = reduce(d, withNull, 4, DataType::kFloat32, RedOp::kSum);
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK(s.message().find("srcs[1] is null") != std::string::npos);
  s = reduce(d, partial, 3, DataType::kFloat32, RedOp::kSum);
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK(s.message() == "kernels::reduce: srcs[1] partially overlaps dst (count=3, nsrcs=2)");
  CHECK(reduce(nullptr, withNull, 0, DataType::kFloat32, RedOp::kSum).isOk());

  CHECK(divide(d, 4, bad, 2).code() == Code::kInvalidArgument);
  s = divide(d, 4, DataType::kFloat32, 0);
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK(s.message() == "kernels::divide: divisor must be positive (divisor=0)");
  CHECK(divide(d, 4, DataType::kFloat32, -2).code() == Code::kInvalidArgument);
  CHECK(divide(nullptr, 4, DataType::kFloat32, 2).code() == Code::kInvalidArgument);

  const float scalar = 2.0f;
  CHECK(preMulSum(d, {}, 4, DataType::kFloat32, &scalar).code() == Code::kInvalidArgument);
  CHECK(preMulSum(d, two, 4, bad, &scalar).code() == Code::kInvalidArgument);
  s = preMulSum(d, two, 4, DataType::kFloat32, nullptr);
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK(s.message() == "kernels::preMulSum: scalar is null (count=4)");
  CHECK(preMulSum(d, withNull, 4, DataType::kFloat32, &scalar).code() == Code::kInvalidArgument);
  CHECK(preMulSum(d, partial, 3, DataType::kFloat32, &scalar).code() == Code::kInvalidArgument);
  CHECK(preMulSum(nullptr, two, 0, DataType::kFloat32, nullptr).isOk());
  CHECK(copy(d, a, 4, bad).code() == Code::kInvalidArgument);
  s = copy(d, nullptr, 4, DataType::kFloat32);
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK(s.message() == "kernels::copy: src is null (count=4)");
  CHECK(copy(nullptr, a, 4, DataType::kFloat32).code() == Code::kInvalidArgument);

  for (float v : d) CHECK(v == 9.0f);  // no side effect on any error

  CHECK(reduce2Fn(bad, RedOp::kSum) == nullptr);
  CHECK(reduce2Fn(DataType::kFloat32, static_cast<RedOp>(5)) == nullptr);
  CHECK(divideFn(static_cast<DataType>(12)) == nullptr);
  CHECK(reduceNFn(bad, RedOp::kSum) == nullptr);
  CHECK(reduceNFn(DataType::kFloat32, static_cast<RedOp>(5)) == nullptr);
  CHECK(preMulSumFn(bad) == nullptr);
  CHECK(scaleFn(bad) == nullptr);
  for (int t = 0; t < kNumDataTypes; ++t) {
    CHECK(divideFn(static_cast<DataType>(t)) != nullptr);
    for (RedOp op : kAllOps) CHECK(reduce2Fn(static_cast<DataType>(t), op) != nullptr);
  }
}

TEST_CASE("reduce, preMulSum and copy: the checked entry points compute, in place too") {
  float a[5] = {1, 2, 3, 4, 5}, b[5] = {10, 20, 30, 40, 50}, c[5] = {-1, -1, -1, -1, -1};
  float d[5];
  const void* three[] = {a, b, c};
  REQUIRE(reduce(d, three, 5, DataType::kFloat32, RedOp::kSum).isOk());
  for (int i = 0; i < 5; ++i) CHECK(d[i] == a[i] + b[i] - 1);
  const float half = 0.5f;
  REQUIRE(preMulSum(d, three, 5, DataType::kFloat32, &half).isOk());
  for (int i = 0; i < 5; ++i) CHECK(d[i] == (a[i] + b[i] - 1) / 2);
  const void* inPlaceLast[] = {a, b, c};  // dst is the last source: allowed (exact alias)
  REQUIRE(reduce(c, inPlaceLast, 5, DataType::kFloat32, RedOp::kMax).isOk());
  for (int i = 0; i < 5; ++i) CHECK(c[i] == b[i]);
  const void* one[] = {a};
  REQUIRE(reduce(d, one, 5, DataType::kFloat32, RedOp::kProd).isOk());  // one source: a copy
  CHECK(std::memcmp(d, a, sizeof a) == 0);
  REQUIRE(copy(d, b, 5, DataType::kFloat32).isOk());
  CHECK(std::memcmp(d, b, sizeof b) == 0);
  uint8_t overlap[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  REQUIRE(copy(overlap + 1, overlap, 7, DataType::kUint8).isOk());  // memmove semantics
  CHECK(overlap[1] == 1);
  CHECK(overlap[7] == 7);
}

}  // namespace
}  // namespace tutti::kernels
