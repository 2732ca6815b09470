// File: python/torch_backend/process_group.h
// ProcessGroupTutti: a c10d::Backend (torch.distributed's process-group plugin interface) that
// runs the collectives of one process group over one tutti::Communicator and its send/recv over a
// second one, on CPU tensors. Point-to-point traffic has a communicator of its own so that a
// receive from any source (recv without src) can tell a sender by the bytes waiting from it: on
// a shared one, a peer already inside a later collective would look like a sender. Calls return at once with a TuttiWork; a worker thread owned by the backend runs them
// in issue order (a Communicator serves one thread at a time) and completes each Work and its
// Future. Argument errors are raised by the call itself, before anything is queued.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tutti/tutti.hpp>
#include <vector>

namespace tutti::torch_backend {

/// One call of the backend. Completed (successfully or with the call's DistBackendError) by the
/// worker thread; its Future holds the output tensors, as DDP's communication hooks expect.
class TuttiWork : public c10d::Work {
 public:
  TuttiWork(int rank, c10d::OpType type, const char* opName, uint64_t seq,
            std::vector<at::Tensor> outputs, std::chrono::milliseconds defaultTimeout,
            std::function<void()> onTimeout);

  /// Blocks until the call completed; rethrows its error. `timeout` 0 means the backend's
  /// timeout when the call was issued (setTimeout). When it runs out, the communicator is
  /// aborted (so that nothing queued behind the call hangs) and DistBackendError is raised,
  /// naming the collective, its sequence number and this rank.
  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  uint64_t getSequencenumber() const override { return seq_; }
  /// The rank a receive got its message from (torch's recv without src returns it); raises for
  /// other calls, and before a receive from any source completed.
  int sourceRank() const override;
  /// Worker thread only, before complete(): the receive's source rank.
  void setSourceRank(int rank) { sourceRank_.store(rank); }
  /// CPU only: nothing to synchronise with.
  void synchronize() override {}

  /// Worker thread only: marks the call finished (error null on success) and completes the
  /// Future, which runs its callbacks on this thread.
  void complete(std::exception_ptr error);

  const char* opName() const { return opName_; }
  uint64_t seq() const { return seq_; }
  /// Adds an output tensor (a coalesced group's receives), before the Work is queued.
  void addOutput(const at::Tensor& t) { outputs_.push_back(t); }

 private:
  const char* opName_;
  uint64_t seq_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds defaultTimeout_;
  std::function<void()> onTimeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<int> sourceRank_{-1};
};

class ProcessGroupTutti : public c10d::Backend {
 public:
  /// Joins the group: rank 0 creates a tutti UniqueId and publishes it in `store` (which torch
  /// prefixes per group), the others read it; then every rank creates the Communicator; the same
  /// again for the send/recv communicator. Blocks until all ranks joined. `timeout` becomes the communicator's collective timeout.
  /// DistBackendError when the rendezvous fails (naming the ranks that did not arrive).
  ProcessGroupTutti(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout);
  /// Finishes the calls already queued, then destroys the communicator.
  ~ProcessGroupTutti() override;

  const std::string getBackendName() const override { return "tutti"; }
  void setTimeout(std::chrono::milliseconds timeout) override;
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }
  /// Fails every queued and running call within about a second (tutti::Communicator::abort).
  void abort() override;
  /// Waits for the queued calls, then stops the worker and destroys the communicator.
  void shutdown() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  /// recv without src: the first message to arrive from any other rank of the group
  /// (Communicator::recvAny on the send/recv communicator); Work::sourceRank() names the sender.
  /// ValueError for an empty tensor (a message of no bytes cannot be seen arriving).
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  /// batch_isend_irecv and _coalescing_manager: the sends and receives issued between
  /// startCoalescing and endCoalescing run together, as one Communicator::sendRecvGroup (every
  /// message posted at once), so ranks that send to each other before they receive do not wait
  /// for each other. Each of them, and endCoalescing, returns the group's one Work. Collectives
  /// issued meanwhile run as usual, in issue order. startCoalescing twice without an
  /// endCoalescing, or endCoalescing without a start, raises ValueError.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

 private:
  using Body = std::function<Status(Communicator&)>;
  struct Queued {
    c10::intrusive_ptr<TuttiWork> work;
    Body body;
  };

  /// Queues `body` behind the calls already issued and returns its Work. The body runs on the
  /// worker thread with the communicator; it stages tensors itself, since earlier calls may
  /// still write them. A blocking call (`async` false: torch waits for it at once) finding
  /// nothing queued or running runs on the caller's thread instead, which saves the two thread
  /// switches (tens of microseconds on a loaded machine) that dominate small collectives.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const char* opName,
                                         std::vector<at::Tensor> outputs, bool async, Body body);
  /// A Work with the next sequence number, not queued yet.
  c10::intrusive_ptr<TuttiWork> makeWork(c10d::OpType type, const char* opName,
                                         std::vector<at::Tensor> outputs);
  /// Queues (or, as enqueue says, runs inline) `work` with its body.
  void submit(const c10::intrusive_ptr<TuttiWork>& work, bool async, Body body);
  /// A send (`send` true) or receive of `tensor` with `peer`: recorded into the group while
  /// coalescing (returning the group's Work), else queued alone.
  c10::intrusive_ptr<c10d::Work> pointToPoint(bool send, const at::Tensor& tensor, int peer);
  /// Runs `body` and completes `work` with its result (worker thread or an inline caller).
  void run(TuttiWork& work, const Body& body);
  void workerLoop();
  /// Stops the worker after the queue drained (drainFirst) or failing what is queued.
  void stop(bool drainFirst);

  Communicator comm_;     ///< collectives
  Communicator p2pComm_;  ///< send, recv, recvAnysource and coalesced send/recv groups
  std::atomic<uint64_t> seq_{0};
  std::atomic<int64_t> timeoutMs_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;
  bool stopping_ = false;
  bool running_ = false;  ///< a body is running (worker or inline): the communicator is taken
  bool stopped_ = false;
  std::thread worker_;

  /// The messages of the group being coalesced (startCoalescing .. endCoalescing); caller's
  /// thread (torch issues a group from one thread).
  struct Coalesced {
    c10::intrusive_ptr<TuttiWork> work;
    std::vector<at::Tensor> tensors;
    std::vector<std::pair<bool, int>> ops;  ///< (send, peer) per tensor
  };
  std::optional<Coalesced> coalescing_;
};

}  // namespace tutti::torch_backend
