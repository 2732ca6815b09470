// File: kernels/cpu/reduce.cc
// Portable CPU implementation of kernels/reduce.h. One loop template per (element type, op) is
// instantiated at compile time into a dtype x op table. Loops over aligned data are written so
// that GCC vectorises them at -O2 (restrict pointers, fixed-length inner blocks: the -O2
// "very cheap" cost model only vectorises loops whose trip count is a multiple of the vector).
#include "kernels/reduce.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/convert.h"

namespace tutti::kernels {
namespace {

// How elements of T are combined: in T itself, or in float for the narrow floating types (one
// rounding to nearest even per stored result).
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

// Integer sum and product wrap modulo 2^bits: computed in the unsigned type of the same width
// (signed overflow is undefined; the conversion back is modular since C++20).
struct SumOp {
  template <typename C>
  static constexpr C apply(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
      using U = std::make_unsigned_t<C>;
      return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return a + b;
    }
  }
};
struct ProdOp {
  template <typename C>
  static constexpr C apply(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
      using U = std::make_unsigned_t<C>;
      return static_cast<C>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    } else {
      return a * b;
    }
  }
};
// NaN propagates: `a != a` is true only for a NaN a, and when b is NaN both comparisons are
// false so b is returned. For integers `a != a` folds away.
struct MaxOp {
  template <typename C>
  static constexpr C apply(C a, C b) {
    return (a > b || a != a) ? a : b;
  }
};
struct MinOp {
  template <typename C>
  static constexpr C apply(C a, C b) {
    return (a < b || a != a) ? a : b;
  }
};

template <typename T, typename Op>
inline T combine(T a, T b) {
  using A = Arith<T>;
  return A::store(Op::template apply<typename A::Compute>(A::load(a), A::load(b)));
}

// Elements per fixed-length inner block: 64 bytes, at least 16 elements.
template <typename T>
inline constexpr size_t kBlock = 64 / sizeof(T) < 16 ? 16 : 64 / sizeof(T);

// dst, a and b are pairwise distinct (a == b is fine: restrict only constrains writes).
template <typename T, typename Op>
void distinctLoop(T* __restrict d, const T* __restrict a, const T* __restrict b, size_t count) {
  size_t i = 0;
  for (; i + kBlock<T> <= count; i += kBlock<T>) {
    for (size_t j = 0; j < kBlock<T>; ++j) d[i + j] = combine<T, Op>(a[i + j], b[i + j]);
  }
  for (; i < count; ++i) d[i] = combine<T, Op>(a[i], b[i]);
}

// d is also one operand: d = d op other (kDstIsA) or d = other op d.
template <typename T, typename Op, bool kDstIsA>
void inPlaceLoop(T* __restrict d, const T* __restrict other, size_t count) {
  auto one = [](T x, T o) { return kDstIsA ? combine<T, Op>(x, o) : combine<T, Op>(o, x); };
  size_t i = 0;
  for (; i + kBlock<T> <= count; i += kBlock<T>) {
    for (size_t j = 0; j < kBlock<T>; ++j) d[i + j] = one(d[i + j], other[i + j]);
  }
  for (; i < count; ++i) d[i] = one(d[i], other[i]);
}

template <typename T, typename Op>
void selfLoop(T* d, size_t count) {
  for (size_t i = 0; i < count; ++i) d[i] = combine<T, Op>(d[i], d[i]);
}

// Any alignment: blocks are copied into aligned locals, combined with the same fixed-length
// loop (so it vectorises too), and copied out. Both inputs of a block are read before its output
// is written, so exact aliasing is fine. A partial last block combines stale lanes it never
// stores (determinate values: the locals start zeroed).
template <typename T, typename Op>
void unalignedLoop(void* dst, const void* a, const void* b, size_t count) {
  constexpr size_t kLanes = 256;
  T x[kLanes]{};
  T y[kLanes]{};
  T r[kLanes];
  auto* d = static_cast<unsigned char*>(dst);
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  for (size_t i = 0; i < count; i += kLanes) {
    const size_t bytes = (count - i < kLanes ? count - i : kLanes) * sizeof(T);
    std::memcpy(x, pa + i * sizeof(T), bytes);
    std::memcpy(y, pb + i * sizeof(T), bytes);
    for (size_t j = 0; j < kLanes; ++j) r[j] = combine<T, Op>(x[j], y[j]);
    std::memcpy(d + i * sizeof(T), r, bytes);
  }
}

template <typename T>
bool isAligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % alignof(T) == 0;
}

template <typename T, typename Op>
void reduce2Kernel(void* dst, const void* a, const void* b, size_t count) {
  if (!isAligned<T>(dst) || !isAligned<T>(a) || !isAligned<T>(b)) {
    unalignedLoop<T, Op>(dst, a, b, count);
    return;
  }
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  if (d == x && d == y) {
    selfLoop<T, Op>(d, count);
  } else if (d == x) {
    inPlaceLoop<T, Op, true>(d, y, count);
  } else if (d == y) {
    inPlaceLoop<T, Op, false>(d, x, count);
  } else {
    distinctLoop<T, Op>(d, x, y, count);
  }
}

// avg finalisation. Precondition: divisor >= 1 (the checked wrapper enforces it), so the
// integer division can neither trap nor overflow; C++ integer division truncates toward zero.
template <typename T>
T divideOne(T v, int divisor) {
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

template <typename T>
void divideKernel(void* buf, size_t count, int divisor) {
  if (isAligned<T>(buf)) {
    T* p = static_cast<T*>(buf);
    for (size_t i = 0; i < count; ++i) p[i] = divideOne(p[i], divisor);
    return;
  }
  auto* p = static_cast<unsigned char*>(buf);
  for (size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    v = divideOne(v, divisor);
    std::memcpy(p + i * sizeof(T), &v, sizeof(T));
  }
}

template <typename T>
void scaleKernel(void* dst, const void* src, size_t count, const void* scalar) {
  T s;
  std::memcpy(&s, scalar, sizeof(T));
  const auto sc = Arith<T>::load(s);
  auto* d = static_cast<unsigned char*>(dst);
  const auto* x = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, x + i * sizeof(T), sizeof(T));
    v = Arith<T>::store(ProdOp::apply(Arith<T>::load(v), sc));
    std::memcpy(d + i * sizeof(T), &v, sizeof(T));
  }
}

// The tables, indexed by the enum values; built from ElementType<D> so that the row order
// cannot drift from the DataType enum. kAvg reduces as kSum.
template <DataType D>
constexpr std::array<Reduce2Fn, kNumRedOps> reduce2Row() {
  using T = ElementType<D>;
  static_assert(sizeof(T) == dataTypeBytes(D));
  std::array<Reduce2Fn, kNumRedOps> row{};
  row[static_cast<int>(RedOp::kSum)] = &reduce2Kernel<T, SumOp>;
  row[static_cast<int>(RedOp::kProd)] = &reduce2Kernel<T, ProdOp>;
  row[static_cast<int>(RedOp::kMax)] = &reduce2Kernel<T, MaxOp>;
  row[static_cast<int>(RedOp::kMin)] = &reduce2Kernel<T, MinOp>;
  row[static_cast<int>(RedOp::kAvg)] = &reduce2Kernel<T, SumOp>;
  return row;
}

template <size_t... I>
constexpr auto makeReduce2Table(std::index_sequence<I...>) {
  return std::array<std::array<Reduce2Fn, kNumRedOps>, kNumDataTypes>{
      reduce2Row<static_cast<DataType>(I)>()...};
}
template <size_t... I>
constexpr auto makeDivideTable(std::index_sequence<I...>) {
  return std::array<DivideFn, kNumDataTypes>{
      &divideKernel<ElementType<static_cast<DataType>(I)>>...};
}

template <size_t... I>
constexpr auto makeScaleTable(std::index_sequence<I...>) {
  return std::array<ScaleFn, kNumDataTypes>{&scaleKernel<ElementType<static_cast<DataType>(I)>>...};
}

constexpr auto kReduce2Table = makeReduce2Table(std::make_index_sequence<kNumDataTypes>{});
constexpr auto kDivideTable = makeDivideTable(std::make_index_sequence<kNumDataTypes>{});
constexpr auto kScaleTable = makeScaleTable(std::make_index_sequence<kNumDataTypes>{});

// True when [x, x+bytes) and [y, y+bytes) share a byte.
bool overlaps(const void* x, const void* y, size_t bytes) {
  const auto ux = reinterpret_cast<uintptr_t>(x);
  const auto uy = reinterpret_cast<uintptr_t>(y);
  return bytes > 0 && ux < uy + bytes && uy < ux + bytes;
}

// Argument checks shared by the wrappers. Their messages are returned as is (no TUTTI_TRY
// trail): they already name the API and the offending value.
Status checkDtypeAndCount(const char* api, DataType dtype, size_t count) {
  if (!isValid(dtype)) {
    return invalidArgument("{}: dtype is invalid (dtype={})", api, static_cast<int>(dtype));
  }
  if (count > SIZE_MAX / dataTypeBytes(dtype)) {
    return invalidArgument("{}: count is too large for the address space (count={}, dtype={})", api,
                           count, dataTypeName(dtype));
  }
  return Status::ok();
}

Status checkOp(const char* api, RedOp op) {
  if (!isValid(op)) return invalidArgument("{}: op is invalid (op={})", api, static_cast<int>(op));
  return Status::ok();
}

// Sources are reduced in blocks of this many bytes so that dst stays in L1/L2 across the
// pairwise passes of a multi-source reduce.
constexpr size_t kReduceBlockBytes = 32 * 1024;

}  // namespace

Reduce2Fn reduce2Fn(DataType dtype, RedOp op) {
  if (!isValid(dtype) || !isValid(op)) return nullptr;
  return kReduce2Table[static_cast<int>(dtype)][static_cast<int>(op)];
}

DivideFn divideFn(DataType dtype) {
  if (!isValid(dtype)) return nullptr;
  return kDivideTable[static_cast<int>(dtype)];
}

ScaleFn scaleFn(DataType dtype) {
  if (!isValid(dtype)) return nullptr;
  return kScaleTable[static_cast<int>(dtype)];
}

Status reduce2(void* dst, const void* a, const void* b, size_t count, DataType dtype, RedOp op) {
  constexpr const char* kApi = "kernels::reduce2";
  if (Status s = checkDtypeAndCount(kApi, dtype, count); !s) return s;
  if (Status s = checkOp(kApi, op); !s) return s;
  if (count == 0) return Status::ok();
  if (dst == nullptr) return invalidArgument("{}: dst is null (count={})", kApi, count);
  if (a == nullptr) return invalidArgument("{}: a is null (count={})", kApi, count);
  if (b == nullptr) return invalidArgument("{}: b is null (count={})", kApi, count);
  const size_t bytes = count * dataTypeBytes(dtype);
  if (dst != a && overlaps(dst, a, bytes)) {
    return invalidArgument("{}: a partially overlaps dst (count={}, bytes={})", kApi, count, bytes);
  }
  if (dst != b && overlaps(dst, b, bytes)) {
    return invalidArgument("{}: b partially overlaps dst (count={}, bytes={})", kApi, count, bytes);
  }
  reduce2Fn(dtype, op)(dst, a, b, count);
  return Status::ok();
}

Status reduce(void* dst, std::span<const void* const> srcs, size_t count, DataType dtype,
              RedOp op) {
  constexpr const char* kApi = "kernels::reduce";
  if (Status s = checkDtypeAndCount(kApi, dtype, count); !s) return s;
  if (Status s = checkOp(kApi, op); !s) return s;
  if (srcs.empty()) return invalidArgument("{}: srcs is empty (count={})", kApi, count);
  if (count == 0) return Status::ok();
  if (dst == nullptr) return invalidArgument("{}: dst is null (count={})", kApi, count);
  const size_t elemBytes = dataTypeBytes(dtype);
  const size_t bytes = count * elemBytes;
  for (size_t k = 0; k < srcs.size(); ++k) {
    if (srcs[k] == nullptr) {
      return invalidArgument("{}: srcs[{}] is null (count={}, nsrcs={})", kApi, k, count,
                             srcs.size());
    }
    if (k == 0 ? (dst != srcs[0] && overlaps(dst, srcs[0], bytes))
               : overlaps(dst, srcs[k], bytes)) {
      return invalidArgument(
          "{}: srcs[{}] overlaps dst, which only srcs[0] may alias (count={}, "
          "nsrcs={})",
          kApi, k, count, srcs.size());
    }
  }
  if (srcs.size() == 1) {
    if (dst != srcs[0]) std::memcpy(dst, srcs[0], bytes);
    return Status::ok();
  }
  const Reduce2Fn fn = reduce2Fn(dtype, op);
  const size_t blockCount = kReduceBlockBytes / elemBytes;
  auto* d = static_cast<unsigned char*>(dst);
  for (size_t first = 0; first < count; first += blockCount) {
    const size_t n = count - first < blockCount ? count - first : blockCount;
    const size_t offset = first * elemBytes;
    auto at = [offset](const void* p) { return static_cast<const unsigned char*>(p) + offset; };
    fn(d + offset, at(srcs[0]), at(srcs[1]), n);
    for (size_t k = 2; k < srcs.size(); ++k) fn(d + offset, d + offset, at(srcs[k]), n);
  }
  return Status::ok();
}

Status divide(void* buf, size_t count, DataType dtype, int divisor) {
  constexpr const char* kApi = "kernels::divide";
  if (Status s = checkDtypeAndCount(kApi, dtype, count); !s) return s;
  if (divisor < 1) {
    return invalidArgument("{}: divisor must be positive (divisor={})", kApi, divisor);
  }
  if (count == 0) return Status::ok();
  if (buf == nullptr) return invalidArgument("{}: buf is null (count={})", kApi, count);
  divideFn(dtype)(buf, count, divisor);
  return Status::ok();
}

Status scale(void* dst, const void* src, size_t count, DataType dtype, const void* scalar) {
  constexpr const char* kApi = "kernels::scale";
  if (Status s = checkDtypeAndCount(kApi, dtype, count); !s) return s;
  if (count == 0) return Status::ok();
  if (dst == nullptr) return invalidArgument("{}: dst is null (count={})", kApi, count);
  if (src == nullptr) return invalidArgument("{}: src is null (count={})", kApi, count);
  if (scalar == nullptr) return invalidArgument("{}: scalar is null (count={})", kApi, count);
  const size_t bytes = count * dataTypeBytes(dtype);
  if (dst != src && overlaps(dst, src, bytes)) {
    return invalidArgument("{}: src partially overlaps dst (count={}, bytes={})", kApi, count,
                           bytes);
  }
  scaleFn(dtype)(dst, src, count, scalar);
  return Status::ok();
}

}  // namespace tutti::kernels
