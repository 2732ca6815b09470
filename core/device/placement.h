// File: core/device/placement.h
// Which device path a communicator's device memory takes (docs/GPU.md's table), decided at init
// from what every rank says of itself: the same inputs on every rank, so the same choice.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tutti::device {

/// What one rank says of itself at init.
struct Placement {
  uint64_t host = 0;               // hash of the host identity (base/host_id.h)
  int64_t pid = 0;                 // process id
  std::array<uint8_t, 16> uuid{};  // the GPU's
  bool gpu = false;                // has a GPU (uuid is set)
  bool staged = false;             // TUTTI_DEVICE_PATH=staged
  bool peer = false;               // TUTTI_DEVICE_PATH=peer
  bool mps = false;                // runs under MPS (its control pipe exists)
};

enum class PathKind {
  kStaged,         // through pinned host memory and the host engine
  kThreadClique,   // threads of one process on one GPU: one kernel for all
  kProcessClique,  // one process per rank, all on one GPU: rank 0's kernel, CUDA IPC
  kPeerThreads,    // TUTTI_DEVICE_PATH=peer, threads of one process: a kernel per rank
  kPeerProcesses,  // TUTTI_DEVICE_PATH=peer, ranks in several processes (CUDA IPC of arenas)
};

/// The path for ranks `all` (rank order; at least 2). The peer executor when every rank asks for
/// it, has a GPU and shares one host, unless ranks of different processes share a GPU without
/// MPS on both (time-sliced contexts: a kernel spinning for the other's could wait a whole time
/// slice); else a clique when every rank is on one GPU and none asks for staged, as threads of
/// one process or as processes of one rank each; else staged.
PathKind choosePath(const std::vector<Placement>& all);

/// Whether ranks of different processes share a GPU where one of them is not under MPS.
bool timeSliced(const std::vector<Placement>& all);

}  // namespace tutti::device
