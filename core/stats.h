// File: core/stats.h
// Per-communicator statistics: calls, bytes and time per (collective, algorithm). Recorded by the
// thread that executes the call (one short mutex hold per call), read by any thread.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include <tutti/tutti.hpp>

namespace tutti {

class StatsTable {
 public:
  StatsTable();
  /// A timestamp for record(), cheap enough for every call: the CPU's time-stamp counter where
  /// the kernel itself keeps time with it (x86-64 with clocksource "tsc": invariant and the same
  /// on every CPU), else steady_clock nanoseconds. A steady_clock read costs about 20 ns on the
  /// development VM, 40% of a 1-rank call; rdtsc a few ns. Thread-safe.
  uint64_t now() const;
  /// Counts one call of `ticks` (a difference of now() values).
  void record(Coll coll, const std::string& algorithm, uint64_t bytes, uint64_t wireBytes,
              uint64_t ticks);
  /// The rows, ticks converted to seconds by the tick rate measured against steady_clock since
  /// this table was made.
  std::vector<CollStats> snapshot() const;
  void reset();

 private:
  mutable std::mutex mu_;
  std::vector<CollStats> rows_;  // few rows: linear search beats a map here
  std::vector<uint64_t> ticks_;  // per row
  bool tsc_ = false;
  uint64_t tick0_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

/// The message size of a call as nccl-tests reports it (bytes): count x dtype size, times nranks
/// for allgather, reducescatter, alltoall, gather and scatter; 0 for a barrier.
uint64_t messageBytes(Coll coll, size_t count, DataType dtype, int nranks);

}  // namespace tutti
