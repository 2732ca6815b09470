// File: core/engine.h
// The engine runs one rank's Plan (a verified-by-construction Schedule plus the kernels it needs)
// over the communicator's connections. Rounds run in order; inside a round every step is posted
// at once and progressed together. Messages are cut into slices of TUTTI_SLICE_BYTES on both
// sides, so forwarding steps (recvCopySend, recvReduceSend) pipeline slice by slice. Waiting
// spins briefly, yields, then sleeps on the shm futex doorbell or polls sockets.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "core/status.h"
#include "kernels/reduce.h"
#include "transports/transport.h"

namespace tutti {

/// A schedule ready to run: built once per call shape and cached by the communicator.
struct Plan {
  algo::Schedule schedule;
  std::string algorithm;  ///< name, for messages
  Coll coll = Coll::kAllReduce;
  size_t elemBytes = 1;
  kernels::Reduce2Fn reduce = nullptr;
  /// avg: after the schedule, divide `divideCount` output elements by `divisor`.
  kernels::DivideFn divide = nullptr;
  size_t divideCount = 0;
  int divisor = 1;
  size_t scratchBytes = 0;  ///< schedule.scratchCount * elemBytes; lent by the communicator's pool
};

/// What the engine needs from the communicator. Only the thread executing plans touches it,
/// except `abort`, which any thread may set.
struct ExecContext {
  int rank = 0;
  int nranks = 1;
  std::vector<transport::Connection*> conns;   ///< by peer rank (self included)
  std::vector<std::string> peerHosts;          ///< by peer rank, for messages
  transport::Transport* doorbellOwner = nullptr;  ///< transport whose doorbell we may sleep on
  std::atomic<bool>* abort = nullptr;
  std::chrono::milliseconds timeout{0};  ///< 0: none
  /// Idle progress passes before a waiting rank yields its core (then it sleeps). The
  /// communicator sets 0 when this host runs more ranks than the CPUs we may use: a spinning rank
  /// would take the core from the peer it waits for.
  int spinCount = 1000;
  /// The engine's per-round list of peers with posted work; kept here so that a call reuses its
  /// capacity instead of allocating.
  std::vector<int> busyPeers;
};

/// Runs `plan` with the given user buffers. `seq` is the call's sequence number on this
/// communicator; errors name the call as "allreduce #12" (formatted only on error).
/// Errors: RemoteError (peer closed/died, naming it), Timeout (naming the round and the peers
/// waited for), InvalidUsage when aborted.
/// `scratch` holds at least plan.scratchBytes bytes (the communicator's pool; plans run one at a
/// time, so they share it).
Status execute(Plan& plan, const void* input, void* output, std::byte* scratch, ExecContext& ctx,
               uint64_t seq);

}  // namespace tutti
