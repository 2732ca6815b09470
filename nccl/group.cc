// File: nccl/group.cc
// ncclGroupStart/End/SimulateEnd and the executor of recorded operations. Per communicator a
// group runs its collectives in issue order, fusing runs of small allreduces of one dtype and op
// into one allreduce over a staging buffer, then all of its sends and receives as one plan whose
// single round posts every message at once (so ring exchanges and all-to-alls cannot deadlock).
// Several communicators in one group run concurrently: one on the calling thread, the others on
// their workers.
#include "nccl/group.h"

#include <algorithm>

#include "base/log.h"
#include "core/batch.h"

namespace tutti::nccl {

namespace {

struct GroupState {
  int depth = 0;
  ncclResult_t error = ncclSuccess;
  std::vector<std::pair<std::shared_ptr<CommState>, BatchOp>> ops;
};
thread_local GroupState tGroup;

Status ready(CommState& s, const char* api) {
  TUTTI_TRY(checkUsable(s, api));
  if (!s.ready.load()) {
    Status e = s.asyncError();
    if (!e.isOk())
      return Status(e.code(), fmt::format("{}: communicator init failed: {}", api, e.message()));
    return invalidUsage("{}: the communicator is not initialised", api);
  }
  return Status::ok();
}

// The operations of `ops` (no tasks) that are ready to run: for each, the communicator is usable
// and the work before it on its stream is done. The others' errors go to `note`.
template <typename Note>
void admit(CommState& s, std::span<BatchOp* const> ops, std::vector<CallArgs>& out, Note note) {
  for (const BatchOp* op : ops) {
    Status st = ready(s, op->api);
    if (st.isOk()) st = syncStream(op->stream, op->api);
    if (st.isOk()) out.push_back(op->callArgs());
    else note(st);
  }
}

// Runs batches on several communicators: the first on this thread, the others on their workers.
Status runConcurrently(
    std::vector<std::pair<std::shared_ptr<CommState>, std::vector<BatchOp>>>& batches,
    size_t fusion) {
  struct Join {
    std::mutex mu;
    std::condition_variable cv;
    size_t remaining = 0;
    Status first;
  };
  auto join = std::make_shared<Join>();
  join->remaining = batches.size() - 1;
  for (size_t b = 1; b < batches.size(); ++b) {
    auto comm = batches[b].first;
    comm->worker->submit([comm, ops = std::move(batches[b].second), join, fusion]() mutable {
      Status st = runBatch(*comm, ops, fusion);
      if (!st.isOk()) fail(st, comm.get());
      std::lock_guard<std::mutex> lock(join->mu);
      if (join->first.isOk() && !st.isOk()) join->first = st;
      if (--join->remaining == 0) join->cv.notify_all();
    });
  }
  Status mine = runBatch(*batches[0].first, batches[0].second, fusion);
  std::unique_lock<std::mutex> lock(join->mu);
  join->cv.wait(lock, [&] { return join->remaining == 0; });
  return mine.isOk() ? join->first : mine;
}

}  // namespace

bool inGroup() { return tGroup.depth > 0; }

ncclResult_t failArg(const Status& s, CommState* comm) {
  const ncclResult_t r = fail(s, comm);
  noteGroupError(r);
  return r;
}

void noteGroupError(ncclResult_t r) {
  if (tGroup.depth > 0 && tGroup.error == ncclSuccess && r != ncclSuccess && r != ncclInProgress)
    tGroup.error = r;
}

Status runBatch(CommState& comm, std::vector<BatchOp>& ops, size_t fusion) {
  // One call outside a group, the common case: no lists to build.
  if (ops.size() == 1 && ops[0].kind != BatchOp::Kind::kTask) {
    const BatchOp& op = ops[0];
    TUTTI_TRY(ready(comm, op.api));
    TUTTI_TRY(syncStream(op.stream, op.api));
    const CallArgs a = op.callArgs();
    return tutti::runBatch(comm.comm, std::span(&a, 1), fusion);
  }
  Status first;
  auto note = [&](const Status& s) {
    if (first.isOk() && !s.isOk()) first = s;
  };
  // Tasks run in order with the collectives around them; sends and receives all run at the end,
  // as one round (core/batch.h).
  std::vector<BatchOp*> colls, p2p;
  std::vector<CallArgs> batch;
  auto flushColls = [&] {
    if (colls.empty()) return;
    batch.clear();
    admit(comm, colls, batch, note);
    if (!batch.empty()) note(tutti::runBatch(comm.comm, batch, fusion));
    colls.clear();
  };
  for (BatchOp& op : ops) {
    switch (op.kind) {
      case BatchOp::Kind::kTask:
        flushColls();
        note(op.task());
        break;
      case BatchOp::Kind::kSend:
      case BatchOp::Kind::kRecv:
        p2p.push_back(&op);
        break;
      case BatchOp::Kind::kColl:
        colls.push_back(&op);
        break;
    }
  }
  flushColls();
  if (!p2p.empty()) {
    batch.clear();
    admit(comm, p2p, batch, note);
    if (!batch.empty()) note(tutti::runBatch(comm.comm, batch, fusion));
  }
  return first;
}

ncclResult_t submitTask(const std::shared_ptr<CommState>& comm, const char* api,
                        std::function<Status()> task) {
  BatchOp op;
  op.kind = BatchOp::Kind::kTask;
  op.api = api;
  op.task = std::move(task);
  return submit(comm, std::move(op));
}

ncclResult_t submit(const std::shared_ptr<CommState>& comm, BatchOp op) {
  if (tGroup.depth > 0) {
    tGroup.ops.emplace_back(comm, std::move(op));
    return ncclSuccess;
  }
  if (op.device()) {  // stream-ordered: a device executor (core/batch.h)
    DeviceBatch batch{comm->device.get(), comm, {}};
    batch.ops.push_back(std::move(op));
    return fail(submitDevice(std::span(&batch, 1), comm->config.blocking), comm.get());
  }
  if (!comm->config.blocking) {
    comm->worker->submit([comm, op = std::move(op)]() mutable {
      std::vector<BatchOp> v;
      v.push_back(std::move(op));
      Status s = runBatch(*comm, v, fusionBytes());
      if (!s.isOk()) {
        fail(s, comm.get());
        comm->recordAsync(s);
      }
    });
    return ncclInProgress;
  }
  comm->worker->drain();
  std::vector<BatchOp> v;
  v.push_back(std::move(op));
  return fail(runBatch(*comm, v, fusionBytes()), comm.get());
}

Status CommState::runHost(std::vector<BatchOp>& ops) { return runBatch(*this, ops, fusionBytes()); }

void CommState::recordDeviceError(const Status& s, bool returned) {
  if (!returned) fail(s, this);  // else the entry point that returns it reports it
  recordAsync(s);
}

double predictGroup(const std::vector<std::pair<CommState*, BatchOp>>& ops) {
  // The communicator's own choices and predictions (its selector, topology and link model), so
  // the estimate describes what ncclGroupEnd would run; communicators not ready add nothing.
  double total = 0;
  for (const auto& [s, op] : ops) {
    if (op.kind == BatchOp::Kind::kTask || !s->ready.load()) continue;
    const CallArgs a = op.callArgs();
    total += predictBatchUs(s->comm, std::span(&a, 1));
  }
  return total;
}

}  // namespace tutti::nccl

using tutti::nccl::fail;
using tutti::nccl::tGroup;

NCCL_API(ncclResult_t, ncclGroupStart, void) {
  ++tGroup.depth;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGroupEnd, void) {
  using namespace tutti;
  using namespace tutti::nccl;
  if (tGroup.depth == 0)
    return fail(invalidUsage("ncclGroupEnd: called without a matching ncclGroupStart"));
  if (--tGroup.depth > 0) return ncclSuccess;
  auto ops = std::move(tGroup.ops);
  const ncclResult_t earlier = tGroup.error;
  tGroup.ops.clear();
  tGroup.error = ncclSuccess;
  if (earlier != ncclSuccess) {
    // NCCL: an argument error inside the group cancels the whole group.
    for (auto& [comm, op] : ops)
      if (op.kind == BatchOp::Kind::kTask)
        comm->recordAsync(
            invalidUsage("ncclGroupEnd: the group was cancelled by an earlier "
                         "error ({})",
                         threadLastError()));
    return earlier;
  }
  if (ops.empty()) return ncclSuccess;

  // One batch per communicator, in order of first appearance.
  std::vector<std::pair<std::shared_ptr<CommState>, std::vector<BatchOp>>> batches;
  bool blocking = false, nonblocking = false;
  for (auto& [comm, op] : ops) {
    auto it = std::find_if(batches.begin(), batches.end(),
                           [&](const auto& b) { return b.first == comm; });
    if (it == batches.end()) {
      batches.emplace_back(comm, std::vector<BatchOp>{});
      it = std::prev(batches.end());
      (comm->config.blocking ? blocking : nonblocking) = true;
    }
    it->second.push_back(std::move(op));
  }
  if (blocking && nonblocking)
    return fail(
        invalidUsage("ncclGroupEnd: blocking and nonblocking communicators are not "
                     "allowed in the same group"));
  // Batches that touch device memory go to the device executors (core/batch.h): what a clique
  // takes leaves the batch's host operations behind, a staged job takes the whole batch.
  std::vector<DeviceBatch> device;
  std::vector<size_t> deviceOf;  // index in `batches`
  for (size_t b = 0; b < batches.size(); ++b) {
    auto& [comm, batch] = batches[b];
    if (std::none_of(batch.begin(), batch.end(), [](const BatchOp& o) { return o.device(); }))
      continue;
    device.push_back({comm->device.get(), comm, std::move(batch)});
    deviceOf.push_back(b);
  }
  Status staged = submitDevice(device, !nonblocking);
  for (size_t d = 0; d < device.size(); ++d) batches[deviceOf[d]].second = std::move(device[d].ops);
  std::erase_if(batches, [](const auto& b) { return b.second.empty(); });
  if (batches.empty()) return fail(staged);  // the device paths' first error, if any
  const size_t fusion = fusionBytes();
  if (nonblocking) {
    for (auto& [comm, batch] : batches) {
      comm->worker->submit([comm, batch = std::move(batch), fusion]() mutable {
        Status s = runBatch(*comm, batch, fusion);
        if (!s.isOk()) {
          fail(s, comm.get());
          comm->recordAsync(s);
        }
      });
    }
    return staged.isOk() ? ncclInProgress : fail(staged);
  }
  for (auto& b : batches) b.first->worker->drain();
  if (batches.size() == 1) {
    Status s = runBatch(*batches[0].first, batches[0].second, fusion);
    return fail(staged.isOk() ? s : staged, batches[0].first.get());
  }
  Status s = runConcurrently(batches, fusion);
  return fail(staged.isOk() ? s : staged);
}

NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  using namespace tutti;
  using namespace tutti::nccl;
  if (tGroup.depth == 0)
    return fail(invalidUsage("ncclGroupSimulateEnd: called without a matching ncclGroupStart"));
  if (!simInfo || simInfo->magic != 0x74685283u ||
      simInfo->size < offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float)) {
    --tGroup.depth;
    if (tGroup.depth == 0) {
      tGroup.ops.clear();
      tGroup.error = ncclSuccess;
    }
    return fail(
        invalidArgument("ncclGroupSimulateEnd: simInfo {} was not initialised with "
                        "NCCL_SIM_INFO_INITIALIZER",
                        static_cast<const void*>(simInfo)));
  }
  if (--tGroup.depth > 0) return ncclSuccess;
  std::vector<std::pair<CommState*, BatchOp>> ops;
  for (auto& [comm, op] : tGroup.ops) ops.emplace_back(comm.get(), op);
  tGroup.ops.clear();
  const ncclResult_t earlier = tGroup.error;
  tGroup.error = ncclSuccess;
  if (earlier != ncclSuccess) return earlier;
  simInfo->estimatedTime = static_cast<float>(predictGroup(ops));
  return ncclSuccess;
}
