// File: core/device/compose.h
// What every device clique does once each rank's batch of a call is known (core/device/clique.h
// for ranks that are threads, core/device/process_clique.h for ranks that are processes): check
// that the ranks called the same collectives with the same shapes, in place or not alike, on
// memory the GPU can reach, and that their sends and receives pair up; then enqueue the kernels
// that compute every rank's result, compiled once per call shape (core/device/compile.h) and
// cached. Also the host-side wait both cliques use while a rank waits for its peers.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <tutti/types.hpp>
#include <vector>

#include "base/batch_op.h"
#include "base/status.h"
#include "core/device/compile.h"
#include "core/device/stream_ops.h"

namespace tutti::device {

/// One operation of a rank's batch on device memory (kTask never reaches a clique).
using Call = BatchOp;

/// "allreduce of 1024 float sum", "broadcast of 16 int8 root 2": for messages.
std::string describeCall(const Call& c);

/// Distinct streams one rank may use in one call (a group spanning several streams).
inline constexpr int kMaxStreams = 4;

/// A batch's distinct streams in order of first use; the first one leads.
struct BatchStreams {
  std::array<Stream, kMaxStreams> at{};
  int count = 0;
};
/// InvalidUsage (naming `rank`) when the batch uses more than kMaxStreams streams.
Result<BatchStreams> batchStreams(const std::vector<Call>& calls, int rank);

/// Elements of the send and receive buffers collective `c` (kColl) touches on `rank`: 0 for a
/// buffer it does not use there (the receive buffer of a non-root reduce, ...).
void bufferCounts(const Call& c, int rank, int nranks, size_t* in, size_t* out);

class Composer {
 public:
  /// `key` names the clique in logs.
  Composer(int nranks, uint64_t key) : nranks_(nranks), key_(key) {}

  /// Checks calls[r] (rank r's batch, for every rank): the same collectives in the same order
  /// with the same shapes, and every send paired with a receive of the same size (in issue order
  /// per sender and receiver). InvalidUsage naming the first difference. No side effect.
  Status check(std::span<const std::vector<Call>> calls) const;

  /// Enqueues on `stream` the launches of checked batches: the collectives in issue order, then
  /// every send/recv pair as copies. The buffer addresses of calls[r] must be valid where
  /// `stream` runs. InvalidUsage for buffers the GPU cannot reach or ranks that disagree on in
  /// place (nothing enqueued for that collective); errors of the compiler and of the launches.
  Status enqueue(std::span<const std::vector<Call>> calls, StreamOps& ops, Stream stream);

 private:
  Status enqueueCollective(std::span<const std::vector<Call>> calls, size_t index, StreamOps& ops,
                           Stream stream);
  Status enqueuePointToPoint(std::span<const std::vector<Call>> calls, StreamOps& ops,
                             Stream stream);
  Result<const CompiledCall*> compiled(const algo::CollShape& shape, const Call& c);

  const int nranks_;
  const uint64_t key_;
  std::mutex mu_;  // cache_
  // Compiled calls by (coll, count, dtype, op, root, in place, premulsum, the scalar's bytes).
  using Key = std::tuple<int, size_t, int, int, int, bool, bool, int64_t>;
  std::map<Key, CompiledCall> cache_;  // node-based: entries never move
};

/// The algorithm TUTTI_ALGO (or NCCL_ALGO) names for `coll` when it names exactly one; "" else.
std::string requestedAlgorithm(Coll coll);

/// How long a rank waits for its peers before its call fails with Timeout: TUTTI_TIMEOUT seconds
/// (0: forever).
std::chrono::milliseconds waitLimit();

/// Waits until ready() holds: spins, then yields, then sleeps 20 us at a time. About every 5 ms
/// of waiting it calls poll(elapsed), whose non-ok Status ends the wait with that Status (abort,
/// a dead peer, the time limit). ready() and poll() run on the calling thread.
Status waitUntil(const std::function<bool()>& ready,
                 const std::function<Status(std::chrono::milliseconds)>& poll);

}  // namespace tutti::device
