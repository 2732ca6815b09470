// File: kernels/cuda/program_kernels.cuh
// The CUDA kernels that execute a kernels::program::Program, as templates over (element type,
// op) instantiated by program.cu, program_int.cu and program_narrow.cu. The arithmetic is
// kernels/program_eval.h's (the CPU emulator's), so results match runOnHost bit for bit; built
// with -fmad=false so no multiply and add fuse.
//
// How a block runs a Program. Prologue: the threads resolve every ref into an address (shared
// memory), and warp 0 plans one op per lane: the leaf address of every push in code order, a
// bit mask of the code's kApply bytes, the op's layout (program_eval.h's opLayout: 16-byte packs
// when every ref has the same address modulo 16, else single elements) and the op's first
// virtual thread (an exclusive scan of the ops' work), so that the small ops of a program land on
// different threads. Then every thread walks every op (ops are independent, no barrier):
// grid-stride over the op's head elements, 16-byte packs and tail elements ("units").
//
// Per round a thread loads the leaves of kSlots / nleaves units (8 loads of 16 bytes in flight)
// into eight register slots, then evaluates each unit's postfix code: the pushes take the slots
// in order (a switch names the slot), the stack is a shift register of five named packs, and an
// op of more than 8 leaves refills the slots once midway. The code is the same for every thread,
// so every branch is uniform and nothing is indexed at run time: no local memory. A pack is kept
// as four 32-bit words whatever the dtype (elements are unpacked only inside the arithmetic), so
// slots and stack take 52 registers; the kernels use up to 128, one block of 512 per SM.
//
// Small programs (program_launch.cc decides: the compact form fits and the work fits one wave)
// skip all of that: ncclDevKernel_ProgramSmall takes a SmallProgram (program_launch.h) whose
// addresses, layouts and apply masks the host resolved, block (x, y) takes op y, and each thread
// evaluates one unit (evalUnit: the same slots and evalCode as above) straight from the
// parameters: no shared memory, no barrier, no scan, one round of loads per thread (two above
// kSlots leaves).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/program_launch.h"
#include "kernels/program_eval.h"

namespace tutti::kernels::cuda::prog {

using program::Buffers;
using program::kApply;
using program::kMaxLeaves;
using program::kMaxOps;
using program::kMaxRefs;
using program::Program;

static_assert(kSmallAddrs <= 256 && kSmallOps <= 65535, "SmallOp slots are bytes; ops a grid dim");
static_assert(kMaxOps <= 32, "warp 0 plans one op per lane");
static_assert(program::kMaxDepth == 5, "evalCode names four packs below the top of the stack");
static_assert(program::kMaxLeaves <= 16, "evalCode refills the slots once");
static_assert(2 * kMaxLeaves - 1 <= 32, "applyMask has a bit per code byte");

/// Leaf values (packs) one thread holds in registers at a time.
inline constexpr int kSlots = 8;

/// One op as the threads walk it (shared memory, written by warp 0 in the prologue).
struct OpPlan {
  uintptr_t leaf[kMaxLeaves];  // element 0 of the leaf of the j-th push, in code order
  uint64_t head;               // elements before the packs (every element: element path)
  uint64_t packs;              // 16-byte packs
  uint64_t tail;               // elements after the packs
  uint64_t rotate;             // real thread of virtual thread 0, below the grid's threads
  uint32_t applyMask;          // bit c: code byte c is kApply
  uint16_t dsts;               // first destination ref
  uint8_t nleaves;
  uint8_t ndsts;
  uint8_t ncode;
  uint8_t divide;
  uint8_t perRound;  // units per thread per round: kSlots / nleaves, at least 1
};

/// Virtual thread of this thread for an op whose virtual thread 0 is real thread `rotate`.
__device__ __forceinline__ uint64_t virtualThread(uint64_t tid, uint64_t rotate,
                                                  uint64_t nthreads) {
  const uint64_t v = tid + nthreads - rotate;
  return v >= nthreads ? v - nthreads : v;
}

/// The sum of `v` over the lanes below `lane` (a whole warp calls it).
__device__ __forceinline__ uint64_t warpExclusiveSum(uint64_t v, int lane) {
  uint64_t inclusive = v;
  for (int delta = 1; delta < 32; delta *= 2) {
    const uint64_t below = __shfl_up_sync(0xFFFFFFFFu, inclusive, delta);
    if (lane >= delta) inclusive += below;
  }
  return inclusive - v;
}

/// Warp 0, lane o: the plan of op o, and the rotation (an exclusive scan of the ops' work over
/// the lanes, modulo the grid's threads).
template <typename T>
__device__ void planOps(const Program& prog, const Buffers& bufs, uint64_t nthreads,
                        OpPlan* plans) {
  const int lane = static_cast<int>(threadIdx.x);
  uint64_t units = 0;
  if (lane < prog.nops) {
    const program::Op& op = prog.ops[lane];
    OpPlan& plan = plans[lane];
    uint32_t mask = 0;
    int push = 0;
    for (int c = 0; c < op.ncode; ++c) {
      const uint8_t byte = prog.code[op.code + c];
      if (byte == kApply) {
        mask |= 1u << c;
      } else {
        plan.leaf[push++] = program::refAddress(prog, bufs, op.leaves + byte, sizeof(T));
      }
    }
    const program::OpLayout l = program::opLayout(prog, op, bufs, sizeof(T));
    plan.head = l.head;
    plan.packs = l.packs;
    plan.tail = l.tail;
    plan.applyMask = mask;
    plan.dsts = op.dsts;
    plan.nleaves = op.nleaves;
    plan.ndsts = op.ndsts;
    plan.ncode = op.ncode;
    plan.divide = (op.flags & program::kDivide) ? 1 : 0;
    plan.perRound = static_cast<uint8_t>(op.nleaves > kSlots ? 1 : kSlots / op.nleaves);
    units = program::workUnits(l);
  }
  const uint64_t before = warpExclusiveSum(units, lane);
  if (lane < prog.nops) plans[lane].rotate = before % nthreads;
}

// ---- packs: N elements of T, 16 bytes or one element ----

// A pack is held as 32-bit words in their memory order (4 for 16 bytes; 1, or 2 for an 8-byte
// element), never as separate narrow elements: a pack of sixteen 1-byte elements then takes 4
// registers, not 16, in the leaf slots and on the stack. Elements are taken out and put back
// only inside the arithmetic.
template <typename T, int N>
struct Pack {
  static constexpr int kWords = (N * static_cast<int>(sizeof(T)) + 3) / 4;
  uint32_t w[kWords];
};

// Element k (a constant after unrolling) of a pack.
template <typename T, int N>
__device__ __forceinline__ T getElem(const Pack<T, N>& p, int k) {
  T v;
  if constexpr (sizeof(T) == 8) {
    const uint64_t bits = (static_cast<uint64_t>(p.w[2 * k + 1]) << 32) | p.w[2 * k];
    __builtin_memcpy(&v, &bits, 8);
  } else if constexpr (sizeof(T) == 4) {
    __builtin_memcpy(&v, &p.w[k], 4);
  } else if constexpr (sizeof(T) == 2) {
    const auto bits = static_cast<uint16_t>(p.w[k / 2] >> (16 * (k % 2)));
    __builtin_memcpy(&v, &bits, 2);
  } else {
    const auto bits = static_cast<uint8_t>(p.w[k / 4] >> (8 * (k % 4)));
    __builtin_memcpy(&v, &bits, 1);
  }
  return v;
}

// Sets element k of a pack whose bits for it are still 0.
template <typename T, int N>
__device__ __forceinline__ void setElem(Pack<T, N>& p, int k, T v) {
  if constexpr (sizeof(T) == 8) {
    uint64_t bits;
    __builtin_memcpy(&bits, &v, 8);
    p.w[2 * k] = static_cast<uint32_t>(bits);
    p.w[2 * k + 1] = static_cast<uint32_t>(bits >> 32);
  } else if constexpr (sizeof(T) == 4) {
    __builtin_memcpy(&p.w[k], &v, 4);
  } else if constexpr (sizeof(T) == 2) {
    uint16_t bits;
    __builtin_memcpy(&bits, &v, 2);
    p.w[k / 2] |= static_cast<uint32_t>(bits) << (16 * (k % 2));
  } else {
    uint8_t bits;
    __builtin_memcpy(&bits, &v, 1);
    p.w[k / 4] |= static_cast<uint32_t>(bits) << (8 * (k % 4));
  }
}

template <typename T, int N>
__device__ __forceinline__ Pack<T, N> zeroPack() {
  Pack<T, N> p;
#pragma unroll
  for (int i = 0; i < Pack<T, N>::kWords; ++i) p.w[i] = 0;
  return p;
}

// Global loads and stores. The addresses come through shared memory, so the compiler cannot
// tell their space and would emit generic accesses; these say global. The loads are not
// volatile: they may move, but never past a store of the value computed from them, and a
// thread's stores never touch a location another of its loads reads, except the one it read
// for the same element (in place), which the data dependency orders.
__device__ __forceinline__ uint4 ldGlobal16(uintptr_t a) {
  uint4 v;
  asm("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(a));
  return v;
}
__device__ __forceinline__ void stGlobal16(uintptr_t a, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(a), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
// One element of 1, 2, 4 or 8 bytes, as bits.
template <int kBytes>
__device__ __forceinline__ uint64_t ldGlobalBits(uintptr_t a) {
  if constexpr (kBytes == 8) {
    uint64_t v;
    asm("ld.global.u64 %0, [%1];" : "=l"(v) : "l"(a));
    return v;
  } else {
    uint32_t v;
    if constexpr (kBytes == 4) {
      asm("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(a));
    } else if constexpr (kBytes == 2) {
      asm("ld.global.u16 %0, [%1];" : "=r"(v) : "l"(a));
    } else {
      asm("ld.global.u8 %0, [%1];" : "=r"(v) : "l"(a));
    }
    return v;
  }
}
template <int kBytes>
__device__ __forceinline__ void stGlobalBits(uintptr_t a, uint64_t bits) {
  if constexpr (kBytes == 8) {
    asm volatile("st.global.u64 [%0], %1;" ::"l"(a), "l"(bits) : "memory");
  } else if constexpr (kBytes == 4) {
    asm volatile("st.global.u32 [%0], %1;" ::"l"(a), "r"(static_cast<uint32_t>(bits)) : "memory");
  } else if constexpr (kBytes == 2) {
    asm volatile("st.global.u16 [%0], %1;" ::"l"(a), "r"(static_cast<uint32_t>(bits)) : "memory");
  } else {
    asm volatile("st.global.u8 [%0], %1;" ::"l"(a), "r"(static_cast<uint32_t>(bits)) : "memory");
  }
}

// 16-byte packs move as one 16-byte access, single elements as themselves.
template <typename T, int N>
__device__ __forceinline__ Pack<T, N> loadPack(uintptr_t addr) {
  if constexpr (N * sizeof(T) == 16) {
    const uint4 v = ldGlobal16(addr);
    return Pack<T, N>{{v.x, v.y, v.z, v.w}};
  } else {
    static_assert(N == 1);
    const uint64_t bits = ldGlobalBits<sizeof(T)>(addr);
    Pack<T, N> p;
    p.w[0] = static_cast<uint32_t>(bits);
    if constexpr (sizeof(T) == 8) p.w[1] = static_cast<uint32_t>(bits >> 32);
    return p;
  }
}

template <typename T, int N>
__device__ __forceinline__ void storePack(uintptr_t addr, const Pack<T, N>& p) {
  if constexpr (N * sizeof(T) == 16) {
    stGlobal16(addr, make_uint4(p.w[0], p.w[1], p.w[2], p.w[3]));
  } else {
    static_assert(N == 1);
    uint64_t bits = p.w[0];
    if constexpr (sizeof(T) == 8) bits |= static_cast<uint64_t>(p.w[1]) << 32;
    stGlobalBits<sizeof(T)>(addr, bits);
  }
}

template <typename T, RedOp Op, int N>
__device__ __forceinline__ Pack<T, N> applyPack(const Pack<T, N>& a, const Pack<T, N>& b) {
  Pack<T, N> r = zeroPack<T, N>();
#pragma unroll
  for (int k = 0; k < N; ++k) {
    setElem<T, N>(r, k, program::applyOp<T, Op>(getElem<T, N>(a, k), getElem<T, N>(b, k)));
  }
  return r;
}

template <typename T, int N>
__device__ __forceinline__ Pack<T, N> premulPack(const Pack<T, N>& a, T scalar) {
  Pack<T, N> r = zeroPack<T, N>();
#pragma unroll
  for (int k = 0; k < N; ++k) {
    setElem<T, N>(r, k, program::premulOp<T>(getElem<T, N>(a, k), scalar));
  }
  return r;
}

template <typename T, int N>
__device__ __forceinline__ Pack<T, N> dividePack(const Pack<T, N>& a, int32_t divisor) {
  Pack<T, N> r = zeroPack<T, N>();
#pragma unroll
  for (int k = 0; k < N; ++k) {
    setElem<T, N>(r, k, program::divideOp<T>(getElem<T, N>(a, k), divisor));
  }
  return r;
}

// raw[slot] by a switch: every case names its slot, so raw stays in registers.
template <typename P>
__device__ __forceinline__ P pickSlot(const P (&raw)[kSlots], int slot) {
  static_assert(kSlots == 8);
  switch (slot) {
    case 0: return raw[0];
    case 1: return raw[1];
    case 2: return raw[2];
    case 3: return raw[3];
    case 4: return raw[4];
    case 5: return raw[5];
    case 6: return raw[6];
    default: return raw[7];
  }
}

// Fills slots [0, nslots) with the leaves of pushes first, first + 1, ... of unit `unit`, then
// of the next units (unit + nthreads, ...) once `nleaves` pushes are taken. Units at or past
// `limit` are not loaded. All loads are issued before any value is used.
template <typename T, int N>
__device__ __forceinline__ void loadSlots(Pack<T, N> (&raw)[kSlots], const uintptr_t* leaf,
                                          int nleaves, int nslots, uint64_t baseElem,
                                          uint64_t unit, uint64_t limit, uint64_t nthreads) {
  int j = 0;
#pragma unroll
  for (int r = 0; r < kSlots; ++r) {
    if (r < nslots && unit < limit) {
      raw[r] = loadPack<T, N>(leaf[j] + (baseElem + unit * N) * sizeof(T));
    }
    if (++j == nleaves) {
      j = 0;
      unit += nthreads;
    }
  }
}

// The postfix code over one unit whose leaves (in push order) are raw[first...]. The stack is a
// shift register: `top`, then s0 (the value below it), s1, s2, s3; `depth` counts them all
// (validate bounds it by kMaxDepth = 5) and guards the moves, so that a shallow stack moves
// nothing. An op of more than kSlots leaves holds one unit per round (first = 0): when its
// pushes have used every slot, the slots are refilled with the leaves of the remaining pushes
// (`leaf`: element 0 of every push's leaf, in code order). Plan is OpPlan or SmallOp: applyMask,
// ncode and nleaves.
template <typename T, RedOp Op, int N, typename Plan>
__device__ __forceinline__ Pack<T, N> evalCode(Pack<T, N> (&raw)[kSlots], int first,
                                               const Plan& plan, const uintptr_t* leaf,
                                               uint64_t baseElem, uint64_t unit, bool preMul,
                                               T scalar) {
  using P = Pack<T, N>;
  P top, s0, s1, s2, s3;
  int depth = 0;
  int next = first;
  uint32_t applyMask = plan.applyMask;
  const int ncode = plan.ncode;
#pragma unroll 1
  for (int c = 0; c < ncode; ++c, applyMask >>= 1) {
    if (applyMask & 1u) {
      top = applyPack<T, Op, N>(s0, top);
      if (depth > 2) s0 = s1;
      if (depth > 3) s1 = s2;
      if (depth > 4) s2 = s3;
      --depth;
    } else {
      if (depth > 3) s3 = s2;
      if (depth > 2) s2 = s1;
      if (depth > 1) s1 = s0;
      if (depth > 0) s0 = top;
      if (next == kSlots) {  // only with nleaves > kSlots: pushes kSlots.. of this unit
        const int rest = plan.nleaves - kSlots;
        loadSlots<T, N>(raw, leaf + kSlots, rest, rest, baseElem, unit, unit + 1, 0);
        next = 0;
      }
      top = pickSlot(raw, next++);
      if (preMul) top = premulPack<T, N>(top, scalar);
      ++depth;
    }
  }
  return top;
}

// Units [first, limit) of an op in steps of nthreads, where unit u is the N elements at element
// baseElem + u * N of every ref. perRound = kSlots / nleaves units per round (one when nleaves
// exceeds kSlots): all their leaves are loaded before any is used.
template <typename T, RedOp Op, int N>
__device__ __forceinline__ void evalRange(const OpPlan& plan, const uintptr_t* addr,
                                          uint64_t baseElem, uint64_t first, uint64_t limit,
                                          uint64_t nthreads, bool preMul, T scalar,
                                          int32_t divisor) {
  using P = Pack<T, N>;
  const int nleaves = plan.nleaves;
  const int perRound = plan.perRound;
  const int nslots = nleaves > kSlots ? kSlots : perRound * nleaves;
  const int ndsts = plan.ndsts;
  const bool divide = plan.divide != 0;
  const uintptr_t* dsts = addr + plan.dsts;
  for (uint64_t p0 = first; p0 < limit; p0 += perRound * nthreads) {
    P raw[kSlots];
    loadSlots<T, N>(raw, plan.leaf, nleaves, nslots, baseElem, p0, limit, nthreads);
    uint64_t u = p0;
#pragma unroll 1
    for (int k = 0; k < perRound && u < limit; ++k, u += nthreads) {
      P result = evalCode<T, Op, N>(raw, k * nleaves, plan, plan.leaf, baseElem, u, preMul, scalar);
      if (divide) result = dividePack<T, N>(result, divisor);
      const uint64_t offset = (baseElem + u * N) * sizeof(T);
#pragma unroll 1
      for (int d = 0; d < ndsts; ++d) storePack<T, N>(dsts[d] + offset, result);
    }
  }
}

// One unit of a small program's op: the N elements at element `elem` of every ref (leaf: the
// pushes' leaves in code order; dsts: the destinations), loaded in one round, evaluated, divided
// when the op divides, stored. The arithmetic of evalRange, so the same bits.
template <typename T, RedOp Op, int N>
__device__ __forceinline__ void evalUnit(const SmallOp& op, const uintptr_t* leaf,
                                         const uintptr_t* dsts, uint64_t elem, bool preMul,
                                         T scalar, int32_t divisor) {
  using P = Pack<T, N>;
  const int nleaves = op.nleaves;
  const uint64_t offset = elem * sizeof(T);
  P raw[kSlots];
#pragma unroll
  for (int r = 0; r < kSlots; ++r) {  // the first kSlots pushes; evalCode loads the rest
    if (r < nleaves) raw[r] = loadPack<T, N>(leaf[r] + offset);
  }
  P result = evalCode<T, Op, N>(raw, 0, op, leaf, elem, 0, preMul, scalar);
  if (op.divide) result = dividePack<T, N>(result, divisor);
  const int ndsts = op.ndsts;
#pragma unroll 1
  for (int d = 0; d < ndsts; ++d) storePack<T, N>(dsts[d] + offset, result);
}

// ---- the copy kernel's plan ----

/// One op of a copy-only program (program_eval.h's copyLayout), in bytes.
struct CopyPlan {
  uintptr_t src;
  uint64_t headBytes;
  uint64_t units;
  uint64_t tailBytes;
  uint64_t rotate;
  uint32_t unitBytes;
  uint16_t dsts;
  uint8_t ndsts;
};

/// Units of kBytes [vt, units) in steps of nthreads, four per thread per round, from src + head
/// to every destination + head. A destination at the source's address is skipped.
template <int kBytes>
__device__ __forceinline__ void copyUnits(const CopyPlan& plan, const uintptr_t* dsts,
                                          uint64_t vt, uint64_t nthreads) {
  constexpr int kPerRound = 4;
  using W = std::conditional_t<kBytes == 16, uint4, uint64_t>;
  const uintptr_t src = plan.src + plan.headBytes;
  for (uint64_t p0 = vt; p0 < plan.units; p0 += kPerRound * nthreads) {
    W v[kPerRound];
#pragma unroll
    for (int k = 0; k < kPerRound; ++k) {
      const uint64_t u = p0 + k * nthreads;
      if (u < plan.units) {
        if constexpr (kBytes == 16) {
          v[k] = ldGlobal16(src + u * kBytes);
        } else {
          v[k] = ldGlobalBits<kBytes>(src + u * kBytes);
        }
      }
    }
#pragma unroll 1
    for (int d = 0; d < plan.ndsts; ++d) {
      if (dsts[d] == plan.src) continue;
      const uintptr_t dst = dsts[d] + plan.headBytes;
#pragma unroll
      for (int k = 0; k < kPerRound; ++k) {
        const uint64_t u = p0 + k * nthreads;
        if (u < plan.units) {
          if constexpr (kBytes == 16) {
            stGlobal16(dst + u * kBytes, v[k]);
          } else {
            stGlobalBits<kBytes>(dst + u * kBytes, v[k]);
          }
        }
      }
    }
  }
}

}  // namespace tutti::kernels::cuda::prog

// The kernels live in the global namespace so that their names start with ncclDevKernel_, as
// NCCL's do (profilers and tools classify NCCL kernels by that prefix). Program and Buffers are
// __grid_constant__ parameters: read in place from the parameter bank, never copied to local
// memory. Up to 128 registers per thread (one block of 512 per SM), which the leaf slots and the
// stack need; the launcher sizes the grid to one wave.
template <typename T, tutti::RedOp Op>
__global__ void __launch_bounds__(tutti::kernels::cuda::prog::kThreads, 1)
    ncclDevKernel_Program(const __grid_constant__ tutti::kernels::program::Program prog,
                          const __grid_constant__ tutti::kernels::program::Buffers bufs) {
  using namespace tutti::kernels::cuda::prog;
  __shared__ uintptr_t addr[kMaxRefs];
  __shared__ OpPlan plans[kMaxOps];
  const uint64_t nthreads = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const uint64_t tid = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int r = static_cast<int>(threadIdx.x); r < prog.nrefs; r += blockDim.x) {
    addr[r] = tutti::kernels::program::refAddress(prog, bufs, r, sizeof(T));
  }
  if (threadIdx.x < 32) planOps<T>(prog, bufs, nthreads, plans);
  __syncthreads();
  constexpr int kPack = 16 / sizeof(T);
  const bool preMul = prog.preMul != 0;
  const T scalar = tutti::kernels::program::scalarOf<T>(prog);
  const int32_t divisor = prog.divisor;
#pragma unroll 1
  for (int o = 0; o < prog.nops; ++o) {
    const OpPlan& plan = plans[o];
    const uint64_t vt = virtualThread(tid, plan.rotate, nthreads);
    // Elements one by one: the head (every element on the element path), then the tail.
#pragma unroll 1
    for (int seg = 0; seg < 2; ++seg) {
      const uint64_t base = seg == 0 ? 0 : plan.head + plan.packs * kPack;
      const uint64_t n = seg == 0 ? plan.head : plan.tail;
      if (vt < n) evalRange<T, Op, 1>(plan, addr, base, vt, n, nthreads, preMul, scalar, divisor);
    }
    if (vt < plan.packs) {
      evalRange<T, Op, kPack>(plan, addr, plan.head, vt, plan.packs, nthreads, preMul, scalar,
                              divisor);
    }
  }
}

// The small path (program_launch.h's SmallProgram): block (x, y) takes units
// [x * blockDim.x, (x + 1) * blockDim.x) of op y, one per thread: the op's 16-byte packs first,
// then its head elements, then its tail elements, so that no thread waits for two rounds of
// loads. The launch bounds of ncclDevKernel_Program (72 to 122 registers are used); no shared
// memory.
template <typename T, tutti::RedOp Op>
__global__ void __launch_bounds__(tutti::kernels::cuda::prog::kThreads, 1)
    ncclDevKernel_ProgramSmall(
        const __grid_constant__ tutti::kernels::cuda::prog::SmallProgram sp) {
  using namespace tutti::kernels::cuda::prog;
  constexpr int kPack = 16 / sizeof(T);
  const SmallOp& op = sp.ops[blockIdx.y];
  const uint64_t vt = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const uintptr_t* leaf = sp.addr + op.leaf;
  const uintptr_t* dsts = sp.addr + op.dsts;
  const bool preMul = sp.preMul != 0;
  T scalar;
  __builtin_memcpy(&scalar, sp.scalar, sizeof(T));
  const uint64_t packs = op.packs;
  if (vt < packs) {
    evalUnit<T, Op, kPack>(op, leaf, dsts, op.head + vt * kPack, preMul, scalar, sp.divisor);
    return;
  }
  uint64_t elem = vt - packs;  // a head element, else a tail element, else nothing
  if (elem >= op.head) {
    elem -= op.head;
    if (elem >= op.tail) return;
    elem += op.head + packs * kPack;
  }
  evalUnit<T, Op, 1>(op, leaf, dsts, elem, preMul, scalar, sp.divisor);
}

namespace tutti::kernels::cuda::prog {

/// Launches ncclDevKernel_ProgramSmall<T, l.op>; cudaGetLastError() after the launch.
template <typename T>
int launchTypedSmall(const SmallProgram& sp, const SmallLaunch& l) {
  const auto s = static_cast<cudaStream_t>(l.stream);
  const dim3 grid(static_cast<unsigned>(l.blocksPerOp), sp.nops);
  switch (l.op) {
    case RedOp::kSum:
      ncclDevKernel_ProgramSmall<T, RedOp::kSum><<<grid, l.threads, 0, s>>>(sp);
      break;
    case RedOp::kProd:
      ncclDevKernel_ProgramSmall<T, RedOp::kProd><<<grid, l.threads, 0, s>>>(sp);
      break;
    case RedOp::kMax:
      ncclDevKernel_ProgramSmall<T, RedOp::kMax><<<grid, l.threads, 0, s>>>(sp);
      break;
    case RedOp::kMin:
      ncclDevKernel_ProgramSmall<T, RedOp::kMin><<<grid, l.threads, 0, s>>>(sp);
      break;
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaGetLastError());
}

/// Launches ncclDevKernel_Program<T, prog.op>; cudaGetLastError() after the launch.
template <typename T>
int launchTyped(const Program& prog, const Buffers& bufs, int blocks, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  switch (prog.op) {
    case RedOp::kSum:
      ncclDevKernel_Program<T, RedOp::kSum><<<blocks, kThreads, 0, s>>>(prog, bufs);
      break;
    case RedOp::kProd:
      ncclDevKernel_Program<T, RedOp::kProd><<<blocks, kThreads, 0, s>>>(prog, bufs);
      break;
    case RedOp::kMax:
      ncclDevKernel_Program<T, RedOp::kMax><<<blocks, kThreads, 0, s>>>(prog, bufs);
      break;
    case RedOp::kMin:
      ncclDevKernel_Program<T, RedOp::kMin><<<blocks, kThreads, 0, s>>>(prog, bufs);
      break;
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace tutti::kernels::cuda::prog
