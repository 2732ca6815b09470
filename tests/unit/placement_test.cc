// File: tests/unit/placement_test.cc
// The device path's choice at init (core/device/placement.h) from every rank's placement: the
// peer executor for threads, for processes on GPUs of their own and for processes sharing a GPU
// under MPS on both sides; the cliques for one GPU; staged for the rest.
#include "core/device/placement.h"

#include <catch2/catch.hpp>

namespace tutti::device {
namespace {

// A rank on host 1, process `pid`, GPU `gpu` (-1: none).
Placement at(int64_t pid, int gpu, bool peer = false, bool mps = false) {
  Placement p;
  p.host = 1;
  p.pid = pid;
  p.gpu = gpu >= 0;
  if (gpu >= 0) p.uuid[0] = static_cast<uint8_t>(gpu + 1);
  p.peer = peer;
  p.mps = mps;
  return p;
}

}  // namespace

TEST_CASE("device path: cliques on one GPU, staged otherwise", "[placement]") {
  CHECK(choosePath({at(7, 0)}) == PathKind::kStaged);  // one rank: device copies
  CHECK(choosePath({at(7, 0), at(7, 0), at(7, 0)}) == PathKind::kThreadClique);
  CHECK(choosePath({at(7, 0), at(8, 0)}) == PathKind::kProcessClique);
  CHECK(choosePath({at(7, 0), at(7, 0), at(8, 0)}) == PathKind::kStaged);  // a mix
  CHECK(choosePath({at(7, 0), at(8, 1)}) == PathKind::kStaged);            // two GPUs
  CHECK(choosePath({at(7, 0), at(8, -1)}) == PathKind::kStaged);           // no GPU
  std::vector<Placement> staged{at(7, 0), at(7, 0)};
  staged[1].staged = true;
  CHECK(choosePath(staged) == PathKind::kStaged);
  std::vector<Placement> hosts{at(7, 0), at(8, 0)};
  hosts[1].host = 2;
  CHECK(choosePath(hosts) == PathKind::kStaged);
}

TEST_CASE("device path: the peer executor when every rank asks for it", "[placement]") {
  CHECK(choosePath({at(7, 0, true), at(7, 1, true)}) == PathKind::kPeerThreads);
  CHECK(choosePath({at(7, 0, true), at(7, 0, true)}) == PathKind::kPeerThreads);
  // Processes, a GPU each (torchrun on 2 GPUs), or 2 processes of 2 threads on 2 GPUs.
  CHECK(choosePath({at(7, 0, true), at(8, 1, true)}) == PathKind::kPeerProcesses);
  CHECK(choosePath({at(7, 0, true), at(7, 0, true), at(8, 1, true), at(8, 1, true)}) ==
        PathKind::kPeerProcesses);
  // Processes sharing a GPU: only with MPS on both; else the process clique keeps them.
  CHECK(choosePath({at(7, 0, true, true), at(8, 0, true, true)}) == PathKind::kPeerProcesses);
  CHECK(choosePath({at(7, 0, true, true), at(8, 0, true, false)}) == PathKind::kProcessClique);
  CHECK(choosePath({at(7, 0, true), at(8, 0, true)}) == PathKind::kProcessClique);
  CHECK(timeSliced({at(7, 0), at(8, 1), at(9, 0, false, true)}));
  CHECK_FALSE(timeSliced({at(7, 0), at(7, 0), at(8, 1)}));
  // One rank without it, or on another host: as without peer.
  CHECK(choosePath({at(7, 0, true), at(7, 0, false)}) == PathKind::kThreadClique);
  std::vector<Placement> hosts{at(7, 0, true), at(8, 1, true)};
  hosts[1].host = 2;
  CHECK(choosePath(hosts) == PathKind::kStaged);
}

}  // namespace tutti::device
