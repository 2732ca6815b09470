// File: kernels/program_host.h
// The checks every executor of a kernels::program::Program runs before it touches memory, and
// the CPU emulator: runOnHost evaluates a Program element by element with the arithmetic of
// kernels/program_eval.h, so that its results are the bits the CUDA kernels
// (kernels/cuda_program.h) produce. For tests of the clique compiler and of the kernels, and for
// executing a Program on host memory.
#pragma once

#include "base/status.h"
#include "kernels/program.h"

namespace tutti::kernels::program {

/// Checks the rules of kernels/program.h that a Program's fields can break: nops, nrefs and
/// ncode within capacity; dtype valid; op sum, prod, max or min; divisor >= 1 when an op has
/// kDivide; no flag bits other than kDivide; for every op: 1 <= nleaves <= kMaxLeaves,
/// ndsts >= 1, its leaf and destination refs inside nrefs and naming buffers below kMaxBuffers,
/// its code inside ncode, ncode == 2 * nleaves - 1, every code byte a leaf below nleaves or
/// kApply, no stack underflow, depth at most kMaxDepth and exactly one value at the end, and
/// count below 2^56. InvalidArgument naming the op, the field and the values otherwise. Overlaps
/// between ops are not checked (a Program holds no sizes). Thread-safe, no side effect.
Status validate(const Program& prog);

/// InvalidArgument when a buffer that an op with count > 0 uses (as a leaf or a destination) is
/// null in `bufs`; names the op, the ref and the buffer number. Precondition: validate(prog).
Status checkBuffers(const Program& prog, const Buffers& bufs);

/// Executes `prog` on host memory: validate, checkBuffers, then every op element by element
/// (kernels/program_eval.h's evalElement), ops in order. Buffers need no alignment. In place
/// works as the Program's rules allow (a destination equal to one of its op's leaves). Returns
/// the first check's error with nothing written. Single-threaded; reentrant; no allocation.
Status runOnHost(const Program& prog, const Buffers& bufs);

}  // namespace tutti::kernels::program
