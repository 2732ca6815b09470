// File: core/comm.h
// CommImpl: the state behind tutti::Communicator. Owns the bootstrap ring, the transports and
// one connection per peer, the plan cache, the error state and the progress thread that runs
// asynchronous work in issue order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "core/bootstrap.h"
#include "core/engine.h"
#include "transports/transport.h"
#include <tutti/tutti.hpp>

namespace tutti::detail {

/// One call's arguments, as the API received them.
struct CallArgs {
  Coll coll = Coll::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = 0;
  int sendPeer = -1;  ///< point to point: -1 when this call does not send
  int recvPeer = -1;  ///< point to point: -1 when this call does not receive
  const char* api = "";  ///< "allReduce", for messages
};

class WorkState {
 public:
  void finish(Status s);
  Status wait();
  bool done() const;
  Status status() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
};

class CommImpl {
 public:
  static Result<std::shared_ptr<CommImpl>> create(const bootstrap::IdData& id, int rank,
                                                  int nranks, const Options& options);
  ~CommImpl();

  int rank() const { return rank_; }
  int size() const { return nranks_; }
  std::string transportTo(int peer) const;

  /// Checks the arguments (no side effect on error), then runs the call on this thread after any
  /// queued asynchronous work.
  Status run(const CallArgs& args);
  /// Checks the arguments, then queues the call for the progress thread.
  Result<Work> runAsync(const CallArgs& args);

  void abort();
  Status asyncError() const;
  Status setAlgorithm(Coll coll, const std::string& name);
  Result<std::string> loadSchedule(const std::string& path);

 private:
  CommImpl() = default;
  Status init(const bootstrap::IdData& id, const Options& options);
  Status check(const CallArgs& a, bool* inPlace) const;
  Status execute(const CallArgs& a, bool inPlace);
  Result<Plan*> plan(const CallArgs& a, bool inPlace);
  void drainQueue();
  void progressLoop();
  void selectAlgorithm(Coll coll, const std::string& name);  // "" = default
  Status failed() const;
  /// No error recorded and not aborted: two atomic loads, for the hot path.
  bool healthy() const {
    return !hasError_.load(std::memory_order_acquire) && !abort_.load(std::memory_order_relaxed);
  }
  void recordError(const Status& s);

  int rank_ = 0, nranks_ = 1;
  std::unique_ptr<bootstrap::Bootstrap> boot_;
  std::vector<transport::PeerInfo> peers_;
  std::vector<std::unique_ptr<transport::Transport>> transports_;
  std::vector<std::unique_ptr<transport::Connection>> conns_;  // by peer
  std::vector<std::string> connTransport_;                     // by peer
  ExecContext exec_;
  std::atomic<bool> abort_{false};
  uint64_t seq_ = 0;  // collectives issued (the API's sequence number)
  std::map<Coll, std::string> algoOverride_;  // changing it clears plans_ (see selectAlgorithm)

  // The override is not part of the key: plans_ is cleared whenever an override changes, so a
  // repeated call builds nothing and allocates nothing.
  using PlanKey = std::tuple<int, size_t, int, int, int, bool, int, int>;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
  PlanKey lastKey_{};          // the last plan looked up (repeated calls skip the map walk);
  Plan* lastPlan_ = nullptr;   // reset whenever plans_ changes
  std::vector<std::byte> scratchPool_;  // shared by all plans (one executes at a time)

  mutable std::mutex errMu_;
  Status firstError_;
  std::atomic<bool> hasError_{false};  // firstError_ is set (read without errMu_ on every call)

  std::mutex qMu_;
  std::condition_variable qCv_;
  std::deque<std::function<void()>> queue_;
  bool running_ = false;  // the progress thread is executing a task
  std::atomic<int> queued_{0};  // tasks queued or running: run() skips drainQueue() at 0
  CallArgs lastChecked_{.api = nullptr};  // the last blocking call that passed check() (execMu_)
  bool lastInPlace_ = false;
  bool stop_ = false;
  std::thread thread_;
  std::mutex execMu_;  // one plan executes at a time
};

}  // namespace tutti::detail
