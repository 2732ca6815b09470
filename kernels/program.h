// File: kernels/program.h
// A device program: what one kernel launch computes for a whole clique of ranks that share one
// address space (ranks that are threads of one process on one GPU, or a leader rank that has
// every peer's buffers mapped). It is the output of the clique compiler (core/device/compile.h),
// which runs every rank's Schedule symbolically and keeps, for each output range, the reduction
// tree of ranks' inputs the host engine would compute there. The kernel (kernels/cuda_program.h)
// and the CPU emulator (kernels/program_eval.h) execute the same struct with the same arithmetic.
//
// Meaning. For every op and every element i in [0, op.count): evaluate the op's postfix code,
// where "push leaf k" loads element i of refs[op.leaves + k] (premultiplied by the scalar and
// rounded to the dtype when Program::preMul), and kApply pops b, pops a and pushes a op b
// rounded to the dtype (kernels/reduce.h's rules: integers wrap, narrow floats compute in float
// and round to nearest even, max/min propagate NaN). The result, divided by Program::divisor
// when the op has kDivide (avg: the rounded sum, then the division, as the host engine's
// divideFn), is stored at element i of every destination refs[op.dsts + j].
//
// Rules the compiler guarantees and the executors rely on:
//  - Per element, every leaf of an op is read before any of its destinations is written, so a
//    destination may be the same location as one of the op's own leaves at the same element
//    index (in-place calls). No other overlap exists inside a Program: no op reads a location
//    another op of the same Program writes, and no two destinations overlap. The ops of one
//    Program may therefore run in any order and concurrently; programs that depend on each
//    other are separate launches, in order.
//  - 1 <= nleaves <= kMaxLeaves, 1 <= ndsts, ncode == 2 * nleaves - 1, the code is a valid
//    postfix sequence whose stack never holds more than kMaxDepth values.
//  - Counts and offsets are in elements of Program::dtype.
// A Program holds no pointers: Buffers maps its buffer numbers to a call's addresses, so one
// compiled Program serves every call of the same shape.
#pragma once

#include <cstddef>
#include <cstdint>

#include <tutti/types.hpp>

namespace tutti::kernels::program {

inline constexpr int kMaxRanks = 16;
/// Buffer numbers: rank r's input is 2r, its output 2r + 1 (collectives). Grouped send/recv
/// programs number their buffers freely.
inline constexpr int kMaxBuffers = 2 * kMaxRanks;
inline constexpr int kMaxOps = 32;
inline constexpr int kMaxRefs = 192;
inline constexpr int kMaxCode = 256;
inline constexpr int kMaxLeaves = 16;
inline constexpr int kMaxDepth = 5;
/// Code byte: pop b, pop a, push (a op b) rounded to the dtype. Any byte below kMaxLeaves pushes
/// that leaf.
inline constexpr uint8_t kApply = 0xFF;
/// Op::flags bit: divide the result by Program::divisor before storing it (avg).
inline constexpr uint8_t kDivide = 1;

constexpr int inputBuffer(int rank) { return 2 * rank; }
constexpr int outputBuffer(int rank) { return 2 * rank + 1; }

/// Element `offset()` of buffer `buf()`, packed into 8 bytes (offsets below 2^56 elements).
struct Ref {
  uint64_t bits = 0;
  static constexpr Ref make(int buf, uint64_t offset) {
    return Ref{(static_cast<uint64_t>(buf) << 56) | (offset & ((uint64_t{1} << 56) - 1))};
  }
  constexpr int buf() const { return static_cast<int>(bits >> 56); }
  constexpr uint64_t offset() const { return bits & ((uint64_t{1} << 56) - 1); }
};

struct Op {
  uint64_t count = 0;  ///< elements
  uint16_t leaves = 0;  ///< first leaf in Program::refs
  uint16_t dsts = 0;    ///< first destination in Program::refs
  uint16_t code = 0;    ///< first code byte in Program::code
  uint8_t nleaves = 0;
  uint8_t ndsts = 0;
  uint8_t ncode = 0;
  uint8_t flags = 0;  ///< kDivide
  uint8_t pad[6] = {};
};
static_assert(sizeof(Op) == 24);

/// One launch's work. Passed to the kernel by value (kernel parameters: graph capture copies
/// it into the node), so it has a fixed size under the 4 KiB parameter limit together with
/// Buffers; a compiled call that needs more ops, refs or code is split into several Programs of
/// the same layer.
struct Program {
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;  ///< kSum, kProd, kMax or kMin (avg compiles to kSum plus kDivide)
  int32_t divisor = 1;     ///< kDivide ops divide by this (the number of ranks)
  uint8_t preMul = 0;      ///< premulsum: every leaf is multiplied by `scalar` first
  uint8_t scalar[8] = {};  ///< one element of dtype (premulsum)
  uint16_t nops = 0, nrefs = 0, ncode = 0;
  Op ops[kMaxOps];
  Ref refs[kMaxRefs];
  uint8_t code[kMaxCode] = {};
};

/// A call's addresses by buffer number (device-accessible in the executing context).
struct Buffers {
  void* ptr[kMaxBuffers] = {};
};

static_assert(sizeof(Program) + sizeof(Buffers) <= 4000, "kernel parameters must stay under 4 KiB");

/// Whether every op is a plain copy (one leaf, no division, no premultiplication): such a
/// program moves bytes and does not depend on the dtype's arithmetic.
constexpr bool copyOnly(const Program& p) {
  if (p.preMul) return false;
  for (int i = 0; i < p.nops; ++i)
    if (p.ops[i].nleaves != 1 || (p.ops[i].flags & kDivide)) return false;
  return true;
}

}  // namespace tutti::kernels::program
