// File: core/engine.cc
// Plan execution: post a round's steps, drive the connections, forward completed slices, wait
// without burning the CPU a peer on the same core needs.
#include "core/engine.h"

#include <algorithm>
#include <cstring>

#include "base/env.h"
#include "base/log.h"
#include "core/checked_call.h"
#include "core/wait.h"

namespace tutti {

namespace {

TUTTI_PARAM_INT(kSliceBytes, "TUTTI_SLICE_BYTES", nullptr, "CORE", 128 << 10,
                "messages are cut into slices of this many bytes (multiple of 64) so that "
                "forwarding pipelines");

using Clock = std::chrono::steady_clock;

size_t sliceBytes() {
  static const size_t s = [] {
    int64_t v = kSliceBytes.get();
    if (v < 4096) v = 4096;
    return static_cast<size_t>(v) & ~size_t(63);
  }();
  return s;
}

// A forwarding step: receive slices, then forward each one as soon as it has arrived.
struct Forward {
  transport::Connection* in;
  transport::Connection* out;
  std::vector<uint64_t> recvSeq;
  std::vector<std::pair<const std::byte*, size_t>> slices;
  size_t forwarded = 0;
};

// Forwarding steps of the running plan, kept per thread with their vectors' capacity so that a
// repeated call allocates nothing (a thread runs one plan at a time).
std::vector<Forward>& forwardPool() {
  thread_local std::vector<Forward> pool;
  return pool;
}

// A local step (copy or reduce) larger than a slice: run a slice at a time between passes over
// the round's connections (see RoundRunner::runLocalSlice).
struct LocalWork {
  std::byte* dst;
  const std::byte* src;
  size_t bytes;
  size_t done;
  bool reduce;
  bool streaming;  // a copy that may bypass the cache (Plan::streaming)
};
std::vector<LocalWork>& localPool() {
  thread_local std::vector<LocalWork> pool;
  return pool;
}

class RoundRunner {
 public:
  RoundRunner(Plan& plan, const void* input, void* output, std::byte* scratch, ExecContext& ctx,
              uint64_t seq)
      : plan_(plan), ctx_(ctx), seq_(seq), busy_(ctx.busyPeers) {
    bases_[0] = static_cast<std::byte*>(const_cast<void*>(input));
    bases_[1] = static_cast<std::byte*>(output);
    bases_[2] = scratch;
  }

  Status run() {
    const auto& rounds = plan_.schedule.rounds;
    check_.start(ctx_.check, plan_.schedule, ctx_.conns, plan_.coll, seq_, ctx_.rank);
    // A signed call also exchanges call messages in round 0 (even with an empty schedule).
    const size_t n = std::max<size_t>(rounds.size(), check_.signs() ? 1 : 0);
    for (size_t r = 0; r < n; ++r) {
      // (A traced call keeps them: its round events are numbered as the schedule's rounds.)
      if (r < plan_.emptyRound.size() && plan_.emptyRound[r] && !(r == 0 && check_.signs()) &&
          !ctx_.roundTimes)
        continue;
      round_ = r;
      const Clock::time_point t0 = ctx_.roundTimes ? Clock::now() : Clock::time_point{};
      static const std::vector<algo::Step> kNoSteps;  // round 0 of an empty schedule (check)
      TUTTI_TRY(postRound(r < rounds.size() ? rounds[r] : kNoSteps));  // by reference: no copy
      TUTTI_TRY(drive());
      bytesDone_ += wireBytes() - roundBase_;
      if (ctx_.roundTimes) ctx_.roundTimes->push_back({t0, Clock::now()});
    }
    if (check_.active()) TUTTI_TRY(check_.finish());
    ctx_.bytesMoved = bytesDone_;
    return Status::ok();
  }

  // A plan marked direct (one round of single-slice messages and local steps; see
  // markDirect): post the round in step order, as postRound would, then progress its peers in a
  // tight loop. A wait longer than the spin budget continues in drive(), which yields, sleeps,
  // and checks abort, timeout and peer liveness. The 2-rank 8-byte allreduce spends the whole
  // call on its critical path. The steps are posted here rather than through postStep, whose
  // slice loops and per-step peer lookups (touch) cost about 15 ns (10%) of that call.
  Status runDirect() {
    const std::vector<int>& peers = plan_.directPeers;
    round_ = plan_.directRound;
    for (const algo::Step& st : plan_.schedule.rounds[round_]) {
      if (st.count == 0) continue;
      const size_t bytes = st.count * plan_.elemBytes;
      switch (st.op) {
        case algo::Op::kCopy: {
          std::byte* d = ptr(st.dst, st.dstOffset);
          const std::byte* s = ptr(st.src, st.srcOffset);
          if (d != s) std::memmove(d, s, bytes);
          break;
        }
        case algo::Op::kReduce: {
          std::byte* d = ptr(st.dst, st.dstOffset);
          plan_.reduce(d, d, ptr(st.src, st.srcOffset), st.count);
          break;
        }
        case algo::Op::kSend:
          ctx_.conns[st.peer]->postSend(ptr(st.src, st.srcOffset), bytes);
          break;
        default: {  // kRecv, kRecvReduce (markDirect admits no other op)
          transport::RecvSpec spec;
          spec.dst = ptr(st.dst, st.dstOffset);
          spec.bytes = bytes;
          if (st.op == algo::Op::kRecvReduce) {
            spec.src = ptr(st.src, st.srcOffset);
            spec.reduce = plan_.reduce;
          }
          spec.elemBytes = plan_.elemBytes;
          ctx_.conns[st.peer]->postRecv(spec);
          break;
        }
      }
    }
    busy_.assign(peers.begin(), peers.end());
    roundBase_ = wireBytes();
    int pass = 0;
    SpinClock clock;
    for (;;) {
      bool done = true;
      for (int peer : peers) {
        transport::Connection* c = ctx_.conns[peer];
        Status s = c->progress();
        if (!s.isOk()) return wrap(s);
        if (!c->idle()) done = false;
      }
      if (done) {
        SpinWait::spunFor(ctx_, pass);
        break;
      }
      if (++pass >= ctx_.spinBudget || clock.spent(pass)) {
        TUTTI_TRY(drive(pass));
        break;
      }
      cpuRelax();
    }
    ctx_.bytesMoved = wireBytes() - roundBase_;
    return Status::ok();
  }

  // One line of a hang report: the call, its round, the peers it waits for, bytes moved.
  std::string reportLine() const {
    // start_ is the call's first sleep (the hot path reads no clock before it waits).
    const double secs = start_ == Clock::time_point{}
                            ? 0.0
                            : std::chrono::duration<double>(Clock::now() - start_).count();
    return fmt::format(
               "{} (algorithm {}): round {} of {}, waiting for {}, {} bytes moved, {:.1f} s "
               "waiting",
               what(), plan_.algorithm, round_, plan_.schedule.rounds.size(), waitingFor(),
               bytesDone_ + wireBytes() - roundBase_, secs) +
           check_.waitingNote();
  }

 private:
  std::byte* ptr(algo::Buf b, size_t offset) const {
    return bases_[static_cast<int>(b)] + offset * plan_.elemBytes;
  }

  void touch(int peer) {
    if (std::find(busy_.begin(), busy_.end(), peer) == busy_.end()) busy_.push_back(peer);
  }

  // Posts a send of [p, p+bytes) to peer in slices.
  void postSends(int peer, const std::byte* p, size_t bytes) {
    const size_t s = sliceBytes();
    for (size_t off = 0; off < bytes; off += s)
      noteSend(ctx_.conns[peer], ctx_.conns[peer]->postSend(p + off, std::min(s, bytes - off)));
    touch(peer);
  }
  // Posts a receive in slices; returns the sequence numbers.
  void postRecvs(int peer, std::byte* dst, const std::byte* src, size_t bytes,
                 std::vector<uint64_t>* seqs, std::vector<std::pair<const std::byte*, size_t>>* sl,
                 bool streaming = false) {
    const size_t s = sliceBytes();
    for (size_t off = 0; off < bytes; off += s) {
      transport::RecvSpec spec;
      spec.dst = dst + off;
      spec.bytes = std::min(s, bytes - off);
      if (src) {
        spec.src = src + off;
        spec.reduce = plan_.reduce;
      }
      spec.elemBytes = plan_.elemBytes;
      spec.streaming = streaming;
      uint64_t seq = ctx_.conns[peer]->postRecv(spec);
      if (seqs) seqs->push_back(seq);
      if (sl) sl->push_back({dst + off, spec.bytes});
    }
    touch(peer);
  }

  Status postRound(const std::vector<algo::Step>& steps) {
    nForwards_ = 0;
    nLocals_ = 0;
    localNext_ = 0;
    busy_.clear();
    const bool checked = round_ == 0 && check_.signs();
    if (checked) ctx_.deferredSteps.clear();
    for (size_t i = 0; i < steps.size(); ++i) {
      const algo::Step& st = steps[i];
      if (st.count == 0) continue;
      // With the check, round 0's sends to `next` go after the call message (posted below, once
      // the local steps of the round have run, so that its inline bytes are final), and the
      // receives from `prev` wait until prev's call message has arrived and matched.
      if (checked && check_.defers(st)) {
        ctx_.deferredSteps.push_back(i);
        continue;
      }
      TUTTI_TRY(postStep(st, streamingAt(round_, i)));
    }
    if (checked) postCallMessages(steps);
    roundBase_ = wireBytes();
    return Status::ok();
  }

  // Plan::streaming for step i of round r (false where the plan marks none).
  bool streamingAt(size_t r, size_t i) const {
    return !plan_.streaming.empty() && plan_.streaming[r][i] != 0;
  }

  Status postStep(const algo::Step& st, bool streaming) {
    using algo::Op;
    if (check_.inlinePending() && algo::receives(st.op) && st.peer == check_.prev())
      return takeInline(st);
    const size_t bytes = st.count * plan_.elemBytes;
    switch (st.op) {
      case Op::kCopy: {
        std::byte* d = ptr(st.dst, st.dstOffset);
        const std::byte* s = ptr(st.src, st.srcOffset);
        if (d == s) break;
        if (bytes > sliceBytes() && (d + bytes <= s || s + bytes <= d)) {
          addLocal(d, s, bytes, /*reduce=*/false, streaming);
          break;
        }
        std::memmove(d, s, bytes);
        break;
      }
      case Op::kReduce: {
        std::byte* d = ptr(st.dst, st.dstOffset);
        if (bytes > sliceBytes()) {
          addLocal(d, ptr(st.src, st.srcOffset), bytes, /*reduce=*/true, false);
          break;
        }
        plan_.reduce(d, d, ptr(st.src, st.srcOffset), st.count);
        break;
      }
      case Op::kSend:
        postSends(st.peer, ptr(st.src, st.srcOffset), bytes);
        break;
      case Op::kRecv:
        postRecvs(st.peer, ptr(st.dst, st.dstOffset), nullptr, bytes, nullptr, nullptr, streaming);
        break;
      case Op::kRecvReduce:
        postRecvs(st.peer, ptr(st.dst, st.dstOffset), ptr(st.src, st.srcOffset), bytes, nullptr,
                  nullptr);
        break;
      case Op::kRecvReduceSend:
      case Op::kRecvCopySend: {
        Forward& f = addForward(st.peer, st.sendPeer);
        const std::byte* src = st.op == Op::kRecvReduceSend ? ptr(st.src, st.srcOffset) : nullptr;
        postRecvs(st.peer, ptr(st.dst, st.dstOffset), src, bytes, &f.recvSeq, &f.slices);
        touch(st.sendPeer);
        break;
      }
    }
    return Status::ok();
  }

  // The call message goes first on both connections, before any data of the call. When this
  // rank's first message of the call to `next` is a round-0 send small enough, its data rides
  // along and the step is not posted. The other deferred sends to `next` follow in step order;
  // ctx_.deferredSteps keeps the deferred receives from `prev` (postDeferred posts them).
  void postCallMessages(const std::vector<algo::Step>& steps) {
    std::vector<size_t>& deferred = ctx_.deferredSteps;
    auto sendsToNext = [&](size_t k) {
      const algo::Step& st = steps[deferred[k]];
      return st.op == algo::Op::kSend && st.peer == check_.next();
    };
    size_t first = SIZE_MAX;  // position in `deferred` of the first send to `next`
    for (size_t k = 0; k < deferred.size() && first == SIZE_MAX; ++k)
      if (sendsToNext(k)) first = k;
    const algo::Step* fs = first == SIZE_MAX ? nullptr : &steps[deferred[first]];
    const bool inlined = check_.postMessages(fs ? ptr(fs->src, fs->srcOffset) : nullptr,
                                             fs ? fs->count * plan_.elemBytes : 0);
    touch(check_.next());
    touch(check_.prev());
    size_t kept = 0;
    for (size_t k = 0; k < deferred.size(); ++k) {
      if (!sendsToNext(k)) {
        deferred[kept++] = deferred[k];
      } else if (k != first || !inlined) {
        const algo::Step& st = steps[deferred[k]];
        postSends(st.peer, ptr(st.src, st.srcOffset), st.count * plan_.elemBytes);
      }
    }
    deferred.resize(kept);
  }

  // The neighbour's call message arrived and matched: post the receives from it that waited.
  Status postDeferred() {
    for (size_t i : ctx_.deferredSteps)
      TUTTI_TRY(postStep(plan_.schedule.rounds[0][i], streamingAt(0, i)));
    ctx_.deferredSteps.clear();
    return Status::ok();
  }

  // The first receive from `prev` takes its data from the call message instead of the wire.
  Status takeInline(const algo::Step& st) {
    const size_t bytes = st.count * plan_.elemBytes;
    TUTTI_TRY_ASSIGN(const std::byte* data, check_.takeInline(bytes));
    std::byte* d = ptr(st.dst, st.dstOffset);
    if (st.op == algo::Op::kRecvReduce || st.op == algo::Op::kRecvReduceSend)
      plan_.reduce(d, ptr(st.src, st.srcOffset), data, st.count);
    else
      std::memcpy(d, data, bytes);
    if (algo::forwards(st.op)) {
      // Already received: forwarded (as one slice, like any message this small) at once.
      Forward& f = addForward(st.peer, st.sendPeer);
      f.recvSeq.push_back(0);
      f.slices.push_back({d, bytes});
      touch(st.sendPeer);
    }
    return Status::ok();
  }

  // Steps of a round are concurrent (the verifier rejects a step that touches what another step
  // of its round writes), so a local step need not run before the round's messages: one larger
  // than a slice runs a slice per pass of drive(). It then overlaps the transfers, and where a
  // send reads the same input (broadcast's root, allgather's own block) the second read of each
  // slice finds it in cache. A slice or less runs at once, as posted.
  void addLocal(std::byte* d, const std::byte* s, size_t bytes, bool reduce, bool streaming) {
    if (!locals_) locals_ = &localPool();
    if (nLocals_ == locals_->size()) locals_->emplace_back();
    (*locals_)[nLocals_++] = {d, s, bytes, 0, reduce, streaming};
  }

  // Runs the next slice of the round's local work (some is left: localNext_ < nLocals_).
  void runLocalSlice() {
    LocalWork& w = (*locals_)[localNext_];
    const size_t n = std::min(sliceBytes(), w.bytes - w.done);
    if (w.reduce)
      plan_.reduce(w.dst + w.done, w.dst + w.done, w.src + w.done, n / plan_.elemBytes);
    else if (w.streaming)
      kernels::copyStreaming(w.dst + w.done, w.src + w.done, n);
    else
      std::memcpy(w.dst + w.done, w.src + w.done, n);
    w.done += n;
    if (w.done == w.bytes) ++localNext_;
  }

  // A reset forwarding entry from the per-thread pool (keeps its vectors' capacity).
  Forward& addForward(int inPeer, int outPeer) {
    if (!forwards_) forwards_ = &forwardPool();  // thread-local: looked up only when used
    if (nForwards_ == forwards_->size()) forwards_->emplace_back();
    Forward& f = (*forwards_)[nForwards_++];
    f.in = ctx_.conns[inPeer];
    f.out = ctx_.conns[outPeer];
    f.recvSeq.clear();
    f.slices.clear();
    f.forwarded = 0;
    return f;
  }

  uint64_t wireBytes() const {
    uint64_t b = 0;
    for (int peer : busy_) b += ctx_.conns[peer]->bytesSent + ctx_.conns[peer]->bytesReceived;
    return b;
  }

  // Progresses until every connection of the round is idle and every slice forwarded.
  // `idle`: idle passes already spent by the caller (runDirect), counted against the spin budget.
  Status drive(int idle = 0) {
    uint64_t lastMoved = movedOver(ctx_, busy_);
    SpinWait wait(ctx_, idle);
    Clock::time_point lastCheck{};  // read the clock only once waiting starts (see sleepWait)
    for (;;) {
      bool done = true;
      for (int peer : busy_) {
        transport::Connection* c = ctx_.conns[peer];
        Status s = c->progress();
        if (!s.isOk()) return wrap(s);
      }
      if (check_.active()) {
        TUTTI_TRY_ASSIGN(const bool matched, check_.poll());
        if (matched) TUTTI_TRY(postDeferred());  // what it posts keeps its connection busy
      }
      for (size_t i = 0; i < nForwards_; ++i) {
        Forward& f = (*forwards_)[i];
        while (f.forwarded < f.slices.size() && f.in->recvsDone() >= f.recvSeq[f.forwarded]) {
          noteSend(f.out,
                   f.out->postSend(f.slices[f.forwarded].first, f.slices[f.forwarded].second));
          ++f.forwarded;
        }
        if (f.forwarded < f.slices.size()) done = false;
      }
      for (int peer : busy_)
        if (!ctx_.conns[peer]->idle() &&
            !(check_.active() && check_.mayLeave(peer, ctx_.deferredSteps.empty())))
          done = false;
      if (localNext_ < nLocals_) {
        runLocalSlice();
        wait.worked();
        continue;  // work was done: no spinning, and the round is not over
      }
      if (done) {
        wait.ended();
        return Status::ok();
      }
      const uint64_t m = movedOver(ctx_, busy_);
      if (m != lastMoved) {
        lastMoved = m;
        wait.progressed();
        continue;
      }
      if (!wait.pass()) TUTTI_TRY(sleepWait(lastCheck));
    }
  }

  void noteSend(const transport::Connection* c, uint64_t seq) {
    if (check_.active()) check_.noteSend(c, seq);
  }

  // Checks abort, timeout and peer liveness (every 100 ms of waiting), then blocks for a short
  // while (blockOnPeers).
  Status sleepWait(Clock::time_point& lastCheck) {
    if (ctx_.abort && ctx_.abort->load(std::memory_order_relaxed))
      return invalidUsage("{}: aborted (rank {}, round {})", what(), ctx_.rank, round_);
    // The clock is read only here, so a call that never waits never reads it: the timeout counts
    // from the call's first sleep, and peers are checked every 100 ms of a round's waiting.
    const auto now = Clock::now();
    if (start_ == Clock::time_point{}) start_ = now;
    if (lastCheck == Clock::time_point{}) lastCheck = now;
    if (now - lastCheck > std::chrono::milliseconds(100)) {
      lastCheck = now;
      if (ctx_.hooks) TUTTI_TRY(ctx_.hooks->whileWaiting([this] { return reportLine(); }));
      for (int peer : busy_) {
        if (ctx_.conns[peer]->idle()) continue;
        Status s = ctx_.conns[peer]->checkPeer();
        if (!s.isOk()) return wrap(s);
      }
      if (ctx_.timeout.count() > 0 && now - start_ > ctx_.timeout) {
        ctx_.report = reportLine();
        return timeoutError("{}: timed out after {} ms in round {} of {} (algorithm {}, rank {}): "
                            "waiting for {} ({} bytes moved)",
                            what(), ctx_.timeout.count(), round_, plan_.schedule.rounds.size(),
                            plan_.algorithm, ctx_.rank, waitingFor(),
                            bytesDone_ + wireBytes() - roundBase_);
      }
    }
    Status s = blockOnPeers(ctx_, busy_);
    return s.isOk() ? s : wrap(s);
  }

  std::string waitingFor() const {
    std::string s;
    for (int peer : busy_) {
      const transport::Connection* c = ctx_.conns[peer];
      if (c->idle()) continue;
      if (!s.empty()) s += ", ";
      s += fmt::format("rank {} (host {})", peer,
                       peer < static_cast<int>(ctx_.peerHosts.size()) ? ctx_.peerHosts[peer] : "?");
    }
    return s.empty() ? "forwarding" : s;
  }

  Status wrap(const Status& s) const {
    return Status(s.code(), fmt::format("{} (algorithm {}, round {}): {}", what(), plan_.algorithm,
                                        round_, s.message()));
  }

  std::string what() const { return fmt::format("{} #{}", collName(plan_.coll), seq_); }

  Plan& plan_;
  ExecContext& ctx_;
  uint64_t seq_;
  std::byte* bases_[3];
  std::vector<int>& busy_;  // ctx_.busyPeers
  std::vector<Forward>* forwards_ = nullptr;  // forwardPool(); the first nForwards_ are this round's
  size_t nForwards_ = 0;
  std::vector<LocalWork>* locals_ = nullptr;  // localPool(); the first nLocals_ are this round's
  size_t nLocals_ = 0;
  size_t localNext_ = 0;  // first of them not finished
  size_t round_ = 0;
  Clock::time_point start_{};  // the call's first sleep (unset while it never waited)
  uint64_t bytesDone_ = 0;  // bytes moved in the finished rounds of this call
  uint64_t roundBase_ = 0;  // wireBytes() when the current round was posted
  CheckedCall check_;  // this call's part in the call-mismatch check (inactive without it)
};

// Decides Plan::direct (see there) and fills Plan::directPeers.
void markDirect(Plan& plan) {
  plan.direct = 0;
  plan.directPeers.clear();
  const auto& rounds = plan.schedule.rounds;
  plan.emptyRound.assign(rounds.size(), 1);
  size_t moving = 0;  // rounds that move data
  for (size_t r = 0; r < rounds.size(); ++r) {
    for (const algo::Step& st : rounds[r])
      if (st.count > 0) plan.emptyRound[r] = 0;
    if (!plan.emptyRound[r]) {
      ++moving;
      plan.directRound = r;
    }
  }
  if (moving != 1 || !plan.streaming.empty()) return;
  for (const algo::Step& st : rounds[plan.directRound]) {
    if (st.count * plan.elemBytes > sliceBytes()) return;
    switch (st.op) {
      case algo::Op::kCopy:
      case algo::Op::kReduce:
        continue;
      case algo::Op::kSend:
      case algo::Op::kRecv:
      case algo::Op::kRecvReduce:
        break;
      default:
        return;  // forwarding steps need the round machinery
    }
    if (st.count > 0 &&
        std::find(plan.directPeers.begin(), plan.directPeers.end(), st.peer) ==
            plan.directPeers.end())
      plan.directPeers.push_back(st.peer);
  }
  plan.direct = 1;
}

}  // namespace

Status execute(Plan& plan, const void* input, void* output, std::byte* scratch, ExecContext& ctx,
               uint64_t seq) {
  if (plan.direct < 0) markDirect(plan);
  RoundRunner runner(plan, input, output, scratch, ctx, seq);
  // The call check and per-round trace events need the round machinery.
  if (plan.direct == 1 && !ctx.check && !ctx.roundTimes)
    TUTTI_TRY(runner.runDirect());
  else
    TUTTI_TRY(runner.run());
  if (plan.divide && plan.divideCount > 0) plan.divide(output, plan.divideCount, plan.divisor);
  return Status::ok();
}

}  // namespace tutti
