// File: nccl/internal.h
// The state behind an ncclComm_t and the helpers shared by the NCCL entry points: result
// conversion, the last-error text, memory-kind checks, the per-communicator worker thread, and
// the pending operations a group collects.
//
// Execution model (DESIGN section 7): a host-memory operation on a blocking communicator outside
// a group runs on the calling thread and is complete when the call returns. Inside a group the
// calls are recorded per thread and run at the outermost ncclGroupEnd (group.cc). Nonblocking
// communicators (config.blocking = 0) run everything on their worker thread and return
// ncclInProgress; ncclCommGetAsyncError reports ncclInProgress until the worker is idle.
#pragma once

#include <tutti/nccl.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tutti/tutti.hpp>
#include <vector>

#include "base/status.h"
#include "base/task_queue.h"
#include "core/batch.h"

namespace tutti::nccl {

/// Marks a live ncclComm (catches use after destroy and garbage handles).
inline constexpr uint64_t kCommMagic = 0x4e43434c54555454ull;  // "TTUTLCCN"
/// First handle of ncclRedOpCreatePreMulSum operators.
inline constexpr int kFirstDynamicOp = ncclNumOps;
inline constexpr int kMaxDynamicOps = 1024;

/// The configuration fields tutti uses, read from a caller's ncclConfig_t of any version.
struct Config {
  bool blocking = true;
  int splitShare = 0;
  int shrinkShare = 0;
  std::string commName;
};

/// Reads `in` (NULL: defaults, then environment) by its size/magic/version header.
/// NCCL_COMM_BLOCKING overrides an unset blocking field. InvalidArgument for a bad magic or size.
Result<Config> readConfig(const ncclConfig_t* in, const char* api);

/// A premultiplied-sum operator: the scalar's bytes and its dtype.
struct PreMulOp {
  bool live = false;
  DataType dtype = DataType::kFloat32;
  std::array<std::byte, 8> scalar{};
};

}  // namespace tutti::nccl

namespace tutti::nccl {

/// Everything behind an ncclComm_t. Shared (shared_ptr) so that a worker still finishing an
/// uninterruptible init after ncclCommAbort keeps it alive. The owner of its device path
/// (core/batch.h): operations on device memory go there.
struct CommState final : DeviceOwner {
  int rank = 0, nranks = 1, cudaDev = -1;
  Config config;
  Communicator comm;  ///< valid once init succeeded
  std::atomic<bool> ready{false};
  std::atomic<bool> aborted{false};
  std::atomic<bool> revoked{false};
  std::atomic<bool> suspended{false};
  std::atomic<int> activeCalls{0};  ///< API calls inside this communicator right now
  std::atomic<uint64_t> shrinks{0};  ///< ncclCommShrink calls on this (parent) communicator

  mutable std::mutex mu;  // guards everything below
  /// The first error before the communicator exists (init, a cancelled init task). Once `ready`,
  /// errors go to the communicator's own error state (recordAsync), the one slot it then has.
  Status initError;
  std::string lastError;
  std::vector<PreMulOp> ops;              ///< handle kFirstDynamicOp + i
  std::map<void*, size_t> registrations;  ///< ncclCommRegister handles -> size
  /// The device executors (core/batch.h): its cliques join at init (joinDeviceClique, before
  /// `ready`). Declared before the worker, so that the worker (which runs the staged jobs) has
  /// stopped when the path is released.
  DevicePathPtr device = makeDevicePath(*this);

  /// Nonblocking communicators, multi-communicator groups, staged jobs: the communicator's own
  /// progress thread too (core/batch.h, createCommunicator), so one thread per communicator.
  const std::shared_ptr<TaskQueue> worker = std::make_shared<TaskQueue>();

  /// Stops the worker before the device path and the communicator go (it runs their work).
  ~CommState() override { worker->stop(std::chrono::hours(24), false); }

  /// Records the error of work run for this communicator outside an entry point that returns it
  /// (a nonblocking group, a staged device job, init): later calls fail with it, as in NCCL
  /// ("Attempt to use communicator before the previous operation returned ncclSuccess").
  void recordAsync(const Status& s);
  /// ncclCommGetAsyncError's answer: initError, else the communicator's error state.
  Status asyncError() const;

  // DeviceOwner (nccl/group.cc).
  int deviceRank() const override { return rank; }
  int deviceRanks() const override { return nranks; }
  bool deviceAborted() const override { return aborted.load(); }
  bool deviceReady() const override { return ready.load(); }
  void post(std::function<void()> task, const CallArgs&) override {
    worker->submit(std::move(task));
  }
  Status runHost(std::vector<BatchOp>& ops) override;
  void recordDeviceError(const Status& s, bool returned) override;
};

}  // namespace tutti::nccl

/// The opaque handle. Freed by ncclCommDestroy / ncclCommAbort.
struct ncclComm {
  uint64_t magic = tutti::nccl::kCommMagic;
  std::shared_ptr<tutti::nccl::CommState> state;
};

namespace tutti::nccl {

/// Status code -> ncclResult_t (same values; tutti's Timeout becomes ncclRemoteError).
ncclResult_t toResult(Code code);
/// Records s as this thread's (and comm's, when given) last error, logs it as an NCCL WARN, and
/// returns its ncclResult_t. Ok maps to ncclSuccess and records nothing.
ncclResult_t fail(const Status& s, CommState* comm = nullptr);
/// This thread's last error text.
const std::string& threadLastError();

/// Validates a handle: InvalidArgument for NULL or a handle that is not (or no longer) a comm.
/// A destroyed handle is recognised as long as it is among the last kRetiredHandles destroyed
/// (retireHandle); anything else that is not a pointer to a live comm is undefined, as in NCCL.
Result<CommState*> checkComm(ncclComm_t comm, const char* api);
/// Ends a handle at ncclCommDestroy/Abort: marks it dead and releases its state, but keeps its
/// few bytes in a FIFO of the last kRetiredHandles handles, so that a call on a destroyed comm
/// reads a dead mark (InvalidArgument) instead of freed memory.
void retireHandle(ncclComm_t comm);
inline constexpr size_t kRetiredHandles = 4096;
/// Fails when the communicator cannot run operations (aborted, revoked, suspended, not ready).
Status checkUsable(CommState& s, const char* api);

/// Prints the version banner once per process when NCCL_DEBUG asks for it, and switches the log
/// to NCCL's line format.
void initLogging();

/// Keeps CommState::activeCalls right for the duration of an API call.
class ActiveCall {
 public:
  explicit ActiveCall(CommState* s) : s_(s) { s_->activeCalls.fetch_add(1); }
  ~ActiveCall() { s_->activeCalls.fetch_sub(1); }
  ActiveCall(const ActiveCall&) = delete;
  ActiveCall& operator=(const ActiveCall&) = delete;

 private:
  CommState* s_;
};

}  // namespace tutti::nccl

/// Defines `ret ncclX(args)` as a weak symbol with a strong alias pncclX, both exported (NCCL's
/// PMPI-style profiling convention). Use: NCCL_API(ncclResult_t, ncclFoo, int a) { ... }
#define NCCL_API(ret, name, ...)                                                            \
  extern "C" ret name(__VA_ARGS__) __attribute__((visibility("default"), weak));            \
  extern "C" ret p##name(__VA_ARGS__) __attribute__((visibility("default"), alias(#name))); \
  extern "C" ret name(__VA_ARGS__)
