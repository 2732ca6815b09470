// File: kernels/program_eval.h
// The arithmetic of a kernels::program::Program, one element at a time, shared by the CPU
// emulator (kernels/program_host.h) and the CUDA kernels (kernels/cuda/program_kernels.cuh), so
// that both compute the same bits: header-only, compiled by g++ and by nvcc (TUTTI_HD functions).
// It also holds the per-op memory layout (16-byte path or element path) that the kernels and
// their launcher agree on.
//
// Rules (those of kernels/reduce.h's reduce2Fn, scaleFn and divideFn; kernels/cpu/scalar_ops.h
// is their scalar model): integer sum and prod wrap (kernels/wrap_arith.h); float32 and float64
// compute in their own type; float16, bfloat16 and fp8 compute in float and round to nearest
// even at every stored value: after each kApply, after each premultiplied leaf, after the divide;
// max/min propagate NaN (the first NaN wins). No multiply and add may fuse: host code that
// includes this builds with -ffp-contract=off, CUDA code with -fmad=false.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/convert.h"
#include "kernels/host_device.h"
#include "kernels/program.h"
#include "kernels/wrap_arith.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace tutti::kernels::program {

// ---- element <-> compute type ----

// How elements of T are combined: in T itself, or in float for the narrow floating types. On
// the device, float16 converts with the hardware's cvt instructions (exact widening; rounding to
// nearest even as convert.h rounds, and NaN rebuilt as convert.h builds it) and fp8 decodes
// arithmetically (convert.h's lookup tables live in host memory).
template <typename T>
struct ElemArith {
  using C = T;
  TUTTI_HD static C load(T v) { return v; }
  TUTTI_HD static T store(C v) { return v; }
};
template <NarrowFloat T>
struct ElemArith<T> {
  using C = float;
  TUTTI_HD static float load(T v) {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, Half>) {
      return __half2float(__ushort_as_half(v.bits));
    } else if constexpr (std::is_same_v<T, BFloat16>) {
      return toFloat(v);
    } else if constexpr (std::is_same_v<T, Fp8E4M3>) {
      return detail::decodeNarrow<detail::kE4M3Format>(v.bits);
    } else {
      return detail::decodeNarrow<detail::kE5M2Format>(v.bits);
    }
#else
    return toFloat(v);
#endif
  }
  TUTTI_HD static T store(float f) {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, Half>) {
      // cvt.rn.f16.f32 rounds like fromFloat<Half>; NaN becomes S.11111.1000000000 as there.
      if (f != f) {
        return Half{static_cast<uint16_t>(((__float_as_uint(f) >> 16) & 0x8000u) | 0x7E00u)};
      }
      return Half{__half_as_ushort(__float2half_rn(f))};
    } else {
      return fromFloat<T>(f);
    }
#else
    return fromFloat<T>(f);
#endif
  }
};

// ---- the three operations ----

/// a op b, rounded to T. Integers: sum and prod wrap, max/min compare. Floating types: NaN
/// propagates through max/min and the first NaN wins: (a > b || a is NaN) ? a : b.
template <typename T, RedOp R>
TUTTI_HD inline T applyOp(T a, T b) {
  using A = ElemArith<T>;
  using C = typename A::C;
  const C x = A::load(a);
  const C y = A::load(b);
  if constexpr (R == RedOp::kSum) {
    return A::store(wrapAdd(x, y));
  } else if constexpr (R == RedOp::kProd) {
    return A::store(wrapMul(x, y));
  } else if constexpr (R == RedOp::kMax) {
    if constexpr (std::is_integral_v<C>) {
      return A::store(x > y ? x : y);
    } else {
      return A::store((x > y || x != x) ? x : y);
    }
  } else {
    static_assert(R == RedOp::kMin, "a Program's op is sum, prod, max or min");
    if constexpr (std::is_integral_v<C>) {
      return A::store(x < y ? x : y);
    } else {
      return A::store((x < y || x != x) ? x : y);
    }
  }
}

/// v * s rounded to T (scaleFn's premultiplication of one leaf); integers wrap.
template <typename T>
TUTTI_HD inline T premulOp(T v, T s) {
  using A = ElemArith<T>;
  return A::store(wrapMul(A::load(v), A::load(s)));
}

/// v / divisor (divideFn): integers truncate toward zero; floating types divide in their compute
/// type and round to T. Precondition: divisor >= 1 (no trap, no overflow). Integers up to 32 bits
/// divide in 32 bits (the same quotient as in 64, and no 64-bit division routine on the GPU);
/// unsigned types divide in their own width or wider, which equals divideFn wherever the divisor
/// fits in T.
template <typename T>
TUTTI_HD inline T divideOp(T v, int32_t divisor) {
  using A = ElemArith<T>;
  if constexpr (NarrowFloat<T>) {
    return A::store(A::load(v) / static_cast<float>(divisor));
  } else if constexpr (std::is_floating_point_v<T>) {
    return v / static_cast<T>(divisor);
  } else if constexpr (std::is_signed_v<T> && sizeof(T) <= 4) {
    return static_cast<T>(static_cast<int32_t>(v) / divisor);
  } else if constexpr (std::is_signed_v<T>) {
    return static_cast<T>(static_cast<int64_t>(v) / divisor);
  } else if constexpr (sizeof(T) <= 4) {
    return static_cast<T>(static_cast<uint32_t>(v) / static_cast<uint32_t>(divisor));
  } else {
    return static_cast<T>(static_cast<uint64_t>(v) / static_cast<uint64_t>(divisor));
  }
}

/// The premulsum scalar of a Program as a T.
template <typename T>
TUTTI_HD inline T scalarOf(const Program& prog) {
  T s;
  static_assert(sizeof(T) <= sizeof(prog.scalar));
  std::memcpy(&s, prog.scalar, sizeof(T));
  return s;
}

// ---- addresses ----

/// The address of element 0 of refs[ref] for elements of `elemBytes` bytes.
TUTTI_HD inline uintptr_t refAddress(const Program& prog, const Buffers& bufs, int ref,
                                     size_t elemBytes) {
  const Ref r = prog.refs[ref];
  return reinterpret_cast<uintptr_t>(bufs.ptr[r.buf()]) + r.offset() * elemBytes;
}

template <typename T>
TUTTI_HD inline T loadElement(uintptr_t base, uint64_t i) {
#if defined(__CUDA_ARCH__)
  return reinterpret_cast<const T*>(base)[i];  // the launcher checked element alignment
#else
  T v;
  std::memcpy(&v, reinterpret_cast<const unsigned char*>(base) + i * sizeof(T), sizeof(T));
  return v;
#endif
}
template <typename T>
TUTTI_HD inline void storeElement(uintptr_t base, uint64_t i, T v) {
#if defined(__CUDA_ARCH__)
  reinterpret_cast<T*>(base)[i] = v;
#else
  std::memcpy(reinterpret_cast<unsigned char*>(base) + i * sizeof(T), &v, sizeof(T));
#endif
}

// ---- one element ----

/// Element i of `op` (i < op.count): every leaf is read, the postfix code is evaluated (leaves
/// premultiplied when prog.preMul, every kApply rounded to T), the result is divided when the op
/// has kDivide, and stored into every destination. All leaves are read before the first store,
/// so a destination may be one of the op's leaves (in place). Precondition: validate(prog) is ok
/// and the op's buffers are non-null (kernels/program_host.h). The reference of the CUDA kernels,
/// which evaluate the same code over 16-byte packs without this function's local arrays.
template <typename T, RedOp R>
TUTTI_HD void evalElement(const Program& prog, const Op& op, const Buffers& bufs, uint64_t i) {
  T leaf[kMaxLeaves];
  for (int k = 0; k < op.nleaves; ++k) {
    leaf[k] = loadElement<T>(refAddress(prog, bufs, op.leaves + k, sizeof(T)), i);
  }
  const T scalar = scalarOf<T>(prog);
  T stack[kMaxDepth];
  int depth = 0;
  for (int c = 0; c < op.ncode; ++c) {
    const uint8_t byte = prog.code[op.code + c];
    if (byte == kApply) {
      stack[depth - 2] = applyOp<T, R>(stack[depth - 2], stack[depth - 1]);
      --depth;
    } else {
      stack[depth++] = prog.preMul ? premulOp<T>(leaf[byte], scalar) : leaf[byte];
    }
  }
  T result = stack[0];
  if (op.flags & kDivide) result = divideOp<T>(result, prog.divisor);
  for (int d = 0; d < op.ndsts; ++d) {
    storeElement<T>(refAddress(prog, bufs, op.dsts + d, sizeof(T)), i, result);
  }
}

// ---- memory layout of an op on the GPU ----

/// How the CUDA kernels walk an op. When every ref of the op (leaves and destinations) has the
/// same address modulo 16, and that offset is a whole number of elements: `head` elements one by
/// one up to the first 16-byte boundary, then `packs` 16-byte packs, then `tail` elements.
/// Otherwise (`vector` false) all `count` elements one by one (head = count, packs = tail = 0).
struct OpLayout {
  bool vector = false;
  uint64_t head = 0;
  uint64_t packs = 0;
  uint64_t tail = 0;
};

TUTTI_HD inline OpLayout opLayout(const Program& prog, const Op& op, const Buffers& bufs,
                                  size_t elemBytes) {
  OpLayout l;
  const uintptr_t first = refAddress(prog, bufs, op.leaves, elemBytes);
  const uintptr_t mod = first % 16;
  bool same = mod % elemBytes == 0;
  for (int k = 1; k < op.nleaves && same; ++k) {
    same = refAddress(prog, bufs, op.leaves + k, elemBytes) % 16 == mod;
  }
  for (int d = 0; d < op.ndsts && same; ++d) {
    same = refAddress(prog, bufs, op.dsts + d, elemBytes) % 16 == mod;
  }
  if (!same) {
    l.head = op.count;
    return l;
  }
  const uint64_t perPack = 16 / elemBytes;
  l.vector = true;
  l.head = (16 - mod) % 16 / elemBytes;
  if (l.head > op.count) l.head = op.count;
  l.packs = (op.count - l.head) / perPack;
  l.tail = op.count - l.head - l.packs * perPack;
  return l;
}

/// Units of work the kernel spreads over its threads for one op: packs, or elements.
TUTTI_HD inline uint64_t workUnits(const OpLayout& l) {
  uint64_t w = l.packs;
  if (l.head > w) w = l.head;
  if (l.tail > w) w = l.tail;
  return w;
}

/// How the copy kernel (copyOnly programs) walks an op, in bytes: `unitBytes` is the largest
/// power of two up to 16 modulo which every ref has the same address; `headBytes` single bytes
/// up to the first unit boundary, `units` units, `tailBytes` single bytes.
struct CopyLayout {
  uint32_t unitBytes = 1;
  uint64_t headBytes = 0;
  uint64_t units = 0;
  uint64_t tailBytes = 0;
};

TUTTI_HD inline CopyLayout copyLayout(const Program& prog, const Op& op, const Buffers& bufs,
                                      size_t elemBytes) {
  const uintptr_t first = refAddress(prog, bufs, op.leaves, elemBytes);
  uintptr_t diff = 16;  // the bits where some ref's address differs from the first's
  for (int k = 1; k < op.nleaves; ++k) {
    diff |= refAddress(prog, bufs, op.leaves + k, elemBytes) ^ first;
  }
  for (int d = 0; d < op.ndsts; ++d) {
    diff |= refAddress(prog, bufs, op.dsts + d, elemBytes) ^ first;
  }
  CopyLayout l;
  l.unitBytes = static_cast<uint32_t>(diff & (~diff + 1));  // lowest set bit, at most 16
  const uint64_t bytes = op.count * elemBytes;
  l.headBytes = (l.unitBytes - first % l.unitBytes) % l.unitBytes;
  if (l.headBytes > bytes) l.headBytes = bytes;
  l.units = (bytes - l.headBytes) / l.unitBytes;
  l.tailBytes = bytes - l.headBytes - l.units * l.unitBytes;
  return l;
}

TUTTI_HD inline uint64_t workUnits(const CopyLayout& l) {
  uint64_t w = l.units;
  if (l.headBytes > w) w = l.headBytes;
  if (l.tailBytes > w) w = l.tailBytes;
  return w;
}

}  // namespace tutti::kernels::program
