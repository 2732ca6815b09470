// File: core/wait.cc
// Spinning, yielding and blocking while a call waits (see wait.h).
#include "core/wait.h"

#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tutti {

namespace {
// The adaptive spin budget's floor (ExecContext::spinBudget): a few passes still catch a peer
// that answers at once.
constexpr int kMinSpin = 16;
// Yields after the spin budget before a wait blocks.
constexpr int kMaxYields = 32;
}  // namespace

uint64_t movedOver(const ExecContext& ctx, std::span<const int> peers) {
  uint64_t m = 0;
  for (int peer : peers) {
    const transport::Connection* c = ctx.conns[peer];
    m += c->bytesSent + c->bytesReceived + c->sendsDone() + c->recvsDone();
  }
  return m;
}

bool SpinWait::pass() {
  ++idle_;
  if (!spunOut_) {
    if (idle_ < ctx_.spinBudget && !clock_.spent(idle_)) {
      cpuRelax();
      return true;
    }
    spunOut_ = true;
    if (ctx_.adaptiveSpin)
      ctx_.spinBudget = std::max(std::min(ctx_.spinCount, kMinSpin), ctx_.spinBudget / 2);
  }
  if (yields_ >= kMaxYields) return false;
  ++yields_;
  if (!ctx_.adaptiveSpin) {
    sched_yield();
    return true;
  }
  const auto y0 = std::chrono::steady_clock::now();
  sched_yield();
  // A yield that returns after more than a few microseconds let another task run: the CPUs are
  // shared, and spinning longer would not have helped.
  if (std::chrono::steady_clock::now() - y0 > std::chrono::microseconds(5)) contended_ = true;
  return true;
}

void SpinWait::ended() {
  if (!spunOut_)
    spunFor(ctx_, idle_);
  else if (yields_ > 0 && yields_ < kMaxYields && !contended_)
    ctx_.spinBudget = std::min(ctx_.spinCount, 2 * ctx_.spinBudget);
}

Status blockOnPeers(ExecContext& ctx, std::span<const int> peers) {
  pollfd fds[64];
  int nfds = 0;
  for (int peer : peers) {
    const transport::Connection* c = ctx.conns[peer];
    if (c->idle() || c->pollFd() < 0 || nfds == 64) continue;
    fds[nfds++] = {c->pollFd(), c->pollEvents(), 0};
  }
  if (nfds > 0) {
    poll(fds, nfds, 1);
    return Status::ok();
  }
  uint32_t* bell = ctx.doorbellOwner ? ctx.doorbellOwner->doorbell() : nullptr;
  if (!bell) {
    usleep(50);
    return Status::ok();
  }
  const uint32_t seen = __atomic_load_n(bell, __ATOMIC_ACQUIRE);
  ctx.doorbellOwner->setSleeping(true);
  // Re-check after announcing sleep: a peer that published before seeing the flag did not wake.
  const uint64_t before = movedOver(ctx, peers);
  for (int peer : peers) {
    Status s = ctx.conns[peer]->progress();
    if (!s.isOk()) {
      ctx.doorbellOwner->setSleeping(false);
      return s;
    }
  }
  if (movedOver(ctx, peers) == before) {
    timespec ts{0, 2'000'000};  // 2 ms: bounds the cost of a missed wake-up
    syscall(SYS_futex, bell, FUTEX_WAIT, seen, &ts, nullptr, 0);
  }
  ctx.doorbellOwner->setSleeping(false);
  return Status::ok();
}

Result<int> waitForIncoming(ExecContext& ctx, std::span<const int> peers, size_t start,
                            std::string_view what) {
  using Clock = std::chrono::steady_clock;
  const size_t n = peers.size();
  SpinWait wait(ctx);
  Clock::time_point begin{}, lastCheck{};
  auto named = [&](const Status& s) {
    return Status(s.code(), fmt::format("{} on rank {}: {}", what, ctx.rank, s.message()));
  };
  for (;;) {
    for (size_t i = 0; i < n; ++i) {
      const int peer = peers[(start + i) % n];
      transport::Connection* c = ctx.conns[peer];
      if (Status s = c->progress(); !s.isOk()) return named(s);  // sends in flight move on
      Result<bool> pending = c->incomingPending();
      if (!pending) return named(pending.status());
      if (pending.value()) {
        wait.ended();
        return peer;
      }
    }
    if (wait.pass()) continue;
    if (ctx.abort && ctx.abort->load(std::memory_order_relaxed))
      return invalidUsage("{}: aborted (rank {})", what, ctx.rank);
    const auto now = Clock::now();
    if (begin == Clock::time_point{}) begin = lastCheck = now;
    if (now - lastCheck > std::chrono::milliseconds(100)) {
      lastCheck = now;
      // Hang reports and other ranks' failure notices, as a waiting collective gets them.
      if (ctx.hooks)
        if (Status s = ctx.hooks->whileWaiting([&] {
              return fmt::format("{}: waiting {} ms for a message from any of ranks {}", what,
                                 std::chrono::duration_cast<std::chrono::milliseconds>(now - begin)
                                     .count(),
                                 fmt::join(peers, ", "));
            });
            !s.isOk())
          return s;
      for (int peer : peers)
        if (Status s = ctx.conns[peer]->checkPeer(); !s.isOk()) return named(s);
      if (ctx.timeout.count() > 0 && now - begin > ctx.timeout)
        return timeoutError("{}: timed out after {} ms on rank {}: no message arrived from any "
                            "of ranks {}",
                            what, ctx.timeout.count(), ctx.rank, fmt::join(peers, ", "));
    }
    // Sockets: poll them for input; shared memory only: the doorbell (blockOnPeers).
    pollfd fds[64];
    nfds_t nfds = 0;
    for (int peer : peers) {
      const transport::Connection* c = ctx.conns[peer];
      if (c->pollFd() >= 0 && nfds < 64) fds[nfds++] = {c->pollFd(), POLLIN, 0};
    }
    if (nfds > 0)
      poll(fds, nfds, 1);
    else if (Status s = blockOnPeers(ctx, peers); !s.isOk())
      return named(s);
  }
}

}  // namespace tutti
