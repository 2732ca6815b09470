// File: core/diagnostics.cc
// A communicator's diagnostics around execution (see diagnostics.h).
#include "core/diagnostics.h"

#include <unistd.h>

#include <thread>

#include "base/env.h"
#include "base/log.h"
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

}  // namespace

void Diagnostics::attach(Owner owner, int64_t checkCalls, ExecContext& exec) {
  owner_ = std::move(owner);
  const int rank = owner_.rank, nranks = owner_.nranks;
  const int64_t want = checkCalls >= 0 ? checkCalls : kCheckCalls.get();
  checkCalls_ = want != 0 && nranks > 1;
  check_.next = (rank + 1) % nranks;
  check_.prev = (rank + nranks - 1) % nranks;
  exec.hooks = this;
  hang::add(this);
}

void Diagnostics::startTrace(ExecContext& exec) {
  traceTrack_ = trace::attach(owner_.rank, owner_.nranks, owner_.hostname);
  if (traceTrack_ >= 0 && log::enabled(LogLevel::kTrace, Subsys::kColl))
    exec.roundTimes = &roundTimes_;
}

void Diagnostics::detach() {
  hang::remove(this);
  trace::detach(traceTrack_);
  traceTrack_ = -1;
}

std::string Diagnostics::prefix() const {
  return fmt::format("rank {}/{} (host {}, pid {})", owner_.rank, owner_.nranks, owner_.hostname,
                     getpid());
}

Status Diagnostics::failed(Coll coll, Status s, uint64_t seq, ExecContext& exec) {
  inCall_.store(false, std::memory_order_relaxed);
  if (!notice_ && s.code() == Code::kRemoteError && owner_.nranks > 2) {
    // The peer that vanished may have left because of an earlier failure elsewhere.
    auto n = std::move(timeoutNotice_);
    if (!n) n = owner_.boot->pollNotice(kNoticeGrace);
    if (n) {
      notice_ = std::move(n);
      s = Status(notice_->code,
                 fmt::format("{} #{}: rank {} failed, so this call cannot complete (rank={}): {} "
                             "[this rank then saw: {}]",
                             collName(coll), seq, notice_->origin, owner_.rank, notice_->text,
                             s.message()));
    }
  }
  if (s.code() == Code::kTimeout && owner_.nranks > 2) {
    // The peer this rank waited for may itself be waiting across a broken link: its own timeout
    // (sent to every rank) names the peer it waited for, so this rank's error points there too.
    auto n = std::move(timeoutNotice_);
    if (!n) n = owner_.boot->pollNotice(kNoticeGrace);
    if (n && n->origin != owner_.rank)
      s = Status(s.code(), fmt::format("{} [rank {} {}: {}]", s.message(), n->origin,
                                       n->code == Code::kTimeout ? "timed out too" : "failed",
                                       n->text));
  }
  if (s.code() == Code::kTimeout && !exec.report.empty()) {
    const std::string p = prefix();
    hang::writeLine(p + ": " + exec.report);
    owner_.reportQueued(p);
  }
  exec.report.clear();
  TUTTI_LOG_WARN(Subsys::kColl, "{}", s.message());
  return s;
}

void Diagnostics::tellOthers(const Status& s, bool aborted) {
  if (!aborted && owner_.nranks > 1)
    owner_.boot->sendNotice(notice_ ? *notice_
                                    : Notice{s.code(), owner_.rank,
                                             fmt::format("rank {} (host {}): {}", owner_.rank,
                                                         owner_.hostname, s.message())});
  notice_.reset();
}

void Diagnostics::trace(const CallArgs& a, const Plan& plan, const Status& s, uint64_t seq,
                        uint64_t bytesMoved, Clock::time_point t0) {
  const auto t1 = Clock::now();
  trace::Args args;
  args.ints = {{"seq", static_cast<int64_t>(seq)},
               {"count", static_cast<int64_t>(a.count)},
               {"bytes", static_cast<int64_t>(messageBytes(a.coll, a.count, a.dtype, owner_.nranks))},
               {"wireBytes", static_cast<int64_t>(bytesMoved)},
               {"root", a.root}};
  args.texts = {{"algorithm", plan.algorithm},
                {"dtype", std::string(dataTypeName(a.dtype))},
                {"op", std::string(redOpName(a.op))},
                {"status", s.isOk() ? std::string("ok") : std::string(codeName(s.code()))}};
  trace::complete(traceTrack_, "coll", std::string(collName(a.coll)), t0, t1, args);
  for (size_t r = 0; r < roundTimes_.size(); ++r)
    trace::complete(traceTrack_, "round", fmt::format("{} round {}", collName(a.coll), r),
                    roundTimes_[r].first, roundTimes_[r].second,
                    trace::Args{{{"seq", static_cast<int64_t>(seq)},
                                 {"round", static_cast<int64_t>(r)}},
                                {}});
  roundTimes_.clear();
}

Status Diagnostics::whileWaiting(const std::function<std::string()>& reportLine) {
  if (reportRequested_.load(std::memory_order_relaxed)) {
    hang::writeLine(fmt::format("{}: {}", prefix(), reportLine()));
    reportRequested_.store(false);
  }
  if (owner_.nranks > 1) {
    if (auto n = owner_.boot->pollNotice(std::chrono::milliseconds(0))) {
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
                                notice_->origin, owner_.rank, notice_->text));
    }
  }
  return Status::ok();
}

void Diagnostics::requestReport() {
  const std::string p = prefix();
  if (inCall_.load()) {
    // The executing thread answers at its next idle check (about every 100 ms while it waits).
    reportRequested_.store(true);
    for (int i = 0; i < 50 && reportRequested_.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (reportRequested_.exchange(false))
      hang::writeLine(fmt::format("{}: {} #{}: running and moving data (not waiting on a peer)", p,
                                  collName(static_cast<Coll>(curColl_.load())), curSeq_.load()));
  } else {
    hang::writeLine(fmt::format("{}: no operation running (last call #{}{})", p, curSeq_.load(),
                                owner_.failed().isOk() ? "" : "; communicator failed"));
  }
  owner_.reportQueued(p);
}

}  // namespace tutti::detail
