// File: kernels/peer_host.h
// The host emulator of the peer interpreter (kernels/peer_interp.h): one rank's peer program run
// with its channels as CPU threads over host memory, with std::atomic_ref where the GPU uses
// acquire loads and release stores. It runs the same interpreter code as the CUDA kernel, so the
// FIFO protocols, the pairing of sends with receives, the persistent counters, aborts and
// timeouts are tested without a GPU (tests/unit/peer_test.cc, also under ThreadSanitizer);
// random yields at the protocol's wait and publish points shake out orderings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/status.h"
#include "kernels/peer_program.h"

namespace tutti::kernels::peer {

struct HostOptions {
  /// Chance, in 1/1000, that a yield point (a publish, a pass that moved nothing) gives up the
  /// CPU; 0: never (a pass that moved nothing still yields after a few spins).
  uint32_t yieldPerMille = 0;
  uint64_t seed = 1;  ///< of the yields, per rank and channel
};

/// Runs every channel of `launch` (one thread per channel the program uses) and returns when all
/// are done: ok, or the Status of launch.error (failureStatus); InvalidArgument when the launch
/// has no program, no error record or no arena for its rank. The caller runs the
/// other ranks' launches concurrently (their arenas are `launch.arenas`). Buffers need no
/// alignment. Blocks the calling thread; thread-safe for distinct launches.
Status runOnHost(const Launch& launch, const HostOptions& options = {});

/// What a failed run's ErrorRecord says: Timeout naming the peer and what was waited for
/// ("rank 1 (channel 0, round 2, op 5) waited 2000 ms for data from peer 3: FIFO counter 7
/// expected, 6 seen"), InvalidUsage for an abort, InternalError for a program the arena or
/// the launch does not fit. Ok for an untouched record.
Status failureStatus(const ErrorRecord& e, uint64_t timeoutNs);

/// Zeroed host memory for one arena (256-byte aligned), as the emulator's ranks share it, and
/// the rank's ErrorRecord.
class HostArena {
 public:
  explicit HostArena(const ArenaLayout& layout);
  unsigned char* data() { return mem_.get(); }
  ErrorRecord* error() { return &error_; }
  /// Sets every FIFO counter (sent, received, tails, heads, for both protocols) to `start`, and
  /// every low-latency line's flags to what llFlag(start - 1) writes, as if `start` slots had
  /// passed through every FIFO: tests of counter and flag wrap-around start near 2^32.
  void startCountersAt(uint64_t start);

 private:
  struct Free {
    void operator()(unsigned char* p) const;
  };
  std::unique_ptr<unsigned char, Free> mem_;
  ArenaLayout layout_;
  ErrorRecord error_{};
};

}  // namespace tutti::kernels::peer
