// File: core/diagnostics.h
// A communicator's diagnostics around execution: the call-mismatch check's state (signing each
// call, core/call_check.h), statistics (core/stats.h), trace events (core/trace.h), hang reports
// (core/hang_report.h: asked for by SIGUSR1 or a timeout, answered from the waiting call), and
// the failure notices that tell the other ranks why this one stopped and name an earlier failure
// elsewhere in this rank's own error. The engine polls it while a call waits (ExecHooks).
// Thread-safety: the methods are for the thread executing calls, except requestReport (any
// thread) and stats(), whose table is thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/collectives.h"
#include "core/bootstrap.h"
#include "core/call_check.h"
#include "core/engine.h"
#include "core/hang_report.h"
#include "core/stats.h"

namespace tutti::detail {

class Diagnostics final : public ExecHooks, public hang::Source {
 public:
  /// What the diagnostics read of their communicator.
  struct Owner {
    int rank = 0;
    int nranks = 1;
    std::string hostname;
    bootstrap::Bootstrap* boot = nullptr;  ///< failure notices travel on it
    std::function<Status()> failed;        ///< the communicator's error state (hang reports)
    /// Writes a hang-report line per queued call not started yet, after `prefix`.
    std::function<void(const std::string& prefix)> reportQueued;
  };

  /// Starts: the check when `checkCalls` (Options::checkCalls; -1: TUTTI_CHECK_CALLS) asks for
  /// it and there are peers; the hang reports. Sets exec.hooks.
  void attach(Owner owner, int64_t checkCalls, ExecContext& exec);
  /// Opens the trace track (TUTTI_TRACE) once the communicator is ready, after calibration,
  /// whose exchanges are not the user's calls. Sets exec.roundTimes when round events are traced.
  void startTrace(ExecContext& exec);
  /// Leaves the hang reports (waiting for one in progress) and the trace.
  void detach();

  /// Call #seq of `coll` begins. With the check on, it carries the signature of `signAs` (a
  /// fused allreduce signs as one allreduce of the total count), or none when null (send/recv,
  /// which still settle carried call messages).
  void begin(const CallArgs* signAs, Coll coll, uint64_t seq, ExecContext& exec) {
    exec.check = nullptr;
    if (checkCalls_) {
      check_.sign = false;
      if (signAs)
        makeSignature(check_, signAs->coll, signAs->count, signAs->dtype, signAs->op,
                      signAs->root, ++collSeq_);
      exec.check = &check_;
    }
    curSeq_.store(seq, std::memory_order_relaxed);
    curColl_.store(static_cast<int>(coll), std::memory_order_relaxed);
    inCall_.store(true, std::memory_order_relaxed);
  }
  /// A call that began ends without running anything (recvAny refused by its transport).
  void end() { inCall_.store(false, std::memory_order_relaxed); }
  /// The call ended well: into the statistics (inline: the hot path). `timed`, `k0`: whether
  /// StatsTable::timeThis chose the call, and stats().now() at its start.
  void ok(Plan& plan, bool timed, uint64_t k0, uint64_t bytesMoved) {
    const uint64_t k1 = timed ? stats_.now() : 0;
    inCall_.store(false, std::memory_order_relaxed);
    stats_.record(plan.stats, plan.coll, plan.algorithm, plan.callBytes, bytesMoved, timed,
                  k1 - k0);
  }
  /// The call failed with `s`: returns its final error, which names an earlier failure of
  /// another rank when a notice of it came (the peer that vanished may have left because of it),
  /// or, for a timeout, appends another rank's timeout (whose text names the peer it waited
  /// for: a chain of waiting ranks leads to the one that stopped or the link that broke); and
  /// writes the hang report of a timeout (exec.report). Logged as a warning.
  Status failed(Coll coll, Status s, uint64_t seq, ExecContext& exec);
  /// After failed(): tells the other ranks why this one stopped (the notice that failed the call,
  /// or `s`), unless `aborted` (an aborted communicator's peers are told by the abort).
  void tellOthers(const Status& s, bool aborted);
  bool tracing() const { return traceTrack_ >= 0; }
  /// Trace events of a call (and its rounds) that started at `t0`.
  void trace(const CallArgs& a, const Plan& plan, const Status& s, uint64_t seq,
             uint64_t bytesMoved, std::chrono::steady_clock::time_point t0);

  StatsTable& stats() { return stats_; }
  const StatsTable& stats() const { return stats_; }

  /// ExecHooks: answers a requested report; ends the call when another rank's notice says it
  /// failed (a timeout elsewhere is kept, not fatal: each rank times out by itself).
  Status whileWaiting(const std::function<std::string()>& reportLine) override;
  /// hang::Source: the running call's line (from the executing thread, within ~0.5 s), or that
  /// none runs; then the queued calls.
  void requestReport() override;

 private:
  std::string prefix() const;

  Owner owner_;
  bool checkCalls_ = false;
  CallCheck check_;
  uint64_t collSeq_ = 0;  // collectives that carried a call signature
  StatsTable stats_;
  int traceTrack_ = -1;
  std::vector<std::pair<std::chrono::steady_clock::time_point,
                        std::chrono::steady_clock::time_point>> roundTimes_;
  std::atomic<bool> inCall_{false};
  std::atomic<bool> reportRequested_{false};
  std::atomic<uint64_t> curSeq_{0};
  std::atomic<int> curColl_{0};
  std::optional<bootstrap::wire::Notice> notice_;  // the notice that failed the running call
  std::optional<bootstrap::wire::Notice> timeoutNotice_;  // another rank timed out
};

}  // namespace tutti::detail
