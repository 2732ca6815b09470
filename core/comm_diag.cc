// File: core/comm_diag.cc
// CommImpl's diagnostics around execution: the call-mismatch check's setup, statistics, trace
// events, hang reports, and failure notices that tell the other ranks why this one stopped.
#include <unistd.h>

#include <thread>

#include "base/env.h"
#include "base/log.h"
#include "core/comm.h"
#include "core/trace.h"

namespace tutti::detail {

namespace {

// Default off: it costs 3-7% of an 8-byte allreduce over shm, over the 2% budget (docs/errors.md
// has the numbers and how to re-measure them with tutti-check-cost).
TUTTI_PARAM_INT(kCheckCalls, "TUTTI_CHECK_CALLS", nullptr, "CORE", 0,
                "1: detect ranks that call different collectives/counts/dtypes/ops/roots "
                "(InvalidUsage naming them); costs a few percent of a small collective's latency");

using Clock = std::chrono::steady_clock;
using bootstrap::wire::Notice;

// How long a rank that saw a peer vanish waits for a notice naming an earlier failure elsewhere
// (the peer may have left because of it), so that every survivor names the first failure.
constexpr auto kNoticeGrace = std::chrono::milliseconds(300);

std::string callText(const CallArgs& a) {
  return fmt::format("{}(count={}, dtype={}, op={}, root={})", collName(a.coll), a.count,
                     dataTypeName(a.dtype), redOpName(a.op), a.root);
}

}  // namespace

void CommImpl::initDiagnostics(const Options& options) {
  const int64_t want = options.checkCalls >= 0 ? options.checkCalls : kCheckCalls.get();
  checkCalls_ = want != 0 && nranks_ > 1;
  check_.next = (rank_ + 1) % nranks_;
  check_.prev = (rank_ + nranks_ - 1) % nranks_;
  exec_.hooks = this;
  traceTrack_ = trace::attach(rank_, nranks_, net_->peers()[rank_].hostname);
  traceRounds_ = traceTrack_ >= 0 && log::enabled(LogLevel::kTrace, Subsys::kColl);
  if (traceRounds_) exec_.roundTimes = &roundTimes_;
  hang::add(this);
}

void CommImpl::finishDiagnostics() {
  hang::remove(this);
  trace::detach(traceTrack_);
  traceTrack_ = -1;
}

Status CommImpl::afterCall(const CallArgs& a, Plan& plan, Status s, bool timed, uint64_t k0,
                           Clock::time_point t0) {
  if (s.isOk()) {
    recordOk(plan, timed, k0);
  } else {
    inCall_.store(false, std::memory_order_relaxed);
    if (!notice_ && s.code() == Code::kRemoteError && nranks_ > 2) {
      // The peer that vanished may have left because of an earlier failure elsewhere.
      auto n = std::move(timeoutNotice_);
      if (!n) n = net_->boot().pollNotice(kNoticeGrace);
      if (n) {
        notice_ = std::move(n);
        s = Status(notice_->code,
                   fmt::format("{} #{}: rank {} failed, so this call cannot complete (rank={}): {} "
                               "[this rank then saw: {}]",
                               collName(a.coll), seq_, notice_->origin, rank_, notice_->text,
                               s.message()));
      }
    }
    if (s.code() == Code::kTimeout && !exec_.report.empty()) {
      const std::string prefix = fmt::format("rank {}/{} (host {}, pid {})", rank_, nranks_,
                                             net_->peers()[rank_].hostname, getpid());
      hang::writeLine(prefix + ": " + exec_.report);
      reportQueued(prefix);
    }
    TUTTI_LOG_WARN(Subsys::kColl, "{}", s.message());
    recordError(s);
    if (!abort_.load() && nranks_ > 1)
      net_->boot().sendNotice(notice_ ? *notice_
                                : Notice{s.code(), rank_,
                                         fmt::format("rank {} (host {}): {}", rank_,
                                                     net_->peers()[rank_].hostname, s.message())});
    notice_.reset();
    exec_.report.clear();
  }
  if (traceTrack_ >= 0) {
    const auto t1 = Clock::now();
    trace::Args args;
    args.ints = {{"seq", static_cast<int64_t>(seq_)},
                 {"count", static_cast<int64_t>(a.count)},
                 {"bytes", static_cast<int64_t>(messageBytes(a.coll, a.count, a.dtype, nranks_))},
                 {"wireBytes", static_cast<int64_t>(exec_.bytesMoved)},
                 {"root", a.root}};
    args.texts = {{"algorithm", plan.algorithm},
                  {"dtype", std::string(dataTypeName(a.dtype))},
                  {"op", std::string(redOpName(a.op))},
                  {"status", s.isOk() ? std::string("ok") : std::string(codeName(s.code()))}};
    trace::complete(traceTrack_, "coll", std::string(collName(a.coll)), t0, t1, args);
    for (size_t r = 0; r < roundTimes_.size(); ++r)
      trace::complete(traceTrack_, "round", fmt::format("{} round {}", collName(a.coll), r),
                      roundTimes_[r].first, roundTimes_[r].second,
                      trace::Args{{{"seq", static_cast<int64_t>(seq_)},
                                   {"round", static_cast<int64_t>(r)}},
                                  {}});
    roundTimes_.clear();
  }
  return s;
}

Status CommImpl::whileWaiting(const std::function<std::string()>& reportLine) {
  if (reportRequested_.load(std::memory_order_relaxed)) {
    hang::writeLine(fmt::format("rank {}/{} (host {}, pid {}): {}", rank_, nranks_,
                                net_->peers()[rank_].hostname, getpid(), reportLine()));
    reportRequested_.store(false);
  }
  if (nranks_ > 1) {
    if (auto n = net_->boot().pollNotice(std::chrono::milliseconds(0))) {
      // Another rank's timeout does not end this call: every waiting rank times out by itself,
      // naming the peers it waits for, which points at the rank that stopped; the first timeout
      // would hide that. It is kept to explain a peer that leaves after its timeout.
      if (n->code == Code::kTimeout) {
        if (!timeoutNotice_) timeoutNotice_ = std::move(n);
        return Status::ok();
      }
      notice_ = std::move(n);
      return Status(notice_->code,
                    fmt::format("{} #{}: rank {} failed, so this call cannot complete (rank={}): {}",
                                collName(static_cast<Coll>(curColl_.load())), curSeq_.load(),
                                notice_->origin, rank_, notice_->text));
    }
  }
  return Status::ok();
}

void CommImpl::requestReport() {
  const std::string prefix = fmt::format("rank {}/{} (host {}, pid {})", rank_, nranks_,
                                         net_->peers()[rank_].hostname, getpid());
  if (inCall_.load()) {
    // The executing thread answers at its next idle check (about every 100 ms while it waits).
    reportRequested_.store(true);
    for (int i = 0; i < 50 && reportRequested_.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (reportRequested_.exchange(false))
      hang::writeLine(fmt::format("{}: {} #{}: running and moving data (not waiting on a peer)",
                                  prefix, collName(static_cast<Coll>(curColl_.load())),
                                  curSeq_.load()));
  } else {
    hang::writeLine(fmt::format("{}: no operation running (last call #{}{})", prefix,
                                curSeq_.load(), failed().isOk() ? "" : "; communicator failed"));
  }
  reportQueued(prefix);
}

void CommImpl::reportQueued(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(argsMu_);
  for (const CallArgs& a : queuedArgs_)
    hang::writeLine(fmt::format("{}: queued, not started: {}", prefix, callText(a)));
}

}  // namespace tutti::detail
