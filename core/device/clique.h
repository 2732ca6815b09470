// File: core/device/clique.h
// A clique: the ranks of one communicator that are threads of one process on one GPU
// (ncclCommInitAll with one device listed several times, or one thread per rank). A collective
// on device memory runs as ONE kernel launch that computes every rank's output from every rank's
// input (kernels/program.h, compiled from the algorithm's schedules by core/device/compile.h),
// enqueued once every rank has made the call.
//
// Why not one kernel per rank that waits for its peers, as NCCL does across GPUs: on one GPU the
// ranks' streams share the device's hardware queues (8 by default, CUDA_DEVICE_MAX_CONNECTIONS),
// so a kernel that spins for a peer can sit in front of that peer's kernel in one queue and
// wait forever; tutti-gpu-probe saw exactly that with 8 ranks (and with 2 under MPS), see
// docs/GPU.md. Here no kernel waits for another kernel: every dependency is a CUDA event whose
// record was enqueued before the wait on it, which no ordering of the queues can deadlock.
//
// One call (the k-th device call of every rank meets in slot k % 2):
//  1. each rank's thread deposits its batch and waits;
//  2. the thread whose deposit completes the slot (the launcher) checks that every rank called
//     the same collectives with the same shapes and that their sends and receives pair up,
//     records an "inputs ready" event on every other stream of the call and makes its own stream
//     wait for them, enqueues the programs, records "done" and makes every other stream wait for
//     it; then it releases the waiting threads, which return.
// The launcher makes every CUDA call of the step: the other ranks' threads are blocked meanwhile,
// so their streams hold exactly their work before the call, and no two threads contend for the
// context's lock. The work runs later, in stream order; but a rank's call returns only once every
// rank has called (NCCL allows a call to block until its peers call, which is why one thread
// driving several ranks must put their calls in one group). A group holding several ranks'
// batches deposits them together; when it holds them all, it launches without waiting at all.
//
// Errors: ranks that call different things, buffers the GPU cannot reach, a graph capture that
// does not include every rank's stream: InvalidUsage for every rank of the call, nothing
// enqueued. A rank aborted (ncclCommAbort) or destroyed while its peers wait fails the clique:
// the waiting calls and every later call return InvalidUsage naming the rank. A wait longer than
// TUTTI_TIMEOUT seconds (when set) fails with Timeout naming the ranks that did not call; every
// 10 s of waiting logs a WARN naming them.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "core/device/compose.h"
#include "core/device/stream_ops.h"
#include <tutti/types.hpp>

namespace tutti::device {

class Clique {
 public:
  /// One rank's share of a submission: its calls in issue order, and its communicator's abort
  /// flag (polled while waiting; may be null).
  struct RankBatch {
    int rank = 0;
    const std::vector<Call>* calls = nullptr;
    const std::atomic<bool>* aborted = nullptr;
  };

  /// The clique `key` (the same 64-bit value on every rank of the communicator) of `nranks`
  /// ranks on `device`, created by the first of its ranks to join. InvalidUsage when a clique of
  /// that key exists with another size or device, or nranks is outside [1, kMaxRanks].
  static Result<std::shared_ptr<Clique>> join(uint64_t key, int nranks, int rank, int device,
                                              StreamOps* ops);
  ~Clique();
  Clique(const Clique&) = delete;
  Clique& operator=(const Clique&) = delete;

  /// Submits the next call of each rank in `batches` (the ranks this thread drives in this
  /// call or group; every rank at most once, all at the same call number) and returns once
  /// their streams wait for its result, as described above. Thread-safe: ranks' threads call it
  /// concurrently; one thread per rank at a time, as NCCL requires.
  Status submit(std::span<const RankBatch> batches);

  /// Fails the clique (a member was aborted or destroyed): waiting and later submissions
  /// return `why`. The first reason is kept.
  void fail(const Status& why);

  int nranks() const { return nranks_; }
  int device() const { return device_; }

 private:
  struct Slot;
  Clique(uint64_t key, int nranks, int device, StreamOps* ops);
  Status init();
  Status await(Slot& s, std::span<const RankBatch> batches, uint64_t seq);
  Status launch(Slot& s, Stream launchStream);
  Status failure() const;

  const uint64_t key_;
  const int nranks_;
  const int device_;
  StreamOps* const ops_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<uint64_t> seq_;  // by rank: calls submitted (each rank's entry: its thread only)
  Composer composer_;
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;  // failure_
  Status failure_;
};

}  // namespace tutti::device
