// File: tests/unit/program_eval_test.cc
// The CPU emulator of kernels::program (kernels/program_host.h) against an independent
// evaluation of the same Programs built from the host engine's kernels (kernels/reduce.h's
// reduce2Fn, scaleFn and divideFn over whole arrays): random programs over all 12 dtypes x
// {sum, prod, max, min}, with and without premultiplication and kDivide, chain, balanced and
// random trees of 1..16 leaves, several destinations, a destination equal to one of its op's
// leaves (in place), counts from 0 to over 10^5, random data with inf and NaN; bit for bit
// (NaN: both NaN) and nothing written outside the destinations. Then validate's and
// checkBuffers' errors, one per rule, each naming the offending value.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "kernels/program.h"
#include "kernels/program_eval.h"
#include "kernels/program_host.h"
#include "tests/unit/program_fixtures.h"
#include "kernels/reduce.h"
#include "tests/unit/kernel_reference.h"

namespace tutti::kernels::program {
namespace {

constexpr RedOp kProgramOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin};

// ---- random trees ----

enum class Shape { kChain, kBalanced, kRandom };

// Postfix code of a left-leaning chain: 0 1 A 2 A 3 A ... (depth 2).
std::vector<uint8_t> chainCode(int n) {
  std::vector<uint8_t> code{0};
  for (int k = 1; k < n; ++k) {
    code.push_back(static_cast<uint8_t>(k));
    code.push_back(kApply);
  }
  return code;
}

// A balanced tree over leaves [first, first + n): depth ceil(log2 n) + 1 <= 5 for n <= 16.
void balancedCode(int first, int n, std::vector<uint8_t>& out) {
  if (n == 1) {
    out.push_back(static_cast<uint8_t>(first));
    return;
  }
  const int left = (n + 1) / 2;
  balancedCode(first, left, out);
  balancedCode(first + left, n - left, out);
  out.push_back(kApply);
}

// A random valid postfix sequence of n pushes whose stack never exceeds kMaxDepth.
std::vector<uint8_t> randomCode(int n, std::mt19937_64& rng) {
  std::vector<uint8_t> code;
  int pushes = 0, depth = 0;
  while (pushes < n || depth > 1) {
    const bool canPush = pushes < n && depth < kMaxDepth;
    const bool canApply = depth >= 2;
    if (canPush && (!canApply || rng() % 2 == 0)) {
      code.push_back(static_cast<uint8_t>(pushes++));
      ++depth;
    } else {
      code.push_back(kApply);
      --depth;
    }
  }
  return code;
}

// Leaf bytes renamed by a random permutation, or (one time in five) drawn with repeats, which
// validate allows (some leaves then go unused).
void renameLeaves(std::vector<uint8_t>& code, int n, std::mt19937_64& rng) {
  std::vector<uint8_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  const bool repeats = rng() % 5 == 0;
  for (uint8_t& b : code) {
    if (b != kApply) b = repeats ? static_cast<uint8_t>(rng() % n) : perm[b];
  }
}

// ---- random programs over host buffers ----

// Buffers 0..15 hold leaves, 16..27 destinations, 28..31 in-place locations (a leaf that is
// also a destination). Op o owns elements [o * slot, (o + 1) * slot) of every buffer, so no op
// reads what another writes, as the Program rules require.
constexpr int kLeafBuffers = 16;
constexpr int kDstBuffers = 12;
constexpr int kFirstDstBuffer = kLeafBuffers;
constexpr int kFirstInPlaceBuffer = kLeafBuffers + kDstBuffers;
constexpr uint64_t kJitter = 8;  // elements of random offset inside a slot

struct HostCase {
  Program prog;
  std::vector<std::vector<unsigned char>> storage;  // one vector per buffer number
  Buffers bufs;
  uint64_t slot = 0;
};

struct CaseOptions {
  int maxOps = 4;
  int maxLeaves = kMaxLeaves;
  uint64_t maxCount = 200;
  bool large = false;  // one op of a large count
};

template <typename T>
T randomScalar(std::mt19937_64& rng) {
  T s;
  test::fillRandom<T>(reinterpret_cast<unsigned char*>(&s), 1, rng);
  return s;
}

// Random values; floating buffers get inf, NaN, zeros and extremes at about 3% of elements.
template <typename T>
void fillData(unsigned char* p, size_t count, std::mt19937_64& rng) {
  test::fillRandom<T>(p, count, rng);
  if constexpr (!std::is_integral_v<T>) {
    for (size_t i = 0; i < count; ++i) {
      if (rng() % 32 == 0) test::fillRandom<T>(p + i * sizeof(T), 1, rng, /*specials=*/true);
    }
  }
}

template <typename T>
HostCase makeCase(RedOp op, const CaseOptions& o, std::mt19937_64& rng) {
  HostCase c;
  Program& p = c.prog;
  p.dtype = test::dataTypeOf<T>();
  p.op = op;
  p.divisor = 1 + static_cast<int32_t>(rng() % 16);
  p.preMul = rng() % 3 == 0;
  const T scalar = randomScalar<T>(rng);
  std::memcpy(p.scalar, &scalar, sizeof(T));
  const int nops = 1 + static_cast<int>(rng() % o.maxOps);
  std::vector<uint64_t> counts(nops);
  for (uint64_t& n : counts) {
    const uint64_t r = rng() % 8;
    n = r == 0 ? 0 : r == 1 ? 1 : rng() % (o.maxCount + 1);
  }
  if (o.large) counts[0] = o.maxCount;
  c.slot = *std::max_element(counts.begin(), counts.end()) + kJitter;
  for (int k = 0; k < nops; ++k) {
    Op& op_ = p.ops[p.nops];
    const int nleaves = 1 + static_cast<int>(rng() % o.maxLeaves);
    int ndsts = 1 + static_cast<int>(rng() % 4);
    if (p.nrefs + nleaves + ndsts + 1 > kMaxRefs || p.ncode + 2 * nleaves - 1 > kMaxCode) break;
    const auto shape = static_cast<Shape>(rng() % 3);
    std::vector<uint8_t> code;
    if (shape == Shape::kChain) {
      code = chainCode(nleaves);
    } else if (shape == Shape::kBalanced) {
      balancedCode(0, nleaves, code);
    } else {
      code = randomCode(nleaves, rng);
    }
    renameLeaves(code, nleaves, rng);
    const uint64_t base = static_cast<uint64_t>(p.nops) * c.slot;
    op_.count = counts[k];
    op_.flags = rng() % 3 == 0 ? kDivide : 0;
    op_.nleaves = static_cast<uint8_t>(nleaves);
    op_.leaves = p.nrefs;
    for (int l = 0; l < nleaves; ++l) {
      p.refs[p.nrefs++] =
          Ref::make(static_cast<int>(rng() % kLeafBuffers), base + rng() % kJitter);
    }
    // In place: one leaf moves to an in-place buffer that no other ref of the op names, and a
    // destination is that same location.
    const bool inPlace = rng() % 3 == 0;
    int inPlaceLeaf = -1;
    if (inPlace) {
      inPlaceLeaf = static_cast<int>(rng() % nleaves);
      p.refs[op_.leaves + inPlaceLeaf] =
          Ref::make(kFirstInPlaceBuffer + p.nops % 4, base + rng() % kJitter);
    }
    op_.dsts = p.nrefs;
    std::vector<int> dstBufs(kDstBuffers);
    std::iota(dstBufs.begin(), dstBufs.end(), kFirstDstBuffer);
    std::shuffle(dstBufs.begin(), dstBufs.end(), rng);
    for (int d = 0; d < ndsts; ++d) {
      p.refs[p.nrefs++] = Ref::make(dstBufs[d], base + rng() % kJitter);
    }
    if (inPlace) {
      const int at = static_cast<int>(rng() % (ndsts + 1));  // replace one, or add one
      if (at == ndsts) {
        p.refs[p.nrefs++] = p.refs[op_.leaves + inPlaceLeaf];
        ++ndsts;
      } else {
        p.refs[op_.dsts + at] = p.refs[op_.leaves + inPlaceLeaf];
      }
    }
    op_.ndsts = static_cast<uint8_t>(ndsts);
    op_.code = p.ncode;
    op_.ncode = static_cast<uint8_t>(code.size());
    for (uint8_t b : code) p.code[p.ncode++] = b;
    ++p.nops;
  }
  const size_t bytes = static_cast<size_t>(p.nops) * c.slot * sizeof(T);
  c.storage.resize(kMaxBuffers);
  for (int b = 0; b < kMaxBuffers; ++b) {
    c.storage[b].resize(bytes);
    fillData<T>(c.storage[b].data(), bytes / sizeof(T), rng);
    c.bufs.ptr[b] = c.storage[b].data();
  }
  return c;
}

// ---- the independent evaluation: whole arrays through the host engine's kernels ----

using Bytes = std::vector<unsigned char>;

// The values every destination of op `o` must hold, computed from `inputs` (the buffers before
// the run): the code runs on arrays, one reduce2Fn per kApply, scaleFn per premultiplied leaf,
// divideFn for kDivide.
Bytes referenceOp(const Program& p, int o, const std::vector<Bytes>& inputs) {
  const Op& op = p.ops[o];
  const size_t eb = dataTypeBytes(p.dtype);
  const size_t bytes = op.count * eb;
  const Reduce2Fn reduce2 = reduce2Fn(p.dtype, p.op);
  const ScaleFn scale = scaleFn(p.dtype);
  const DivideFn divide = divideFn(p.dtype);
  std::vector<Bytes> stack;
  for (int c = 0; c < op.ncode; ++c) {
    const uint8_t b = p.code[op.code + c];
    if (b == kApply) {
      Bytes rhs = std::move(stack.back());
      stack.pop_back();
      if (bytes > 0) reduce2(stack.back().data(), stack.back().data(), rhs.data(), op.count);
    } else {
      const Ref r = p.refs[op.leaves + b];
      const unsigned char* src = inputs[r.buf()].data() + r.offset() * eb;
      Bytes v(src, src + bytes);
      if (p.preMul && bytes > 0) scale(v.data(), v.data(), op.count, p.scalar);
      stack.push_back(std::move(v));
    }
  }
  REQUIRE(stack.size() == 1);
  if ((op.flags & kDivide) && bytes > 0) divide(stack[0].data(), op.count, p.divisor);
  return stack[0];
}

template <typename T>
std::string describe(const unsigned char* got, const unsigned char* want) {
  return std::to_string(test::isNaNValue(*reinterpret_cast<const T*>(got))) + ": got " +
         std::to_string(loadAsDouble(test::dataTypeOf<T>(), got, 0)) + ", want " +
         std::to_string(loadAsDouble(test::dataTypeOf<T>(), want, 0));
}

// Runs the case on the emulator and checks every destination against the reference and every
// other byte against the input. Returns "" or the first mismatch.
template <typename T>
std::string runAndCheck(HostCase& c) {
  const Program& p = c.prog;
  const std::vector<Bytes> inputs = c.storage;
  std::vector<Bytes> expected = inputs;
  for (int o = 0; o < p.nops; ++o) {
    const Bytes want = referenceOp(p, o, inputs);
    for (int d = 0; d < p.ops[o].ndsts; ++d) {
      const Ref r = p.refs[p.ops[o].dsts + d];
      std::copy(want.begin(), want.end(), expected[r.buf()].begin() + r.offset() * sizeof(T));
    }
  }
  const Status s = runOnHost(p, c.bufs);
  if (!s.isOk()) return "runOnHost failed: " + s.toString();
  for (int b = 0; b < kMaxBuffers; ++b) {
    const size_t n = c.storage[b].size() / sizeof(T);
    for (size_t i = 0; i < n; ++i) {
      T got, want;
      std::memcpy(&got, c.storage[b].data() + i * sizeof(T), sizeof(T));
      std::memcpy(&want, expected[b].data() + i * sizeof(T), sizeof(T));
      if (!test::sameResult(got, want)) {
        const uint64_t op = i / c.slot;
        return "buffer " + std::to_string(b) + " element " + std::to_string(i) + " (op " +
               std::to_string(op) + ") NaN " +
               describe<T>(c.storage[b].data() + i * sizeof(T),
                           expected[b].data() + i * sizeof(T));
      }
    }
  }
  return "";
}

std::string programSummary(const Program& p) {
  std::string out = "dtype=" + std::string(dataTypeName(p.dtype)) + " op=" +
                    std::string(redOpName(p.op)) + " preMul=" + std::to_string(p.preMul) +
                    " divisor=" + std::to_string(p.divisor);
  for (int o = 0; o < p.nops; ++o) {
    const Op& op = p.ops[o];
    out += "\n  op " + std::to_string(o) + ": count=" + std::to_string(op.count) +
           " nleaves=" + std::to_string(op.nleaves) + " ndsts=" + std::to_string(op.ndsts) +
           " divide=" + std::to_string(op.flags & kDivide) + " code=";
    for (int c = 0; c < op.ncode; ++c) {
      const uint8_t b = p.code[op.code + c];
      out += b == kApply ? std::string("A ") : std::to_string(b) + " ";
    }
  }
  return out;
}

void forEachDtype(DataType dtype, auto&& fn) { REQUIRE(detail::withElementType(dtype, fn)); }

TEST_CASE("runOnHost matches reduce2Fn/scaleFn/divideFn on random programs") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  const RedOp op = GENERATE(from_range(std::begin(kProgramOps), std::end(kProgramOps)));
  CAPTURE(dataTypeName(dtype), redOpName(op));
  std::mt19937_64 rng(1000 * static_cast<int>(dtype) + static_cast<int>(op));
  forEachDtype(dtype, [&]<typename T>(T) {
    for (int iter = 0; iter < 40; ++iter) {
      CaseOptions o;
      if (iter % 10 == 9) o.maxOps = kMaxOps;  // many small ops (capacity permitting)
      HostCase c = makeCase<T>(op, o, rng);
      const std::string failure = runAndCheck<T>(c);
      INFO(programSummary(c.prog));
      INFO(failure);
      REQUIRE(failure.empty());
    }
  });
}

TEST_CASE("runOnHost on 16-leaf ops and a large count") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  const RedOp op = GENERATE(from_range(std::begin(kProgramOps), std::end(kProgramOps)));
  CAPTURE(dataTypeName(dtype), redOpName(op));
  std::mt19937_64 rng(77 + 1000 * static_cast<int>(dtype) + static_cast<int>(op));
  forEachDtype(dtype, [&]<typename T>(T) {
    CaseOptions o;
    o.maxOps = 2;
    o.large = true;
    o.maxCount = 100003;
    HostCase c = makeCase<T>(op, o, rng);
    std::string failure = runAndCheck<T>(c);
    INFO(programSummary(c.prog));
    INFO(failure);
    REQUIRE(failure.empty());
    // Every op with exactly 16 leaves (balanced, depth 5), premultiplied and divided.
    CaseOptions full;
    full.maxOps = 3;
    full.maxCount = 300;
    HostCase f = makeCase<T>(op, full, rng);
    Program& p = f.prog;
    p.preMul = 1;
    p.ncode = 0;
    for (int k = 0; k < p.nops; ++k) {
      Op& each = p.ops[k];
      // Rebuild the op with 16 new leaves, keeping its destinations.
      std::vector<uint8_t> code;
      balancedCode(0, kMaxLeaves, code);
      renameLeaves(code, kMaxLeaves, rng);
      const uint64_t base = static_cast<uint64_t>(k) * f.slot;
      each.leaves = p.nrefs;
      for (int l = 0; l < kMaxLeaves; ++l) {
        p.refs[p.nrefs++] = Ref::make(static_cast<int>(rng() % kLeafBuffers), base + rng() % 8);
      }
      each.nleaves = kMaxLeaves;
      each.code = p.ncode;
      each.ncode = static_cast<uint8_t>(code.size());
      each.flags = kDivide;
      for (uint8_t b : code) p.code[p.ncode++] = b;
      // A destination in an in-place buffer is no leaf's location any more: a plain one.
    }
    REQUIRE(validate(p).isOk());
    failure = runAndCheck<T>(f);
    INFO(programSummary(p));
    INFO(failure);
    REQUIRE(failure.empty());
  });
}

TEST_CASE("runOnHost: in place, rounding at every stored value, empty programs") {
  // bfloat16 (1 + 2^-8) * 3 leaves: chained, each kApply rounds; this is not the once-rounded
  // sum, which is the point of evaluating the tree as written.
  Program p;
  p.dtype = DataType::kBfloat16;
  p.op = RedOp::kSum;
  p.nops = 1;
  p.ops[0] = Op{.count = 1, .leaves = 0, .dsts = 3, .code = 0, .nleaves = 3, .ndsts = 1,
                .ncode = 5, .flags = 0};
  p.refs[0] = Ref::make(0, 0);
  p.refs[1] = Ref::make(1, 0);
  p.refs[2] = Ref::make(2, 0);
  p.refs[3] = Ref::make(0, 0);  // in place on leaf 0
  p.nrefs = 4;
  const uint8_t code[] = {0, 1, kApply, 2, kApply};
  std::memcpy(p.code, code, sizeof(code));
  p.ncode = 5;
  // 1, 2^-8 and 2^-8: 1 + 2^-8 is a tie that rounds to 1 (even), and again: 1. The sum rounded
  // once would be 1 + 2^-7.
  BFloat16 a = fromFloat<BFloat16>(1.0f), b = fromFloat<BFloat16>(0.00390625f), c = b;
  Buffers bufs;
  bufs.ptr[0] = &a;
  bufs.ptr[1] = &b;
  bufs.ptr[2] = &c;
  REQUIRE(runOnHost(p, bufs).isOk());
  CHECK(toFloat(a) == 1.0f);

  Program empty;
  REQUIRE(runOnHost(empty, Buffers{}).isOk());
  // Count 0: the buffers may be null.
  p.ops[0].count = 0;
  REQUIRE(runOnHost(p, Buffers{}).isOk());
}

// ---- validate and checkBuffers ----

void requireInvalid(const Program& p, const std::string& needle) {
  const Status s = validate(p);
  INFO(s.toString());
  REQUIRE(s.code() == Code::kInvalidArgument);
  REQUIRE_THAT(s.message(), Catch::Contains(needle));
}

TEST_CASE("validate accepts a valid program and names every broken rule") {
  REQUIRE(validate(validProgram()).isOk());
  Program p;
  SECTION("capacities") {
    p = validProgram();
    p.nops = kMaxOps + 1;
    requireInvalid(p, "nops=33");
    p = validProgram();
    p.nrefs = kMaxRefs + 1;
    requireInvalid(p, "nrefs=193");
    p = validProgram();
    p.ncode = kMaxCode + 1;
    requireInvalid(p, "ncode=257");
  }
  SECTION("dtype, op, divisor, flags, count") {
    p = validProgram();
    p.dtype = static_cast<DataType>(12);
    requireInvalid(p, "dtype=12");
    p = validProgram();
    p.op = RedOp::kAvg;
    requireInvalid(p, "op=4");
    p = validProgram();
    p.ops[0].flags = kDivide;
    p.divisor = 0;
    requireInvalid(p, "divisor=0");
    p.divisor = -3;
    requireInvalid(p, "divisor=-3");
    p.divisor = 0;
    p.ops[0].flags = 0;
    REQUIRE(validate(p).isOk());  // the divisor matters only with kDivide
    p.ops[0].flags = 0x4;
    requireInvalid(p, "flags=0x4");
    p = validProgram();
    p.ops[0].count = uint64_t{1} << 56;
    requireInvalid(p, "count=72057594037927936");
  }
  SECTION("nleaves, ndsts") {
    p = validProgram();
    p.ops[0].nleaves = 0;
    requireInvalid(p, "nleaves=0");
    p = validProgram();
    p.ops[0].nleaves = kMaxLeaves + 1;
    requireInvalid(p, "nleaves=17");
    p = validProgram();
    p.ops[0].ndsts = 0;
    requireInvalid(p, "ndsts=0");
  }
  SECTION("refs out of range") {
    p = validProgram();
    p.ops[0].leaves = 2;
    requireInvalid(p, "leaves=2, n=2, nrefs=3");
    p = validProgram();
    p.ops[0].dsts = 3;
    requireInvalid(p, "dsts=3, n=1, nrefs=3");
    p = validProgram();
    p.refs[1] = Ref::make(40, 0);
    requireInvalid(p, "buffer 40");
  }
  SECTION("code") {
    p = validProgram();
    p.ops[0].code = 1;
    requireInvalid(p, "code=1, ncode=3, program ncode=3");
    p = validProgram();
    p.ops[0].ncode = 2;
    requireInvalid(p, "ncode=2, not 2 * nleaves - 1 (nleaves=2)");
    p = validProgram();
    p.code[1] = 2;
    requireInvalid(p, "byte 1 is 2");
    p = validProgram();
    p.code[0] = 0;
    p.code[1] = kApply;
    p.code[2] = 1;
    requireInvalid(p, "underflows the stack at byte 1 (kApply with depth=1)");
    p = validProgram();
    p.code[2] = 0;  // 0 1 0: three values left
    requireInvalid(p, "leaves 3 values");
    // Six pushes before the first kApply.
    p = validProgram();
    p.ops[0].nleaves = 6;
    p.ops[0].ncode = 11;
    p.ops[0].dsts = 6;
    for (int k = 0; k < 7; ++k) p.refs[k] = Ref::make(k, 0);
    p.nrefs = 7;
    const uint8_t deep[] = {0, 1, 2, 3, 4, 5, kApply, kApply, kApply, kApply, kApply};
    std::memcpy(p.code, deep, sizeof(deep));
    p.ncode = sizeof(deep);
    requireInvalid(p, "depth=6, kMaxDepth=5");
    const uint8_t ok[] = {0, 1, 2, 3, 4, kApply, 5, kApply, kApply, kApply, kApply};
    std::memcpy(p.code, ok, sizeof(ok));
    REQUIRE(validate(p).isOk());
  }
  SECTION("the op's index is named") {
    p = validProgram();
    p.nops = 2;
    p.ops[1] = p.ops[0];
    p.ops[1].ndsts = 0;
    requireInvalid(p, "op 1 has ndsts=0");
  }
}

TEST_CASE("runOnHost refuses null buffers of ops with work, and invalid programs") {
  Program p = validProgram();
  float a[4] = {1, 2, 3, 4}, b[4] = {1, 1, 1, 1}, out[4] = {};
  Buffers bufs;
  bufs.ptr[0] = a;
  bufs.ptr[2] = b;
  Status s = runOnHost(p, bufs);
  REQUIRE(s.code() == Code::kInvalidArgument);
  REQUIRE_THAT(s.message(), Catch::Contains("buffer 1 is null"));
  REQUIRE_THAT(s.message(), Catch::Contains("destination 0"));
  bufs.ptr[1] = out;
  bufs.ptr[2] = nullptr;
  s = runOnHost(p, bufs);
  REQUIRE_THAT(s.message(), Catch::Contains("buffer 2 is null but op 0 uses it as leaf 1"));
  bufs.ptr[2] = b;
  REQUIRE(runOnHost(p, bufs).isOk());
  CHECK(out[0] == 2.0f);
  CHECK(out[3] == 5.0f);
  p.ops[0].ndsts = 0;
  const float before = out[0];
  s = runOnHost(p, bufs);
  REQUIRE(s.code() == Code::kInvalidArgument);
  CHECK(out[0] == before);
}

// The layouts the CUDA kernels and their launcher share.
TEST_CASE("opLayout and copyLayout split ops into head, 16-byte packs and tail") {
  alignas(64) static float mem[4][64];
  Program p = validProgram();
  Buffers bufs;
  bufs.ptr[0] = mem[0];
  bufs.ptr[1] = mem[1];
  bufs.ptr[2] = mem[2];
  p.ops[0].count = 23;
  p.refs[0] = Ref::make(0, 1);
  p.refs[1] = Ref::make(2, 5);
  p.refs[2] = Ref::make(1, 1);
  OpLayout l = opLayout(p, p.ops[0], bufs, 4);
  CHECK(l.vector);
  CHECK(l.head == 3);
  CHECK(l.packs == 5);
  CHECK(l.tail == 0);
  p.refs[1] = Ref::make(2, 2);
  l = opLayout(p, p.ops[0], bufs, 4);
  CHECK_FALSE(l.vector);
  CHECK(l.head == 23);
  CHECK(workUnits(l) == 23);
  CopyLayout cl = copyLayout(p, p.ops[0], bufs, 4);
  CHECK(cl.unitBytes == 4);
  CHECK(cl.headBytes == 0);
  CHECK(cl.units == 23);
  p.refs[1] = Ref::make(2, 1);
  cl = copyLayout(p, p.ops[0], bufs, 4);
  CHECK(cl.unitBytes == 16);
  CHECK(cl.headBytes == 12);
  CHECK(cl.units == 5);
  CHECK(cl.tailBytes == 0);
}

}  // namespace
}  // namespace tutti::kernels::program
