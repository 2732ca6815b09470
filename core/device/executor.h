// File: core/device/executor.h
// The executor seam: what runs a batch of operations (base/batch_op.h) whose buffers are CUDA
// device memory, ordered on the callers' streams. A communicator's device path (DevicePath, set
// up by core/batch.h's makeDevicePath and joinDeviceClique) holds one staged executor and, when
// its ranks share one GPU, one clique executor; submitDevice (core/batch.h) picks the executor
// per batch. A new executor (a per-rank device interpreter of the schedule IR, say) implements
// this interface and is chosen in DevicePath: the layers above do not change.
//
// Today's executors:
//   staged          the host engine on pinned copies of the buffers (core/device/staged.h); any
//                   layout; one rank's plain collectives become device copies on the stream
//   clique          ranks that are threads of one process on one GPU: one kernel per collective
//                   for all of them (core/device/clique.h)
//   process-clique  ranks that are processes of their own on one GPU (core/device/process_clique.h)
//   peer            a kernel per rank, exchanging data with its peers' kernels through FIFOs in
//                   device memory (core/device/peer.h; TUTTI_DEVICE_PATH=peer, threads of one
//                   process)
// The host executor (RoundRunner, core/engine.h) runs plans on host memory; the staged executor
// reaches it through DeviceOwner::runHost.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "base/batch_op.h"
#include "base/status.h"
#include "core/batch.h"

namespace tutti::device {

class Clique;
class ProcessClique;

/// One rank's batch as an executor takes it: its owner, its operations in issue order, and what
/// keeps the owner alive while a staged job is in flight.
struct RankBatch {
  DeviceOwner* owner = nullptr;
  std::vector<BatchOp>* ops = nullptr;
  std::shared_ptr<void> keepAlive;
};

class Executor {
 public:
  virtual ~Executor() = default;
  /// "staged", "clique", "process-clique", "peer": for messages.
  virtual const char* name() const = 0;
  /// Enqueues the batches on their streams and returns without waiting for their results
  /// (a clique may wait for the other ranks' calls, as its header says). The batches are the
  /// ranks this thread submits together (a clique takes several; the others one at a time).
  /// The executor may consume the operations (`ops` is then unspecified).
  virtual Status submit(std::span<const RankBatch> batches) = 0;
  /// A rank of this executor is destroyed (`abort` false) or aborted: waits of its peers fail
  /// with `why`.
  virtual void fail(const Status& why, bool abort) = 0;
  /// The failure of work submitted earlier that ran on the device after its call returned (a
  /// peer kernel that timed out or was aborted), once known; ok otherwise. Polled by
  /// ncclCommGetAsyncError. Thread-safe.
  virtual Status poll() { return Status::ok(); }
};

/// The staged executor (core/device/staged.h): one job per batch, whose host work is the owner's
/// runHost on the worker. One rank's batch of plain collectives on one stream is a device copy
/// per out-of-place call instead.
std::unique_ptr<Executor> makeStagedExecutor();
/// The executors of a thread clique and of a process clique.
std::unique_ptr<Executor> makeCliqueExecutor(std::shared_ptr<Clique> clique);
std::unique_ptr<Executor> makeProcessCliqueExecutor(std::unique_ptr<ProcessClique> clique);

}  // namespace tutti::device
