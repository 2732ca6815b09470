// File: core/comm.h
// CommImpl: the state behind tutti::Communicator, in parts: its peers (PeerSet, core/peers.h:
// the bootstrap ring, transports and one connection per peer), its plans (PlanCache,
// core/plan_cache.h), its progress thread (TaskQueue: asynchronous calls and staged device jobs
// in issue order), selection (Selection, core/selection.h) and calibration (core/calibrate.cc),
// diagnostics (Diagnostics, core/diagnostics.h: the call check, stats, trace, hang reports,
// failure notices) and the error state. The entry points: run (blocking), runAsync,
// runOnStream (core/stream_calls.cc), and runChecked / runPlan / planFor for the batch entry
// (core/batch.cc).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include "algorithms/selector.h"
#include "base/arg_check.h"
#include "base/task_queue.h"
#include "core/batch.h"
#include "core/bootstrap.h"
#include "core/diagnostics.h"
#include "core/engine.h"
#include "core/peers.h"
#include "core/plan_cache.h"
#include "core/selection.h"
#include "core/stats.h"
#include "transports/transport.h"
#include <tutti/tutti.hpp>

namespace tutti::detail {

/// CallArgs::api of calibration's own exchanges at init (core/calibrate.cc).
inline constexpr const char* kCalibrateApi = "calibrate";

class WorkState {
 public:
  void finish(Status s);
  Status wait();
  bool done() const;
  Status status() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
};

class CommImpl final : public DeviceOwner {
 public:
  /// `progress`: the progress thread's queue, shared with the layer above (the NCCL layer's
  /// worker); nullptr makes one.
  static Result<std::shared_ptr<CommImpl>> create(const bootstrap::IdData& id, int rank,
                                                  int nranks, const Options& options,
                                                  std::shared_ptr<TaskQueue> progress = nullptr);
  ~CommImpl();

  int rank() const { return rank_; }
  int size() const { return nranks_; }
  std::string transportTo(int peer) const;

  /// Checks the arguments (no side effect on error), then runs the call on this thread after any
  /// queued asynchronous work.
  Status run(const CallArgs& args);
  /// run() for arguments that already passed checkCall (the batch entry's callers check every
  /// call before anything runs): the same execution, without checking them again.
  Status runChecked(const CallArgs& args);
  /// A call on a CUDA stream (Communicator's stream overloads; core/stream_calls.cc): checked,
  /// then staged on the stream when a buffer is device memory (core/device/staged.h: the host
  /// engine runs it on the progress thread), else run after the stream's earlier work.
  Status runOnStream(const CallArgs& args, void* stream);
  /// Checks the arguments, then queues the call for the progress thread.
  Result<Work> runAsync(const CallArgs& args);
  /// Communicator::recvAny: `args` is a receive from peers[0] (the peers were checked); checks
  /// the rest, waits for the first of `peers` with an incoming message (waitForIncoming), then
  /// receives it from that peer as run() would. Returns the peer.
  Result<int> recvAny(CallArgs args, std::span<const int> peers);

  /// Runs a plan the caller built (the NCCL layer's grouped send/recv, whose steps address user
  /// buffers by byte offset from `input`/`output`) on this thread after any queued asynchronous
  /// work, under the same rules as run(): error state, abort, sequence number. No scratch.
  /// With the call check on, the plan carries the signature of `signAs` (a fused allreduce signs
  /// as one allreduce of the total count); without it (grouped send/recv) it is not checked.
  Status runPlan(Plan& plan, const void* input, void* output, const CallArgs* signAs = nullptr);
  /// The plan run() would execute for these (already checked) arguments, built and cached on
  /// first use: the NCCL layer fuses several calls into one plan made of exactly the steps of the
  /// unfused calls, so that fusion changes no result bit. With `forwardRounds`, the plan's
  /// forwardRounds are filled as well (first time: one schedule build per rank).
  Result<const Plan*> planFor(const CallArgs& args, bool inPlace, bool forwardRounds = false);
  /// The batch entry's cache of fused plans (PlanCache::findFused, insertFused), under the
  /// execution mutex; cleared with the plans when an override changes.
  bool findFused(const PlanCache::FusedKey& key, std::shared_ptr<Plan>* plan);
  void storeFused(PlanCache::FusedKey key, std::shared_ptr<Plan> plan);

  void abort();
  Status asyncError() const;
  /// Records `s` as the error state (the first one is kept; later calls fail). Thread-safe.
  void recordError(const Status& s);
  /// The bootstrap (its point-to-point messages work after a failure: ncclCommShrink).
  bootstrap::Bootstrap& bootstrapRing() { return net_->boot(); }
  /// Fused inputs and outputs and premultiplied inputs of batches (core/batch.cc); grows only.
  /// Used by the thread running a batch (one at a time, as every call on a communicator).
  PageBuffer& batchStaging() { return plans_.batchStaging(); }
  Status setAlgorithm(Coll coll, const std::string& name);
  Result<std::string> loadSchedule(const std::string& path);
  /// The selector's decision (core/selection.h) for Communicator::algorithmFor, after checking
  /// the arguments.
  Result<algo::Decision> explain(Coll coll, size_t count, DataType dtype, RedOp op, int root,
                                 bool inPlace);

  std::vector<CollStats> stats() const { return diag_.stats().snapshot(); }
  void resetStats() { diag_.stats().reset(); }
  /// Writes this communicator's hang-report lines (from any thread).
  void requestReport() { diag_.requestReport(); }

  // DeviceOwner (core/stream_calls.cc): stream calls on device memory run on the staged
  // executor, whose host work runs on the progress thread like an asynchronous call.
  int deviceRank() const override { return rank_; }
  int deviceRanks() const override { return nranks_; }
  bool deviceAborted() const override { return abort_.load() || closing_.load(); }
  bool deviceReady() const override { return true; }
  void post(std::function<void()> task, const CallArgs& what) override {
    queueTask(what, std::move(task));
  }
  Status runHost(std::vector<BatchOp>& ops) override;
  void recordDeviceError(const Status& s, bool) override { recordError(s); }

 private:
  CommImpl() = default;
  Status init(const bootstrap::IdData& id, const Options& options);
  Status check(const CallArgs& a, bool* inPlace) const;
  Status execute(const CallArgs& a, bool inPlace);
  Result<Plan*> plan(const CallArgs& a, bool inPlace);
  /// This rank's view of call `a` for the algorithms, with the selection's host map.
  algo::CollShape shapeOf(const CallArgs& a, bool inPlace) const;
  /// Waits for the queued tasks, unless called from one (a task runs after those before it).
  void drainQueue() {
    if (!progress_->onThread()) progress_->drain();
  }
  /// Queues `task` for the progress thread; `a` names it in hang reports.
  void queueTask(const CallArgs& a, std::function<void()> task);
  void selectAlgorithm(Coll coll, const std::string& name);  // "" = default
  /// TUTTI_CALIBRATE: fits model_ by short exchanges, or loads and checks the per-host cache
  /// (core/calibrate.cc). hostOfRank: a host index per rank. Collective over all ranks.
  Status calibrate(const std::vector<int>& hostOfRank);
  /// Half round trip (us) of `bytes` to and from `peer`, the smallest mean of three batches of
  /// `iters`; the leader sends first.
  Result<double> calibrationPingPong(int peer, bool leader, size_t bytes, int iters);
  /// Mean time (us, the smallest of three batches' means) of an exchange: this rank and
  /// `peer` send each other `bytes` bytes at once (one sendRecv each).
  Result<double> calibrationExchange(int peer, size_t bytes, int iters);
  Status failed() const;
  /// No error recorded and not aborted: two atomic loads, for the hot path.
  bool healthy() const {
    return !hasError_.load(std::memory_order_acquire) && !abort_.load(std::memory_order_relaxed);
  }
  /// A call that executed ended with `s` (not ok, or traced): the trace events, and on failure
  /// the diagnostics' final error (core/diagnostics.h), the error state and the notice to the
  /// other ranks. Returns the call's final Status. timed, k0: as Diagnostics::ok; t0: the
  /// call's start, read only when tracing.
  Status afterCall(const CallArgs& a, Plan& plan, Status s, bool timed, uint64_t k0,
                   std::chrono::steady_clock::time_point t0);
  /// A call of `coll` that executed failed with `s`: its final error (Diagnostics::failed)
  /// becomes the error state and is told to the other ranks. Returns it.
  Status callFailed(Coll coll, Status s);
  /// Hang-report lines of the queued calls not started yet.
  void reportQueued(const std::string& prefix);

  int rank_ = 0, nranks_ = 1;
  std::unique_ptr<PeerSet> net_;  // bootstrap, identities, transports, connections
  ExecContext exec_;
  std::atomic<bool> abort_{false};
  uint64_t seq_ = 0;  // collectives issued (the API's sequence number)
  size_t anyTurn_ = 0;  // recvAny's scan starts here (peers take turns)

  PlanCache plans_;  // cleared whenever an override changes (execMu_)
  // Stream-ordered calls on device memory (core/stream_calls.cc): created at the first one.
  // Destroyed after the progress thread has ended (it runs the staged jobs).
  DevicePathPtr device_;
  std::atomic<bool> closing_{false};  // the destructor runs: staged jobs still waiting give up

  Selection selection_;  // the link model, overrides and decisions (core/selection.h)
  PageBuffer calibBuf_;  // calibration's buffers (init only; freed after)

  mutable std::mutex errMu_;
  Status firstError_;
  std::atomic<bool> hasError_{false};  // firstError_ is set (read without errMu_ on every call)

  CallArgs lastChecked_{.api = nullptr};  // the last blocking call that passed check() (execMu_)
  bool lastInPlace_ = false;
  std::mutex execMu_;  // one plan executes at a time
  // The progress thread's queue (asynchronous calls, staged device jobs; the NCCL layer's
  // worker tasks when it shares it): run() skips drainQueue() while pending() is 0. Stopped first
  // in the destructor.
  std::shared_ptr<TaskQueue> progress_;
  bool ownsProgress_ = true;
  std::mutex argsMu_;
  std::deque<CallArgs> queuedArgs_;  // the queued tasks' calls, not yet started (hang reports)

  Diagnostics diag_;  // check, stats, trace, hang reports, failure notices
};

/// The implementation behind a Communicator, for core's own entries that are not in the public
/// header (core/batch.h). Null for a moved-from communicator.
struct CommAccess {
  static CommImpl* get(const Communicator& c) { return c.impl_.get(); }
  static Communicator wrap(std::shared_ptr<CommImpl> impl) { return Communicator(std::move(impl)); }
};

}  // namespace tutti::detail
