// File: nccl/staging_ranges.h
// Which bytes of its buffers an operation reads and writes on one rank, and the merging of byte
// ranges into the spans that one staging buffer each mirrors (nccl/device.cc). Plain arithmetic:
// no CUDA, so that the unit tests check it on any machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "nccl/group.h"

namespace tutti::nccl {

/// Bytes that `op` reads from its send buffer and writes to its receive buffer on `rank` of
/// `nranks` (0 for a buffer it does not use there: the receive buffer of a non-root reduce or
/// gather, the send buffer of a non-root broadcast or scatter). Shapes as in include/tutti/nccl.h.
void ioBytes(const PendingOp& op, int rank, int nranks, size_t* inBytes, size_t* outBytes);

/// A byte range [begin, end) of the address space.
struct Span {
  uintptr_t begin, end;
};

/// The spans sorted by start, with overlapping ones merged. Spans that only touch stay apart:
/// they may lie in two allocations, and one cudaMemcpyAsync cannot cross from one allocation
/// into the next (two buffers that cudaMalloc placed back to back did exactly that on an H100).
std::vector<Span> mergeSpans(std::vector<Span> spans);

}  // namespace tutti::nccl
