// File: nccl/staging_ranges.h
// Which bytes of its buffers an operation reads and writes on one rank, and the merging of byte
// ranges into the spans that one staging buffer each mirrors (core/device/staged.h). Plain arithmetic:
// no CUDA, so that the unit tests check it on any machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/device/staged.h"
#include "nccl/group.h"

namespace tutti::nccl {

/// Bytes that `op` reads from its send buffer and writes to its receive buffer on `rank` of
/// `nranks` (0 for a buffer it does not use there: the receive buffer of a non-root reduce or
/// gather, the send buffer of a non-root broadcast or scatter). Shapes as in include/tutti/nccl.h.
void ioBytes(const PendingOp& op, int rank, int nranks, size_t* inBytes, size_t* outBytes);

using device::mergeSpans;  // core/device/staged.h
using device::Span;

}  // namespace tutti::nccl
