// File: kernels/cuda/program_launch.h
// Internal interface between the host side of kernels/cuda_program.h (program_launch.cc,
// compiled as C++) and the Program kernels' launchers in the .cu files: plain types only, CUDA
// errors as the int value of cudaError_t. Two kernel families: the grid kernels take the whole
// Program and plan it in shared memory (any size); the small kernels take a SmallProgram, the
// compact form the launcher builds for programs of few ops (one unit of work per thread).
#pragma once

#include <cstdint>

#include "kernels/program.h"

namespace tutti::kernels::cuda::prog {

/// Threads per block of every Program kernel (the small kernels: at most).
inline constexpr int kThreads = 512;

/// Capacity of the compact form: ops with work, and leaf plus destination addresses over them.
/// 16 ops and 96 addresses hold an allreduce of up to 16 ranks (one op), a reducescatter or an
/// allgather of 8 (8 ops of 9 addresses), a broadcast, a reduce, an alltoall of 4; the
/// parameter block is 1168 bytes instead of the Program's and Buffers' 3.9 KiB.
inline constexpr int kSmallOps = 16;
inline constexpr int kSmallAddrs = 96;

/// One op of a SmallProgram, resolved on the host (program_eval.h's layouts). Its units are
/// `packs` (16-byte packs, or units of `unitBytes` for the copy kernel), then `head` single
/// elements (bytes for the copy kernel), then `tail`; a thread takes one unit.
struct SmallOp {
  uint32_t head = 0;       ///< elements (copy: bytes) before the packs, or all off the pack path
  uint32_t packs = 0;      ///< 16-byte packs (copy: units of unitBytes)
  uint32_t tail = 0;       ///< elements (copy: bytes) after the packs
  uint32_t applyMask = 0;  ///< bit c: code byte c is kApply (typed kernels)
  uint8_t leaf = 0;        ///< addr slot of the first push's leaf (code order); copy: the source
  uint8_t dsts = 0;        ///< addr slot of the first destination
  uint8_t nleaves = 0;
  uint8_t ndsts = 0;
  uint8_t ncode = 0;
  uint8_t divide = 0;     ///< the op has kDivide
  uint8_t unitBytes = 0;  ///< copy kernel: 1, 2, 4, 8 or 16
  uint8_t pad = 0;
};
static_assert(sizeof(SmallOp) == 24);

/// The small kernels' parameter block: element 0 of every ref an op uses, as an address, and
/// the ops that have work (count > 0), in program order.
struct SmallProgram {
  uintptr_t addr[kSmallAddrs] = {};
  SmallOp ops[kSmallOps] = {};
  uint8_t scalar[8] = {};  ///< Program::scalar
  int32_t divisor = 1;     ///< Program::divisor
  uint8_t preMul = 0;      ///< Program::preMul
  uint8_t nops = 0;
};
static_assert(sizeof(SmallProgram) <= 1200, "the compact form must stay small");

/// How a SmallProgram is launched: a grid of blocksPerOp x nops blocks of `threads` threads;
/// block (x, y) takes units [x * threads, (x + 1) * threads) of op y.
struct SmallLaunch {
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int blocksPerOp = 1;
  int threads = kThreads;
  void* stream = nullptr;
};

/// Launch one Program kernel with `blocks` blocks of kThreads on `stream` and return
/// cudaGetLastError(). Preconditions: validate(prog), checkBuffers, alignment checked.
/// ncclDevKernel_ProgramCopy, any dtype (program.cu).
int launchProgramCopy(const program::Program& prog, const program::Buffers& bufs, int blocks,
                      void* stream);
/// ncclDevKernel_Program<T, Op> for float32 and float64 (program.cu).
int launchProgramFloat(const program::Program& prog, const program::Buffers& bufs, int blocks,
                       void* stream);
/// The six integer types (program_int.cu).
int launchProgramInt(const program::Program& prog, const program::Buffers& bufs, int blocks,
                     void* stream);
/// float16, bfloat16, fp8 e4m3 and e5m2 (program_narrow.cu).
int launchProgramNarrow(const program::Program& prog, const program::Buffers& bufs, int blocks,
                        void* stream);

/// The small kernels, same contract: ncclDevKernel_ProgramCopySmall (program.cu) for copy-only
/// programs, ncclDevKernel_ProgramSmall<T, Op> per family (program.cu, program_int.cu,
/// program_narrow.cu). Precondition: every op of `sp` has at most blocksPerOp * threads units.
int launchSmallCopy(const SmallProgram& sp, const SmallLaunch& l);
int launchSmallFloat(const SmallProgram& sp, const SmallLaunch& l);
int launchSmallInt(const SmallProgram& sp, const SmallLaunch& l);
int launchSmallNarrow(const SmallProgram& sp, const SmallLaunch& l);

}  // namespace tutti::kernels::cuda::prog
