// File: core/engine.cc
// Plan execution: post a round's steps, drive the connections, forward completed slices, wait
// without burning the CPU a peer on the same core needs.
#include "core/engine.h"

#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/env.h"
#include "core/log.h"

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

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
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
    // With the call check on, round 0 also carries the signature (even for an empty schedule).
    const size_t n = std::max<size_t>(rounds.size(), ctx_.check ? 1 : 0);
    for (size_t r = 0; r < n; ++r) {
      round_ = r;
      const Clock::time_point t0 = ctx_.roundTimes ? Clock::now() : Clock::time_point{};
      static const std::vector<algo::Step> kNoSteps;  // round 0 of an empty schedule (check)
      TUTTI_TRY(postRound(r < rounds.size() ? rounds[r] : kNoSteps));  // by reference: no copy
      TUTTI_TRY(drive());
      bytesDone_ += wireBytes() - roundBase_;
      if (ctx_.roundTimes) ctx_.roundTimes->push_back({t0, Clock::now()});
    }
    ctx_.bytesMoved = bytesDone_;
    return Status::ok();
  }

  // One line of a hang report: the call, its round, the peers it waits for, bytes moved.
  std::string reportLine() const {
    // start_ is the call's first sleep (the hot path reads no clock before it waits).
    const double secs = start_ == Clock::time_point{}
                            ? 0.0
                            : std::chrono::duration<double>(Clock::now() - start_).count();
    return fmt::format("{} (algorithm {}): round {} of {}, waiting for {}, {} bytes moved, {:.1f} s "
                       "waiting",
                       what(), plan_.algorithm, round_, plan_.schedule.rounds.size(), waitingFor(),
                       bytesDone_ + wireBytes() - roundBase_, secs) +
           (sigPending_ ? fmt::format("; rank {} has not entered this call", ctx_.check->prev)
                        : std::string());
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
      ctx_.conns[peer]->postSend(p + off, std::min(s, bytes - off));
    touch(peer);
  }
  // Posts a receive in slices; returns the sequence numbers.
  void postRecvs(int peer, std::byte* dst, const std::byte* src, size_t bytes,
                 std::vector<uint64_t>* seqs, std::vector<std::pair<const std::byte*, size_t>>* sl) {
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
      uint64_t seq = ctx_.conns[peer]->postRecv(spec);
      if (seqs) seqs->push_back(seq);
      if (sl) sl->push_back({dst + off, spec.bytes});
    }
    touch(peer);
  }

  Status postRound(const std::vector<algo::Step>& steps) {
    using algo::Op;
    nForwards_ = 0;
    busy_.clear();
    if (round_ == 0 && ctx_.check) postCheck();
    for (const algo::Step& st : steps) {
      if (st.count == 0) continue;
      const size_t bytes = st.count * plan_.elemBytes;
      switch (st.op) {
        case Op::kCopy: {
          std::byte* d = ptr(st.dst, st.dstOffset);
          const std::byte* s = ptr(st.src, st.srcOffset);
          if (d != s) std::memmove(d, s, bytes);
          break;
        }
        case Op::kReduce: {
          std::byte* d = ptr(st.dst, st.dstOffset);
          plan_.reduce(d, d, ptr(st.src, st.srcOffset), st.count);
          break;
        }
        case Op::kSend:
          postSends(st.peer, ptr(st.src, st.srcOffset), bytes);
          break;
        case Op::kRecv:
          postRecvs(st.peer, ptr(st.dst, st.dstOffset), nullptr, bytes, nullptr, nullptr);
          break;
        case Op::kRecvReduce:
          postRecvs(st.peer, ptr(st.dst, st.dstOffset), ptr(st.src, st.srcOffset), bytes, nullptr,
                    nullptr);
          break;
        case Op::kRecvReduceSend:
        case Op::kRecvCopySend: {
          if (!forwards_) forwards_ = &forwardPool();  // thread-local: looked up only when used
          if (nForwards_ == forwards_->size()) forwards_->emplace_back();
          Forward& f = (*forwards_)[nForwards_++];
          f.in = ctx_.conns[st.peer];
          f.out = ctx_.conns[st.sendPeer];
          f.recvSeq.clear();
          f.slices.clear();
          f.forwarded = 0;
          const std::byte* src = st.op == Op::kRecvReduceSend ? ptr(st.src, st.srcOffset) : nullptr;
          postRecvs(st.peer, ptr(st.dst, st.dstOffset), src, bytes, &f.recvSeq, &f.slices);
          touch(st.sendPeer);
          break;
        }
      }
    }
    roundBase_ = wireBytes();
    return Status::ok();
  }

  // The call signature goes first on both connections, before any data of the call.
  void postCheck() {
    CallCheck& c = *ctx_.check;
    c.seq = seq_;
    ctx_.conns[c.next]->postSend(&c.mine, sizeof c.mine);
    touch(c.next);
    transport::RecvSpec spec;
    spec.dst = &c.theirs;
    spec.bytes = sizeof c.theirs;
    sigSeq_ = ctx_.conns[c.prev]->postRecv(spec);
    touch(c.prev);
    sigPending_ = true;
  }

  uint64_t wireBytes() const {
    uint64_t b = 0;
    for (int peer : busy_) b += ctx_.conns[peer]->bytesSent + ctx_.conns[peer]->bytesReceived;
    return b;
  }

  // Progresses until every connection of the round is idle and every slice forwarded.
  Status drive() {
    int idle = 0;
    uint64_t lastMoved = moved();
    Clock::time_point lastCheck{};  // read the clock only once waiting starts (see sleepWait)
    for (;;) {
      bool done = true;
      for (int peer : busy_) {
        transport::Connection* c = ctx_.conns[peer];
        Status s = c->progress();
        if (!s.isOk()) return wrap(s);
      }
      if (sigPending_ && ctx_.conns[ctx_.check->prev]->recvsDone() >= sigSeq_) {
        sigPending_ = false;
        TUTTI_TRY(verifyCall(*ctx_.check, ctx_.rank));
      }
      for (size_t i = 0; i < nForwards_; ++i) {
        Forward& f = (*forwards_)[i];
        while (f.forwarded < f.slices.size() && f.in->recvsDone() >= f.recvSeq[f.forwarded]) {
          f.out->postSend(f.slices[f.forwarded].first, f.slices[f.forwarded].second);
          ++f.forwarded;
        }
        if (f.forwarded < f.slices.size()) done = false;
      }
      for (int peer : busy_)
        if (!ctx_.conns[peer]->idle()) done = false;
      if (done) return Status::ok();

      const uint64_t m = moved();
      if (m != lastMoved) {
        lastMoved = m;
        idle = 0;
        continue;
      }
      ++idle;
      if (idle < ctx_.spinCount) {
        cpuRelax();
        continue;
      }
      if (idle < ctx_.spinCount + 32) {
        sched_yield();
        continue;
      }
      TUTTI_TRY(sleepWait(lastCheck));
    }
  }

  uint64_t moved() const {
    uint64_t m = 0;
    for (int peer : busy_) {
      const transport::Connection* c = ctx_.conns[peer];
      m += c->bytesSent + c->bytesReceived + c->sendsDone() + c->recvsDone();
    }
    return m;
  }

  // Blocks for a short while (at most a few ms) until a peer may have made progress; checks
  // abort, timeout and peer liveness.
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
    pollfd fds[64];
    int nfds = 0;
    for (int peer : busy_) {
      const transport::Connection* c = ctx_.conns[peer];
      if (c->idle() || c->pollFd() < 0 || nfds == 64) continue;
      fds[nfds++] = {c->pollFd(), c->pollEvents(), 0};
    }
    if (nfds > 0) {
      poll(fds, nfds, 1);
      return Status::ok();
    }
    uint32_t* bell = ctx_.doorbellOwner ? ctx_.doorbellOwner->doorbell() : nullptr;
    if (!bell) {
      usleep(50);
      return Status::ok();
    }
    const uint32_t seen = __atomic_load_n(bell, __ATOMIC_ACQUIRE);
    ctx_.doorbellOwner->setSleeping(true);
    // Re-check after announcing sleep: a peer that published before seeing the flag did not wake.
    const uint64_t before = moved();
    for (int peer : busy_) {
      Status s = ctx_.conns[peer]->progress();
      if (!s.isOk()) {
        ctx_.doorbellOwner->setSleeping(false);
        return wrap(s);
      }
    }
    if (moved() == before) {
      timespec ts{0, 2'000'000};  // 2 ms: bounds the cost of a missed wake-up
      syscall(SYS_futex, bell, FUTEX_WAIT, seen, &ts, nullptr, 0);
    }
    ctx_.doorbellOwner->setSleeping(false);
    return Status::ok();
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
  size_t round_ = 0;
  Clock::time_point start_{};  // the call's first sleep (unset while it never waited)
  uint64_t bytesDone_ = 0;  // bytes moved in the finished rounds of this call
  uint64_t roundBase_ = 0;  // wireBytes() when the current round was posted
  uint64_t sigSeq_ = 0;     // receive sequence number of the neighbour's call signature
  bool sigPending_ = false;
};

}  // namespace

Status execute(Plan& plan, const void* input, void* output, std::byte* scratch, ExecContext& ctx,
               uint64_t seq) {
  RoundRunner runner(plan, input, output, scratch, ctx, seq);
  TUTTI_TRY(runner.run());
  if (plan.divide && plan.divideCount > 0) plan.divide(output, plan.divideCount, plan.divisor);
  return Status::ok();
}

}  // namespace tutti
