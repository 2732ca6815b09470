// File: core/device/executors.cc
// The device executors behind the seam of core/device/executor.h: the staged executor (which
// device bytes a batch reads and writes, the host work that runs the batch on the staging, one
// rank's batches as device copies) and the two cliques' executors.
#include <algorithm>

#include "base/config.h"
#include "base/log.h"
#include "core/device/clique.h"
#include "core/device/executor.h"
#include "core/device/process_clique.h"
#include "core/device/staged.h"

#if TUTTI_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tutti::device {

namespace {

#if TUTTI_HAVE_CUDA
Status cudaFailure(const char* api, const char* call, cudaError_t e) {
  (void)cudaGetLastError();  // reset, so that the next launch check does not report this one
  return makeStatus(Code::kUnhandledCudaError, "{}: {} failed: {}", api, call,
                    cudaGetErrorString(e));
}

// One rank: every collective's output is its input (avg divides by 1), so a batch of plain
// collectives on one stream is a device copy per out-of-place call, in issue order, and sends to
// self are copies into the matching receives. False (nothing enqueued): the batch needs the
// staged path (premulsum, tasks, several streams, an init still running, unpaired sends), which
// also reports its errors.
bool enqueueSingleRank(DeviceOwner& owner, const std::vector<BatchOp>& ops, Status* st) {
  if (owner.deviceRanks() != 1 || !owner.deviceReady()) return false;
  const auto stream = static_cast<cudaStream_t>(ops.front().stream);
  std::vector<const BatchOp*> sends, recvs;
  for (const BatchOp& op : ops) {
    if (op.kind == BatchOp::Kind::kTask || op.preMul || op.stream != stream) return false;
    if (op.kind == BatchOp::Kind::kSend) sends.push_back(&op);
    if (op.kind == BatchOp::Kind::kRecv) recvs.push_back(&op);
  }
  if (sends.size() != recvs.size()) return false;
  for (size_t k = 0; k < sends.size(); ++k)
    if (sends[k]->count * dataTypeBytes(sends[k]->dtype) !=
        recvs[k]->count * dataTypeBytes(recvs[k]->dtype))
      return false;
  auto copy = [&](void* dst, const void* src, size_t bytes, const char* api) {
    if (bytes == 0 || dst == src || !st->isOk()) return;
    const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream);
    if (e != cudaSuccess) *st = cudaFailure(api, "cudaMemcpyAsync", e);
  };
  for (const BatchOp& op : ops) {
    if (op.kind != BatchOp::Kind::kColl) continue;
    const auto [in, out] = op.ioBytes(0, 1);
    copy(op.recv, op.send, std::min(in, out), op.api);
  }
  for (size_t k = 0; k < sends.size(); ++k)
    copy(recvs[k]->recv, sends[k]->send, recvs[k]->count * dataTypeBytes(recvs[k]->dtype),
         recvs[k]->api);
  return true;
}
#endif  // TUTTI_HAVE_CUDA

class StagedExecutor final : public Executor {
 public:
  const char* name() const override { return "staged"; }

  Status submit(std::span<const RankBatch> batches) override {
    Status first;
    for (const RankBatch& b : batches) {
      Status st = submitOne(b);
      if (first.isOk() && !st.isOk()) first = st;
    }
    return first;
  }

  void fail(const Status&, bool) override {}  // jobs poll DeviceOwner::aborted

 private:
  Status submitOne(const RankBatch& b) {
    std::vector<BatchOp>& ops = *b.ops;
    DeviceOwner* owner = b.owner;
#if !TUTTI_HAVE_CUDA
    (void)owner;
    return invalidUsage("{}: device memory needs a tutti built with CUDA", ops.front().api);
#else
    if (Status st; enqueueSingleRank(*owner, ops, &st)) return st;
    // The job runs on the stream of the first device operation (tasks have none); the batch's
    // other streams join it.
    const auto lead =
        std::find_if(ops.begin(), ops.end(), [](const BatchOp& o) { return o.device(); });
    StagedJob job;
    job.api = lead->api;
    job.stream = lead->stream;
    for (const BatchOp& op : ops)
      if (op.kind != BatchOp::Kind::kTask && op.stream != lead->stream &&
          std::find(job.joinStreams.begin(), job.joinStreams.end(), op.stream) ==
              job.joinStreams.end())
        job.joinStreams.push_back(op.stream);
    // Device ranges read and written.
    for (const BatchOp& op : ops) {
      if (!op.device()) continue;
      const auto [in, out] = op.ioBytes(owner->deviceRank(), owner->deviceRanks());
      const auto send = reinterpret_cast<uintptr_t>(op.send);
      const auto recv = reinterpret_cast<uintptr_t>(op.recv);
      if (op.sendDevice) job.inputs.push_back({send, send + in});
      if (op.recvDevice) job.outputs.push_back({recv, recv + out});
    }
    // The host work: the batch on the staging, on the owner's worker. A raw pointer to the
    // owner: a captured job lives in this executor's queue, which the owner owns.
    job.bind = [&ops, owner](const std::function<std::byte*(uintptr_t)>& host) {
      for (BatchOp& op : ops) {
        if (op.sendDevice) op.send = host(reinterpret_cast<uintptr_t>(op.send));
        if (op.recvDevice) op.recv = host(reinterpret_cast<uintptr_t>(op.recv));
        op.stream = nullptr;  // the proxy must not wait on the stream that waits on it
      }
      return [owner, batch = std::move(ops)]() mutable { return owner->runHost(batch); };
    };
    CallArgs what = lead->callArgs();
    what.preMulScalar = nullptr;  // the operation moves into the job
    job.post = [owner, what](std::function<void()> task) { owner->post(std::move(task), what); };
    job.onFailure = [owner](const Status& st) { owner->recordDeviceError(st, false); };
    job.aborted = [owner] { return owner->deviceAborted(); };
    job.keepAlive = b.keepAlive;
    if (!queue_) queue_ = makeStagedQueue();
    return queue_->enqueue(std::move(job));
#endif
  }

  std::shared_ptr<StagedQueue> queue_;  // created at the first job
};

class CliqueExecutor final : public Executor {
 public:
  explicit CliqueExecutor(std::shared_ptr<Clique> clique) : clique_(std::move(clique)) {}
  const char* name() const override { return "clique"; }

  Status submit(std::span<const RankBatch> batches) override {
    // The clique polls a flag per rank while it waits; an abort during the wait reaches it
    // through fail() (the owner's abort calls failDevicePath).
    std::vector<Clique::RankBatch> ranks(batches.size());
    auto aborted = std::make_unique<std::atomic<bool>[]>(batches.size());
    for (size_t i = 0; i < batches.size(); ++i) {
      aborted[i].store(batches[i].owner->deviceAborted());
      ranks[i] = {batches[i].owner->deviceRank(), batches[i].ops, &aborted[i]};
    }
    Status st = clique_->submit(ranks);
    if (!st.isOk())
      for (const RankBatch& b : batches) b.owner->recordDeviceError(st, true);
    return st;
  }

  void fail(const Status& why, bool) override { clique_->fail(why); }

 private:
  std::shared_ptr<Clique> clique_;
};

class ProcessCliqueExecutor final : public Executor {
 public:
  explicit ProcessCliqueExecutor(std::unique_ptr<ProcessClique> clique)
      : clique_(std::move(clique)) {}
  const char* name() const override { return "process-clique"; }

  Status submit(std::span<const RankBatch> batches) override {
    Status first;
    for (const RankBatch& b : batches) {
      if (b.owner->deviceAborted()) aborted_.store(true);
      Status st = clique_->submit(*b.ops, &aborted_);
      if (!st.isOk()) b.owner->recordDeviceError(st, true);
      if (first.isOk() && !st.isOk()) first = st;
    }
    return first;
  }

  void fail(const Status&, bool abort) override {
    if (!abort) return;
    aborted_.store(true);
    clique_->abort();
  }

 private:
  std::unique_ptr<ProcessClique> clique_;
  std::atomic<bool> aborted_{false};
};

}  // namespace

std::unique_ptr<Executor> makeStagedExecutor() { return std::make_unique<StagedExecutor>(); }
std::unique_ptr<Executor> makeCliqueExecutor(std::shared_ptr<Clique> clique) {
  return std::make_unique<CliqueExecutor>(std::move(clique));
}
std::unique_ptr<Executor> makeProcessCliqueExecutor(std::unique_ptr<ProcessClique> clique) {
  return std::make_unique<ProcessCliqueExecutor>(std::move(clique));
}

}  // namespace tutti::device
