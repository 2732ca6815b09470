// File: kernels/cpu/simd_kernels.cc
// The CPU kernels in Highway vectors. Highway's foreach_target.h compiles this file once per
// instruction set (x86: AVX3 = AVX-512, AVX2, SSE4, and the EMU128 or SCALAR fallback), each copy
// in its own namespace; targets() picks the tables at run time. Elements are loaded with LoadU
// (any alignment) into float lanes for the narrow floats, and the count % lanes tail runs the
// scalar fold of scalar_ops.h, whose results the vectors reproduce bit for bit.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd_kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/scalar_ops.h"

HWY_BEFORE_NAMESPACE();
namespace tutti::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- narrow float codecs in 32-bit lanes ----
// Vector forms of detail::decodeNarrow / encodeNarrow (kernels/convert.h): the same integer and
// float steps, lane by lane, so the results are identical. bits hold the narrow encoding in the
// low bits of int32 lanes.

template <detail::NarrowFormat fmt, class DF>
HWY_INLINE hn::Vec<DF> decodeNarrowV(DF df, hn::Vec<hn::RebindToSigned<DF>> bits) {
  const hn::RebindToSigned<DF> di;
  constexpr int kWidth = fmt.expBits + fmt.manBits;
  constexpr int kShift = 23 - fmt.manBits;
  const auto sign = hn::ShiftLeft<31 - kWidth>(hn::And(bits, hn::Set(di, 1 << kWidth)));
  const auto mag = hn::And(bits, hn::Set(di, (1 << kWidth) - 1));
  const auto man = hn::And(mag, hn::Set(di, (1 << fmt.manBits) - 1));
  const auto normal = hn::Add(hn::ShiftLeft<kShift>(mag), hn::Set(di, (127 - fmt.bias) << 23));
  const auto subnormal = hn::BitCast(
      di, hn::Mul(hn::ConvertTo(df, man), hn::Set(df, detail::powerOfTwo(1 - fmt.bias - fmt.manBits))));
  auto out = hn::IfThenElse(hn::Lt(mag, hn::Set(di, 1 << fmt.manBits)), subnormal, normal);
  if constexpr (fmt.hasInf) {
    const auto quietBit =
        hn::IfThenElseZero(hn::Ne(man, hn::Zero(di)), hn::Set(di, 0x00400000));
    const auto special =
        hn::Or(hn::Set(di, 0x7F800000), hn::Or(hn::ShiftLeft<kShift>(man), quietBit));
    const auto infBits = static_cast<int32_t>(detail::infBits(fmt));
    out = hn::IfThenElse(hn::Gt(mag, hn::Set(di, infBits - 1)), special, out);
  } else {
    const auto nan = hn::Or(hn::Set(di, 0x7FC00000), hn::ShiftLeft<kShift>(man));
    out = hn::IfThenElse(hn::Eq(mag, hn::Set(di, static_cast<int32_t>(fmt.nanBits))), nan, out);
  }
  return hn::BitCast(df, hn::Or(sign, out));
}

// Round to nearest even with the magic-number add; see detail::encodeNarrow. All compares are on
// values below 2^31, so signed lanes serve.
template <detail::NarrowFormat fmt, class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> encodeNarrowV(DF df, hn::Vec<DF> f) {
  const hn::RebindToSigned<DF> di;
  constexpr int32_t kMinField = 127 + 1 - fmt.bias;
  constexpr int32_t kCapField = 127 + (1 << fmt.expBits) - fmt.bias;
  constexpr auto kOverflow =
      static_cast<int32_t>(fmt.saturate ? fmt.maxFiniteBits : detail::infBits(fmt));
  constexpr auto kInf = static_cast<int32_t>(fmt.hasInf ? detail::infBits(fmt) : fmt.maxFiniteBits);
  const auto x = hn::BitCast(di, f);
  const auto absx = hn::And(x, hn::Set(di, 0x7FFFFFFF));
  auto field = hn::ShiftRight<23>(absx);
  field = hn::Min(hn::Max(field, hn::Set(di, kMinField)), hn::Set(di, kCapField));
  const auto magic = hn::ShiftLeft<23>(hn::Add(field, hn::Set(di, 23 - fmt.manBits)));
  const auto sum = hn::Add(hn::BitCast(df, absx), hn::BitCast(df, magic));
  const auto q = hn::Sub(hn::BitCast(di, sum), magic);
  auto bits = hn::Add(hn::ShiftLeft<fmt.manBits>(hn::Sub(field, hn::Set(di, kMinField))), q);
  bits = hn::IfThenElse(hn::Gt(bits, hn::Set(di, static_cast<int32_t>(fmt.maxFiniteBits))),
                        hn::Set(di, kOverflow), bits);
  bits = hn::IfThenElse(hn::Eq(absx, hn::Set(di, 0x7F800000)), hn::Set(di, kInf), bits);
  bits = hn::IfThenElse(hn::Gt(absx, hn::Set(di, 0x7F800000)),
                        hn::Set(di, static_cast<int32_t>(fmt.nanBits)), bits);
  const auto sign = hn::ShiftLeft<fmt.expBits + fmt.manBits>(
      hn::BitCast(di, hn::ShiftRight<31>(hn::BitCast(hn::RebindToUnsigned<DF>(), x))));
  return hn::Or(sign, bits);
}

// bfloat16: the upper half of a float, rounded to nearest even; NaN keeps its top bits, quieted.
// (Highway 1.0.3's DemoteTo(bfloat16) truncates, hence our own.)
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> encodeBf16V(DF /*df*/, hn::Vec<DF> f) {
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  const auto x = hn::BitCast(du, f);
  const auto upper = hn::ShiftRight<16>(x);
  const auto rounded =
      hn::ShiftRight<16>(hn::Add(x, hn::Add(hn::Set(du, 0x7FFFu), hn::And(upper, hn::Set(du, 1u)))));
  const auto quietNaN = hn::Or(upper, hn::Set(du, 0x40u));
  const auto isNaN = hn::Gt(hn::BitCast(di, hn::And(x, hn::Set(du, 0x7FFFFFFFu))),
                            hn::Set(di, 0x7F800000));
  return hn::IfThenElse(isNaN, hn::BitCast(di, quietNaN), hn::BitCast(di, rounded));
}

// ---- lanes: how a storage type moves between memory and compute vectors ----
// Native types compute in their own lanes; narrow floats in float lanes (one vector of floats per
// Lanes(D) stored elements).
//
// Vectors are capped at 32 bytes: these loops are bound by memory bandwidth, and on the AVX-512
// machine we measured (AMD Zen 4) 64-byte vectors streamed 5-8% slower than 32-byte ones
// (float sum, 2 sources, 64 MiB: 0.92 of the a+b->c ceiling against 0.97-1.0). The AVX3 target
// still brings its instructions (AVX-512VL masks and conversions) at 256 bits.
inline constexpr size_t kVectorBytes = 32;
template <typename T>
using Tag = hn::CappedTag<T, kVectorBytes / sizeof(T)>;

template <typename T>
struct Lanes {
  using D = Tag<T>;
  using V = hn::Vec<D>;
  static HWY_INLINE V load(D d, const unsigned char* p) {
    return hn::LoadU(d, reinterpret_cast<const T*>(p));
  }
  static HWY_INLINE void store(D d, V v, unsigned char* p) {
    hn::StoreU(v, d, reinterpret_cast<T*>(p));
  }
};

// Narrow types stored as U (uint8_t or uint16_t) and coded by Codec::{decode, encode}.
template <typename U, class Codec>
struct NarrowLanes {
  using D = Tag<float>;
  using V = hn::Vec<D>;
  static HWY_INLINE V load(D d, const unsigned char* p) {
    const hn::Rebind<U, D> dn;
    const hn::RebindToSigned<D> di;
    return Codec::decode(d, hn::PromoteTo(di, hn::LoadU(dn, reinterpret_cast<const U*>(p))));
  }
  static HWY_INLINE void store(D d, V v, unsigned char* p) {
    const hn::Rebind<U, D> dn;
    hn::StoreU(hn::DemoteTo(dn, Codec::encode(d, v)), dn, reinterpret_cast<U*>(p));
  }
};

template <detail::NarrowFormat fmt>
struct FormatCodec {
  template <class D, class VI>
  static HWY_INLINE hn::Vec<D> decode(D d, VI bits) {
    return decodeNarrowV<fmt>(d, bits);
  }
  template <class D>
  static HWY_INLINE hn::Vec<hn::RebindToSigned<D>> encode(D d, hn::Vec<D> v) {
    return encodeNarrowV<fmt>(d, v);
  }
};
struct Bf16Codec {
  template <class D, class VI>
  static HWY_INLINE hn::Vec<D> decode(D d, VI bits) {
    return hn::BitCast(d, hn::ShiftLeft<16>(bits));
  }
  template <class D>
  static HWY_INLINE hn::Vec<hn::RebindToSigned<D>> encode(D d, hn::Vec<D> v) {
    return encodeBf16V(d, v);
  }
};

template <>
struct Lanes<BFloat16> : NarrowLanes<uint16_t, Bf16Codec> {};
template <>
struct Lanes<Fp8E4M3> : NarrowLanes<uint8_t, FormatCodec<detail::kE4M3Format>> {};
template <>
struct Lanes<Fp8E5M2> : NarrowLanes<uint8_t, FormatCodec<detail::kE5M2Format>> {};

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
// F16C converts exactly and rounds to nearest even; only its NaN encoding differs from
// fromFloat<Half> (it keeps payload bits), so NaN lanes become the quiet NaN 0x7FC00000 with
// their sign first, which F16C encodes as S.11111.1000000000 like fromFloat<Half>.
template <>
struct Lanes<Half> {
  using D = Tag<float>;
  using V = hn::Vec<D>;
  static HWY_INLINE V load(D d, const unsigned char* p) {
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
  }
  static HWY_INLINE void store(D d, V v, unsigned char* p) {
    const hn::Rebind<hwy::float16_t, D> dh;
    const hn::RebindToSigned<D> di;
    const auto x = hn::BitCast(di, v);
    const auto isNaN = hn::Gt(hn::And(x, hn::Set(di, 0x7FFFFFFF)), hn::Set(di, 0x7F800000));
    const auto canonical =
        hn::Or(hn::And(x, hn::Set(di, static_cast<int32_t>(0x80000000u))), hn::Set(di, 0x7FC00000));
    const auto clean = hn::BitCast(d, hn::IfThenElse(isNaN, canonical, x));
    hn::StoreU(hn::DemoteTo(dh, clean), dh, reinterpret_cast<hwy::float16_t*>(p));
  }
};
#else
// Without F16C (SSE4, EMU128) Highway emulates float16 by truncation and maps inf and NaN to
// finite values, so the generic codec serves.
template <>
struct Lanes<Half> : NarrowLanes<uint16_t, FormatCodec<detail::kHalfFormat>> {};
#endif

// ---- ops on compute vectors (the vector forms of scalar_ops.h) ----

struct SumV {
  template <class D, class V>
  HWY_INLINE V first(D, V a) const {
    return a;
  }
  template <class D, class V>
  HWY_INLINE V next(D, V acc, V b) const {
    return hn::Add(acc, b);
  }
};
struct ProdV {
  template <class D, class V>
  HWY_INLINE V first(D, V a) const {
    return a;
  }
  template <class D, class V>
  HWY_INLINE V next(D, V acc, V b) const {
    return hn::Mul(acc, b);
  }
};
// Highway's Max/Min return either operand for NaN; the float forms select as MaxOp/MinOp do.
// IsNaN, not Ne(a, a): Highway 1.0.3's x86 operator!= compares with _CMP_NEQ_OQ (ordered), so
// NaN != NaN is false there.
struct MaxV {
  template <class D, class V>
  HWY_INLINE V first(D, V a) const {
    return a;
  }
  template <class D, class V>
  HWY_INLINE V next(D, V a, V b) const {
    if constexpr (hwy::IsFloat<hn::TFromD<D>>()) {
      return hn::IfThenElse(hn::Or(hn::Gt(a, b), hn::IsNaN(a)), a, b);
    } else {
      return hn::Max(a, b);
    }
  }
};
struct MinV {
  template <class D, class V>
  HWY_INLINE V first(D, V a) const {
    return a;
  }
  template <class D, class V>
  HWY_INLINE V next(D, V a, V b) const {
    if constexpr (hwy::IsFloat<hn::TFromD<D>>()) {
      return hn::IfThenElse(hn::Or(hn::Lt(a, b), hn::IsNaN(a)), a, b);
    } else {
      return hn::Min(a, b);
    }
  }
};
template <class V>
struct PreMulSumV {
  V scalar;
  template <class D>
  HWY_INLINE V first(D, V a) const {
    return hn::Mul(a, scalar);
  }
  template <class D>
  HWY_INLINE V next(D, V acc, V b) const {
    return hn::Add(acc, hn::Mul(b, scalar));
  }
};

// 8-bit integers under a multiply: Highway 1.0.3 has no 8-bit multiply, so they are widened to
// 16-bit lanes; the low 8 bits of the 16-bit product are the 8-bit product modulo 2^8.
template <typename T>
struct WideLanes {
  using D = Tag<int16_t>;
  using V = hn::Vec<D>;
  static HWY_INLINE V load(D d, const unsigned char* p) {
    return hn::PromoteTo(d, hn::LoadU(hn::Rebind<T, D>(), reinterpret_cast<const T*>(p)));
  }
  static HWY_INLINE void store(D d, V v, unsigned char* p) {
    const hn::Rebind<uint8_t, D> d8;
    hn::StoreU(hn::DemoteTo(d8, hn::And(v, hn::Set(d, 0xFF))), d8, reinterpret_cast<uint8_t*>(p));
  }
};
// The lanes of T under a multiply (prod, premulsum).
template <typename T>
using MulLanes = std::conditional_t<std::is_integral_v<T> && sizeof(T) == 1, WideLanes<T>, Lanes<T>>;

// Highway 1.0.3 has no 64-bit integer multiply either: prod and premulsum of (u)int64 run the
// scalar fold (which GCC may still vectorise for the target).
template <typename T>
constexpr bool kVectorMul = !std::is_integral_v<T> || sizeof(T) != sizeof(int64_t);
template <typename T, class ScalarOp>
constexpr bool kVectorOp =
    !(std::is_same_v<ScalarOp, ProdOp> || std::is_same_v<ScalarOp, PreMulSumOp<T>>) ||
    kVectorMul<T>;

// ---- the fold over sources ----

// Folds whole vectors of elements: 4 vectors per step while they last, then 1. Every source of
// a step is loaded before its stores, so dst may alias any source exactly. Returns the number of
// elements done; the caller finishes the rest with foldScalar.
template <typename T, class L = Lanes<T>, class Op>
HWY_INLINE size_t foldVectors(const Op& op, void* dst, const void* const* srcs, size_t nsrcs,
                              size_t count) {
  const typename L::D d;
  const size_t n = hn::Lanes(d);
  const size_t stride = n * sizeof(T);  // bytes of one vector's elements in memory
  auto* out = static_cast<unsigned char*>(dst);
  const auto* s0 = static_cast<const unsigned char*>(srcs[0]);
  size_t i = 0;
  for (; i + 4 * n <= count; i += 4 * n) {
    const size_t off = i * sizeof(T);
    auto a0 = op.first(d, L::load(d, s0 + off));
    auto a1 = op.first(d, L::load(d, s0 + off + stride));
    auto a2 = op.first(d, L::load(d, s0 + off + 2 * stride));
    auto a3 = op.first(d, L::load(d, s0 + off + 3 * stride));
    for (size_t k = 1; k < nsrcs; ++k) {
      const auto* s = static_cast<const unsigned char*>(srcs[k]) + off;
      a0 = op.next(d, a0, L::load(d, s));
      a1 = op.next(d, a1, L::load(d, s + stride));
      a2 = op.next(d, a2, L::load(d, s + 2 * stride));
      a3 = op.next(d, a3, L::load(d, s + 3 * stride));
    }
    L::store(d, a0, out + off);
    L::store(d, a1, out + off + stride);
    L::store(d, a2, out + off + 2 * stride);
    L::store(d, a3, out + off + 3 * stride);
  }
  for (; i + n <= count; i += n) {
    const size_t off = i * sizeof(T);
    auto a = op.first(d, L::load(d, s0 + off));
    for (size_t k = 1; k < nsrcs; ++k) {
      a = op.next(d, a, L::load(d, static_cast<const unsigned char*>(srcs[k]) + off));
    }
    L::store(d, a, out + off);
  }
  return i;
}

// The lanes that (T, ScalarOp) computes in.
template <typename T, class ScalarOp>
using OpLanes = std::conditional_t<std::is_same_v<ScalarOp, ProdOp>, MulLanes<T>, Lanes<T>>;

template <typename T, class ScalarOp, class VecOp>
void reduceNKernel(void* dst, const void* const* srcs, size_t nsrcs, size_t count) {
  size_t done = 0;
  if constexpr (kVectorOp<T, ScalarOp>) {
    done = foldVectors<T, OpLanes<T, ScalarOp>>(VecOp{}, dst, srcs, nsrcs, count);
  }
  foldScalar<T>(ScalarOp{}, dst, srcs, nsrcs, done, count);
}

// The engine's hot path: two sources, known at compile time.
template <typename T, class ScalarOp, class VecOp>
void reduce2Kernel(void* dst, const void* a, const void* b, size_t count) {
  const void* srcs[2] = {a, b};
  size_t done = 0;
  if constexpr (kVectorOp<T, ScalarOp>) {
    done = foldVectors<T, OpLanes<T, ScalarOp>>(VecOp{}, dst, srcs, 2, count);
  }
  foldScalar<T>(ScalarOp{}, dst, srcs, 2, done, count);
}

template <typename T>
void preMulSumKernel(void* dst, const void* const* srcs, size_t nsrcs, size_t count,
                     const void* scalar) {
  using A = Arith<T>;
  const auto s = A::load(loadAt<T>(scalar, 0));
  size_t done = 0;
  if constexpr (kVectorMul<T>) {
    using L = MulLanes<T>;
    const typename L::D d;
    using V = hn::Vec<typename L::D>;
    done = foldVectors<T, L>(PreMulSumV<V>{hn::Set(d, static_cast<hn::TFromD<typename L::D>>(s))},
                             dst, srcs, nsrcs, count);
  }
  foldScalar<T>(PreMulSumOp<typename A::Compute>{s}, dst, srcs, nsrcs, done, count);
}

template <typename T>
void scaleKernel(void* dst, const void* src, size_t count, const void* scalar) {
  const void* srcs[1] = {src};
  preMulSumKernel<T>(dst, srcs, 1, count, scalar);
}

// Floating types divide in vectors (IEEE division, the same result as divideOne); integer
// division has no SIMD form and stays scalar.
template <typename T>
void divideKernel(void* buf, size_t count, int divisor) {
  size_t i = 0;
  if constexpr (!std::is_integral_v<T>) {
    using L = Lanes<T>;
    const typename L::D d;
    const size_t n = hn::Lanes(d);
    const auto div = hn::Set(d, static_cast<hn::TFromD<typename L::D>>(divisor));
    auto* p = static_cast<unsigned char*>(buf);
    for (; i + n <= count; i += n) {
      unsigned char* at = p + i * sizeof(T);
      L::store(d, hn::Div(L::load(d, at), div), at);
    }
  }
  for (; i < count; ++i) storeAt<T>(buf, i, divideOne(loadAt<T>(buf, i), divisor));
}

// ---- the table of this target ----

template <DataType D>
void fillRow(KernelTable& t) {
  using T = ElementType<D>;
  constexpr int kRow = static_cast<int>(D);
  auto set = [&t]<RedOp op, class S, class V>() {
    t.reduce2[kRow][static_cast<int>(op)] = &reduce2Kernel<T, S, V>;
    t.reduceN[kRow][static_cast<int>(op)] = &reduceNKernel<T, S, V>;
  };
  set.template operator()<RedOp::kSum, SumOp, SumV>();
  set.template operator()<RedOp::kProd, ProdOp, ProdV>();
  set.template operator()<RedOp::kMax, MaxOp, MaxV>();
  set.template operator()<RedOp::kMin, MinOp, MinV>();
  set.template operator()<RedOp::kAvg, SumOp, SumV>();  // the caller divides at the end
  t.preMulSum[kRow] = &preMulSumKernel<T>;
  t.scale[kRow] = &scaleKernel<T>;
  t.divide[kRow] = &divideKernel<T>;
}

template <size_t... I>
KernelTable makeTable(std::index_sequence<I...>) {
  KernelTable t{};
  (fillRow<static_cast<DataType>(I)>(t), ...);
  return t;
}

const KernelTable* GetKernelTable() {
  static const KernelTable table = makeTable(std::make_index_sequence<kNumDataTypes>{});
  return &table;
}

}  // namespace HWY_NAMESPACE
}  // namespace tutti::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cctype>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/log.h"

namespace tutti::kernels::cpu {

HWY_EXPORT(GetKernelTable);

namespace {

TUTTI_PARAM_STRING(kCpuTarget, "TUTTI_CPU_TARGET", nullptr, "KERNEL", "",
                   "instruction set of the CPU reduction kernels (AVX3, AVX2, SSE4, EMU128, "
                   "SCALAR; Highway's names); empty: the best this CPU supports");

std::vector<Target> discoverTargets() {
  std::vector<Target> out;
  // Each compiled target's table is reached through Highway's dispatcher by narrowing the
  // supported set to that target alone, then the mask is restored.
  for (int64_t bit : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(bit);
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
    out.push_back({hwy::TargetName(bit), bit, HWY_DYNAMIC_DISPATCH(GetKernelTable)()});
  }
  hwy::SetSupportedTargetsForTest(0);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  return out;  // SupportedAndGeneratedTargets lists the best (lowest bit) first
}

bool sameName(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::span<const Target> targets() {
  static const std::vector<Target> list = discoverTargets();
  return list;
}

const Target& activeTarget() {
  static const Target* const chosen = [] {
    const std::span<const Target> all = targets();
    const std::string want = kCpuTarget.get();
    if (want.empty()) return &all.front();
    for (const Target& t : all) {
      if (sameName(t.name, want)) return &t;
    }
    std::string names;
    for (const Target& t : all) names += std::string(names.empty() ? "" : ", ") + t.name;
    TUTTI_LOG_WARN(Subsys::kKernel,
                   "TUTTI_CPU_TARGET={} is not a target this build and CPU support ({}); using {}",
                   want, names, all.front().name);
    return &all.front();
  }();
  return *chosen;
}

}  // namespace tutti::kernels::cpu
#endif  // HWY_ONCE
