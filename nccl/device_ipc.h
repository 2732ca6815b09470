// File: nccl/device_ipc.h
// Collectives of ranks that share one GPU, in device memory: each rank's worker (the proxy of
// nccl/device.h) copies its input into a device staging buffer that every other rank has mapped
// (CUDA IPC between processes, the plain pointer between threads of one process), the ranks
// meet at a host barrier, and each then builds its output straight from the peers' staging with
// the CUDA kernels of kernels/cuda_reduce.h (reductions in rank order, so every rank gets the
// same bits) and device copies; a second barrier frees the staging for the next chunk. Buffers
// larger than the staging run in chunks. Nothing crosses PCIe: compare the staged path of
// nccl/device.h, which moves every byte through host memory twice.
//
// The stream side is that of every staged job (a host function hands the batch to the worker;
// ncclDevKernel_ProxyWait holds the stream until it is done), so stream order, graph capture and
// abort behave the same.
//
// Which ranks use it: every rank of a communicator whose ranks all run on one GPU (the same
// device UUID, found at init by exchangeDeviceInfo), for batches made only of collectives (no
// send/recv, no communicator tasks), unless TUTTI_DEVICE_IPC=0. As NCCL requires, every rank
// passes device memory to such a call: a rank that passes host memory while its peers pass
// device memory takes another path, and the call fails with a timeout (TUTTI_TIMEOUT) or waits.
#pragma once

#include <memory>
#include <vector>

#include "nccl/group.h"

namespace tutti::nccl {

/// Collective, at communicator init on every rank: gathers each rank's GPU UUID (zeros without
/// a device) and process id, and sets CommState::deviceLocal when every rank has the same GPU.
/// Then, for such a communicator of 2 or more ranks (unless TUTTI_DEVICE_IPC=0), allocates the
/// rank's device staging (TUTTI_DEVICE_STAGING_BYTES, default 64 MiB), publishes its CUDA IPC
/// handle and maps the peers' (CommState::ipc). Errors: those of the host allgathers;
/// UnhandledCudaError when an allocation or a mapping fails.
Status exchangeDeviceInfo(CommState& s);

/// Whether the batch runs on the shared-GPU path (see above). The answer depends only on what
/// is the same on every rank of a correct program: the communicator, the knob and the calls.
bool ipcEligible(const CommState& s, const std::vector<PendingOp>& ops);

/// Runs the batch (device pointers, in issue order) on the worker thread; it allocates nothing.
/// Errors: UnhandledCudaError for a failed CUDA call, and those of the host barriers (a dead
/// peer, a timeout, an abort).
Status runIpcBatch(CommState& s, const std::vector<PendingOp>& ops);

}  // namespace tutti::nccl
