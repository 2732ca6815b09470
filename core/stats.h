// File: core/stats.h
// Per-communicator statistics: calls, bytes and time per (collective, algorithm). Recorded by the
// thread that executes the call without a lock or an atomic read-modify-write (that thread holds
// the communicator's execution mutex), read by any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include <tutti/tutti.hpp>

#include "base/collectives.h"

namespace tutti {

class StatsTable {
 public:
  /// One (collective, algorithm) row. The counters are written by the executing thread only and
  /// read by any thread (relaxed atomics: the writer stores load + n, a plain add on x86).
  struct Row {
    Coll coll = Coll::kAllReduce;
    std::string algorithm;
    std::atomic<uint64_t> calls{0}, bytes{0}, wireBytes{0}, ticks{0};
    uint64_t base[4] = {0, 0, 0, 0};  // the counters at the last reset(); under mu_
  };

  /// Timing state of one call shape (one cached plan), owned by the executing thread.
  ///
  /// Reading the clock twice costs about 10 ns here (rdtsc in a VM), 6% of a 2-rank 8-byte
  /// allreduce. So a shape whose last timed call took under shortTicks_ (about 1-4 us) is timed
  /// once every kSampleEvery calls, and each call in between is charged the last timed call's
  /// duration; longer calls are all timed.
  struct Slot {
    Row* row = nullptr;                // found on the shape's first call
    uint64_t lastTicks = ~uint64_t(0);  // duration of the last timed call (~0: none yet)
    uint32_t untimed = 0;              // calls since the last timed one
  };
  static constexpr uint32_t kSampleEvery = 16;

  StatsTable();
  /// A timestamp, cheap enough for every call: the CPU's time-stamp counter where the kernel
  /// itself keeps time with it (x86-64 with clocksource "tsc": invariant and the same on every
  /// CPU), else steady_clock nanoseconds (about 20 ns a read on the development VM). Thread-safe.
  uint64_t now() const {
#if defined(__x86_64__)
    if (tsc_) return __builtin_ia32_rdtsc();
#endif
    return steadyNanos();
  }
  /// Whether the call about to run on `slot` reads the clock (see Slot). Executing thread only.
  bool timeThis(Slot& slot) const {
    return slot.lastTicks >= shortTicks_ || ++slot.untimed >= kSampleEvery;
  }
  /// Counts one successful call on `slot`: `ticks` (a difference of now() values) when it was
  /// timed, else the slot's last timed duration. Executing thread only; finds the row (under the
  /// mutex) on the slot's first call.
  /// Inline: it runs once per call (the 2-rank 8-byte allreduce spends its whole duration on the
  /// critical path).
  void record(Slot& slot, Coll coll, const std::string& algorithm, uint64_t bytes,
              uint64_t wireBytes, bool timed, uint64_t ticks) {
    if (!slot.row) slot.row = findRow(coll, algorithm);
    if (timed) {
      slot.lastTicks = ticks;
      slot.untimed = 0;
    } else {
      ticks = slot.lastTicks;
    }
    Row& r = *slot.row;
    add(r.calls, 1);
    add(r.bytes, bytes);
    add(r.wireBytes, wireBytes);
    add(r.ticks, ticks);
  }
  /// The rows with calls since the last reset(), ticks converted to seconds by the tick rate
  /// measured against steady_clock since this table was made. Thread-safe; a call that runs
  /// meanwhile may show in some counters of its row and not yet in others.
  std::vector<CollStats> snapshot() const;
  /// Starts every row over from zero. Thread-safe; a call running meanwhile may be counted on
  /// either side of the reset.
  void reset();

 private:
  static uint64_t steadyNanos();
  // The single writer's increment: no read-modify-write instruction, readers see whole values.
  static void add(std::atomic<uint64_t>& a, uint64_t n) {
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  Row* findRow(Coll coll, const std::string& algorithm);

  mutable std::mutex mu_;       // guards adding rows and base[]
  std::deque<Row> rows_;        // stable addresses: slots point into it
  bool tsc_ = false;
  uint64_t shortTicks_ = 0;     // "short call": about 1-4 us in ticks (see the constructor)
  uint64_t tick0_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace tutti
