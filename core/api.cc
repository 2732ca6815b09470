// File: core/api.cc
// The public C++ API (include/tutti/tutti.hpp) on top of CommImpl: UniqueId creation, the
// launcher-environment path, and one thin forwarding function per collective.
#include "algorithms/algorithm.h"
#include "base/config.h"
#include "base/env.h"
#include "base/log.h"
#include "core/batch.h"
#include "core/comm.h"
#include "core/launcher_env.h"

namespace tutti {

using detail::CallArgs;
using detail::CommImpl;

const char* versionString() { return TUTTI_VERSION_STRING; }

namespace {

std::chrono::milliseconds bootstrapTimeout(const Options& o) {
  if (o.bootstrapTimeout.count() > 0) return o.bootstrapTimeout;
  auto v = env::get({"TUTTI_BOOTSTRAP_TIMEOUT"});
  auto n = v ? env::parseInt(*v) : std::nullopt;
  return std::chrono::seconds(n && *n > 0 ? *n : 120);
}

// Where createUniqueId binds the root: the interface named by TUTTI_SOCKET_IFNAME /
// NCCL_SOCKET_IFNAME, else loopback (a job without a named interface is taken to be local).
Result<net::SockAddr> rootBindAddress() {
  const std::string spec = net::socketIfnameSpec();
  if (spec.empty()) return net::loopbackInterface().addr;
  TUTTI_TRY_ASSIGN(net::InterfaceAddr chosen, net::chooseInterface(spec));
  return chosen.addr;
}

// A fresh secret and a root bound at `addr`, as an id.
Result<UniqueId> idWithRootAt(const net::SockAddr& addr) {
  bootstrap::IdData d;
  d.secret = bootstrap::randomSecret();
  TUTTI_TRY_ASSIGN(d.root, bootstrap::startRoot(addr, d.secret, bootstrapTimeout(Options{})));
  return bootstrap::encodeId(d);
}
}  // namespace

Result<UniqueId> createUniqueId() {
  log::init();
  net::SockAddr addr;
  if (auto id = env::get({"TUTTI_COMM_ID", "NCCL_COMM_ID"}); id && !id->empty()) {
    TUTTI_TRY_ASSIGN(addr, net::parseHostPort(*id));
  } else {
    TUTTI_TRY_ASSIGN(addr, rootBindAddress());
  }
  return idWithRootAt(addr);
}

Result<UniqueId> createFreshUniqueId() {
  log::init();
  TUTTI_TRY_ASSIGN(net::SockAddr addr, rootBindAddress());
  return idWithRootAt(addr);
}

// ---- Unique ids for the layers above (core/batch.h) ----

Status checkUniqueId(const UniqueId& id) { return bootstrap::decodeId(id).status(); }

Result<UniqueId> uniqueIdAt(const std::string& hostPort, uint64_t secret) {
  TUTTI_TRY_ASSIGN(net::SockAddr addr, net::parseHostPort(hostPort));
  return bootstrap::encodeId({secret, addr});
}

Status startRootOf(const UniqueId& id) {
  TUTTI_TRY_ASSIGN(bootstrap::IdData d, bootstrap::decodeId(id));
  return bootstrap::startRoot(d.root, d.secret, bootstrapTimeout(Options{})).status();
}

// All ranks local: createFreshUniqueId's address (the named interface, else loopback). Otherwise
// the named interface or NCCL's default one, so that an id sent to other hosts (MPI_Bcast, a
// store) is reachable.
Result<UniqueId> freshUniqueId(bool allLocal) {
  if (allLocal) return createFreshUniqueId();
  TUTTI_TRY_ASSIGN(net::InterfaceAddr chosen, net::chooseInterface(net::socketIfnameSpec()));
  return idWithRootAt(chosen.addr);
}

Result<Communicator> createCommunicator(const UniqueId& id, int rank, int nranks,
                                        std::shared_ptr<TaskQueue> worker) {
  TUTTI_TRY_ASSIGN(auto data, bootstrap::decodeId(id));
  TUTTI_TRY_ASSIGN(auto impl, CommImpl::create(data, rank, nranks, Options{}, std::move(worker)));
  return detail::CommAccess::wrap(std::move(impl));
}

void recordAsyncError(Communicator& comm, const Status& s) {
  if (detail::CommImpl* impl = detail::CommAccess::get(comm)) impl->recordError(s);
}

std::chrono::milliseconds defaultBootstrapTimeout() { return bootstrapTimeout(Options{}); }

bool launcherSaysLocal() {
  auto e = readLaunchEnv();
  return e.isOk() && e->localSize > 0 && e->localSize == e->nranks;
}

// ---- Communicator ----

Communicator::Communicator(std::shared_ptr<detail::CommImpl> impl) : impl_(std::move(impl)) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

Result<Communicator> Communicator::create(const UniqueId& id, int rank, int nranks,
                                          const Options& options) {
  TUTTI_TRY_ASSIGN(auto data, bootstrap::decodeId(id));
  TUTTI_TRY_ASSIGN(auto impl, CommImpl::create(data, rank, nranks, options));
  return Communicator(std::move(impl));
}

Result<Communicator> Communicator::fromEnvironment(const Options& options) {
  log::init();
  TUTTI_TRY_ASSIGN(LaunchEnv e, readLaunchEnv());
  bootstrap::IdData data;
  data.secret = e.secret;
  auto addr = net::parseHostPort(e.rootAddress);
  if (!addr.isOk())
    return invalidArgument("root address from {} is invalid: {}", e.rootSource,
                           addr.status().message());
  data.root = addr.value();
  if (e.rank == 0) {
    auto bound = bootstrap::startRoot(data.root, data.secret, bootstrapTimeout(options));
    if (!bound.isOk())
      return Status(bound.status().code(),
                    fmt::format("rank 0 cannot host the rendezvous root at {} (from {}): {}",
                                e.rootAddress, e.rootSource, bound.status().message()));
  }
  TUTTI_LOG_INFO(Subsys::kInit, "init: launcher {} rank {}/{} root {} ({})", e.launcher, e.rank,
                 e.nranks, e.rootAddress, e.rootSource);
  TUTTI_TRY_ASSIGN(auto impl, CommImpl::create(data, e.rank, e.nranks, options));
  return Communicator(std::move(impl));
}

namespace {
Status noComm(const char* api) {
  return invalidUsage("{}: the communicator is empty (moved from or never created)", api);
}
}  // namespace

#define TUTTI_COMM_OR_FAIL(api) \
  if (!impl_) return noComm(api)

int Communicator::rank() const { return impl_ ? impl_->rank() : -1; }
int Communicator::size() const { return impl_ ? impl_->size() : 0; }
std::string Communicator::transportTo(int peer) const {
  return impl_ ? impl_->transportTo(peer) : std::string();
}

namespace {
CallArgs makeArgs(const char* api, Coll coll, const void* send, void* recv, size_t count,
                  DataType dtype, RedOp op, int root) {
  CallArgs a;
  a.api = api;
  a.coll = coll;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  a.root = root;
  return a;
}

// An error about element `i` of list argument `list` of `api`: "api: ..." becomes
// "api: list[i]: ..." (built only when a check failed).
Status atIndex(const Status& s, std::string_view api, const char* list, size_t i) {
  std::string_view text = s.message();
  if (text.starts_with(api) && text.substr(api.size()).starts_with(": "))
    text.remove_prefix(api.size() + 2);
  return Status(s.code(), fmt::format("{}: {}[{}]: {}", api, list, i, text));
}

// The peer of a point-to-point call, named as the caller passed it (CallArgs uses -1 for "no
// send" / "no receive", so -1 must be rejected here).
Status checkPeer(const char* api, const char* arg, int peer, int rank, int nranks) {
  if (peer < 0 || peer >= nranks)
    return invalidArgument("{}: {} {} is outside [0, {}) ({}={}, rank={})", api, arg, peer, nranks,
                           arg, peer, rank);
  return Status::ok();
}
}  // namespace

Status Communicator::allReduce(const void* send, void* recv, size_t count, DataType dtype,
                               RedOp op) {
  TUTTI_COMM_OR_FAIL("allReduce");
  return impl_->run(makeArgs("allReduce", Coll::kAllReduce, send, recv, count, dtype, op, 0));
}
Status Communicator::allGather(const void* send, void* recv, size_t count, DataType dtype) {
  TUTTI_COMM_OR_FAIL("allGather");
  return impl_->run(
      makeArgs("allGather", Coll::kAllGather, send, recv, count, dtype, RedOp::kSum, 0));
}
Status Communicator::reduceScatter(const void* send, void* recv, size_t count, DataType dtype,
                                   RedOp op) {
  TUTTI_COMM_OR_FAIL("reduceScatter");
  return impl_->run(
      makeArgs("reduceScatter", Coll::kReduceScatter, send, recv, count, dtype, op, 0));
}
Status Communicator::broadcast(const void* send, void* recv, size_t count, DataType dtype,
                               int root) {
  TUTTI_COMM_OR_FAIL("broadcast");
  return impl_->run(
      makeArgs("broadcast", Coll::kBroadcast, send, recv, count, dtype, RedOp::kSum, root));
}
Status Communicator::reduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                            int root) {
  TUTTI_COMM_OR_FAIL("reduce");
  return impl_->run(makeArgs("reduce", Coll::kReduce, send, recv, count, dtype, op, root));
}
Status Communicator::allToAll(const void* send, void* recv, size_t count, DataType dtype) {
  TUTTI_COMM_OR_FAIL("allToAll");
  return impl_->run(
      makeArgs("allToAll", Coll::kAllToAll, send, recv, count, dtype, RedOp::kSum, 0));
}
Status Communicator::gather(const void* send, void* recv, size_t count, DataType dtype, int root) {
  TUTTI_COMM_OR_FAIL("gather");
  return impl_->run(makeArgs("gather", Coll::kGather, send, recv, count, dtype, RedOp::kSum, root));
}
Status Communicator::scatter(const void* send, void* recv, size_t count, DataType dtype,
                             int root) {
  TUTTI_COMM_OR_FAIL("scatter");
  return impl_->run(
      makeArgs("scatter", Coll::kScatter, send, recv, count, dtype, RedOp::kSum, root));
}
Status Communicator::send(const void* buf, size_t count, DataType dtype, int peer) {
  TUTTI_COMM_OR_FAIL("send");
  TUTTI_TRY(checkPeer("send", "peer", peer, impl_->rank(), impl_->size()));
  CallArgs a = makeArgs("send", Coll::kSendRecv, buf, nullptr, count, dtype, RedOp::kSum, 0);
  a.sendPeer = peer;
  return impl_->run(a);
}
Status Communicator::recv(void* buf, size_t count, DataType dtype, int peer) {
  TUTTI_COMM_OR_FAIL("recv");
  TUTTI_TRY(checkPeer("recv", "peer", peer, impl_->rank(), impl_->size()));
  CallArgs a = makeArgs("recv", Coll::kSendRecv, nullptr, buf, count, dtype, RedOp::kSum, 0);
  a.recvPeer = peer;
  return impl_->run(a);
}
Result<int> Communicator::recvAny(void* buf, size_t count, DataType dtype,
                                  std::span<const int> peers) {
  TUTTI_COMM_OR_FAIL("recvAny");
  constexpr const char* kApi = "recvAny";
  const int rank = impl_->rank(), nranks = impl_->size();
  if (peers.empty())
    return invalidArgument("{}: peers is empty (give the ranks that may send; rank={})", kApi,
                           rank);
  for (size_t i = 0; i < peers.size(); ++i) {
    Status s = checkPeer(kApi, "peer", peers[i], rank, nranks);
    if (s.isOk() && peers[i] == rank)
      s = invalidArgument("{}: peer {} is this rank (a rank cannot receive from itself here)",
                          kApi, peers[i]);
    if (!s.isOk()) return atIndex(s, kApi, "peers", i);
  }
  if (isValid(dtype) && count * dataTypeBytes(dtype) == 0)
    return invalidArgument("{}: a message of 0 bytes cannot be received from any source: nothing "
                           "arrives that tells the sender (count={}, rank={})",
                           kApi, count, rank);
  CallArgs a = makeArgs(kApi, Coll::kSendRecv, nullptr, buf, count, dtype, RedOp::kSum, 0);
  a.recvPeer = peers[0];
  return impl_->recvAny(a, peers);
}
Status Communicator::sendRecv(const void* send, int sendPeer, void* recv, int recvPeer,
                              size_t count, DataType dtype) {
  TUTTI_COMM_OR_FAIL("sendRecv");
  TUTTI_TRY(checkPeer("sendRecv", "sendPeer", sendPeer, impl_->rank(), impl_->size()));
  TUTTI_TRY(checkPeer("sendRecv", "recvPeer", recvPeer, impl_->rank(), impl_->size()));
  CallArgs a = makeArgs("sendRecv", Coll::kSendRecv, send, recv, count, dtype, RedOp::kSum, 0);
  a.sendPeer = sendPeer;
  a.recvPeer = recvPeer;
  return impl_->run(a);
}
// ---- stream-ordered calls ----

#define TUTTI_ON_STREAM(api, coll, send, recv, op, root)                                   \
  TUTTI_COMM_OR_FAIL(api);                                                                 \
  return impl_->runOnStream(makeArgs(api, coll, send, recv, count, dtype, op, root), stream)

Status Communicator::allReduce(const void* send, void* recv, size_t count, DataType dtype,
                               RedOp op, void* stream) {
  TUTTI_ON_STREAM("allReduce", Coll::kAllReduce, send, recv, op, 0);
}
Status Communicator::allGather(const void* send, void* recv, size_t count, DataType dtype,
                               void* stream) {
  TUTTI_ON_STREAM("allGather", Coll::kAllGather, send, recv, RedOp::kSum, 0);
}
Status Communicator::reduceScatter(const void* send, void* recv, size_t count, DataType dtype,
                                   RedOp op, void* stream) {
  TUTTI_ON_STREAM("reduceScatter", Coll::kReduceScatter, send, recv, op, 0);
}
Status Communicator::broadcast(const void* send, void* recv, size_t count, DataType dtype,
                               int root, void* stream) {
  TUTTI_ON_STREAM("broadcast", Coll::kBroadcast, send, recv, RedOp::kSum, root);
}
Status Communicator::reduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                            int root, void* stream) {
  TUTTI_ON_STREAM("reduce", Coll::kReduce, send, recv, op, root);
}
Status Communicator::allToAll(const void* send, void* recv, size_t count, DataType dtype,
                              void* stream) {
  TUTTI_ON_STREAM("allToAll", Coll::kAllToAll, send, recv, RedOp::kSum, 0);
}
Status Communicator::gather(const void* send, void* recv, size_t count, DataType dtype, int root,
                            void* stream) {
  TUTTI_ON_STREAM("gather", Coll::kGather, send, recv, RedOp::kSum, root);
}
Status Communicator::scatter(const void* send, void* recv, size_t count, DataType dtype,
                             int root, void* stream) {
  TUTTI_ON_STREAM("scatter", Coll::kScatter, send, recv, RedOp::kSum, root);
}
#undef TUTTI_ON_STREAM
Status Communicator::send(const void* buf, size_t count, DataType dtype, int peer,
                          void* stream) {
  TUTTI_COMM_OR_FAIL("send");
  TUTTI_TRY(checkPeer("send", "peer", peer, impl_->rank(), impl_->size()));
  CallArgs a = makeArgs("send", Coll::kSendRecv, buf, nullptr, count, dtype, RedOp::kSum, 0);
  a.sendPeer = peer;
  return impl_->runOnStream(a, stream);
}
Status Communicator::recv(void* buf, size_t count, DataType dtype, int peer, void* stream) {
  TUTTI_COMM_OR_FAIL("recv");
  TUTTI_TRY(checkPeer("recv", "peer", peer, impl_->rank(), impl_->size()));
  CallArgs a = makeArgs("recv", Coll::kSendRecv, nullptr, buf, count, dtype, RedOp::kSum, 0);
  a.recvPeer = peer;
  return impl_->runOnStream(a, stream);
}

Status Communicator::allReduceFused(std::span<const ReduceBuffer> buffers, DataType dtype,
                                    RedOp op) {
  TUTTI_COMM_OR_FAIL("allReduceFused");
  std::vector<CallArgs> ops;
  ops.reserve(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    const ReduceBuffer& b = buffers[i];
    ops.push_back(makeArgs("allReduceFused", Coll::kAllReduce, b.send, b.recv, b.count, dtype, op,
                           0));
    bool inPlace = false;
    if (Status s = detail::checkCall(ops.back(), impl_->rank(), impl_->size(), &inPlace);
        !s.isOk())
      return atIndex(s, "allReduceFused", "buffers", i);
  }
  return runBatch(*this, ops, fusionBytes());
}

Status Communicator::sendRecvGroup(std::span<const PeerTransfer> ops) {
  TUTTI_COMM_OR_FAIL("sendRecvGroup");
  const int rank = impl_->rank(), nranks = impl_->size();
  std::vector<CallArgs> args;
  args.reserve(ops.size());
  constexpr const char* kApi = "sendRecvGroup";
  for (size_t i = 0; i < ops.size(); ++i) {
    const PeerTransfer& t = ops[i];
    Status s = checkPeer(kApi, "peer", t.peer, rank, nranks);
    if (s.isOk() && !isValid(t.dtype))
      s = invalidArgument("{}: invalid datatype (dtype={})", kApi, static_cast<int>(t.dtype));
    if (s.isOk() && t.count > 0) s = detail::checkCount(kApi, t.count, t.dtype, 1);
    if (s.isOk() && t.count > 0 && !t.buf)
      s = invalidArgument("{}: buf is NULL (buf=NULL, count={}, rank={})", kApi, t.count, rank);
    if (!s.isOk()) return atIndex(s, kApi, "ops", i);
    CallArgs a = makeArgs("sendRecvGroup", Coll::kSendRecv, t.send ? t.buf : nullptr,
                          t.send ? nullptr : t.buf, t.count, t.dtype, RedOp::kSum, 0);
    (t.send ? a.sendPeer : a.recvPeer) = t.peer;
    args.push_back(a);
  }
  return runBatch(*this, args, 0);  // checks that messages to this rank itself pair up
}

Status Communicator::barrier() {
  TUTTI_COMM_OR_FAIL("barrier");
  return impl_->run(
      makeArgs("barrier", Coll::kBarrier, nullptr, nullptr, 0, DataType::kUint8, RedOp::kSum, 0));
}

Result<Work> Communicator::allReduceAsync(const void* send, void* recv, size_t count,
                                          DataType dtype, RedOp op) {
  TUTTI_COMM_OR_FAIL("allReduceAsync");
  return impl_->runAsync(
      makeArgs("allReduceAsync", Coll::kAllReduce, send, recv, count, dtype, op, 0));
}
Result<Work> Communicator::allGatherAsync(const void* send, void* recv, size_t count,
                                          DataType dtype) {
  TUTTI_COMM_OR_FAIL("allGatherAsync");
  return impl_->runAsync(
      makeArgs("allGatherAsync", Coll::kAllGather, send, recv, count, dtype, RedOp::kSum, 0));
}
Result<Work> Communicator::reduceScatterAsync(const void* send, void* recv, size_t count,
                                              DataType dtype, RedOp op) {
  TUTTI_COMM_OR_FAIL("reduceScatterAsync");
  return impl_->runAsync(
      makeArgs("reduceScatterAsync", Coll::kReduceScatter, send, recv, count, dtype, op, 0));
}
Result<Work> Communicator::broadcastAsync(const void* send, void* recv, size_t count,
                                          DataType dtype, int root) {
  TUTTI_COMM_OR_FAIL("broadcastAsync");
  return impl_->runAsync(
      makeArgs("broadcastAsync", Coll::kBroadcast, send, recv, count, dtype, RedOp::kSum, root));
}
Result<Work> Communicator::reduceAsync(const void* send, void* recv, size_t count, DataType dtype,
                                       RedOp op, int root) {
  TUTTI_COMM_OR_FAIL("reduceAsync");
  return impl_->runAsync(makeArgs("reduceAsync", Coll::kReduce, send, recv, count, dtype, op, root));
}
Result<Work> Communicator::allToAllAsync(const void* send, void* recv, size_t count,
                                         DataType dtype) {
  TUTTI_COMM_OR_FAIL("allToAllAsync");
  return impl_->runAsync(
      makeArgs("allToAllAsync", Coll::kAllToAll, send, recv, count, dtype, RedOp::kSum, 0));
}
Result<Work> Communicator::gatherAsync(const void* send, void* recv, size_t count, DataType dtype,
                                       int root) {
  TUTTI_COMM_OR_FAIL("gatherAsync");
  return impl_->runAsync(
      makeArgs("gatherAsync", Coll::kGather, send, recv, count, dtype, RedOp::kSum, root));
}
Result<Work> Communicator::scatterAsync(const void* send, void* recv, size_t count,
                                        DataType dtype, int root) {
  TUTTI_COMM_OR_FAIL("scatterAsync");
  return impl_->runAsync(
      makeArgs("scatterAsync", Coll::kScatter, send, recv, count, dtype, RedOp::kSum, root));
}
Result<Work> Communicator::barrierAsync() {
  TUTTI_COMM_OR_FAIL("barrierAsync");
  return impl_->runAsync(makeArgs("barrierAsync", Coll::kBarrier, nullptr, nullptr, 0,
                                  DataType::kUint8, RedOp::kSum, 0));
}

void Communicator::abort() {
  if (impl_) impl_->abort();
}
Status Communicator::asyncError() const {
  if (!impl_) return noComm("asyncError");
  return impl_->asyncError();
}
Status Communicator::setAlgorithm(Coll coll, const std::string& name) {
  TUTTI_COMM_OR_FAIL("setAlgorithm");
  return impl_->setAlgorithm(coll, name);
}
Result<std::string> Communicator::loadSchedule(const std::string& path) {
  if (!impl_) return noComm("loadSchedule");
  return impl_->loadSchedule(path);
}
std::vector<CollStats> Communicator::stats() const {
  return impl_ ? impl_->stats() : std::vector<CollStats>{};
}
void Communicator::resetStats() {
  if (impl_) impl_->resetStats();
}
void Communicator::writeHangReport() const {
  if (impl_) impl_->requestReport();
}
Result<Communicator::AlgorithmChoice> Communicator::algorithmFor(Coll coll, size_t count,
                                                                 DataType dtype, RedOp op,
                                                                 int root, bool inPlace) const {
  if (!impl_) return noComm("algorithmFor");
  TUTTI_TRY_ASSIGN(auto d, impl_->explain(coll, count, dtype, op, root, inPlace));
  return AlgorithmChoice{std::string(d.algo->name), d.predictedUs, d.reason};
}
std::vector<std::string> Communicator::algorithms(Coll coll) {
  std::vector<std::string> names;
  for (const auto& a : algo::registry())
    if (a.coll == coll) names.emplace_back(a.name);
  return names;
}

// ---- Work ----

Status Work::wait() const { return state_ ? state_->wait() : Status::ok(); }
bool Work::test() const { return !state_ || state_->done(); }
Status Work::error() const { return state_ ? state_->status() : Status::ok(); }

}  // namespace tutti
