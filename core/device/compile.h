// File: core/device/compile.h
// The clique compiler: when every rank of a collective shares one address space (threads of one
// process on one GPU, or a leader with every peer's buffers mapped), one kernel can compute every
// rank's output straight from every rank's input. compile() runs an algorithm's schedules
// symbolically (algo::dataflow, the verifier) and emits kernels::program::Programs that evaluate
// exactly the reduction trees the host engine builds, so the results are the engine's, bit for
// bit, and every algorithm stays a verified schedule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/algorithm.h"
#include "base/status.h"
#include "kernels/program.h"

namespace tutti::device {

/// One call shape compiled to kernel launches.
struct CompiledCall {
  std::string algorithm;
  /// Run in order, each after the previous one completed. Buffer numbers are
  /// kernels::program::inputBuffer(r) / outputBuffer(r): the user's send and recv pointers of
  /// rank r, as passed to the call (in place they alias as NCCL's in-place forms do, and the
  /// programs are ordered for it). Empty when there is nothing to do (count 0, or in place with
  /// every output already holding its result).
  std::vector<kernels::program::Program> launches;
  /// Device-memory traffic of one call: every leaf read and every destination written once per
  /// element (sum over ops of count * element bytes * nleaves, resp. * ndsts).
  uint64_t bytesRead = 0, bytesWritten = 0;
  /// compileBest: why this algorithm (the winner and the runner-up with their traffic), for logs.
  std::string reason;
};

/// Compiles `algo`'s schedules for `shape` (shape.rank is ignored: all ranks are built).
///
/// What it computes: for every element of every rank's output, the reduction tree the host
/// engine builds there, over the ranks' inputs. Ops that produce the same tree over the same
/// input range for several outputs are one op with several destinations (ring allreduce reads
/// every input once and writes every output once). avg sums and divides by nranks on the ranks
/// that hold the result (as the engine: allreduce, reducescatter, reduce at its root, nranks > 1).
/// premulsum: `preMulScalar` points to one element of shape.dtype (null otherwise; shape.op must
/// then be kSum): every leaf is multiplied by it first. The trees are those of the out-of-place
/// schedule then, because the engine scales into a staging buffer and runs out of place.
///
/// In place (shape.inPlace): NCCL's aliasing (allreduce, broadcast, reduce: send == recv;
/// allgather: send == recv + rank*count; reducescatter: recv == send + rank*count; alltoall:
/// send == recv). An output that already holds its result is not written; ops that write what
/// other ops read go to later launches. InvalidUsage when no order exists (in-place alltoall with
/// nranks >= 2 and count > 0: blocks swap between ranks), and for in-place gather and scatter
/// (no in-place form).
///
/// Errors (InvalidUsage unless noted, naming the argument and its value): sendrecv and barrier
/// (grouped send/recv is compiled by the executor), nranks outside [1, kMaxRanks], a root outside
/// [0, nranks), an algorithm for another collective or one that declines the shape, schedules
/// that fail verification (the verifier's message), InvalidArgument for an invalid dtype or op or
/// a scalar with another op than sum or a collective that does not reduce.
/// Cost: the verifier's O(segments) plus O(pieces log pieces); independent of the count's size
/// for regular algorithms. Pure: no I/O, no globals; meant to run once per call shape (cached).
Result<CompiledCall> compile(const algo::CollShape& shape, const algo::AlgorithmInfo& algo,
                             const std::byte* preMulScalar);

/// compile() with the algorithm named `requested` when it is not empty (InvalidArgument when no
/// such algorithm exists for shape.coll); otherwise every registered algorithm for shape.coll that
/// supports the shape is compiled and the one with the least bytesRead + bytesWritten wins, ties
/// broken by fewer launches, then fewer ops, then name (deterministic). Algorithms that fail to
/// compile (in-place cycles, unsupported shapes) are skipped; when none compiles, the first
/// error is returned with the number of candidates.
Result<CompiledCall> compileBest(const algo::CollShape& shape, std::string_view requested,
                                 const std::byte* preMulScalar);

}  // namespace tutti::device
