// File: nccl/group.cc
// ncclGroupStart/End/SimulateEnd and the executor of recorded operations. Per communicator a
// group runs its collectives in issue order, fusing runs of small allreduces of one dtype and op
// into one allreduce over a staging buffer, then all of its sends and receives as one plan whose
// single round posts every message at once (so ring exchanges and all-to-alls cannot deadlock).
// Several communicators in one group run concurrently: one on the calling thread, the others on
// their workers.
#include "nccl/group.h"

#include <algorithm>
#include <cstring>

#include "algorithms/algorithm.h"
#include "algorithms/simulator.h"
#include "core/comm.h"
#include "core/engine.h"
#include "core/env.h"
#include "core/log.h"
#include "kernels/reduce.h"
#include "nccl/device.h"

namespace tutti::nccl {

namespace {

// Default from tutti-nccl-fusion on 4 ranks over shm (docs/NCCL.md, "Group fusion"): fused
// buffers up to 64 KiB were 3.5-4.3x faster than separate calls for 4-32 KiB allreduces, while
// 128 KiB-4 MiB fused buffers were no faster or slower (0.4-1.4x). Measured under load.
TUTTI_PARAM_INT(kFusionBytes, "TUTTI_FUSION_BYTES", nullptr, "NCCL", 64 << 10,
                "largest fused allreduce buffer inside an NCCL group (bytes; 0 disables fusion)");

struct GroupState {
  int depth = 0;
  ncclResult_t error = ncclSuccess;
  std::vector<std::pair<std::shared_ptr<CommState>, PendingOp>> ops;
};
thread_local GroupState tGroup;

bool overlaps(const void* a, size_t an, const void* b, size_t bn) {
  if (!a || !b || an == 0 || bn == 0) return false;
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bn && y < x + an;
}

Status ensureStaging(CommState& s, size_t bytes, const char* api) {
  if (s.staging.size() >= bytes) return Status::ok();
  try {
    s.staging.resize(bytes);
  } catch (const std::bad_alloc&) {
    return systemError("{}: cannot allocate {} bytes of staging memory", api, bytes);
  }
  return Status::ok();
}

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

Status runColl(CommState& s, const PendingOp& op) {
  TUTTI_TRY(ready(s, op.api));
  TUTTI_TRY(syncStream(op.stream, op.api));
  Communicator& c = s.comm;
  const void* send = op.send;
  if (op.preMul && op.count > 0) {
    const size_t in = op.coll == Coll::kReduceScatter ? op.count * s.nranks : op.count;
    const size_t elem = dataTypeBytes(op.dtype);
    TUTTI_TRY(ensureStaging(s, in * elem, op.api));
    TUTTI_TRY(kernels::scale(s.staging.data(), op.send, in, op.dtype, op.scalar.data()));
    send = s.staging.data();
  }
  switch (op.coll) {
    case Coll::kAllReduce:
      return c.allReduce(send, op.recv, op.count, op.dtype, op.op);
    case Coll::kReduce:
      return c.reduce(send, op.recv, op.count, op.dtype, op.op, op.root);
    case Coll::kReduceScatter:
      return c.reduceScatter(send, op.recv, op.count, op.dtype, op.op);
    case Coll::kAllGather:
      return c.allGather(send, op.recv, op.count, op.dtype);
    case Coll::kBroadcast:
      return c.broadcast(send, op.recv, op.count, op.dtype, op.root);
    case Coll::kAllToAll:
      return c.allToAll(send, op.recv, op.count, op.dtype);
    case Coll::kGather:
      return c.gather(send, op.recv, op.count, op.dtype, op.root);
    case Coll::kScatter:
      return c.scatter(send, op.recv, op.count, op.dtype, op.root);
    default:
      return internalError("{}: unexpected collective {}", op.api, collName(op.coll));
  }
}

bool fusable(const PendingOp& op, size_t limit) {
  return op.kind == PendingOp::Kind::kColl && op.coll == Coll::kAllReduce && op.count > 0 &&
         op.count * dataTypeBytes(op.dtype) <= limit;
}

// Length of the run of fusable allreduces starting at ops[i] (1 when nothing to fuse).
size_t fusedRun(const std::vector<PendingOp>& ops, size_t i, size_t limit) {
  if (!fusable(ops[i], limit)) return 1;
  const size_t elem = dataTypeBytes(ops[i].dtype);
  size_t total = ops[i].count * elem, j = i + 1;
  for (; j < ops.size(); ++j) {
    const PendingOp& o = ops[j];
    if (!fusable(o, limit) || o.dtype != ops[i].dtype || o.op != ops[i].op) break;
    if (total + o.count * elem > limit) break;
    // A later input must not be an earlier output: fused, it would be read before written.
    bool dependent = false;
    for (size_t k = i; k < j && !dependent; ++k)
      dependent = overlaps(o.send, o.count * elem, ops[k].recv, ops[k].count * elem);
    if (dependent) break;
    total += o.count * elem;
  }
  return j - i;
}

// One plan made of the unfused calls' own plans, round by round: segment k's steps, with its
// ranges moved to its place in the packed staging buffers, run in round r exactly as they would
// alone. Every element is therefore reduced by the same algorithm in the same order as without
// fusion (bit-identical results), while the latency of each round is paid once for all calls.
// Out-of-place segments read the packed input; in-place ones read and write the packed output
// only, as they do alone.
Status runFused(CommState& s, std::vector<PendingOp>& ops, size_t first, size_t n) {
  const PendingOp& head = ops[first];
  TUTTI_TRY(ready(s, head.api));
  const size_t elem = dataTypeBytes(head.dtype);
  size_t total = 0;
  for (size_t k = first; k < first + n; ++k) total += ops[k].count;
  TUTTI_TRY(ensureStaging(s, 2 * total * elem, head.api));
  std::byte* in = s.staging.data();
  std::byte* out = in + total * elem;
  detail::CommImpl* impl = s.comm.impl();

  Plan fused;
  fused.coll = Coll::kAllReduce;
  fused.elemBytes = elem;
  fused.algorithm = "fused";
  size_t off = 0, scratch = 0;
  for (size_t k = first; k < first + n; ++k) {
    const PendingOp& o = ops[k];
    TUTTI_TRY(syncStream(o.stream, o.api));
    const bool inPlace = !o.preMul && o.send == o.recv;
    std::byte* dst = (inPlace ? out : in) + off * elem;
    if (o.preMul)
      TUTTI_TRY(kernels::scale(dst, o.send, o.count, o.dtype, o.scalar.data()));
    else
      std::memcpy(dst, o.send, o.count * elem);
    detail::CallArgs a;
    a.coll = Coll::kAllReduce;
    a.send = in + off * elem;
    a.recv = inPlace ? const_cast<std::byte*>(in + off * elem) : out + off * elem;
    a.count = o.count;
    a.dtype = o.dtype;
    a.op = o.op;
    a.api = o.api;
    TUTTI_TRY_ASSIGN(const Plan* p, impl->planFor(a, inPlace));
    // Copied right away: building the next segment's plan may evict this one from the cache.
    if (k == first) {
      fused.reduce = p->reduce;
      fused.divide = p->divide;
      fused.divisor = p->divisor;
    }
    fused.algorithm += (k == first ? " " : "+") + p->algorithm;
    const auto& rounds = p->schedule.rounds;
    if (fused.schedule.rounds.size() < rounds.size()) fused.schedule.rounds.resize(rounds.size());
    for (size_t r = 0; r < rounds.size(); ++r) {
      for (algo::Step st : rounds[r]) {
        if (inPlace) {  // alone, input and output are one buffer: keep them one
          if (st.src == algo::Buf::kInput) st.src = algo::Buf::kOutput;
          if (st.dst == algo::Buf::kInput) st.dst = algo::Buf::kOutput;
        }
        auto shift = [&](algo::Buf b) { return b == algo::Buf::kScratch ? scratch : off; };
        st.srcOffset += shift(st.src);
        st.dstOffset += shift(st.dst);
        fused.schedule.rounds[r].push_back(st);
      }
    }
    scratch += p->schedule.scratchCount;
    off += o.count;
  }
  fused.schedule.scratchCount = scratch;
  fused.scratchBytes = scratch * elem;
  if (fused.divide) fused.divideCount = total;
  TUTTI_LOG_TRACE(Subsys::kColl, "group: fused {} allreduces ({} elements, {} {}) as '{}'", n,
                  total, dataTypeName(head.dtype), redOpName(head.op), fused.algorithm);
  detail::CallArgs whole;  // what the ranks' call checks compare: one allreduce of `total`
  whole.coll = Coll::kAllReduce;
  whole.count = total;
  whole.dtype = head.dtype;
  whole.op = head.op;
  whole.api = head.api;
  TUTTI_TRY(impl->runPlan(fused, in, out, &whole));
  off = 0;
  for (size_t k = first; k < first + n; ++k) {
    std::memcpy(ops[k].recv, out + off * elem, ops[k].count * elem);
    off += ops[k].count;
  }
  return Status::ok();
}

// Every send and receive of the batch as one round: each message is posted at once, and messages
// between one pair of ranks keep their call order (the transports match them in order).
Status runP2p(CommState& s, const std::vector<PendingOp*>& ops) {
  const char* api = ops.front()->api;
  TUTTI_TRY(ready(s, api));
  std::vector<size_t> selfSends, selfRecvs;
  uintptr_t inBase = UINTPTR_MAX, outBase = UINTPTR_MAX;
  for (const PendingOp* o : ops) {
    TUTTI_TRY(syncStream(o->stream, o->api));
    const size_t bytes = o->count * dataTypeBytes(o->dtype);
    if (bytes == 0) continue;
    if (o->kind == PendingOp::Kind::kSend) {
      inBase = std::min(inBase, reinterpret_cast<uintptr_t>(o->send));
      if (o->peer == s.rank) selfSends.push_back(bytes);
    } else {
      outBase = std::min(outBase, reinterpret_cast<uintptr_t>(o->recv));
      if (o->peer == s.rank) selfRecvs.push_back(bytes);
    }
  }
  if (selfSends != selfRecvs)
    return invalidUsage(
        "{}: a send to this rank itself ({}) needs a matching receive of the same "
        "size in the same group (rank {}: {} sends, {} receives to self)",
        api, s.rank, s.rank, selfSends.size(), selfRecvs.size());
  Plan plan;
  plan.coll = Coll::kSendRecv;
  plan.algorithm = "grouped send/recv";
  plan.elemBytes = 1;  // steps count bytes, offsets are from the lowest user buffer
  std::vector<algo::Step> round;
  for (const PendingOp* o : ops) {
    const size_t bytes = o->count * dataTypeBytes(o->dtype);
    if (bytes == 0) continue;
    algo::Step st;
    st.peer = o->peer;
    st.count = bytes;
    if (o->kind == PendingOp::Kind::kSend) {
      st.op = algo::Op::kSend;
      st.src = algo::Buf::kInput;
      st.srcOffset = reinterpret_cast<uintptr_t>(o->send) - inBase;
    } else {
      st.op = algo::Op::kRecv;
      st.dst = algo::Buf::kOutput;
      st.dstOffset = reinterpret_cast<uintptr_t>(o->recv) - outBase;
    }
    round.push_back(st);
  }
  if (round.empty()) return Status::ok();
  plan.schedule.rounds.push_back(std::move(round));
  return s.comm.impl()->runPlan(plan, reinterpret_cast<const void*>(inBase),
                                reinterpret_cast<void*>(outBase));
}

// Runs batches on several communicators: the first on this thread, the others on their workers.
Status runConcurrently(
    std::vector<std::pair<std::shared_ptr<CommState>, std::vector<PendingOp>>>& batches,
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
    comm->worker.submit([comm, ops = std::move(batches[b].second), join, fusion]() mutable {
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

size_t fusionBytes() {
  const int64_t v = kFusionBytes.get();
  return v > 0 ? static_cast<size_t>(v) : 0;
}

bool inGroup() { return tGroup.depth > 0; }

void noteGroupError(ncclResult_t r) {
  if (tGroup.depth > 0 && tGroup.error == ncclSuccess && r != ncclSuccess && r != ncclInProgress)
    tGroup.error = r;
}

Status runBatch(CommState& comm, std::vector<PendingOp>& ops, size_t fusion) {
  Status first;
  auto note = [&](const Status& s) {
    if (first.isOk() && !s.isOk()) first = s;
  };
  std::vector<PendingOp*> p2p;
  for (size_t i = 0; i < ops.size();) {
    PendingOp& op = ops[i];
    switch (op.kind) {
      case PendingOp::Kind::kTask:
        note(op.task());
        ++i;
        break;
      case PendingOp::Kind::kSend:
      case PendingOp::Kind::kRecv:
        p2p.push_back(&op);
        ++i;
        break;
      case PendingOp::Kind::kColl: {
        const size_t n = fusion > 0 ? fusedRun(ops, i, fusion) : 1;
        note(n > 1 ? runFused(comm, ops, i, n) : runColl(comm, op));
        i += n;
        break;
      }
    }
  }
  if (!p2p.empty()) note(runP2p(comm, p2p));
  return first;
}

ncclResult_t submit(const std::shared_ptr<CommState>& comm, PendingOp op) {
  if (tGroup.depth > 0) {
    tGroup.ops.emplace_back(comm, std::move(op));
    return ncclSuccess;
  }
  if (op.device()) {  // stream-ordered: the clique's kernel, or staged for the worker
    std::vector<std::pair<std::shared_ptr<CommState>, std::vector<PendingOp>>> batch(1);
    batch[0].first = comm;
    batch[0].second.push_back(std::move(op));
    if (comm->clique && comm->config.blocking)
      return fail(submitToClique(batch), comm.get());
    if (comm->procClique && comm->config.blocking)
      return fail(submitToProcessClique(*comm, batch[0].second), comm.get());
    return fail(enqueueDevice(comm, std::move(batch[0].second)), comm.get());
  }
  if (!comm->config.blocking) {
    comm->worker.submit([comm, op = std::move(op)]() mutable {
      std::vector<PendingOp> v;
      v.push_back(std::move(op));
      Status s = runBatch(*comm, v, fusionBytes());
      if (!s.isOk()) {
        fail(s, comm.get());
        comm->recordAsync(s);
      }
    });
    return ncclInProgress;
  }
  comm->worker.drain();
  std::vector<PendingOp> v;
  v.push_back(std::move(op));
  return fail(runBatch(*comm, v, fusionBytes()), comm.get());
}

double predictGroup(const std::vector<std::pair<CommState*, PendingOp>>& ops) {
  const algo::LinkModel model = algo::LinkModel::defaults();
  const algo::LinkParams& shm = model.links[static_cast<int>(algo::LinkClass::kShm)];
  double total = 0;
  for (const auto& [s, op] : ops) {
    if (op.kind == PendingOp::Kind::kTask || op.count == 0) continue;
    const double bytes = static_cast<double>(op.count * dataTypeBytes(op.dtype));
    if (op.kind != PendingOp::Kind::kColl) {  // one message
      total += shm.latencyUs + bytes / (shm.bandwidthGBps * 1e3);
      continue;
    }
    // The communicator's own choice and prediction (its selector, topology and link model), so
    // the estimate describes what ncclGroupEnd would run.
    if (!s->ready.load()) continue;
    auto choice = s->comm.algorithmFor(op.coll, op.count, op.dtype, op.op, op.root, false);
    if (choice.isOk() && choice->predictedUs > 0) total += choice->predictedUs;
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
      if (op.kind == PendingOp::Kind::kTask)
        comm->recordAsync(
            invalidUsage("ncclGroupEnd: the group was cancelled by an earlier "
                         "error ({})",
                         threadLastError()));
    return earlier;
  }
  if (ops.empty()) return ncclSuccess;

  // One batch per communicator, in order of first appearance.
  std::vector<std::pair<std::shared_ptr<CommState>, std::vector<PendingOp>>> batches;
  bool blocking = false, nonblocking = false;
  for (auto& [comm, op] : ops) {
    auto it = std::find_if(batches.begin(), batches.end(),
                           [&](const auto& b) { return b.first == comm; });
    if (it == batches.end()) {
      batches.emplace_back(comm, std::vector<PendingOp>{});
      it = std::prev(batches.end());
      (comm->config.blocking ? blocking : nonblocking) = true;
    }
    it->second.push_back(std::move(op));
  }
  if (blocking && nonblocking)
    return fail(
        invalidUsage("ncclGroupEnd: blocking and nonblocking communicators are not "
                     "allowed in the same group"));
  // Device operations of communicators in a device clique go to their clique, every clique's
  // batches together (one thread driving all ranks launches at once); what is left of those
  // batches (host memory) runs below.
  Status staged;
  std::vector<std::pair<std::shared_ptr<CommState>, std::vector<PendingOp>>> cliqued;
  for (size_t b = 0; b < batches.size();) {
    auto& [comm, batch] = batches[b];
    const bool eligible =
        (comm->clique || comm->procClique) && !nonblocking &&
        std::any_of(batch.begin(), batch.end(), [](const PendingOp& o) { return o.device(); }) &&
        std::none_of(batch.begin(), batch.end(),
                     [](const PendingOp& o) { return o.kind == PendingOp::Kind::kTask; });
    if (!eligible) {
      ++b;
      continue;
    }
    std::vector<PendingOp> dev, host;
    for (PendingOp& o : batch) (o.device() ? dev : host).push_back(std::move(o));
    cliqued.emplace_back(comm, std::move(dev));
    if (host.empty()) {
      batches.erase(batches.begin() + static_cast<std::ptrdiff_t>(b));
    } else {
      batch = std::move(host);
      ++b;
    }
  }
  std::stable_sort(cliqued.begin(), cliqued.end(), [](const auto& x, const auto& y) {
    return std::less<>()(x.first->clique.get(), y.first->clique.get());
  });
  // Process cliques: the batches this process posts as a peer first (they never wait), then
  // those it leads (which wait for their peers, who may be waiting for this group's posts).
  std::stable_partition(cliqued.begin(), cliqued.end(), [](const auto& b) {
    return b.first->procClique && b.first->rank != 0;
  });
  for (size_t i = 0; i < cliqued.size();) {
    size_t j = i + 1;
    Status st;
    if (cliqued[i].first->procClique) {
      st = submitToProcessClique(*cliqued[i].first, cliqued[i].second);
    } else {
      while (j < cliqued.size() && cliqued[j].first->clique == cliqued[i].first->clique) ++j;
      st = submitToClique(std::span(cliqued).subspan(i, j - i));
    }
    if (!st.isOk() && staged.isOk()) staged = st;
    i = j;
  }
  // A communicator's batch that touches device memory is one staged job on its stream
  // (nccl/device.h); the others run here as before.
  for (size_t b = 0; b < batches.size();) {
    auto& batch = batches[b].second;
    if (std::none_of(batch.begin(), batch.end(), [](const PendingOp& o) { return o.device(); })) {
      ++b;
      continue;
    }
    Status st = enqueueDevice(batches[b].first, std::move(batch));
    if (!st.isOk() && staged.isOk()) staged = st;
    batches.erase(batches.begin() + static_cast<std::ptrdiff_t>(b));
  }
  if (batches.empty()) return fail(staged);  // the device paths' first error, if any
  const size_t fusion = fusionBytes();
  if (nonblocking) {
    for (auto& [comm, batch] : batches) {
      comm->worker.submit([comm, batch = std::move(batch), fusion]() mutable {
        Status s = runBatch(*comm, batch, fusion);
        if (!s.isOk()) {
          fail(s, comm.get());
          comm->recordAsync(s);
        }
      });
    }
    return staged.isOk() ? ncclInProgress : fail(staged);
  }
  for (auto& b : batches) b.first->worker.drain();
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
  std::vector<std::pair<CommState*, PendingOp>> ops;
  for (auto& [comm, op] : tGroup.ops) ops.emplace_back(comm.get(), op);
  tGroup.ops.clear();
  const ncclResult_t earlier = tGroup.error;
  tGroup.error = ncclSuccess;
  if (earlier != ncclSuccess) return earlier;
  simInfo->estimatedTime = static_cast<float>(predictGroup(ops));
  return ncclSuccess;
}
