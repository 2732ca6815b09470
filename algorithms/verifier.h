// File: algorithms/verifier.h
// The schedule verifier: executes every rank's schedule symbolically. Each element of every
// buffer carries the multiset of contributions it holds ((rank, index) pairs); the collective's
// postcondition must hold exactly (every required contribution once, nothing else), sends must
// match receives of the same size in order per (src, dst) within the same round, no round may
// deadlock, no range may leave its buffer, and no scratch element may be read before written.
// The first violation is reported with rank, round, step and range.
//
// The model (what the engine guarantees, see core/engine.cc):
//  - Buffers are run-length segments, so the cost does not depend on the count (1<<20 elements
//    cost what 1 costs); any nranks (rank sets are interned bitsets).
//  - Steps of a round run concurrently: every read sees the state at the start of the round,
//    except that a forwarding step (recvCopySend, recvReduceSend) sends what it has just
//    received. A step that writes a range another step of the round reads or writes is a hazard
//    (a copy whose source and destination coincide, as in place, does nothing).
//  - Wire order per (src, dst) in a round: plain sends in step order, then forwarded messages;
//    two forwards to one peer that receive from different peers would interleave and are
//    rejected. Zero-count steps are skipped as the engine skips them.
//  - Reading an element nothing wrote is an error, and so is reducing two different source
//    indices or the same rank twice (reported where it happens, not at the end).
//  - Barrier: payloads are tokens (not checked); every rank must have heard from every other
//    rank, directly or transitively, by the end of its last round. Sendrecv has no postcondition.
#pragma once

#include <vector>

#include "algorithms/algorithm.h"

namespace tutti::algo {

/// Verifies the schedules of all ranks for `shape` (shape.rank is ignored; perRank[r] is rank r's
/// schedule, perRank.size() == shape.nranks). Ok, or InvalidUsage whose message names the first
/// violation: "verify: rank R round K step S (op ...): <what> (range [a,+n))".
/// In-place shapes alias input and output as NCCL does (see include/tutti/tutti.hpp).
Status verify(const CollShape& shape, const std::vector<Schedule>& perRank);

/// Builds every rank's schedule with `algo` (a rank the algorithm declines is an error) and
/// verifies them. Declines for the whole shape (supports() false on rank 0) return ok.
Status verifyAlgorithm(const AlgorithmInfo& algo, const CollShape& shape);

}  // namespace tutti::algo
