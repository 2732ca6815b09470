// File: nccl/device.cc
// The NCCL layer's side of the staged device executor (core/device/staged.h): which device bytes
// a batch reads and writes, the host work that runs it on the staging (the batch, communicator
// tasks included, on the communicator's worker), and one rank's batches as device copies.
#include "nccl/device.h"

#include <algorithm>

#include "base/config.h"
#include "base/log.h"

#if TUTTI_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tutti::nccl {

#if !TUTTI_HAVE_CUDA

Status enqueueDevice(const std::shared_ptr<CommState>&, std::vector<PendingOp> ops) {
  return invalidUsage("{}: device memory needs a tutti built with CUDA", ops.front().api);
}

#else

namespace {

Status cudaFailure(const char* api, const char* call, cudaError_t e) {
  (void)cudaGetLastError();  // reset, so that the next launch check does not report this one
  return makeStatus(Code::kUnhandledCudaError, "{}: {} failed: {}", api, call,
                    cudaGetErrorString(e));
}

device::StagedQueue& queueOf(CommState& s) {
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.device) s.device = device::makeStagedQueue();
  return *s.device;
}

// One rank: every collective's output is its input (avg divides by 1), so a batch of plain
// collectives on one stream is a device copy per out-of-place call, in issue order, and sends to
// self are copies into the matching receives. False (nothing enqueued): the batch needs the
// staged path (premulsum, communicator tasks, several streams, an init still running, unpaired
// sends), which also reports its errors.
bool enqueueSingleRank(CommState& s, const std::vector<PendingOp>& ops, Status* st) {
  if (s.nranks != 1 || !s.ready.load()) return false;
  const cudaStream_t stream = ops.front().stream;
  std::vector<const PendingOp*> sends, recvs;
  for (const PendingOp& op : ops) {
    if (op.kind == PendingOp::Kind::kTask || op.preMul || op.stream != stream) return false;
    if (op.kind == PendingOp::Kind::kSend) sends.push_back(&op);
    if (op.kind == PendingOp::Kind::kRecv) recvs.push_back(&op);
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
  for (const PendingOp& op : ops) {
    if (op.kind != PendingOp::Kind::kColl) continue;
    size_t in = 0, out = 0;
    ioBytes(op, 0, 1, &in, &out);
    copy(op.recv, op.send, std::min(in, out), op.api);
  }
  for (size_t k = 0; k < sends.size(); ++k)
    copy(recvs[k]->recv, sends[k]->send, recvs[k]->count * dataTypeBytes(recvs[k]->dtype),
         recvs[k]->api);
  return true;
}

}  // namespace

Status enqueueDevice(const std::shared_ptr<CommState>& comm, std::vector<PendingOp> ops) {
  CommState& s = *comm;
  if (Status st; enqueueSingleRank(s, ops, &st)) return st;
  // The job runs on the stream of the first device operation (tasks have none); the batch's
  // other streams join it.
  const auto lead =
      std::find_if(ops.begin(), ops.end(), [](const PendingOp& o) { return o.device(); });
  device::StagedJob job;
  job.api = lead->api;
  job.stream = lead->stream;
  for (const PendingOp& op : ops)
    if (op.kind != PendingOp::Kind::kTask && op.stream != lead->stream &&
        std::find(job.joinStreams.begin(), job.joinStreams.end(), op.stream) ==
            job.joinStreams.end())
      job.joinStreams.push_back(op.stream);
  // Device ranges read and written.
  for (const PendingOp& op : ops) {
    if (!op.device()) continue;
    size_t in = 0, out = 0;
    ioBytes(op, s.rank, s.nranks, &in, &out);
    const auto send = reinterpret_cast<uintptr_t>(op.send);
    const auto recv = reinterpret_cast<uintptr_t>(op.recv);
    if (op.sendDevice) job.inputs.push_back({send, send + in});
    if (op.recvDevice) job.outputs.push_back({recv, recv + out});
  }
  // The host work: the batch on the staging, on the communicator's worker. Raw pointers to the
  // communicator: a captured job lives in its queue, which the communicator owns.
  CommState* state = &s;
  job.bind = [&ops, state](const std::function<std::byte*(uintptr_t)>& host) {
    for (PendingOp& op : ops) {
      if (op.sendDevice) op.send = host(reinterpret_cast<uintptr_t>(op.send));
      if (op.recvDevice) op.recv = host(reinterpret_cast<uintptr_t>(op.recv));
      op.stream = nullptr;  // the proxy must not wait on the stream that waits on it
    }
    return [state, batch = std::move(ops)]() mutable {
      return runBatch(*state, batch, fusionBytes());
    };
  };
  job.post = [state](std::function<void()> task) { state->worker.submit(std::move(task)); };
  job.onFailure = [state](const Status& st) {
    fail(st, state);
    state->recordAsync(st);
  };
  job.aborted = [state] { return state->aborted.load(); };
  job.keepAlive = comm;
  return queueOf(s).enqueue(std::move(job));
}

#endif  // TUTTI_HAVE_CUDA

}  // namespace tutti::nccl
