// File: nccl/group.h
// Recorded operations and the group layer: what a collective or send/recv call leaves behind,
// how the outermost ncclGroupEnd runs it (per communicator: collectives in issue order with
// small-allreduce fusion, then every send and receive together; several communicators
// concurrently), and the entry used by calls made outside a group.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/batch.h"
#include "nccl/internal.h"

namespace tutti::nccl {

/// One recorded operation on one communicator.
struct PendingOp {
  enum class Kind { kColl, kSend, kRecv, kTask } kind = Kind::kColl;
  Coll coll = Coll::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;  ///< the reduction after any premultiplication
  bool preMul = false;     ///< premultiply the input by `scalar` first
  std::array<std::byte, 8> scalar{};
  int root = 0;
  int peer = -1;  ///< kSend / kRecv
  cudaStream_t stream = nullptr;
  /// The send / receive buffer this rank uses is CUDA device memory (found once, at the call).
  bool sendDevice = false, recvDevice = false;
  /// The GPU can read / write that buffer at its address (device, managed or mapped pinned host
  /// memory): what the device clique needs (nccl/device.h).
  bool sendReachable = false, recvReachable = false;
  /// Runs on the device path (a device clique, or staged on its stream: nccl/device.h) rather
  /// than on the host path.
  bool device() const { return sendDevice || recvDevice; }
  const char* api = "";
  /// kTask: communicator management run in order with the operations (init, split, finalize).
  std::function<Status()> task;
};

/// The operation as core's batch entry takes it (core/batch.h); kColl, kSend or kRecv.
CallArgs toCallArgs(const PendingOp& op);

/// Submits `op` on `comm`: recorded when this thread is inside a group, else run now (blocking
/// communicator: on this thread; nonblocking: on its worker, returning ncclInProgress).
ncclResult_t submit(const std::shared_ptr<CommState>& comm, PendingOp op);

/// Whether this thread is inside ncclGroupStart/End.
bool inGroup();
/// Records an argument error of a call inside the group (ncclGroupEnd then returns it).
void noteGroupError(ncclResult_t r);

/// Runs one communicator's operations in order (what a group does per communicator). Used by the
/// group layer and by tests of fusion. `fusionBytes` 0 disables fusion.
Status runBatch(CommState& comm, std::vector<PendingOp>& ops, size_t fusionBytes);

/// Sum over the group's collectives of the simulator's prediction (microseconds).
double predictGroup(const std::vector<std::pair<CommState*, PendingOp>>& ops);

}  // namespace tutti::nccl
