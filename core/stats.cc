// File: core/stats.cc
#include "core/stats.h"

#include <fstream>

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
  // TSC rates run 1-4 GHz: 4096 ticks is 1-4 us; steady_clock ticks are nanoseconds.
  shortTicks_ = tsc_ ? 4096 : 2000;
  tick0_ = now();
}

uint64_t StatsTable::steadyNanos() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

StatsTable::Row* StatsTable::findRow(Coll coll, const std::string& algorithm) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Row& r : rows_)
    if (r.coll == coll && r.algorithm == algorithm) return &r;
  Row& r = rows_.emplace_back();
  r.coll = coll;
  r.algorithm = algorithm;
  return &r;
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
  std::vector<CollStats> out;
  for (const Row& r : rows_) {
    const uint64_t calls = r.calls.load(std::memory_order_relaxed) - r.base[0];
    if (calls == 0) continue;
    out.push_back(CollStats{r.coll, r.algorithm, calls,
                            r.bytes.load(std::memory_order_relaxed) - r.base[1],
                            r.wireBytes.load(std::memory_order_relaxed) - r.base[2],
                            static_cast<double>(r.ticks.load(std::memory_order_relaxed) -
                                                r.base[3]) *
                                secondsPerTick});
  }
  return out;
}

void StatsTable::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Row& r : rows_) {
    r.base[0] = r.calls.load(std::memory_order_relaxed);
    r.base[1] = r.bytes.load(std::memory_order_relaxed);
    r.base[2] = r.wireBytes.load(std::memory_order_relaxed);
    r.base[3] = r.ticks.load(std::memory_order_relaxed);
  }
}

}  // namespace tutti
