// File: core/batch.h
// The batch entry: the one core header the NCCL layer includes. A batch is one communicator's
// share of an NCCL group (or any list of calls issued together): collectives run in issue order,
// runs of small allreduces of one dtype and op fused into one plan made of exactly the steps of
// the separate calls (bit-identical results, one round latency for all), then every send and
// receive of the batch posted together as one round (ring exchanges and all-to-alls cannot
// deadlock). Steps count elements of the operations' dtype; point-to-point steps of several
// dtypes count bytes (a byte is then the element).
//
// Also here, for the same callers: the device path (operations on CUDA streams, handed to the
// device executors of core/device/executor.h), unique ids with a root in this process, and the
// bootstrap's point-to-point messages, which work after the data connections failed
// (ncclCommShrink agrees on a new communicator through them).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <tutti/tutti.hpp>
#include <vector>

#include "base/batch_op.h"
#include "base/collectives.h"
#include "base/task_queue.h"

namespace tutti {

/// Runs `ops` on `comm` (see the file comment). Each operation is a collective (any but kSendRecv
/// and kBarrier; `preMulScalar` allowed) or one message: coll kSendRecv with exactly one of
/// sendPeer (a send of `send`) and recvPeer (a receive into `recv`) set. Every operation runs
/// even after one failed; the first error is returned. `fusionBytes`: the largest fused allreduce
/// (bytes of the fused buffer); 0 disables fusion. Each collective must have passed
/// detail::checkCall (base/arg_check.h) already, as the NCCL layer's calls and allReduceFused do
/// before anything runs: the batch does not check them again. Messages are checked
/// (InvalidArgument for a peer out of range, InvalidUsage for a send to this rank without a
/// receive of the same size from it in the batch). Same thread-safety as the C++ API's calls.
Status runBatch(Communicator& comm, std::span<const CallArgs> ops, size_t fusionBytes);

/// The simulator's prediction of `ops` run as a batch, in microseconds: for each collective the
/// selector's choice on this communicator (Communicator::algorithmFor), for each message one
/// message over shared memory in the default link model; operations of count 0, and collectives
/// that cannot be predicted, add nothing. Local; no communication.
double predictBatchUs(const Communicator& comm, std::span<const CallArgs> ops);

/// TUTTI_FUSION_BYTES (default 64 KiB): the largest fused buffer, and so the largest allreduce
/// that is fused; 0 disables fusion.
size_t fusionBytes();

/// Communicator::create whose progress thread is `worker`, the caller's own task queue: one
/// thread per communicator runs the caller's queued work and the communicator's. The caller
/// stops `worker` before it lets go of the communicator. Errors as Communicator::create.
Result<Communicator> createCommunicator(const UniqueId& id, int rank, int nranks,
                                        std::shared_ptr<TaskQueue> worker);

/// Records `s` (not ok) in the communicator's error state, the one error slot it has: the first
/// error is kept, Communicator::asyncError reports it, and later calls fail with it. For work the
/// caller ran for the communicator outside its calls (a nonblocking NCCL group on the worker, a
/// staged device job). Thread-safe.
void recordAsyncError(Communicator& comm, const Status& s);

// ---- The device path ----

/// Whether a CUDA device is usable in this process (cached after the first call; false in builds
/// without CUDA).
bool cudaDevicePresent();
/// Waits for the work enqueued on `stream` (a cudaStream_t) so far; ok for nullptr, without a
/// device or without CUDA. UnhandledCudaError naming `api` when CUDA fails.
Status syncStream(void* stream, const char* api);
/// Sets op's memory kinds (BatchOp::sendDevice ... recvReachable) from the buffers it uses on
/// `rank` of `nranks` (one cudaPointerGetAttributes per buffer; all false without CUDA).
void findMemoryKinds(BatchOp& op, int rank, int nranks);

/// What a communicator's device path needs of its owner (the NCCL layer's communicator state).
/// Called from the thread that submits, from the owner's worker, and from CUDA's host-function
/// thread; the owner outlives its device path.
class DeviceOwner {
 public:
  virtual ~DeviceOwner() = default;
  /// This rank and the number of ranks as the owner knows them now (a communicator being split
  /// learns them when its split runs).
  virtual int deviceRank() const = 0;
  virtual int deviceRanks() const = 0;
  /// True once the owner is aborted: waits give up, staged jobs not yet reached fail.
  virtual bool deviceAborted() const = 0;
  /// True once the owner's communicator can run operations (its init finished).
  virtual bool deviceReady() const = 0;
  /// Runs `task` on the owner's worker thread, in submission order. `what`: the batch's first
  /// device operation, for hang reports (its preMulScalar is null).
  virtual void post(std::function<void()> task, const CallArgs& what) = 0;
  /// Runs a batch on host memory on the worker: the host work of a staged job (tasks included).
  virtual Status runHost(std::vector<BatchOp>& ops) = 0;
  /// Records a device executor's error as the owner's asynchronous error. `returned`: the call
  /// that submitted the work also returns `s` (a clique's launch error), so its caller reports
  /// it; false for a staged job that failed after its call had returned.
  virtual void recordDeviceError(const Status& s, bool returned) = 0;
};

/// A communicator's device path: its device executors (core/device/executor.h). Opaque here.
class DevicePath;

struct DevicePathDelete {
  void operator()(DevicePath* p) const;  // defined where DevicePath is complete
};
using DevicePathPtr = std::unique_ptr<DevicePath, DevicePathDelete>;

/// A device path for `owner`, made with the owner, before its communicator exists (a staged job
/// may run the communicator's init).
DevicePathPtr makeDevicePath(DeviceOwner& owner);

/// At the end of the owner's init (collective: every rank calls it): exchanges each rank's
/// process, host and GPU (`cudaDevice`, -1 for none). When all ranks are threads of this process
/// on one GPU, joins them to one device clique; when every rank is a process of its own on one
/// GPU, to one process clique. Otherwise, with TUTTI_DEVICE_PATH=staged, or without a GPU, device
/// memory takes the staged executor. Errors of the exchange fail the init; a clique that cannot
/// be formed is logged and left out (on every rank).
Status joinDeviceClique(DevicePath& path, Communicator& comm, int cudaDevice);

/// One communicator's share of a submission: its operations in issue order, at least one of
/// them on device memory. `keepAlive` holds the owner for staged jobs still in flight.
struct DeviceBatch {
  DevicePath* path = nullptr;
  std::shared_ptr<void> keepAlive;
  std::vector<BatchOp> ops;
};

/// Submits device batches of several communicators (each at most once) and returns without
/// waiting for their results. A batch of a communicator in a clique (blocking communicators
/// only, no tasks in it) gives its device operations to the clique, all of one clique's batches
/// together, and keeps its host-memory operations in `ops` for the caller to run; any other batch
/// becomes one staged job on the stream of its first device operation (tasks and host operations
/// included; `ops` is left empty). Errors (the first one; every batch is submitted): those of the
/// cliques (core/device/clique.h, process_clique.h) and of the staged executor
/// (core/device/staged.h); errors that come from a launch rather than the arguments are also
/// recorded with the owner (DeviceOwner::recordError).
Status submitDevice(std::span<DeviceBatch> batches, bool blocking);

/// A window (ncclCommWindowRegister) of this rank's: collective over the communicator, in the
/// same order on every rank. With the peer executor over ranks that are processes of their own,
/// the ranks map each other's windows, and calls whose buffers lie in windows on every rank
/// read their peers' buffers in place (core/device/peer.h, sharePeerWindow); otherwise nothing
/// happens. Errors: the allgather's.
Status shareDeviceWindow(DevicePath& path, Communicator& comm, void* buff, size_t bytes);
/// Whether the path shares windows (shareDeviceWindow does something): false for a path whose
/// ranks do not run the peer executor.
bool peerWindows(const DevicePath& path);
/// The window at `buff` goes: every process unmaps it before this returns on any rank.
Status unshareDeviceWindow(DevicePath& path, Communicator& comm, void* buff);

/// The owner is destroyed (`abort` false) or aborted: fails the clique waits of its peers with
/// `why`; an aborted process clique stops its peers too.
void failDevicePath(DevicePath& path, const Status& why, bool abort);

/// Failures of device work that ran after its call returned (the peer executor's kernels):
/// recorded with the owner (DeviceOwner::recordDeviceError) and returned; ok when there are none.
/// For ncclCommGetAsyncError. Thread-safe.
Status pollDevicePath(DevicePath& path);

// ---- Unique ids ----

/// Whether a unique id was made by this library (InvalidArgument with the reason otherwise).
Status checkUniqueId(const UniqueId& id);
/// An id of the root at `hostPort` ("host:port") with `secret`; no root is started.
Result<UniqueId> uniqueIdAt(const std::string& hostPort, uint64_t secret);
/// Starts the root of `id` in this process (bound at the id's address). Errors: those of binding.
Status startRootOf(const UniqueId& id);
/// An id with a fresh secret and a root started in this process, bound at loopback when
/// `allLocal` and no socket interface is named, else at the named (or default) interface.
Result<UniqueId> freshUniqueId(bool allLocal);
/// Whether the launcher's environment says every rank runs on this host.
bool launcherSaysLocal();
/// How long a rendezvous waits for its ranks: TUTTI_BOOTSTRAP_TIMEOUT seconds, default 120.
std::chrono::milliseconds defaultBootstrapTimeout();

/// Sends `body` to `peer`'s bootstrap listener under `tag` (a fresh connection; works when the
/// data connections or other ranks are gone). Errors: Timeout, RemoteError naming the peer.
Status bootstrapSend(Communicator& comm, int peer, uint64_t tag, const std::string& body,
                     std::chrono::milliseconds timeout);
/// Receives the message `peer` sent under `tag` with bootstrapSend.
Result<std::string> bootstrapRecv(Communicator& comm, int peer, uint64_t tag,
                                  std::chrono::milliseconds timeout);

}  // namespace tutti
