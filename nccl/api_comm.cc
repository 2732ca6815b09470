// File: nccl/api_comm.cc
// NCCL entry points that create, derive, query and tear down communicators, and the error API.
// Creation is a recorded task (group.h) so that it runs concurrently with the group's other inits
// at ncclGroupEnd, on the worker of a nonblocking communicator, or right away otherwise.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <thread>

#include "base/config.h"
#include "base/env.h"
#include "base/hash.h"
#include "base/log.h"
#include "core/batch.h"
#include "nccl/group.h"
#include "nccl/internal.h"

#if TUTTI_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tutti::nccl {
namespace {

// NCCL_COMM_ID (or TUTTI_COMM_ID, which tutti-run sets): a fixed root "host:port".
std::optional<std::string> fixedRootSpec() {
  auto v = env::get({"NCCL_COMM_ID", "TUTTI_COMM_ID"});
  if (!v || v->empty()) return std::nullopt;
  return v;
}

// The secret of a fixed-root id: TUTTI_COMM_SECRET (hex, as tutti-run sets it), else a hash of the
// address. The latter protects nothing; NCCL's fixed-root ids carry a constant magic too.
uint64_t fixedSecret(const std::string& spec) {
  if (auto s = env::get({"TUTTI_COMM_SECRET"}); s && !s->empty())
    return std::strtoull(s->c_str(), nullptr, 16);
  return fnv1a("tutti-nccl-comm-id:" + spec);
}

UniqueId toTutti(const ncclUniqueId& id) {
  UniqueId u;
  std::memcpy(u.bytes.data(), id.internal, sizeof id.internal);
  return u;
}

// With a fixed root, rank 0 hosts it (NCCL does this inside ncclCommInitRank).
Status maybeHostFixedRoot(const UniqueId& id, int rank) {
  if (rank != 0) return Status::ok();
  auto spec = fixedRootSpec();
  if (!spec) return Status::ok();
  TUTTI_TRY_ASSIGN(UniqueId fixed, uniqueIdAt(*spec, fixedSecret(*spec)));
  if (fixed.bytes != id.bytes)
    return Status::ok();  // an id from ncclGetUniqueId without the variable: its root runs
  if (Status bound = startRootOf(id); !bound.isOk())
    return Status(bound.code(), fmt::format("rank 0 cannot host the root at NCCL_COMM_ID={}: {}",
                                            *spec, bound.message()));
  return Status::ok();
}

bool allLocal(const CommState& s) {
  for (int p = 0; p < s.nranks; ++p) {
    const std::string t = s.comm.transportTo(p);
    if (t != "self" && t != "shm") return false;
  }
  return true;
}

int currentDevice() {
#if TUTTI_HAVE_CUDA
  int d = -1;
  if (cudaDevicePresent() && cudaGetDevice(&d) == cudaSuccess) return d;
  (void)cudaGetLastError();
#endif
  return -1;
}

// Joins the rendezvous and publishes the communicator.
Status joinComm(CommState& s, const UniqueId& id) {
  TUTTI_TRY(maybeHostFixedRoot(id, s.rank));
  auto c = createCommunicator(id, s.rank, s.nranks, s.worker);
  if (!c.isOk()) {
    s.recordAsync(c.status());
    return c.status();
  }
  s.comm = std::move(c).value();
  if (Status d = joinDeviceClique(*s.device, s.comm, s.cudaDev); !d.isOk()) {
    s.recordAsync(d);
    return d;
  }
  s.ready.store(true);
  TUTTI_LOG_INFO(Subsys::kInit, "comm {} rank {} nranks {} cudaDev {}{}{} - Init COMPLETE",
                 static_cast<const void*>(&s), s.rank, s.nranks, s.cudaDev,
                 s.config.commName.empty() ? "" : " commName ", s.config.commName);
  return Status::ok();
}

// Allocates a handle for `state` whose init runs as `task` on `runner` (the new communicator
// itself, or the parent of a split or shrink): recorded in a group, on the worker when `runner` is
// nonblocking, else now. A blocking init that fails frees the handle and stores NULL.
ncclResult_t createComm(ncclComm_t* out, std::shared_ptr<CommState> state,
                        const std::shared_ptr<CommState>& runner, std::function<Status()> task,
                        const char* api) {
  auto* h = new ncclComm{kCommMagic, std::move(state)};
  *out = h;
  const bool deferred = inGroup() || !runner->config.blocking;
  ncclResult_t r = submitTask(runner, api, std::move(task));
  if (!deferred && r != ncclSuccess) {
    h->magic = 0;
    delete h;
    *out = nullptr;
  }
  return r;
}

ncclResult_t initRankConfig(const char* api, ncclComm_t* comm, int nranks,
                            const ncclUniqueId& commId, int rank, const ncclConfig_t* config,
                            int cudaDev) {
  initLogging();
  Status st;
  if (!comm)
    st = invalidArgument("{}: comm (the output pointer) is NULL", api);
  else if (nranks < 1)
    st = invalidArgument("{}: nranks must be >= 1 (nranks={})", api, nranks);
  else if (rank < 0 || rank >= nranks)
    st = invalidArgument("{}: rank {} is outside [0, {})", api, rank, nranks);
  Config cfg;
  if (st.isOk()) {
    auto c = readConfig(config, api);
    if (c.isOk())
      cfg = c.value();
    else
      st = c.status();
  }
  const UniqueId id = toTutti(commId);
  if (st.isOk()) {
    if (Status d = checkUniqueId(id); !d.isOk())
      st = invalidArgument("{}: commId was not made by ncclGetUniqueId of this library: {}", api,
                           d.message());
  }
  if (!st.isOk()) return failArg(st);
  auto state = std::make_shared<CommState>();
  state->rank = rank;
  state->nranks = nranks;
  state->config = cfg;
  state->cudaDev = cudaDev >= 0 ? cudaDev : currentDevice();
  CommState* raw = state.get();
  return createComm(
      comm, state, state, [raw, id] { return joinComm(*raw, id); }, api);
}

// ---- split and shrink ----

// Collective over the parent: agree on (color, key), let each color's first member host a root,
// and hand its id to the others. child is null for NCCL_SPLIT_NOCOLOR.
Status doSplit(CommState& parent, int color, int key, CommState* child) {
  TUTTI_TRY(checkUsable(parent, "ncclCommSplit"));
  const int n = parent.nranks;
  int mine[2] = {color < 0 ? -1 : color, key};
  std::vector<int> all(2 * static_cast<size_t>(n));
  TUTTI_TRY(parent.comm.allGather(mine, all.data(), 2, DataType::kInt32));
  std::vector<int> members;
  if (color >= 0) {
    for (int r = 0; r < n; ++r)
      if (all[2 * r] == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(),
                     [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
  }
  std::vector<char> ids(static_cast<size_t>(n) * 128, 0);
  UniqueId myId;
  Status made;
  if (color >= 0 && members.front() == parent.rank) {
    auto id = freshUniqueId(allLocal(parent));
    if (id.isOk())
      myId = id.value();
    else
      made = id.status();  // still take part in the exchange so that no peer hangs
  }
  TUTTI_TRY(parent.comm.allGather(myId.bytes.data(), ids.data(), 128, DataType::kUint8));
  TUTTI_TRY(made);
  if (!child) return Status::ok();
  UniqueId id;
  std::memcpy(id.bytes.data(), ids.data() + static_cast<size_t>(members.front()) * 128, 128);
  child->nranks = static_cast<int>(members.size());
  child->rank =
      static_cast<int>(std::find(members.begin(), members.end(), parent.rank) - members.begin());
  TUTTI_LOG_INFO(Subsys::kInit, "ncclCommSplit: rank {} color {} key {} -> rank {} of {}",
                 parent.rank, color, key, child->rank, child->nranks);
  return joinComm(*child, id);
}

// Survivors only, and without the parent's data connections or its bootstrap ring, both of which
// may run through a dead rank: the lowest survivor hosts a fresh root and sends its id to each
// other survivor as a bootstrap point-to-point message (a fresh connection to that survivor's
// bootstrap listener, core/bootstrap.h). The excluded ranks are never contacted, so this works on
// a parent whose collectives failed because a rank died. The message carries the survivor list:
// ranks that disagree on excludeRanksList fail instead of building different communicators.
// `seq` (the parent's shrink count) tells the messages of successive shrinks apart.
Status doShrink(CommState& parent, std::vector<int> survivors, CommState* child, int flags,
                uint64_t seq) {
  if (parent.aborted.load())
    return invalidUsage("ncclCommShrink: the parent communicator was aborted");
  if (!parent.ready.load())
    return invalidUsage("ncclCommShrink: the parent communicator's init did not complete");
  if (flags & NCCL_SHRINK_ABORT) {  // its pending operations end first, as in NCCL
    parent.aborted.store(true);
    parent.comm.abort();
  }
  const uint64_t tag = 0x5348524b00000000ull | (seq & 0xffffffffull);  // "SHRK"
  std::string list;
  for (int r : survivors) list += fmt::format("{},", r);
  const int leader = survivors.front();
  const auto timeout = defaultBootstrapTimeout();
  UniqueId id;
  if (parent.rank == leader) {
    auto fresh = freshUniqueId(allLocal(parent));
    // The others are told either way, so that none waits for an id that will not come.
    const std::string body = fresh.isOk()
                                 ? "I" + std::string(reinterpret_cast<const char*>(fresh->bytes.data()),
                                                     fresh->bytes.size()) + list
                                 : "E" + fresh.status().message();
    Status sent;
    for (int r : survivors)
      if (r != leader && sent.isOk()) sent = bootstrapSend(parent.comm, r, tag, body, timeout);
    TUTTI_TRY(fresh.status());
    if (!sent.isOk())
      return Status(sent.code(), "ncclCommShrink: sending the new id: " + sent.message());
    id = fresh.value();
  } else {
    auto got = bootstrapRecv(parent.comm, leader, tag, timeout);
    if (!got.isOk())
      return Status(got.status().code(),
                    fmt::format("ncclCommShrink: waiting for the new id from rank {} (the lowest "
                                "surviving rank): {}",
                                leader, got.status().message()));
    const std::string& body = got.value();
    if (body.empty() || (body[0] != 'I' && body[0] != 'E') ||
        (body[0] == 'I' && body.size() < 1 + id.bytes.size()))
      return remoteError("ncclCommShrink: malformed id message from rank {}", leader);
    if (body[0] == 'E')
      return remoteError("ncclCommShrink: rank {} could not create the new communicator's id: {}",
                         leader, body.substr(1));
    std::memcpy(id.bytes.data(), body.data() + 1, id.bytes.size());
    const std::string theirs = body.substr(1 + id.bytes.size());
    if (theirs != list)
      return invalidUsage("ncclCommShrink: rank {} keeps ranks {{{}}} but rank {} keeps {{{}}}: "
                          "every survivor must pass the same excludeRanksList",
                          parent.rank, list, leader, theirs);
  }
  child->nranks = static_cast<int>(survivors.size());
  child->rank = static_cast<int>(std::find(survivors.begin(), survivors.end(), parent.rank) -
                                 survivors.begin());
  TUTTI_LOG_INFO(Subsys::kInit, "ncclCommShrink: rank {} -> rank {} of {} (survivors {})",
                 parent.rank, child->rank, child->nranks, list);
  return joinComm(*child, id);
}

}  // namespace
}  // namespace tutti::nccl

using namespace tutti;
using namespace tutti::nccl;

// ---- version, ids, init ----

NCCL_API(ncclResult_t, ncclGetVersion, int* version) {
  if (!version) return fail(invalidArgument("ncclGetVersion: version is NULL"));
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  initLogging();
  if (!uniqueId) return fail(invalidArgument("ncclGetUniqueId: uniqueId is NULL"));
  std::memset(uniqueId->internal, 0, sizeof uniqueId->internal);
  UniqueId id;
  if (auto spec = fixedRootSpec()) {
    auto fixed = uniqueIdAt(*spec, fixedSecret(*spec));
    if (!fixed.isOk())
      return fail(invalidArgument("ncclGetUniqueId: NCCL_COMM_ID='{}' is not host:port: {}", *spec,
                                  fixed.status().message()));
    id = fixed.value();
  } else {
    auto fresh = freshUniqueId(launcherSaysLocal());
    if (!fresh.isOk()) return fail(fresh.status());
    id = fresh.value();
  }
  std::memcpy(uniqueId->internal, id.bytes.data(), sizeof uniqueId->internal);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId,
         int rank, ncclConfig_t* config) {
  return initRankConfig("ncclCommInitRankConfig", comm, nranks, commId, rank, config, -1);
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId,
         int rank) {
  return initRankConfig("ncclCommInitRank", comm, nranks, commId, rank, nullptr, -1);
}

NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank,
         int nId, ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || !commIds)
    return failArg(
        invalidArgument("ncclCommInitRankScalable: need nId >= 1 ids (nId={}, "
                        "commIds={})",
                        nId, static_cast<const void*>(commIds)));
  // One root serves every rank: the others' ids are valid but unused.
  return initRankConfig("ncclCommInitRankScalable", newcomm, nranks, commIds[0], myrank, config,
                        -1);
}

NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comm, int ndev, const int* devlist) {
  initLogging();
  if (!comm) return failArg(invalidArgument("ncclCommInitAll: comm is NULL"));
  if (ndev < 1)
    return failArg(invalidArgument("ncclCommInitAll: ndev must be >= 1 (ndev={})", ndev));
  auto fresh = freshUniqueId(true);
  if (!fresh.isOk()) return failArg(fresh.status());
  ncclUniqueId id;
  std::memcpy(id.internal, fresh->bytes.data(), sizeof id.internal);
  // All ranks join together: as a group (inside the caller's group, or one of our own).
  ncclGroupStart();
  ncclResult_t first = ncclSuccess;
  for (int i = 0; i < ndev; ++i) {
    comm[i] = nullptr;
    ncclResult_t r = initRankConfig("ncclCommInitAll", &comm[i], ndev, id, i, nullptr,
                                    devlist ? devlist[i] : (cudaDevicePresent() ? i : -1));
    if (first == ncclSuccess) first = r;
  }
  ncclResult_t end = ncclGroupEnd();
  return first != ncclSuccess ? first : end;
}

// ---- teardown ----

NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  auto s = checkComm(comm, "ncclCommFinalize");
  if (!s.isOk()) return fail(s.status());
  CommState* st = s.value();
  return submitTask(comm->state, "ncclCommFinalize", [st]() -> Status {
    TUTTI_TRY(checkUsable(*st, "ncclCommFinalize"));
    if (!st->ready.load()) return st->asyncError();
    return st->comm.barrier();  // every rank has issued (and so completed) all its operations
  });
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (!comm) return ncclSuccess;  // as NCCL: destroying NULL is a no-op
  auto s = checkComm(comm, "ncclCommDestroy");
  if (!s.isOk()) return fail(s.status());
  CommState* st = s.value();
  st->worker->stop(std::chrono::hours(24), false);  // pending operations complete first
  // A peer still waiting for this rank's call in a clique would wait forever.
  failDevicePath(*st->device, invalidUsage("rank {}'s communicator was destroyed", st->rank),
                 false);
  for (int i = 0; i < 100000 && st->activeCalls.load() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  retireHandle(comm);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  auto s = checkComm(comm, "ncclCommAbort");
  if (!s.isOk()) return fail(s.status());
  CommState* st = s.value();
  st->aborted.store(true);
  failDevicePath(*st->device, invalidUsage("rank {} was aborted (ncclCommAbort)", st->rank), true);
  if (st->ready.load()) st->comm.abort();  // running operations fail within milliseconds
  // An init still in its rendezvous cannot be interrupted: leave it to finish on its own.
  st->worker->stop(std::chrono::seconds(2), true);
  for (int i = 0; i < 5000 && st->activeCalls.load() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  comm->magic = 0;
  if (st->activeCalls.load() > 0) {
    TUTTI_LOG_WARN(Subsys::kInit,
                   "ncclCommAbort: a call on comm {} did not return within 5 s; "
                   "its memory is kept",
                   static_cast<const void*>(comm));
    return ncclSuccess;
  }
  retireHandle(comm);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  auto s = checkComm(comm, "ncclCommRevoke");
  if (!s.isOk()) return fail(s.status());
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return fail(
        invalidArgument("ncclCommRevoke: revokeFlags must be NCCL_REVOKE_DEFAULT (0) "
                        "(revokeFlags={})",
                        revokeFlags));
  CommState* st = s.value();
  st->revoked.store(true);
  if (st->ready.load()) st->comm.abort();
  return ncclSuccess;
}

// ---- derived communicators ----

NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
         ncclConfig_t* config) {
  auto s = checkComm(comm, "ncclCommSplit");
  if (!s.isOk()) return failArg(s.status());
  if (!newcomm) return failArg(invalidArgument("ncclCommSplit: newcomm is NULL"), s.value());
  Config cfg = s.value()->config;
  if (config) {
    auto c = readConfig(config, "ncclCommSplit");
    if (!c.isOk()) return failArg(c.status(), s.value());
    cfg = c.value();
  }
  auto parent = comm->state;
  *newcomm = nullptr;
  if (color < 0) {  // NCCL_SPLIT_NOCOLOR: take part, get no communicator
    return submitTask(parent, "ncclCommSplit",
                      [p = parent.get(), key] { return doSplit(*p, -1, key, nullptr); });
  }
  auto child = std::make_shared<CommState>();
  child->config = cfg;
  child->cudaDev = parent->cudaDev;
  child->nranks = 1;  // set by the split
  return createComm(
      newcomm, child, parent,
      [p = parent.get(), c = child, color, key] { return doSplit(*p, color, key, c.get()); },
      "ncclCommSplit");
}

NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList,
         int excludeRanksCount, ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  auto s = checkComm(comm, "ncclCommShrink");
  if (!s.isOk()) return failArg(s.status());
  CommState* st = s.value();
  if (!newcomm) return failArg(invalidArgument("ncclCommShrink: newcomm is NULL"), st);
  if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList))
    return failArg(invalidArgument("ncclCommShrink: bad exclude list (excludeRanksList={}, "
                                   "excludeRanksCount={})",
                                   static_cast<const void*>(excludeRanksList), excludeRanksCount),
                   st);
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return failArg(invalidArgument("ncclCommShrink: shrinkFlags must be NCCL_SHRINK_DEFAULT or "
                                   "NCCL_SHRINK_ABORT (shrinkFlags={})",
                                   shrinkFlags),
                   st);
  std::vector<bool> excluded(st->nranks, false);
  for (int i = 0; i < excludeRanksCount; ++i) {
    const int r = excludeRanksList[i];
    if (r < 0 || r >= st->nranks)
      return failArg(
          invalidArgument("ncclCommShrink: excluded rank {} is outside [0, {})", r, st->nranks),
          st);
    excluded[r] = true;
  }
  if (excluded[st->rank])
    return failArg(invalidArgument("ncclCommShrink: rank {} calls it but is in the exclude list "
                                   "(excluded ranks do not call ncclCommShrink)",
                                   st->rank),
                   st);
  std::vector<int> survivors;
  for (int r = 0; r < st->nranks; ++r)
    if (!excluded[r]) survivors.push_back(r);
  Config cfg = st->config;
  if (config) {
    auto c = readConfig(config, "ncclCommShrink");
    if (!c.isOk()) return failArg(c.status(), st);
    cfg = c.value();
  }
  auto parent = comm->state;
  auto child = std::make_shared<CommState>();
  child->config = cfg;
  child->cudaDev = parent->cudaDev;
  return createComm(newcomm, child, parent,
                    [p = parent.get(), c = child, survivors, shrinkFlags,
                     seq = parent->shrinks.fetch_add(1)] {
                      return doShrink(*p, survivors, c.get(), shrinkFlags, seq);
                    },
                    "ncclCommShrink");
}

// ---- errors and queries ----

NCCL_API(const char*, ncclGetErrorString, ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    case ncclTimeout:
      return "timeout";  // NCCL's text; tutti itself reports timeouts as ncclRemoteError
    default:
      return "unknown result code";
  }
}

NCCL_API(const char*, ncclGetLastError, ncclComm_t comm) {
  if (comm && comm->magic == kCommMagic && comm->state) {
    CommState* st = comm->state.get();
    static thread_local std::string copy;
    std::lock_guard<std::mutex> lock(st->mu);
    if (!st->lastError.empty()) {
      copy = st->lastError;
      return copy.c_str();
    }
  }
  return threadLastError().c_str();
}

NCCL_API(void, ncclResetDebugInit, void) { initLogging(); }

extern "C" __attribute__((visibility("default"))) void ncclResetDebugInitInternal() {
  initLogging();
}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  auto s = checkComm(comm, "ncclCommGetAsyncError");
  if (!s.isOk()) return fail(s.status());
  if (!asyncError) return fail(invalidArgument("ncclCommGetAsyncError: asyncError is NULL"));
  CommState* st = s.value();
  if (st->worker->pending() > 0) {
    *asyncError = ncclInProgress;
    return ncclSuccess;
  }
  if (st->revoked.load()) {  // revoke completed: quiescent
    *asyncError = ncclSuccess;
    return ncclSuccess;
  }
  (void)pollDevicePath(*st->device);  // a device kernel's failure becomes the async error
  Status e = st->asyncError();
  *asyncError = e.isOk() ? ncclSuccess : toResult(e.code());
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  auto s = checkComm(comm, "ncclCommCount");
  if (!s.isOk()) return fail(s.status());
  if (!count) return fail(invalidArgument("ncclCommCount: count is NULL"));
  *count = s.value()->nranks;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  auto s = checkComm(comm, "ncclCommCuDevice");
  if (!s.isOk()) return fail(s.status());
  if (!device) return fail(invalidArgument("ncclCommCuDevice: device is NULL"));
  *device = s.value()->cudaDev;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  auto s = checkComm(comm, "ncclCommUserRank");
  if (!s.isOk()) return fail(s.status());
  if (!rank) return fail(invalidArgument("ncclCommUserRank: rank is NULL"));
  *rank = s.value()->rank;
  return ncclSuccess;
}
