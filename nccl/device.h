// File: nccl/device.h
// Operations on CUDA device memory, stream-ordered. A batch of operations of one communicator
// that touches device memory (one call outside a group, or one communicator's share of a group)
// becomes one staged job of core's staged executor (core/device/staged.h: pinned copies on the
// caller's stream, the batch run by the host engine on the communicator's worker, every
// algorithm and transport of the host path, fusion and grouped send/recv included).
//
// Errors: a failed job (a dead peer, a timeout, an abort) writes "failed", so the stream never
// hangs on it; the error is the communicator's asynchronous error (ncclCommGetAsyncError) and the
// outputs are undefined. ncclCommAbort fails jobs whose stream has not reached them yet.
//
// One rank is the exception: its batch of plain collectives on one stream is a device copy per
// out-of-place call (cudaMemcpyAsync on the stream), with no staging and no proxy.
//
// Ranks that are threads of one process on one GPU take the device clique instead
// (core/device/clique.h: one kernel per collective for all of them, no host copies), unless
// TUTTI_DEVICE_PATH=staged. Every other layout (ranks in several processes, on several GPUs or
// hosts) takes this staged path, whose bandwidth is bound by the host copies and the host engine
// (docs/GPU.md gives the numbers).
#pragma once

#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "nccl/group.h"
#include "nccl/staging_ranges.h"

namespace tutti::nccl {

using device::MemoryKind;  // core/device/staged.h
using device::memoryKind;

/// At the end of a communicator's init (collective: every rank calls it): exchanges each rank's
/// process, host and GPU. When all ranks are threads of this process on one GPU, joins them to
/// one device clique (CommState::clique); when every rank is a process of its own on one GPU, to
/// one process clique (CommState::procClique). Otherwise, or with TUTTI_DEVICE_PATH=staged, or
/// without a GPU, leaves both null (device memory then takes the staged path). Errors of the
/// exchange fail the init; a clique that cannot be formed is logged and left out (on every rank).
Status initDevicePath(CommState& s);

/// Submits one batch of device operations per communicator given (all of one clique, each
/// communicator at most once, each batch non-empty and made of collectives and send/recv only)
/// to the clique: see core/device/clique.h for what it waits for. An error is recorded as each
/// communicator's asynchronous error when it comes from the launch rather than the arguments.
Status submitToClique(std::span<std::pair<std::shared_ptr<CommState>, std::vector<PendingOp>>> batches);

/// Submits one communicator's batch of device operations (collectives and send/recv only) to its
/// process clique (core/device/process_clique.h). Errors are recorded as the communicator's
/// asynchronous error too.
Status submitToProcessClique(CommState& s, const std::vector<PendingOp>& ops);

/// Enqueues `ops` (one communicator's batch; at least one has device() true) as one staged job on
/// the stream of its first device operation, and returns without waiting. The communicator must
/// be usable. Errors (nothing is left enqueued unless stated): UnhandledCudaError when a CUDA call
/// fails (an enqueue failure after the copies in leaves the job to fail on the stream);
/// SystemError when pinned memory cannot be allocated; InvalidUsage without CUDA.
/// Thread-safe per communicator as NCCL is: one thread issues on a communicator at a time.
Status enqueueDevice(const std::shared_ptr<CommState>& comm, std::vector<PendingOp> ops);

}  // namespace tutti::nccl
