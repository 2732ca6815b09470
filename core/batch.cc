// File: core/batch.cc
// The batch entry (core/batch.h): fusion of small allreduces into one plan of the separate calls'
// steps, and a batch's sends and receives as one round.
#include "core/batch.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include "algorithms/fusion.h"
#include "algorithms/simulator.h"
#include "base/env.h"
#include "base/log.h"
#include "base/strings.h"
#include "core/comm.h"
#include "core/engine.h"
#include "kernels/reduce.h"

namespace tutti {

namespace {

using detail::CommImpl;

// Default from tutti-nccl-fusion on 4 ranks over shm (docs/NCCL.md, "Group fusion"): fused
// buffers up to 64 KiB were 3.5-4.3x faster than separate calls for 4-32 KiB allreduces, while
// 128 KiB-4 MiB fused buffers were no faster or slower (0.4-1.4x). Measured under load.
TUTTI_PARAM_INT(kFusionBytes, "TUTTI_FUSION_BYTES", nullptr, "CORE", 64 << 10,
                "largest fused allreduce buffer of a batch (an NCCL group, allReduceFused; bytes; "
                "0 disables fusion)");

Result<std::byte*> staging(CommImpl& impl, size_t bytes, const char* api) {
  PageBuffer& s = impl.batchStaging();
  if (s.size() < bytes) {
    try {
      s.grow(bytes);
    } catch (const std::bad_alloc&) {
      return systemError("{}: cannot allocate {} bytes of staging memory", api, bytes);
    }
  }
  return s.data();
}

Status runColl(const Communicator& c, CommImpl& impl, const CallArgs& op) {
  const void* send = op.send;
  if (op.preMulScalar && op.count > 0) {
    const size_t in = inputCount(op.coll, op.count, c.size(), c.rank(), op.root);
    TUTTI_TRY_ASSIGN(std::byte * buf, staging(impl, in * dataTypeBytes(op.dtype), op.api));
    TUTTI_TRY(kernels::scale(buf, op.send, in, op.dtype, op.preMulScalar));
    send = buf;
  }
  if (op.coll == Coll::kSendRecv || op.coll == Coll::kBarrier)
    return invalidArgument("{}: collective {} cannot be part of a batch", op.api,
                           collName(op.coll));
  CallArgs a = op;
  a.send = send;
  a.preMulScalar = nullptr;
  return impl.runChecked(a);
}

bool fusable(const CallArgs& op, size_t limit) {
  return op.coll == Coll::kAllReduce && op.count > 0 &&
         op.count * dataTypeBytes(op.dtype) <= limit;
}

// Length of the run of fusable allreduces starting at ops[i] (1 when nothing to fuse).
size_t fusedRun(std::span<const CallArgs> ops, size_t i, size_t limit) {
  if (!fusable(ops[i], limit)) return 1;
  const size_t elem = dataTypeBytes(ops[i].dtype);
  size_t total = ops[i].count * elem, j = i + 1;
  for (; j < ops.size(); ++j) {
    const CallArgs& o = ops[j];
    if (!fusable(o, limit) || o.dtype != ops[i].dtype || o.op != ops[i].op) break;
    if (total + o.count * elem > limit) break;
    // A later input must not be an earlier output: fused, it would be read before written.
    bool dependent = false;
    for (size_t k = i; k < j && !dependent; ++k)
      dependent = bytesOverlap(o.send, o.count * elem, ops[k].recv, ops[k].count * elem);
    if (dependent) break;
    total += o.count * elem;
  }
  return j - i;
}

bool runsInPlace(const CallArgs& o) { return !o.preMulScalar && o.send == o.recv; }

// One plan made of the unfused calls' own plans (algo::fuseSchedules): each call's steps, with its
// ranges moved to its place in the packed staging buffers, run in the same order as alone, and
// the calls share rounds where the matching rule allows (a call whose round forwards on some
// rank shares it only with calls that do not forward there, and goes last in it). Every element
// is therefore reduced by the same algorithm in the same order as without fusion (bit-identical
// results), while the latency of a shared round is paid once for all calls. Out-of-place
// segments read the packed input; in-place ones read and write the packed output only, as they
// do alone. The plan addresses the staging buffers by offset, so it holds for any buffers.
// nullptr when the calls could share no round (every round of each forwards: rings) or would
// take as many rounds fused: fused, they would only add the staging copies (tutti-nccl-fusion,
// 10 forced-ring calls of 4 KiB, 2 ranks: 0.77x the separate calls' speed fused, 0.86-0.91x
// run one by one).
Result<std::shared_ptr<Plan>> buildFused(CommImpl& impl, std::span<const CallArgs> ops) {
  auto fused = std::make_shared<Plan>();
  fused->coll = Coll::kAllReduce;
  fused->elemBytes = dataTypeBytes(ops.front().dtype);
  fused->algorithm = "fused";
  // Copies of the calls' schedules and forwarding rounds: building the next call's plan may
  // evict an earlier one from the cache.
  std::vector<algo::Schedule> alone(ops.size());
  std::vector<std::vector<uint8_t>> forwards(ops.size());
  std::vector<algo::FusePart> parts(ops.size());
  size_t off = 0, separateRounds = 0;
  // Calls that forward in every round cannot share one (a fused round holds one forwarding call).
  bool canShare = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    const CallArgs& o = ops[i];
    CallArgs seg;  // the call alone; plans depend on its shape, not on its buffers
    seg.coll = Coll::kAllReduce;
    seg.count = o.count;
    seg.dtype = o.dtype;
    seg.op = o.op;
    seg.api = o.api;
    const bool inPlace = runsInPlace(o);
    TUTTI_TRY_ASSIGN(const Plan* p, impl.planFor(seg, inPlace, true));
    if (i == 0) {
      fused->reduce = p->reduce;
      fused->divide = p->divide;
      fused->divisor = p->divisor;
    }
    fused->algorithm += (i == 0 ? " " : "+") + p->algorithm;
    alone[i] = p->schedule;
    forwards[i] = p->forwardRounds;
    parts[i] = {.schedule = &alone[i], .offset = off, .inPlace = inPlace,
                .forwardRounds = forwards[i]};
    separateRounds += alone[i].rounds.size();
    canShare |= forwards[i].size() < alone[i].rounds.size() ||
                std::find(forwards[i].begin(), forwards[i].end(), 0) != forwards[i].end();
    off += o.count;
  }
  if (!canShare) return std::shared_ptr<Plan>();
  fused->schedule = algo::fuseSchedules(parts);
  if (fused->schedule.rounds.size() >= separateRounds) return std::shared_ptr<Plan>();
  fused->scratchBytes = fused->schedule.scratchCount * fused->elemBytes;
  if (fused->divide) fused->divideCount = off;
  return fused;
}

// Runs the calls as one fused plan, built at the first batch of their shape and cached with the
// communicator's plans. Returns false, having run nothing, when fusion would not pay (buildFused).
Result<bool> runFused(CommImpl& impl, std::span<const CallArgs> ops) {
  const CallArgs& head = ops.front();
  const size_t elem = dataTypeBytes(head.dtype);
  detail::PlanCache::FusedKey key{static_cast<int>(head.dtype), static_cast<int>(head.op), {}};
  auto& calls = std::get<2>(key);
  calls.reserve(ops.size());
  size_t total = 0;
  for (const CallArgs& o : ops) {
    calls.emplace_back(o.count, runsInPlace(o));
    total += o.count;
  }
  std::shared_ptr<Plan> fused;
  if (!impl.findFused(key, &fused)) {
    TUTTI_TRY_ASSIGN(fused, buildFused(impl, ops));
    impl.storeFused(std::move(key), fused);
  }
  if (!fused) return false;

  TUTTI_TRY_ASSIGN(std::byte * in, staging(impl, 2 * total * elem, head.api));
  std::byte* out = in + total * elem;
  size_t off = 0;
  for (const CallArgs& o : ops) {
    std::byte* dst = (runsInPlace(o) ? out : in) + off * elem;
    if (o.preMulScalar)
      TUTTI_TRY(kernels::scale(dst, o.send, o.count, o.dtype, o.preMulScalar));
    else
      std::memcpy(dst, o.send, o.count * elem);
    off += o.count;
  }
  TUTTI_LOG_TRACE(Subsys::kColl, "batch: fused {} allreduces ({} elements, {} {}) as '{}' in {} rounds",
                  ops.size(), total, dataTypeName(head.dtype), redOpName(head.op),
                  fused->algorithm, fused->schedule.rounds.size());
  CallArgs whole;  // what the ranks' call checks compare: one allreduce of `total`
  whole.coll = Coll::kAllReduce;
  whole.count = total;
  whole.dtype = head.dtype;
  whole.op = head.op;
  whole.api = head.api;
  TUTTI_TRY(impl.runPlan(*fused, in, out, &whole));
  off = 0;
  for (const CallArgs& o : ops) {
    std::memcpy(o.recv, out + off * elem, o.count * elem);
    off += o.count;
  }
  return true;
}

// Every send and receive of the batch as one round: each message is posted at once, and messages
// between one pair of ranks keep their call order (the transports match them in order). Steps
// count bytes, and offsets are from the lowest send (input) and the lowest receive (output)
// buffer, so one plan addresses every user buffer whatever its dtype.
Status runP2p(Communicator& c, CommImpl& impl, const std::vector<const CallArgs*>& ops) {
  const char* api = ops.front()->api;
  const int rank = c.rank();
  std::vector<size_t> selfSends, selfRecvs;
  uintptr_t inBase = UINTPTR_MAX, outBase = UINTPTR_MAX;
  for (const CallArgs* o : ops) {
    const size_t bytes = o->count * dataTypeBytes(o->dtype);
    if (bytes == 0) continue;
    if (o->sendPeer >= 0) {
      inBase = std::min(inBase, reinterpret_cast<uintptr_t>(o->send));
      if (o->sendPeer == rank) selfSends.push_back(bytes);
    } else {
      outBase = std::min(outBase, reinterpret_cast<uintptr_t>(o->recv));
      if (o->recvPeer == rank) selfRecvs.push_back(bytes);
    }
  }
  if (selfSends != selfRecvs)
    return invalidUsage(
        "{}: a send to this rank itself ({}) needs a matching receive of the same "
        "size in the same group (rank {}: {} sends, {} receives to self)",
        api, rank, rank, selfSends.size(), selfRecvs.size());
  Plan plan;
  plan.coll = Coll::kSendRecv;
  plan.algorithm = "grouped send/recv";
  plan.elemBytes = 1;  // a byte is the element: the operations' dtypes may differ
  std::vector<algo::Step> round;
  for (const CallArgs* o : ops) {
    const size_t bytes = o->count * dataTypeBytes(o->dtype);
    if (bytes == 0) continue;
    algo::Step st;
    st.peer = o->sendPeer >= 0 ? o->sendPeer : o->recvPeer;
    st.count = bytes;
    if (o->sendPeer >= 0) {
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
  return impl.runPlan(plan, reinterpret_cast<const void*>(inBase),
                      reinterpret_cast<void*>(outBase));
}

// One message: exactly one of sendPeer and recvPeer, in range.
Status checkP2p(const Communicator& c, const CallArgs& o) {
  if ((o.sendPeer >= 0) == (o.recvPeer >= 0))
    return invalidArgument("{}: a batch's message needs exactly one of sendPeer and recvPeer "
                           "(sendPeer={}, recvPeer={})", o.api, o.sendPeer, o.recvPeer);
  const int peer = o.sendPeer >= 0 ? o.sendPeer : o.recvPeer;
  if (peer >= c.size())
    return invalidArgument("{}: peer {} is outside [0, {})", o.api, peer, c.size());
  return Status::ok();
}

}  // namespace

Status runBatch(Communicator& comm, std::span<const CallArgs> ops, size_t fusionBytes) {
  CommImpl* impl = detail::CommAccess::get(comm);
  if (!impl) return invalidUsage("runBatch: the communicator was moved from or destroyed");
  Status first;
  auto note = [&](const Status& s) {
    if (first.isOk() && !s.isOk()) first = s;
  };
  std::vector<const CallArgs*> p2p;
  for (size_t i = 0; i < ops.size();) {
    const CallArgs& op = ops[i];
    if (op.coll == Coll::kSendRecv) {
      Status s = checkP2p(comm, op);
      if (s.isOk()) p2p.push_back(&op);
      note(s);
      ++i;
      continue;
    }
    const size_t n = fusionBytes > 0 ? fusedRun(ops, i, fusionBytes) : 1;
    if (n > 1) {
      Result<bool> fused = runFused(*impl, ops.subspan(i, n));
      if (!fused.isOk()) note(fused.status());
      if (!fused.isOk() || fused.value()) {
        i += n;
        continue;
      }
    }
    // Alone: one call, or a run whose calls share no round (runFused ran nothing).
    for (size_t k = 0; k < n; ++k) note(runColl(comm, *impl, ops[i + k]));
    i += n;
  }
  if (!p2p.empty()) note(runP2p(comm, *impl, p2p));
  return first;
}

double predictBatchUs(const Communicator& comm, std::span<const CallArgs> ops) {
  const algo::LinkModel model = algo::LinkModel::defaults();
  const algo::LinkParams& shm = model.links[static_cast<int>(algo::LinkClass::kShm)];
  double total = 0;
  for (const CallArgs& a : ops) {
    if (a.count == 0) continue;
    if (a.coll == Coll::kSendRecv) {  // one message
      const double bytes = static_cast<double>(a.count * dataTypeBytes(a.dtype));
      total += shm.latencyUs + bytes / (shm.bandwidthGBps * 1e3);
      continue;
    }
    auto choice = comm.algorithmFor(a.coll, a.count, a.dtype, a.op, a.root, false);
    if (choice.isOk() && choice->predictedUs > 0) total += choice->predictedUs;
  }
  return total;
}

size_t fusionBytes() {
  const int64_t v = kFusionBytes.get();
  return v > 0 ? static_cast<size_t>(v) : 0;
}

Status bootstrapSend(Communicator& comm, int peer, uint64_t tag, const std::string& body,
                     std::chrono::milliseconds timeout) {
  CommImpl* impl = detail::CommAccess::get(comm);
  if (!impl) return invalidUsage("bootstrapSend: the communicator was moved from or destroyed");
  return impl->bootstrapRing().sendTo(peer, tag, body, timeout);
}

Result<std::string> bootstrapRecv(Communicator& comm, int peer, uint64_t tag,
                                  std::chrono::milliseconds timeout) {
  CommImpl* impl = detail::CommAccess::get(comm);
  if (!impl) return invalidUsage("bootstrapRecv: the communicator was moved from or destroyed");
  return impl->bootstrapRing().recvFrom(peer, tag, timeout);
}

}  // namespace tutti
