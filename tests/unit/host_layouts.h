// File: tests/unit/host_layouts.h
// The host maps the schedule tests run every algorithm over (schedule_sim_test.cc,
// device_compile_test.cc): none, then synthetic multi-host layouts for hierarchical algorithms
// (which decline without one): contiguous blocks of 2 and of 3 ranks per host, and ranks dealt
// round-robin over 2 hosts (groups that are not contiguous).
#pragma once

#include <vector>

namespace tutti::algo {

inline std::vector<std::vector<int>> hostLayouts(int n) {
  std::vector<std::vector<int>> out{{}};
  for (int per : {2, 3}) {
    if (n % per != 0 || n / per < 2) continue;
    std::vector<int> blocks(n);
    for (int r = 0; r < n; ++r) blocks[r] = r / per;
    out.push_back(blocks);
  }
  if (n % 2 == 0 && n >= 2) {
    std::vector<int> dealt(n);
    for (int r = 0; r < n; ++r) dealt[r] = r % 2;
    out.push_back(dealt);
  }
  return out;
}

}  // namespace tutti::algo
