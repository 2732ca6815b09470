// File: core/stats.h
// Per-communicator statistics: calls, bytes and time per (collective, algorithm). Recorded by the
// thread that executes the call (one short mutex hold per call), read by any thread.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include <tutti/tutti.hpp>

namespace tutti {

class StatsTable {
 public:
  void record(Coll coll, const std::string& algorithm, uint64_t bytes, uint64_t wireBytes,
              double seconds);
  std::vector<CollStats> snapshot() const;
  void reset();

 private:
  mutable std::mutex mu_;
  std::vector<CollStats> rows_;  // few rows: linear search beats a map here
};

/// The message size of a call as nccl-tests reports it (bytes): count x dtype size, times nranks
/// for allgather, reducescatter, alltoall, gather and scatter; 0 for a barrier.
uint64_t messageBytes(Coll coll, size_t count, DataType dtype, int nranks);

}  // namespace tutti
