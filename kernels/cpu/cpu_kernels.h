// File: kernels/cpu/cpu_kernels.h
// Internal: the CPU kernel tables, one per instruction set compiled in (Highway targets such as
// AVX3 = AVX-512, AVX2, SSE4, EMU128/SCALAR), and the runtime choice among them. kernels/reduce.h
// serves the best table; tests and tutti-kernel-bench walk all of them.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "kernels/reduce.h"

namespace tutti::kernels::cpu {

/// Every kernel of one instruction set, indexed by DataType and RedOp values. kAvg entries are
/// the kSum kernels (the caller divides once at the end). Entries are never null.
struct KernelTable {
  std::array<std::array<Reduce2Fn, kNumRedOps>, kNumDataTypes> reduce2;
  std::array<std::array<ReduceNFn, kNumRedOps>, kNumDataTypes> reduceN;
  std::array<PreMulSumFn, kNumDataTypes> preMulSum;
  std::array<ScaleFn, kNumDataTypes> scale;
  std::array<DivideFn, kNumDataTypes> divide;
};

/// One compiled instruction set that this CPU supports.
struct Target {
  const char* name;  ///< Highway's name: "AVX3", "AVX2", "SSE4", "EMU128", "SCALAR", ...
  int64_t bit;       ///< Highway's HWY_* target bit
  const KernelTable* table;
};

/// The compiled targets this CPU supports, best first (never empty). Built on first use; the
/// first call temporarily overrides Highway's process-wide target mask to reach each target's
/// table, so make it (or any kernel lookup) before other threads use Highway in this process.
/// Thread-safe afterwards.
std::span<const Target> targets();

/// The target every lookup in kernels/reduce.h serves: the best one, or the one named by
/// TUTTI_CPU_TARGET (case-insensitive Highway name; an unknown or unsupported name logs a
/// warning and keeps the best).
const Target& activeTarget();

}  // namespace tutti::kernels::cpu
