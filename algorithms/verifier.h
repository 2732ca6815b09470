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

#include <cstdint>
#include <vector>

#include "algorithms/algorithm.h"

namespace tutti::algo {

/// Verifies the schedules of all ranks for `shape` (shape.rank is ignored; perRank[r] is rank r's
/// schedule, perRank.size() == shape.nranks). Ok, or InvalidUsage whose message names the first
/// violation: "verify: rank R round K step S (op ...): <what> (range [a,+n))".
/// In-place shapes alias input and output as NCCL does (see include/tutti/tutti.hpp).
Status verify(const CollShape& shape, const std::vector<Schedule>& perRank);

/// What each output element holds after the schedules ran: a reduction tree over the ranks'
/// inputs, all read at the same input index (the verifier rejects anything else). The trees are
/// the ones the host engine builds (which step combines what), so a program that evaluates them
/// computes the engine's results (core/device/compile.h). Children are in canonical order: the
/// reduction ops commute bit for bit except for NaN payloads and for max/min of a +0 and a -0 of
/// a floating type, whose result is the second operand (kernels/cpu/scalar_ops.h); there the
/// sign of a zero may differ from the engine's.
struct Dataflow {
  /// A leaf (rank >= 0: that rank's input) or, with rank -1, nodes[a] op nodes[b]. Ids 0..n-1
  /// are the leaves of ranks 0..n-1; a node's children have smaller ids.
  struct Node {
    int32_t rank = -1;
    uint32_t a = 0, b = 0;
  };
  std::vector<Node> nodes;
  /// output[offset + i] = tree `expr` over inputs[index + i], for i in [0, count).
  struct Piece {
    uint64_t offset = 0, count = 0;
    uint32_t expr = 0;
    uint64_t index = 0;
  };
  /// Per rank, the written parts of its output buffer as the user sees it (the output view; in
  /// place an unwritten part still holding the input counts as written), in offset order,
  /// maximal (adjacent pieces differ in expr or are not contiguous in index).
  std::vector<std::vector<Piece>> outputs;
};

/// Verifies the schedules (as verify(), same errors) and returns their dataflow. InvalidUsage for
/// a barrier (it moves no data). Cost: verify()'s, O(segments), independent of the count.
Result<Dataflow> dataflow(const CollShape& shape, const std::vector<Schedule>& perRank);

/// Builds every rank's schedule with `algo` (a rank the algorithm declines is an error) and
/// verifies them. Declines for the whole shape (supports() false on rank 0) return ok.
Status verifyAlgorithm(const AlgorithmInfo& algo, const CollShape& shape);

}  // namespace tutti::algo
