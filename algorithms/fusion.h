// File: algorithms/fusion.h
// Fusion of several small allreduces into one schedule: each call keeps its own algorithm's steps,
// moved to its place in packed buffers, and the calls share rounds (one round's latency for all).
//
// Sharing a round must keep the matching rule of schedule.h. The engine's wire order per (src,
// dst) in a round is "plain sends in step order, then forwarded messages" (core/engine.cc, the
// verifier's model), so two calls' steps cannot simply be concatenated: a plain send of a later
// call would overtake an earlier call's forwarded message (2-rank ring: send, recvReduceSend,
// recv), and the receiver, whose receives are in step order, would take one for the other.
// fuseSchedules therefore lets a fused round hold the steps of at most one call in whose round
// some rank forwards, and puts that call's steps after every other call's. A call whose
// forwarding round would meet another's starts its rounds later. The decision reads only
// forwardRounds, which is the same on every rank, so every rank builds the same round numbering.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "algorithms/algorithm.h"

namespace tutti::algo {

/// One call's part of a fused allreduce, on this rank.
struct FusePart {
  const Schedule* schedule = nullptr;  ///< the call alone (its algorithm's schedule, this rank)
  size_t offset = 0;                   ///< elements: its place in the fused input and output
  /// The call alone runs in place: its input steps are moved to the output, keeping one buffer.
  bool inPlace = false;
  /// Per round of `schedule`: 1 where SOME rank of the call has a forwarding step (see
  /// forwardRounds). Must be the same on every rank.
  std::span<const uint8_t> forwardRounds;
};

/// The fused schedule: parts' ranges moved by their offsets (scratch packed in part order), rounds
/// shared as described above. Every element is reduced by its own call's steps, so the results are
/// those of the separate calls, bit for bit. Proven for all ranks by tests/unit/fusion_test.cc
/// with the verifier. Cost: O(steps + rounds x parts).
Schedule fuseSchedules(std::span<const FusePart> parts);

/// Per round of `algo`'s schedules for `shape` on every rank (shape.rank is ignored): 1 where any
/// rank has a forwarding step (recvReduceSend, recvCopySend). Builds nranks schedules.
/// Errors: the algorithm's build error for a rank.
Result<std::vector<uint8_t>> forwardRounds(const AlgorithmInfo& algo, CollShape shape);

}  // namespace tutti::algo
