// File: core/device/placement.cc
// The device path's choice from every rank's placement (core/device/placement.h).
#include "core/device/placement.h"

namespace tutti::device {

bool timeSliced(const std::vector<Placement>& all) {
  for (std::size_t r = 0; r < all.size(); ++r)
    for (std::size_t q = 0; q < r; ++q)
      if (all[q].pid != all[r].pid && all[q].uuid == all[r].uuid && !(all[q].mps && all[r].mps))
        return true;
  return false;
}

PathKind choosePath(const std::vector<Placement>& all) {
  if (all.size() < 2) return PathKind::kStaged;
  bool oneGpu = true, oneProcess = true, ownProcesses = true, peer = true;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const Placement& o = all[r];
    oneGpu = oneGpu && o.gpu && !o.staged && o.host == all[0].host && o.uuid == all[0].uuid;
    oneProcess = oneProcess && o.pid == all[0].pid;
    peer = peer && o.peer && o.gpu && o.host == all[0].host;
    for (std::size_t q = 0; q < r; ++q) ownProcesses = ownProcesses && all[q].pid != o.pid;
  }
  if (peer && oneProcess) return PathKind::kPeerThreads;
  if (peer && !timeSliced(all)) return PathKind::kPeerProcesses;
  if (!oneGpu) return PathKind::kStaged;
  if (oneProcess) return PathKind::kThreadClique;
  return ownProcesses ? PathKind::kProcessClique : PathKind::kStaged;
}

}  // namespace tutti::device
