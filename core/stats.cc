// File: core/stats.cc
#include "core/stats.h"

#include <fstream>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace tutti {

namespace {

bool kernelUsesTsc() {
#if defined(__x86_64__)
  std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  return f >> name && name == "tsc";
#else
  return false;
#endif
}

}  // namespace

StatsTable::StatsTable() : t0_(std::chrono::steady_clock::now()) {
  static const bool tsc = kernelUsesTsc();
  tsc_ = tsc;
  tick0_ = now();
}

uint64_t StatsTable::now() const {
#if defined(__x86_64__)
  if (tsc_) return __rdtsc();
#endif
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

void StatsTable::record(Coll coll, const std::string& algorithm, uint64_t bytes,
                        uint64_t wireBytes, uint64_t ticks) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = 0;
  while (i < rows_.size() && !(rows_[i].coll == coll && rows_[i].algorithm == algorithm)) ++i;
  if (i == rows_.size()) {
    rows_.push_back(CollStats{coll, algorithm, 0, 0, 0, 0});
    ticks_.push_back(0);
  }
  rows_[i].calls += 1;
  rows_[i].bytes += bytes;
  rows_[i].wireBytes += wireBytes;
  ticks_[i] += ticks;
}

std::vector<CollStats> StatsTable::snapshot() const {
  double secondsPerTick = 1e-9;
  if (tsc_) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const uint64_t ticks = now() - tick0_;
    secondsPerTick = ticks > 0 ? elapsed / static_cast<double>(ticks) : 0.0;
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CollStats> out = rows_;
  for (size_t i = 0; i < out.size(); ++i) out[i].seconds = ticks_[i] * secondsPerTick;
  return out;
}

void StatsTable::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  rows_.clear();
  ticks_.clear();
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
