// File: nccl/api_coll.cc
// NCCL collectives (also with a per-call ncclCollConfig_t), send/recv, custom reduction
// operators, buffer and window registration, the window pointer queries, and ncclMemAlloc.
// Every call checks its arguments at once (an error has no effect and is returned immediately;
// inside a group it also cancels the group, as in NCCL) and then submits the operation (group.h).
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <set>

#include "base/arg_check.h"
#include "base/config.h"
#include "nccl/group.h"
#include "nccl/internal.h"

#if TUTTI_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tutti::nccl {
namespace {

bool hasReduction(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}

ncclResult_t enqueue(BatchOp op, ncclDataType_t datatype, ncclRedOp_t redop, ncclComm_t comm) {
  auto cs = checkComm(comm, op.api);
  if (!cs.isOk()) return failArg(cs.status());
  CommState* s = cs.value();
  ActiveCall guard(s);
  auto bad = [&](const Status& st) { return failArg(st, s); };
  if (Status u = checkUsable(*s, op.api); !u.isOk()) return bad(u);
  if (static_cast<unsigned>(datatype) >= ncclNumTypes)
    return bad(
        invalidArgument("{}: invalid datatype (datatype={})", op.api, static_cast<int>(datatype)));
  op.dtype = static_cast<DataType>(datatype);
  if (op.kind == BatchOp::Kind::kColl && hasReduction(op.coll)) {
    const int v = static_cast<int>(redop);
    if (v >= 0 && v < ncclNumOps) {
      op.op = static_cast<RedOp>(v);
    } else {
      Status opError;
      {
        std::lock_guard<std::mutex> lock(s->mu);
        const int idx = v - kFirstDynamicOp;
        if (idx < 0 || idx >= static_cast<int>(s->ops.size()) || !s->ops[idx].live) {
          opError = invalidArgument(
              "{}: invalid reduction operator (op={}): not built in, and not a live operator "
              "of ncclRedOpCreatePreMulSum on this communicator (destroyed, or never created)",
              op.api, v);
        } else if (s->ops[idx].dtype != op.dtype) {
          opError = invalidArgument(
              "{}: operator (op={}) was created for datatype {} but is used with {}", op.api, v,
              dataTypeName(s->ops[idx].dtype), dataTypeName(op.dtype));
        } else {
          op.op = RedOp::kSum;
          op.preMul = true;
          op.scalar = s->ops[idx].scalar;  // copied: the handle may be destroyed after this call
        }
      }
      if (!opError.isOk()) return bad(opError);
    }
  }
  if (op.kind == BatchOp::Kind::kColl) {
    // The C++ API's rules (base/arg_check.h): root, count overflow, null buffers this rank
    // uses, overlap other than NCCL's in-place forms. Checked now, so that a bad call inside a
    // group has no effect (the group is cancelled before anything runs).
    const CallArgs a = op.callArgs();
    bool inPlace = false;
    if (Status c = detail::checkCall(a, s->rank, s->nranks, &inPlace); !c.isOk()) return bad(c);
  } else {
    if (op.peer < 0 || op.peer >= s->nranks)
      return bad(invalidArgument("{}: peer {} is outside [0, {}) (peer={}, rank={})", op.api,
                                 op.peer, s->nranks, op.peer, s->rank));
    if (Status c = detail::checkCount(op.api, op.count, op.dtype, 1); !c.isOk()) return bad(c);
    if (op.count > 0 && !(op.kind == BatchOp::Kind::kSend ? op.send : op.recv))
      return bad(invalidArgument("{}: {} is NULL ({}=NULL, count={}, rank={})", op.api,
                                 op.kind == BatchOp::Kind::kSend ? "sendbuff" : "recvbuff",
                                 op.kind == BatchOp::Kind::kSend ? "sendbuff" : "recvbuff",
                                 op.count, s->rank));
  }
  // Memory kind of the buffers this rank uses (recvbuff of a non-root reduce is not).
  findMemoryKinds(op, s->rank, s->nranks);
  return submit(comm->state, std::move(op));
}

BatchOp collOp(const char* api, Coll coll, const void* send, void* recv, size_t count, int root,
               cudaStream_t stream) {
  BatchOp op;
  op.kind = BatchOp::Kind::kColl;
  op.api = api;
  op.coll = coll;
  op.send = send;
  op.recv = recv;
  op.count = count;
  op.root = root;
  op.stream = stream;
  return op;
}

// ncclMemAlloc's host allocations (told apart from cudaMalloc'd ones at ncclMemFree).
std::mutex gAllocMu;
std::set<void*> gHostAllocs;

struct Registration {
  void* buff;
  size_t size;
};
struct Window {
  void* buff;
  size_t size;
  int flags;
  CommState* comm;
  int rank;  // the registering rank, for the pointer queries (which get no comm)
};
// Every live window, so that the pointer queries (ncclGetLsaDevicePointer, ...) can tell a window
// from garbage without a communicator.
std::mutex gWinMu;
std::set<const Window*> gWindows;

constexpr int kKnownWinFlags =
    NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING | NCCL_WIN_GIN_ONLY | NCCL_WIN_CFT_COUNTED;

// Reads a caller's ncclCollConfig_t of any version by its size/magic header (fields beyond the
// caller's size keep their defaults; fields beyond ours are ignored) and refuses what tutti cannot
// honour. The tuning fields (CTA counts, cluster size, CTA policy, profiler tag, ext) only steer
// NCCL's kernels and are ignored.
Status checkCollConfig(const ncclCollConfig_t* in, const char* api) {
  if (!in) return Status::ok();
  if (in->magic != NCCL_API_MAGIC)
    return invalidArgument(
        "{}: ncclCollConfig_t argument not initialized via NCCL_COLLCONFIG_INITIALIZER "
        "(magic={:#x})",
        api, in->magic);
  if (in->size < offsetof(ncclCollConfig_t, ext))
    return invalidArgument("{}: ncclCollConfig_t size {} bytes is smaller than its header", api,
                           in->size);
  ncclCollConfig_t c = NCCL_COLLCONFIG_INITIALIZER;
  std::memcpy(&c, in, std::min(in->size, sizeof c));
  if (c.algSelection && c.algSelection[0] != '\0' && c.forceAlgSelection != 0)
    return invalidUsage(
        "{}: not supported by tutti: ncclCollConfig_t.algSelection names NCCL algorithms "
        "(algSelection=\"{}\", forceAlgSelection={}); set forceAlgSelection=0 to let tutti "
        "choose",
        api, c.algSelection, c.forceAlgSelection);
  if (c.launchCompletionEvent)
    return invalidUsage(
        "{}: not supported by tutti: ncclCollConfig_t.launchCompletionEvent (a CUDA event "
        "recorded when the collective's kernel has launched)",
        api);
  return Status::ok();
}

ncclResult_t enqueueWithConfig(BatchOp op, ncclDataType_t datatype, ncclRedOp_t redop,
                               ncclComm_t comm, const ncclCollConfig_t* config) {
  if (Status c = checkCollConfig(config, op.api); !c.isOk()) {
    auto cs = checkComm(comm, op.api);
    return failArg(c, cs.isOk() ? cs.value() : nullptr);
  }
  return enqueue(std::move(op), datatype, redop, comm);
}

}  // namespace
}  // namespace tutti::nccl

using namespace tutti;
using namespace tutti::nccl;

// ---- collectives ----

NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(collOp("ncclAllReduce", Coll::kAllReduce, sendbuff, recvbuff, count, 0, stream),
                 datatype, op, comm);
}

NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(collOp("ncclReduce", Coll::kReduce, sendbuff, recvbuff, count, root, stream),
                 datatype, op, comm);
}

NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream) {
  return enqueue(collOp("ncclBcast", Coll::kBroadcast, buff, buff, count, root, stream), datatype,
                 ncclSum, comm);
}

NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(collOp("ncclBroadcast", Coll::kBroadcast, sendbuff, recvbuff, count, root, stream),
                 datatype, ncclSum, comm);
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(
      collOp("ncclReduceScatter", Coll::kReduceScatter, sendbuff, recvbuff, recvcount, 0, stream),
      datatype, op, comm);
}

NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(
      collOp("ncclAllGather", Coll::kAllGather, sendbuff, recvbuff, sendcount, 0, stream), datatype,
      ncclSum, comm);
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(collOp("ncclAlltoAll", Coll::kAllToAll, sendbuff, recvbuff, count, 0, stream),
                 datatype, ncclSum, comm);
}

NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(collOp("ncclGather", Coll::kGather, sendbuff, recvbuff, count, root, stream),
                 datatype, ncclSum, comm);
}

NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(collOp("ncclScatter", Coll::kScatter, sendbuff, recvbuff, count, root, stream),
                 datatype, ncclSum, comm);
}

// ---- collectives with a per-call configuration ----

NCCL_API(ncclResult_t, ncclAllReduceConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  return enqueueWithConfig(
      collOp("ncclAllReduceConfig", Coll::kAllReduce, sendbuff, recvbuff, count, 0, stream),
      datatype, op, comm, config);
}

NCCL_API(ncclResult_t, ncclBroadcastConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  return enqueueWithConfig(
      collOp("ncclBroadcastConfig", Coll::kBroadcast, sendbuff, recvbuff, count, root, stream),
      datatype, ncclSum, comm, config);
}

NCCL_API(ncclResult_t, ncclReduceConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  return enqueueWithConfig(
      collOp("ncclReduceConfig", Coll::kReduce, sendbuff, recvbuff, count, root, stream),
      datatype, op, comm, config);
}

NCCL_API(ncclResult_t, ncclAllGatherConfig, const void* sendbuff, void* recvbuff,
         size_t sendcount, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  return enqueueWithConfig(
      collOp("ncclAllGatherConfig", Coll::kAllGather, sendbuff, recvbuff, sendcount, 0, stream),
      datatype, ncclSum, comm, config);
}

NCCL_API(ncclResult_t, ncclReduceScatterConfig, const void* sendbuff, void* recvbuff,
         size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
         cudaStream_t stream, const ncclCollConfig_t* config) {
  return enqueueWithConfig(collOp("ncclReduceScatterConfig", Coll::kReduceScatter, sendbuff,
                                  recvbuff, recvcount, 0, stream),
                           datatype, op, comm, config);
}

NCCL_API(ncclResult_t, ncclAlltoAllConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  return enqueueWithConfig(
      collOp("ncclAlltoAllConfig", Coll::kAllToAll, sendbuff, recvbuff, count, 0, stream),
      datatype, ncclSum, comm, config);
}

NCCL_API(ncclResult_t, ncclGatherConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  return enqueueWithConfig(
      collOp("ncclGatherConfig", Coll::kGather, sendbuff, recvbuff, count, root, stream),
      datatype, ncclSum, comm, config);
}

NCCL_API(ncclResult_t, ncclScatterConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  return enqueueWithConfig(
      collOp("ncclScatterConfig", Coll::kScatter, sendbuff, recvbuff, count, root, stream),
      datatype, ncclSum, comm, config);
}

// ---- point to point ----

NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype,
         int peer, ncclComm_t comm, cudaStream_t stream) {
  BatchOp op;
  op.kind = BatchOp::Kind::kSend;
  op.api = "ncclSend";
  op.send = sendbuff;
  op.count = count;
  op.peer = peer;
  op.stream = stream;
  return enqueue(std::move(op), datatype, ncclSum, comm);
}

NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, cudaStream_t stream) {
  BatchOp op;
  op.kind = BatchOp::Kind::kRecv;
  op.api = "ncclRecv";
  op.recv = recvbuff;
  op.count = count;
  op.peer = peer;
  op.stream = stream;
  return enqueue(std::move(op), datatype, ncclSum, comm);
}

// ---- custom operators ----

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar,
         ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm) {
  auto cs = checkComm(comm, "ncclRedOpCreatePreMulSum");
  if (!cs.isOk()) return fail(cs.status());
  CommState* s = cs.value();
  if (!op) return fail(invalidArgument("ncclRedOpCreatePreMulSum: op is NULL"), s);
  if (!scalar) return fail(invalidArgument("ncclRedOpCreatePreMulSum: scalar is NULL"), s);
  if (static_cast<unsigned>(datatype) >= ncclNumTypes)
    return fail(invalidArgument("ncclRedOpCreatePreMulSum: invalid datatype {}",
                                static_cast<int>(datatype)),
                s);
  if (residence == ncclScalarDevice)
    return fail(invalidUsage("ncclRedOpCreatePreMulSum: a device-resident scalar "
                             "(ncclScalarDevice) is not supported yet; pass "
                             "ncclScalarHostImmediate"),
                s);
  if (residence != ncclScalarHostImmediate)
    return fail(invalidArgument("ncclRedOpCreatePreMulSum: invalid residence {}",
                                static_cast<int>(residence)),
                s);
  const DataType dt = static_cast<DataType>(datatype);
  std::lock_guard<std::mutex> lock(s->mu);
  size_t idx = 0;
  while (idx < s->ops.size() && s->ops[idx].live) ++idx;
  if (idx == s->ops.size()) {
    if (s->ops.size() >= static_cast<size_t>(kMaxDynamicOps)) {
      s->lastError = "ncclRedOpCreatePreMulSum: too many live operators";
      return ncclInvalidUsage;
    }
    s->ops.emplace_back();
  }
  PreMulOp& p = s->ops[idx];
  p.live = true;
  p.dtype = dt;
  p.scalar.fill(std::byte{0});
  std::memcpy(p.scalar.data(), scalar, dataTypeBytes(dt));
  *op = static_cast<ncclRedOp_t>(kFirstDynamicOp + static_cast<int>(idx));
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  auto cs = checkComm(comm, "ncclRedOpDestroy");
  if (!cs.isOk()) return fail(cs.status());
  CommState* s = cs.value();
  const int idx = static_cast<int>(op) - kFirstDynamicOp;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (idx >= 0 && idx < static_cast<int>(s->ops.size()) && s->ops[idx].live) {
      s->ops[idx].live = false;
      return ncclSuccess;
    }
  }
  return fail(invalidArgument(
                  "ncclRedOpDestroy: operator {} is {} on this communicator", static_cast<int>(op),
                  idx < 0 ? "built in" : "not a live ncclRedOpCreatePreMulSum operator"),
              s);
}

// ---- registration ----

NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size,
         void** handle) {
  auto cs = checkComm(comm, "ncclCommRegister");
  if (!cs.isOk()) return fail(cs.status());
  CommState* s = cs.value();
  if (!handle) return fail(invalidArgument("ncclCommRegister: handle is NULL"), s);
  if (!buff && size > 0)
    return fail(invalidArgument("ncclCommRegister: buff is NULL (size={})", size), s);
  auto* r = new Registration{buff, size};
  std::lock_guard<std::mutex> lock(s->mu);
  s->registrations[r] = size;
  *handle = r;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  auto cs = checkComm(comm, "ncclCommDeregister");
  if (!cs.isOk()) return fail(cs.status());
  CommState* s = cs.value();
  {
    std::lock_guard<std::mutex> lock(s->mu);
    auto it = s->registrations.find(handle);
    if (it != s->registrations.end()) {
      s->registrations.erase(it);
      delete static_cast<Registration*>(handle);
      return ncclSuccess;
    }
  }
  return fail(invalidArgument("ncclCommDeregister: handle {} was not returned by ncclCommRegister "
                              "on this communicator",
                              handle),
              s);
}

NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size,
         ncclWindow_t* win, int winFlags) {
  auto cs = checkComm(comm, "ncclCommWindowRegister");
  if (!cs.isOk()) return fail(cs.status());
  CommState* s = cs.value();
  if (!win) return fail(invalidArgument("ncclCommWindowRegister: win is NULL"), s);
  if (!buff && size > 0)
    return fail(invalidArgument("ncclCommWindowRegister: buff is NULL (size={})", size), s);
  if (winFlags & ~kKnownWinFlags)
    return fail(invalidArgument("ncclCommWindowRegister: unknown winFlags {:#x}", winFlags), s);
  auto* w = new Window{buff, size, winFlags, s, s->rank};
  {
    std::lock_guard<std::mutex> lock(gWinMu);
    gWindows.insert(w);
  }
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->registrations[w] = size;
    *win = reinterpret_cast<ncclWindow_t>(w);
  }
  if (!peerWindows(*s->device)) return ncclSuccess;
  // Ranks that are processes of the peer executor map each other's windows (collective; at
  // ncclGroupEnd inside a group, as in NCCL).
  return submitTask(comm->state, "ncclCommWindowRegister",
                    [s, buff, size] { return shareDeviceWindow(*s->device, s->comm, buff, size); });
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  auto cs = checkComm(comm, "ncclCommWindowDeregister");
  if (!cs.isOk()) return fail(cs.status());
  CommState* s = cs.value();
  void* buff = nullptr;
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    auto it = s->registrations.find(win);
    if (it != s->registrations.end()) {
      s->registrations.erase(it);
      {
        std::lock_guard<std::mutex> winLock(gWinMu);
        gWindows.erase(reinterpret_cast<const Window*>(win));
      }
      buff = reinterpret_cast<Window*>(win)->buff;
      delete reinterpret_cast<Window*>(win);
      found = true;
    }
  }
  if (found) {
    if (!peerWindows(*s->device)) return ncclSuccess;
    // Every process unmaps the window before the call returns on any rank (collective).
    return submitTask(comm->state, "ncclCommWindowDeregister",
                      [s, buff] { return unshareDeviceWindow(*s->device, s->comm, buff); });
  }
  return fail(invalidArgument("ncclCommWindowDeregister: window {} was not registered on this "
                              "communicator",
                              static_cast<const void*>(win)),
              s);
}

NCCL_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  auto cs = checkComm(comm, "ncclWinGetUserPtr");
  if (!cs.isOk()) return fail(cs.status());
  CommState* s = cs.value();
  if (!outUserPtr) return fail(invalidArgument("ncclWinGetUserPtr: outUserPtr is NULL"), s);
  std::lock_guard<std::mutex> lock(s->mu);
  if (!s->registrations.count(win)) {
    s->lastError = "ncclWinGetUserPtr: window not registered on this communicator";
    return ncclInvalidArgument;
  }
  *outUserPtr = reinterpret_cast<Window*>(win)->buff;
  return ncclSuccess;
}

// The address of byte `offset` of the calling rank's own window: tutti maps no peer memory, so a
// rank's load/store-accessible (LSA) team is itself (lsaRank 0) and the only peer it can address is
// itself.
namespace {
Result<void*> ownWindowPointer(ncclWindow_t window, size_t offset, void** outPtr,
                               const char* api) {
  if (!outPtr) return invalidArgument("{}: outPtr is NULL", api);
  std::lock_guard<std::mutex> lock(gWinMu);
  const auto* w = reinterpret_cast<const Window*>(window);
  if (!gWindows.count(w))
    return invalidArgument("{}: window {} is not a live window of ncclCommWindowRegister", api,
                           static_cast<const void*>(window));
  if (offset > w->size)
    return invalidArgument("{}: offset {} bytes is beyond the window's {} bytes (rank={})", api,
                           offset, w->size, w->rank);
  return static_cast<void*>(static_cast<char*>(w->buff) + offset);
}
}  // namespace

NCCL_API(ncclResult_t, ncclGetLsaDevicePointer, ncclWindow_t window, size_t offset, int lsaRank,
         void** outPtr) {
  constexpr const char* api = "ncclGetLsaDevicePointer";
  auto p = ownWindowPointer(window, offset, outPtr, api);
  if (!p.isOk()) return fail(p.status());
  if (lsaRank != 0)
    return fail(invalidArgument(
        "{}: lsaRank {} is outside the LSA team [0, 1) (tutti: a rank's LSA team is itself)", api,
        lsaRank));
  *outPtr = p.value();
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGetPeerDevicePointer, ncclWindow_t window, size_t offset, int peer,
         void** outPtr) {
  constexpr const char* api = "ncclGetPeerDevicePointer";
  auto p = ownWindowPointer(window, offset, outPtr, api);
  if (!p.isOk()) return fail(p.status());
  int rank = 0;
  {
    std::lock_guard<std::mutex> lock(gWinMu);
    rank = reinterpret_cast<const Window*>(window)->rank;
  }
  if (peer != rank)
    return fail(invalidUsage(
        "{}: not supported by tutti: peer {} is not load/store accessible from rank {} (tutti "
        "maps no peer memory)",
        api, peer, rank));
  *outPtr = p.value();
  return ncclSuccess;
}

// ---- memory ----

NCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  if (!ptr) return fail(invalidArgument("ncclMemAlloc: ptr is NULL"));
  *ptr = nullptr;
#if TUTTI_HAVE_CUDA
  if (cudaDevicePresent()) {
    cudaError_t e = cudaMalloc(ptr, size > 0 ? size : 1);
    if (e != cudaSuccess)
      return fail(makeStatus(Code::kUnhandledCudaError, "ncclMemAlloc: cudaMalloc({}) failed: {}",
                             size, cudaGetErrorString(e)));
    return ncclSuccess;
  }
#endif
  constexpr size_t kAlign = 4096;
  const size_t bytes = (std::max<size_t>(size, 1) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, bytes);
  if (!p) return fail(systemError("ncclMemAlloc: cannot allocate {} bytes", size));
  std::lock_guard<std::mutex> lock(gAllocMu);
  gHostAllocs.insert(p);
  *ptr = p;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclMemFree, void* ptr) {
  if (!ptr) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(gAllocMu);
    if (gHostAllocs.erase(ptr)) {
      std::free(ptr);
      return ncclSuccess;
    }
  }
#if TUTTI_HAVE_CUDA
  if (cudaDevicePresent()) {
    cudaError_t e = cudaFree(ptr);
    if (e == cudaSuccess) return ncclSuccess;
    return fail(makeStatus(Code::kUnhandledCudaError, "ncclMemFree({}): cudaFree failed: {}", ptr,
                           cudaGetErrorString(e)));
  }
#endif
  return fail(invalidArgument("ncclMemFree: {} was not allocated by ncclMemAlloc", ptr));
}
