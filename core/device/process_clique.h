// File: core/device/process_clique.h
// Ranks of one communicator that are separate processes on one GPU (torchrun with every rank on
// cuda:0, several MPI ranks per GPU): a process clique. As in the thread clique
// (core/device/clique.h), one kernel computes every rank's output from every rank's input; here
// it runs in the leader's process (rank 0), which maps the other ranks' buffers with CUDA IPC.
//
// Why this shape (docs/GPU.md, tutti-gpu-probe on an H200): without MPS the processes' contexts
// are time-sliced, so a kernel that spins for a kernel of another process waits for a whole time
// slice (2.2 ms per barrier of spinning kernels with 2 processes, 6.7 ms with 4), and every
// process that runs a kernel per call costs a context switch (about 70-110 us); the GPU's stream
// memory operations, which no SM executes, synchronised 2 processes in 8 us and 4 in 28. So only
// the leader runs a kernel, and the ranks wait for each other with stream memory operations on
// flags in shared host memory. With MPS the same protocol runs (and its waits are faster).
//
// One call. Rank r != 0: posts its batch (shapes, and for each buffer its allocation's IPC handle
// and offset) in its mailbox in shared memory, enqueues on its stream "ready[r] = 1", "wait until
// done[r]", "done[r] = 0", and returns. Rank 0: waits on the host until every rank posted this
// call, maps their buffers (once per allocation: the mappings are cached), checks that the calls
// match, and enqueues on its stream, for every r: "wait until ready[r]", "ready[r] = 0"; then the
// kernels (core/device/compose.h); then "done[r] = 1" for every r, which is written even when the
// call failed, so that no rank's stream waits forever. The flags are handshakes (set by one side,
// cleared by the other after it saw them), so a call captured in a CUDA graph on every rank can
// be replayed any number of times.
//
// Aborts: each flag is a 64-bit word whose low half is the handshake and whose high half is a
// sticky "aborted" bit that every wait also accepts. ncclCommAbort on any rank sets it on the
// flags that rank's peers or its own stream wait on, so that no stream stays blocked, and marks
// the clique failed: later calls on every rank fail with the reason. A rank that waits on the
// host (the leader for a post, a rank for a free mailbox slot) polls its abort flag, the other
// process (does it still exist), the clique's failure and TUTTI_TIMEOUT.
//
// Memory: every buffer a rank passes must be cudaMalloc'd device memory (CUDA IPC); others are
// refused with InvalidUsage on every rank of the call.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "core/device/compose.h"
#include "core/device/stream_ops.h"

namespace tutti::device {

class ProcessClique {
 public:
  /// An allgather over the communicator: every rank's `bytes` bytes, in rank order.
  using Allgather = std::function<Status(const void* mine, void* all, size_t bytes)>;

  /// Collective over all ranks: rank 0 creates the shared memory of the clique `key`, the others
  /// map it, every rank maps it for the GPU. pids: every rank's process id. Errors of the shared
  /// memory and of CUDA; InvalidUsage for nranks outside [2, kMaxRanks].
  static Result<std::unique_ptr<ProcessClique>> create(uint64_t key, int nranks, int rank,
                                                       int device, std::vector<int64_t> pids,
                                                       StreamOps* ops, const Allgather& allgather);
  ~ProcessClique();
  ProcessClique(const ProcessClique&) = delete;
  ProcessClique& operator=(const ProcessClique&) = delete;

  /// Submits this rank's next batch (see above). A rank other than 0 returns once the batch is
  /// posted and its stream's waits are enqueued; rank 0 returns once every rank posted this call
  /// and the kernels are enqueued. `aborted` (may be null) is polled while waiting. Errors: the
  /// clique's failure (a rank aborted, a rank whose process ended, a call that failed on the
  /// leader: reported by every rank at its next call), InvalidUsage for calls that differ or
  /// buffers that cannot be shared, Timeout (TUTTI_TIMEOUT). One thread at a time.
  Status submit(const std::vector<Call>& calls, const std::atomic<bool>* aborted);

  /// ncclCommAbort: releases every stream wait of this rank and of the waits its peers have on
  /// it, and fails the clique. Thread-safe; idempotent.
  void abort();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  struct Region;  // the shared memory layout (process_clique.cc)

 private:
  ProcessClique(uint64_t key, int nranks, int rank, int device, std::vector<int64_t> pids,
                StreamOps* ops);
  Status attach(const Allgather& allgather);
  Status submitPeer(const std::vector<Call>& calls, const std::atomic<bool>* aborted);
  Status submitLeader(const std::vector<Call>& calls, const std::atomic<bool>* aborted);
  Status peerAlive(int r) const;
  Status failure() const;
  void fail(const std::string& why);
  Result<void*> mapped(int r, const StreamOps::Export& e);

  const uint64_t key_;
  const int nranks_, rank_, device_;
  const std::vector<int64_t> pids_;
  StreamOps* const ops_;
  Composer composer_;
  Region* region_ = nullptr;  // shared memory, mapped for the host
  size_t regionBytes_ = 0;
  Region* regionDev_ = nullptr;  // the same memory's device address
  uint64_t seq_ = 0;             // calls submitted by this rank
  std::vector<Event> events_;    // joining a batch's other streams: 2 per extra stream
  Event last_ = nullptr;         // recorded after this rank's latest handshake
  bool used_ = false;            // last_ was recorded
  std::map<std::pair<int, uint64_t>, void*> imports_;  // leader: (rank, allocation) -> base
};

}  // namespace tutti::device
