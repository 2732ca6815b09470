// File: core/device/staged.h
// The staged device executor: operations on CUDA device memory, in stream order, run by the host
// engine on pinned copies of their buffers. It serves every layout the device cliques do not
// (ranks in several processes on several GPUs or hosts) and is what the NCCL layer falls back to.
//
// One job is one batch of operations of one communicator. On the caller's stream it enqueues, in
// order:
//   1. the device-to-host copies of every device input range into pinned staging blocks;
//   2. a host function that hands the job to the proxy (the owner's worker thread);
//   3. a one-thread kernel that holds the stream until the proxy has run the job
//      (kernels/cuda_reduce.h, waitFlag);
//   4. the host-to-device copies of every device output range back from staging;
//   5. a host function that returns the staging blocks to the queue's pool (eager jobs only).
// The call returns at once. The proxy runs the job's host work on the staging blocks, then writes
// its flag (done or failed), so the stream never hangs on a failed job. Input and output ranges
// that overlap share one staging block, so the host work sees the aliasing the caller's buffers
// have.
//
// Streams: the job runs after the work before it on its stream, and work after it waits for its
// result; other streams of the batch join it (events) before and after, as NCCL does for a group.
// Jobs run on the proxy in issue order. A job enqueued while its stream is captured in a CUDA
// graph lives as long as the queue and runs at each replay of the graph; allocations made during
// capture relax the thread's capture mode, as NCCL does.
//
// Thread-safety: enqueue may be called from one thread at a time per queue (one thread issues on
// a communicator at a time, as in NCCL); the host functions and the proxy run concurrently.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tutti::device {

/// Whether a CUDA device is usable in this process (cached after the first call; false in builds
/// without CUDA).
bool cudaDevicePresent();

/// Waits for the work enqueued on `stream` (a cudaStream_t) so far; ok for nullptr, without a
/// device or without CUDA. UnhandledCudaError naming `api` when CUDA fails.
Status syncStream(void* stream, const char* api);

/// What CUDA says of a buffer (one cudaPointerGetAttributes): `device` for device or managed
/// memory; `reachable` when a kernel can use it at its own address (device, managed, or pinned
/// host memory mapped at the same address). Both false for nullptr, for pageable host memory, and
/// always on machines or builds without CUDA.
struct MemoryKind {
  bool device = false;
  bool reachable = false;
};
MemoryKind memoryKind(const void* p);

/// A byte range [begin, end) of the address space.
struct Span {
  uintptr_t begin, end;
};

/// The spans sorted by start, with overlapping ones merged. Spans that only touch stay apart:
/// they may lie in two allocations, and one cudaMemcpyAsync cannot cross from one allocation
/// into the next (two buffers that cudaMalloc placed back to back did exactly that on an H100).
std::vector<Span> mergeSpans(std::vector<Span> spans);

/// One staged job, as its owner describes it.
struct StagedJob {
  const char* api = "";  ///< for messages
  void* stream = nullptr;  ///< the cudaStream_t the job runs on
  std::vector<void*> joinStreams;  ///< other streams of the batch (distinct, not `stream`)
  /// Device byte ranges [begin, end) the job reads (inputs) and writes (outputs); they may
  /// overlap and repeat.
  std::vector<Span> inputs, outputs;
  /// Called once by enqueue, after the staging is allocated: given the host address of a device
  /// address inside the ranges (nullptr outside them; valid during the call only), returns the
  /// host work, which the proxy runs once per execution (once for an eager job, at each replay
  /// for a captured one). The host work must not wait on `stream`.
  std::function<std::function<Status()>(const std::function<std::byte*(uintptr_t)>& host)> bind;
  /// Runs a task on the proxy (the owner's worker thread), in submission order.
  std::function<void(std::function<void()>)> post;
  /// A failed execution's error (the host work's Status, or an abort before the stream reached
  /// the job), on the proxy thread.
  std::function<void(const Status&)> onFailure;
  /// True once the owner is aborted: a proxy waiting for an eager job's stream gives up.
  std::function<bool()> aborted;
  /// Held by an eager job until its proxy task has ended (the owner's state, so that it outlives
  /// a job its stream has not reached yet). A captured job does not hold it: it lives in the
  /// queue, which the owner owns, and its closures must not own the owner.
  std::shared_ptr<void> keepAlive;
};

/// A communicator's pinned staging pool and its jobs in flight.
class StagedQueue {
 public:
  StagedQueue();
  ~StagedQueue();
  StagedQueue(const StagedQueue&) = delete;
  StagedQueue& operator=(const StagedQueue&) = delete;

  /// Enqueues `job` on its stream and returns without waiting. Errors (nothing is left enqueued
  /// unless stated): UnhandledCudaError when a CUDA call fails (an enqueue failure after the
  /// inputs' copies leaves the job to fail on the stream); SystemError when pinned memory
  /// cannot be allocated; InvalidUsage without CUDA.
  Status enqueue(StagedJob job);

  /// Waits (at most `limit`) until every eager job has retired. False: some still hold memory.
  bool drain(std::chrono::milliseconds limit);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// A StagedQueue owned by a shared_ptr whose deleter waits (up to 10 s) for the eager jobs in
/// flight, and leaks the queue with a warning when they do not retire (a stream that never
/// reaches them: their host functions may still run).
std::shared_ptr<StagedQueue> makeStagedQueue();

}  // namespace tutti::device
