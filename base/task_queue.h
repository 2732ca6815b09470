// File: base/task_queue.h
// A thread that runs tasks in submission order, started on first use: a communicator's progress
// thread (its asynchronous calls and staged device jobs, core/comm.h), which the NCCL layer
// shares as its per-communicator worker (nonblocking communicators, multi-communicator groups).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>

namespace tutti {

class TaskQueue {
 public:
  TaskQueue();
  /// stop(24 hours, false): the queued tasks run first.
  ~TaskQueue();
  TaskQueue(const TaskQueue&) = delete;
  TaskQueue& operator=(const TaskQueue&) = delete;

  void submit(std::function<void()> task);
  /// Blocks until every submitted task has finished. Must not be called from a task.
  void drain();
  /// Number of tasks submitted and not yet finished (one atomic load).
  int pending() const { return pending_->load(std::memory_order_acquire); }
  /// Whether the caller is a task of this queue (which must not drain it).
  bool onThread() const;
  /// Lets queued tasks finish (waiting at most `wait`), then ends the thread. With
  /// `detachIfBusy`, a task still running then (an uninterruptible bootstrap) is left to finish on
  /// its own thread, which owns everything it touches. Called from a task of this queue (its last
  /// owner let go inside it), the thread ends after that task.
  void stop(std::chrono::milliseconds wait, bool detachIfBusy);

 private:
  struct Shared;
  std::shared_ptr<Shared> sh_;
  std::shared_ptr<std::atomic<int>> pending_ = std::make_shared<std::atomic<int>>(0);
  std::thread thread_;
};

}  // namespace tutti
