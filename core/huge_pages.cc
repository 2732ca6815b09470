// File: core/huge_pages.cc
// See huge_pages.h. One process-wide map of the 2 MiB regions seen (used once, or asked for);
// madvise runs outside its lock.
#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/env.h"
#include "base/log.h"

namespace tutti::hugepages {
namespace {

TUTTI_PARAM_INT(kHugePageBytes, "TUTTI_HUGE_PAGE_BYTES", nullptr, "CORE", 4 << 20,
                "host buffers of at least this many bytes are moved to transparent huge pages "
                "at their second use (madvise MADV_COLLAPSE; contents unchanged); 0: never");

// The map stays small (one entry per 2 MiB of distinct large buffers); past 2^20 entries (2 TiB
// of buffers seen) it is cleared, which at worst asks the kernel again.
constexpr size_t kMaxRegions = size_t(1) << 20;

// Uses recorded per region: 1 after the first, kAsked once passed to madvise.
constexpr uint8_t kAsked = 2;

struct State {
  std::mutex mu;
  std::unordered_map<uintptr_t, uint8_t> uses;  // region address -> uses recorded (1 or kAsked)
  Counters counters;
  bool loggedRefusal = false;
  bool loggedSuccess = false;
};

State& state() {
  static State* s = new State;  // never destroyed: calls may run during static destruction
  return *s;
}

}  // namespace

size_t thresholdBytes() {
  const int64_t v = kHugePageBytes.get();
  return v <= 0 ? 0 : static_cast<size_t>(v);
}

void interior(const void* p, size_t bytes, uintptr_t* first, uintptr_t* last) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t mask = kRegionBytes - 1;
  *first = *last = 0;
  if (bytes < kRegionBytes || a > UINTPTR_MAX - bytes) return;
  const uintptr_t f = (a + mask) & ~mask, l = (a + bytes) & ~mask;
  if (f < l) *first = f, *last = l;
}

bool thpAlways() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(f, mode);
  return mode.find("[always]") != std::string::npos;
}

long anonHugeKbOfMapping(const void* addr) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  std::ifstream f("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(f, line)) {
    unsigned long lo = 0, hi = 0;
    char dash = 0;
    // A mapping's header line starts with "lo-hi "; its fields are "Name: value kB" lines.
    std::istringstream in(line);
    if (in >> std::hex >> lo >> dash >> hi && dash == '-' && in.peek() == ' ') {
      inside = a >= lo && a < hi;
      continue;
    }
    long kb = 0;
    if (inside && std::sscanf(line.c_str(), "AnonHugePages: %ld kB", &kb) == 1) return kb;
  }
  return -1;
}

Counters counters() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.counters;
}

void advise(const void* p, size_t bytes) {
  const size_t threshold = thresholdBytes();
  if (threshold == 0 || bytes < threshold || !p) return;
  uintptr_t first = 0, last = 0;
  interior(p, bytes, &first, &last);
  if (first == last) return;
  // Runs of regions on their second use, claimed under the lock so that two threads never ask
  // twice.
  std::vector<std::pair<uintptr_t, uintptr_t>> runs;
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.uses.size() + (last - first) / kRegionBytes > kMaxRegions) s.uses.clear();
    for (uintptr_t r = first; r < last; r += kRegionBytes) {
      uint8_t& uses = s.uses[r];
      if (uses == kAsked) {
        ++s.counters.regionsSkipped;
        continue;
      }
      if (++uses < kAsked) {
        ++s.counters.regionsFirstUse;
        continue;
      }
      if (!runs.empty() && runs.back().second == r) runs.back().second = r + kRegionBytes;
      else runs.emplace_back(r, r + kRegionBytes);
    }
  }
  for (const auto& [b, e] : runs) {
    const int rc = ::madvise(reinterpret_cast<void*>(b), e - b, kMadvCollapse);
    const int err = rc == 0 ? 0 : errno;
    const uint64_t n = (e - b) / kRegionBytes;
    std::lock_guard<std::mutex> lock(s.mu);
    s.counters.regionsAsked += n;
    if (rc == 0) {
      s.counters.regionsCollapsed += n;
      if (!s.loggedSuccess) {
        s.loggedSuccess = true;
        TUTTI_LOG_INFO(Subsys::kInit,
                       "huge pages: buffer {} ({} bytes) now on 2 MiB pages ({} MiB from {:#x}); "
                       "TUTTI_HUGE_PAGE_BYTES={} (0 turns this off)",
                       p, bytes, (e - b) >> 20, b, threshold);
      }
    } else if (!s.loggedRefusal) {
      s.loggedRefusal = true;
      TUTTI_LOG_INFO(Subsys::kInit,
                     "huge pages: madvise(MADV_COLLAPSE) of {} MiB at {:#x} in buffer {} refused: "
                     "{} (errno {}); the buffer stays on small pages",
                     (e - b) >> 20, b, p, std::strerror(err), err);
    }
  }
}

}  // namespace tutti::hugepages
