// File: core/engine.h
// The engine runs one rank's Plan (a verified-by-construction Schedule plus the kernels it needs)
// over the communicator's connections. Rounds run in order; inside a round every step is posted
// at once and progressed together. Messages are cut into slices of TUTTI_SLICE_BYTES on both
// sides, so forwarding steps (recvCopySend, recvReduceSend) pipeline slice by slice, and local
// steps (copy, reduce) larger than a slice run a slice at a time between the round's transfers.
// Waiting spins briefly, yields, then sleeps on the shm futex doorbell or polls sockets.
// A plan of one round whose messages and local steps fit one slice each (a small call) skips the
// round machinery: its steps are posted in order and its peers progressed in a tight loop, and
// only a longer wait goes through the same yield/sleep path (Plan::direct).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "base/status.h"
#include "core/call_check.h"
#include "core/stats.h"
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
  /// Per step of `schedule` (rounds[r][i]): 1 where a plain receive (transport::RecvSpec::
  /// streaming) or a local copy (kernels::copyStreaming) may write with non-temporal stores
  /// (algo::lastTouchWrites). Empty for calls below the streaming size.
  std::vector<std::vector<uint8_t>> streaming;
  StatsTable::Slot stats;   ///< this shape's statistics row and call timing
  /// Set by the communicator when it builds the plan, so that a repeated call computes neither:
  uint64_t callBytes = 0;   ///< messageBytes() of the call (the stats' bytes per call)
  bool adviseHuge = false;  ///< the call's buffers may reach the huge-page threshold
  /// Set by execute() on the plan's first run: 1 when one round of the schedule moves data (the
  /// others have no step or only zero-count steps: 2-rank recursive doubling pads its rounds)
  /// and it has messages of at most one slice and local steps of at most one slice (a small
  /// call), which execute() then runs directly, without the round machinery; 0 otherwise.
  int8_t direct = -1;
  size_t directRound = 0;        ///< that round
  std::vector<int> directPeers;  ///< the distinct peers of that round, in step order
  /// Per round of `schedule` (set with `direct`): 1 where no step moves data; the round machinery
  /// skips such a round (it would only post nothing and wait for nothing).
  std::vector<uint8_t> emptyRound;
  /// Per round of `schedule`: 1 where some rank of the call forwards (algo::forwardRounds); what
  /// fusion needs to share rounds with other calls. Filled by CommImpl::planFor when asked
  /// (`forwardRoundsKnown`), since it builds every rank's schedule.
  std::vector<uint8_t> forwardRounds;
  bool forwardRoundsKnown = false;
};

/// Calls back into the communicator while a call waits (failure notices from other ranks,
/// hang-report requests). Called by the executing thread about every 100 ms of waiting.
class ExecHooks {
 public:
  virtual ~ExecHooks() = default;
  /// `reportLine` formats the call's hang-report line (sequence number, collective, round, peers
  /// waited on, bytes moved). A non-ok Status ends the call with it.
  virtual Status whileWaiting(const std::function<std::string()>& reportLine) = 0;
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
  /// communicator sets 0 when this host runs more ranks than the CPUs we may use (a spinning rank
  /// would take the core from the peer it waits for), 100000 for a rank bound to CPUs no other
  /// rank of its host uses, else 1000.
  int spinCount = 1000;
  /// The spin budget in use, between min(16, spinCount) and spinCount. With adaptiveSpin it is
  /// adapted wait by wait: a wait that ends while spinning raises it to twice the passes it took;
  /// one that spins it out halves it, and it doubles again when the yields that followed returned
  /// at once (nobody else wanted a CPU). Without adaptiveSpin it stays spinCount.
  int spinBudget = 1000;
  /// Set by the communicator when this rank may run on several CPUs and is not bound to CPUs of
  /// its own: then a peer that does not answer while this rank spins may be waiting for the CPU
  /// this rank holds (another process took the other), and spinning on only delays it. A rank
  /// bound to CPUs of its own spins its full budget: yielding would hand a CPU to whatever else
  /// runs there.
  bool adaptiveSpin = false;
  /// The engine's per-round list of peers with posted work; kept here so that a call reuses its
  /// capacity instead of allocating.
  std::vector<int> busyPeers;
  /// Call-mismatch check of this call (call message exchanged first in round 0), or nullptr.
  CallCheck* check = nullptr;
  /// Round-0 steps that wait for the neighbour's call message (reused capacity, like busyPeers).
  std::vector<size_t> deferredSteps;
  ExecHooks* hooks = nullptr;
  /// When non-null, execute() appends each round's [start, end) (trace events at TRACE level).
  std::vector<std::pair<std::chrono::steady_clock::time_point,
                        std::chrono::steady_clock::time_point>>* roundTimes = nullptr;
  /// Set by execute(): bytes this call sent plus received; on Timeout, the hang-report line.
  uint64_t bytesMoved = 0;
  std::string report;
};

/// Runs `plan` with the given user buffers. `seq` is the call's sequence number on this
/// communicator; errors name the call as "allreduce #12" (formatted only on error).
/// Errors: RemoteError (peer closed/died, naming it), Timeout (naming the round and the peers
/// waited for; ctx.report then holds the hang-report line), InvalidUsage when aborted or when
/// ctx.check finds that the neighbour called something else.
/// `scratch` holds at least plan.scratchBytes bytes (the communicator's pool; plans run one at a
/// time, so they share it).
Status execute(Plan& plan, const void* input, void* output, std::byte* scratch, ExecContext& ctx,
               uint64_t seq);

}  // namespace tutti
