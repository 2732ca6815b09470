// File: core/stats.cc
#include "core/stats.h"

namespace tutti {

void StatsTable::record(Coll coll, const std::string& algorithm, uint64_t bytes,
                        uint64_t wireBytes, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  CollStats* row = nullptr;
  for (auto& r : rows_)
    if (r.coll == coll && r.algorithm == algorithm) row = &r;
  if (!row) {
    rows_.push_back(CollStats{coll, algorithm, 0, 0, 0, 0});
    row = &rows_.back();
  }
  row->calls += 1;
  row->bytes += bytes;
  row->wireBytes += wireBytes;
  row->seconds += seconds;
}

std::vector<CollStats> StatsTable::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rows_;
}

void StatsTable::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  rows_.clear();
}

uint64_t messageBytes(Coll coll, size_t count, DataType dtype, int nranks) {
  const uint64_t b = static_cast<uint64_t>(count) * dataTypeBytes(dtype);
  switch (coll) {
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAllToAll:
    case Coll::kGather:
    case Coll::kScatter:
      return b * static_cast<uint64_t>(nranks);
    case Coll::kBarrier:
      return 0;
    default:
      return b;
  }
}

}  // namespace tutti
