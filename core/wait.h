// File: core/wait.h
// How a rank waits for its peers inside a call. A waiting rank first spins (progress passes with
// a pause between them), then yields its CPU, then blocks on its connections (poll on sockets,
// the shm doorbell futex, or a short sleep). The spin budget adapts wait by wait when the rank
// may share CPUs with its peers (ExecContext::spinBudget), so that a rank does not burn the CPU
// its peer needs, and a rank with a CPU of its own catches an answer without a system call.
#pragma once

#include <chrono>
#include <span>
#include <string_view>

#include "base/status.h"
#include "core/engine.h"

namespace tutti {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Bytes sent and received plus messages completed over the connections of `peers`: a wait
/// made progress when this changed.
uint64_t movedOver(const ExecContext& ctx, std::span<const int> peers);

/// The wall-clock cap on one stretch of spinning: however large the spin budget
/// (ctx.spinBudget passes), a rank that has spun this long without progress yields. A pass costs
/// about 10-20 ns over shm but a system call over tcp, so a budget in passes alone would spin
/// tcp ranks 30-50x longer.
class SpinClock {
 public:
  static constexpr std::chrono::microseconds kMaxSpin{2000};
  /// Whether a stretch now `idle` passes long has spun past kMaxSpin. The clock is read only
  /// from pass kFrom on (a short wait never reads it), then every kEvery passes; a stretch that
  /// this clock did not see reach kFrom counts as spent once past it.
  bool spent(int idle) {
    if (idle < kFrom || (idle & (kEvery - 1)) != 0) return false;
    const auto now = std::chrono::steady_clock::now();
    if (idle == kFrom) {
      start_ = now;
      return false;
    }
    return start_ == std::chrono::steady_clock::time_point{} || now - start_ > kMaxSpin;
  }

 private:
  static constexpr int kFrom = 1024;
  static constexpr int kEvery = 256;
  std::chrono::steady_clock::time_point start_{};
};

/// One wait's spin-then-yield stretch, with the adaptation of ctx.spinBudget. Not thread-safe:
/// used by the thread executing the call.
class SpinWait {
 public:
  /// `idle`: idle passes the caller already spent on this wait.
  SpinWait(ExecContext& ctx, int idle = 0) : ctx_(ctx), idle_(idle) {}

  /// One idle pass: spins or yields, and returns true; false when both are spent and the caller
  /// should block (blockOnPeers).
  bool pass();
  /// Progress was made: this idle stretch ended, a new one begins.
  void progressed() {
    ended();
    idle_ = 0;
    spunOut_ = false;
    yields_ = 0;
    contended_ = false;
  }
  /// Local work was done between passes: the spin starts over (yields and budget unchanged).
  void worked() { idle_ = 0; }
  /// The wait is over. While spinning, the budget keeps covering twice the passes it took; after
  /// a spun-out budget, during yields on CPUs nobody else wanted (no yield gave one away), a
  /// longer spin would have caught it, so the budget doubles. Ended after a yield that let
  /// another task run, or asleep, the halved budget stays.
  void ended();

  /// A wait that ended after `idle` spinning passes keeps the budget at least twice that.
  static void spunFor(ExecContext& ctx, int idle) {
    if (2 * idle > ctx.spinBudget) ctx.spinBudget = std::min(ctx.spinCount, 2 * idle);
  }

 private:
  ExecContext& ctx_;
  int idle_;
  bool spunOut_ = false;    // this idle stretch has spent the spin budget
  SpinClock clock_;
  int yields_ = 0;          // sched_yield calls since
  bool contended_ = false;  // one of them gave the CPU away (another task was runnable)
};

/// Blocks for a short while (at most a few ms) until one of the connections of `peers` may have
/// made progress: poll on their sockets, else sleep on ctx.doorbellOwner's futex (after one more
/// progress pass, so that a wake-up published before the sleep is not missed), else 50 us.
/// Returns a connection's progress error unchanged.
Status blockOnPeers(ExecContext& ctx, std::span<const int> peers);

/// Waits until one of `peers` has begun sending a message this rank has not posted a receive
/// for (Connection::incomingPending) and returns that peer; nothing is consumed. The scan starts
/// at peers[start % size] so that repeated waits can take turns. Spins, yields, then blocks (poll
/// on sockets, the shm doorbell, or a short sleep), checking every 100 ms of waiting that the
/// peers are alive and that ctx.timeout has not passed. Errors: InvalidUsage when aborted or when
/// a peer's transport cannot probe, RemoteError naming a peer that died or closed, Timeout naming
/// `what` and the peers waited for. Every connection of `peers` must have no receive in flight.
Result<int> waitForIncoming(ExecContext& ctx, std::span<const int> peers, size_t start,
                            std::string_view what);

}  // namespace tutti
