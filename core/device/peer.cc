// File: core/device/peer.cc
// The peer executor (see peer.h): the group of a communicator's thread ranks, their arenas and
// program areas, the choice of algorithm, protocol and channels per call shape, the program
// cache, and the launches.
#include "core/device/peer.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "base/arg_check.h"
#include "base/env.h"
#include "base/log.h"
#include "core/batch.h"
#include "core/device/compose.h"
#include "core/device/executor.h"
#include "core/device/peer_compile.h"
#include "kernels/peer_host.h"

namespace tutti::device {

namespace peer = kernels::peer;

namespace {

TUTTI_PARAM_INT(kPeerChannels, "TUTTI_PEER_CHANNELS", nullptr, "NCCL", 8,
                "peer executor (TUTTI_DEVICE_PATH=peer): channels (CTAs) per rank at most");
TUTTI_PARAM_INT(kPeerScratchBytes, "TUTTI_PEER_SCRATCH_BYTES", nullptr, "NCCL", 4 << 20,
                "peer executor: scratch bytes per channel in each rank's arena");
TUTTI_PARAM_INT(kPeerLlBytes, "TUTTI_PEER_LL_BYTES", nullptr, "NCCL", 64 << 10,
                "peer executor: calls up to this size (nccl-tests' size) use the low-latency "
                "protocol");
TUTTI_PARAM_INT(kPeerProgramBytes, "TUTTI_PEER_PROGRAM_BYTES", nullptr, "NCCL", 4 << 20,
                "peer executor: device memory per rank for compiled programs (one per call "
                "shape)");

constexpr uint64_t kBytesPerChannel = 512 << 10;

// The algorithms tried for a shape, best first: TUTTI_ALGO's alone when it names one; else, up
// to 64 KiB per rank, those with the fewest rounds (every round waits for a peer's message),
// and above, the bandwidth-optimal ones (every byte crosses a link the fewest times).
std::vector<std::string> candidates(const algo::CollShape& s) {
  if (std::string r = requestedAlgorithm(s.coll); !r.empty()) return {r};
  const bool small = s.count * dataTypeBytes(s.dtype) <= (64 << 10);
  switch (s.coll) {
    case Coll::kAllReduce:
      return small ? std::vector<std::string>{"one_shot", "recursive_doubling", "ring"}
                   : std::vector<std::string>{"ring", "rabenseifner", "two_shot"};
    case Coll::kAllGather:
      return small ? std::vector<std::string>{"direct", "recursive_doubling", "ring"}
                   : std::vector<std::string>{"ring", "direct"};
    case Coll::kReduceScatter:
      return small ? std::vector<std::string>{"pairwise", "recursive_halving", "ring"}
                   : std::vector<std::string>{"ring", "pairwise"};
    case Coll::kBroadcast:
      return small ? std::vector<std::string>{"binomial", "chain"}
                   : std::vector<std::string>{"chain", "scatter_allgather", "binomial"};
    case Coll::kReduce:
      return small ? std::vector<std::string>{"binomial", "chain"}
                   : std::vector<std::string>{"chain", "reducescatter_gather", "binomial"};
    case Coll::kAllToAll:
      return {"pairwise", "bruck"};
    default:  // gather, scatter
      return {"direct", "binomial"};
  }
}

bool inPlaceOn(const BatchOp& op, int rank, int nranks) {
  return detail::inPlaceOf(op.callArgs(), rank, nranks);
}

}  // namespace

peer::ArenaConfig peerArenaConfig(int nranks) {
  peer::ArenaConfig c;
  c.nranks = nranks;
  c.channels =
      static_cast<int32_t>(std::clamp<int64_t>(kPeerChannels.get(), 1, peer::kMaxChannels));
  c.slots = 8;
  c.slotBytes = 128 << 10;
  c.llSlots = 8;
  c.llLines = 512;  // a line per thread of a 512-thread CTA: 4 KiB of data per slot
  c.scratchBytes =
      peer::alignUp(static_cast<uint64_t>(std::max<int64_t>(kPeerScratchBytes.get(), 0)), 256);
  return c;
}

bool peerEligible(const std::vector<BatchOp>& ops, int rank, int nranks) {
  if (ops.empty()) return false;
  for (const BatchOp& op : ops) {
    if (op.kind == BatchOp::Kind::kTask || op.stream != ops.front().stream) return false;
    if (op.kind == BatchOp::Kind::kColl && op.preMul && inPlaceOn(op, rank, nranks)) return false;
    const auto [in, out] = op.ioBytes(rank, nranks);
    if ((in > 0 && !op.sendReachable) || (out > 0 && !op.recvReachable)) return false;
  }
  return true;
}

class PeerGroup {
 public:
  // A call shape: (coll, count, dtype, op, root, in place, premulsum, the scalar's bytes).
  using Key = std::tuple<int, size_t, int, int, int, bool, bool, int64_t>;

  struct Placed {
    uint64_t offset = 0;  // in the rank's program area
    peer::ProgramHeader header;
    std::string algorithm;
  };

  struct Rank {
    int device = -1;
    unsigned char* arena = nullptr;              // device memory of `device`
    unsigned char* programs = nullptr;           // device memory of `device`
    unsigned char* mirror = nullptr;             // mapped host memory: what `programs` holds
    peer::ErrorRecord* error = nullptr;          // mapped host memory
    uint64_t used = 0;                           // bytes of `programs` placed
    std::map<Key, Placed> cache;                 // collectives
    std::map<std::string, Placed> messageCache;  // batches of sends and receives
    std::mutex mu;  // the above: one thread per rank at a time, but a group may span threads
  };

  PeerGroup(uint64_t key, int nranks, PeerDevice* dev, const peer::ArenaConfig& config)
      : key_(key),
        nranks_(nranks),
        dev_(dev),
        layout_(peer::arenaLayout(config)),
        programBytes_(peer::alignUp(
            static_cast<uint64_t>(std::max<int64_t>(kPeerProgramBytes.get(), 4096)), 256)) {
    for (int r = 0; r < nranks; ++r) ranks_.push_back(std::make_unique<Rank>());
  }

  ~PeerGroup() {
    {
      std::lock_guard<std::mutex> lock(registryMu());
      auto& reg = registry();
      if (auto it = reg.find(key_); it != reg.end() && it->second.expired()) reg.erase(it);
    }
    const Result<int> previous = dev_->currentDevice();
    for (auto& r : ranks_) {
      if (r->device >= 0 && dev_->setDevice(r->device).isOk()) {
        if (r->arena) dev_->freeDevice(r->arena);
        if (r->programs) dev_->freeDevice(r->programs);
      }
      if (r->mirror) dev_->freeMapped(r->mirror);
      if (r->error) dev_->freeMapped(r->error);
    }
    if (abort_) dev_->freeMapped(abort_);
    if (previous.isOk()) (void)dev_->setDevice(previous.value());
  }

  static std::mutex& registryMu() {
    static std::mutex mu;
    return mu;
  }
  static std::map<uint64_t, std::weak_ptr<PeerGroup>>& registry() {
    static std::map<uint64_t, std::weak_ptr<PeerGroup>> reg;
    return reg;
  }

  int nranks() const { return nranks_; }

  // Allocates `rank`'s memory on `device` (and the group's abort flag, once).
  Status allocate(int rank, int device) {
    Rank& r = *ranks_[rank];
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.device >= 0) return invalidUsage("peer group {:#x}: rank {} joined twice", key_, rank);
    TUTTI_TRY(dev_->setDevice(device));
    r.device = device;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (!abort_) {
        TUTTI_TRY_ASSIGN(void* a, dev_->allocMapped(sizeof(uint32_t) * 32));
        abort_ = static_cast<uint32_t*>(a);
      }
    }
    TUTTI_TRY_ASSIGN(void* arena, dev_->allocDevice(layout_.bytes));
    r.arena = static_cast<unsigned char*>(arena);
    TUTTI_TRY_ASSIGN(void* programs, dev_->allocDevice(programBytes_));
    r.programs = static_cast<unsigned char*>(programs);
    TUTTI_TRY_ASSIGN(void* mirror, dev_->allocMapped(programBytes_));
    r.mirror = static_cast<unsigned char*>(mirror);
    TUTTI_TRY_ASSIGN(void* error, dev_->allocMapped(sizeof(peer::ErrorRecord)));
    r.error = static_cast<peer::ErrorRecord*>(error);
    return Status::ok();
  }

  Status connect(int rank) {
    Rank& r = *ranks_[rank];
    TUTTI_TRY_ASSIGN(const int previous, dev_->currentDevice());
    TUTTI_TRY(dev_->setDevice(r.device));
    Status st;
    for (int q = 0; q < nranks_ && st.isOk(); ++q) {
      const Rank& o = *ranks_[q];
      if (o.arena == nullptr)
        st = internalError("peer group {:#x}: rank {} connects before rank {} has joined", key_,
                           rank, q);
      else if (o.device != r.device)
        st = dev_->enablePeerAccess(o.device);
    }
    if (Status back = dev_->setDevice(previous); st.isOk()) st = back;
    return st;
  }

  Status failure() {
    if (!failed_.load()) return Status::ok();
    std::lock_guard<std::mutex> lock(mu_);
    return failure_;
  }

  void fail(const Status& why, bool abort) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failed_.load()) {
        failure_ = why;
        failed_.store(true);
      }
    }
    if (abort && abort_) std::atomic_ref<uint32_t>(*abort_).store(1, std::memory_order_release);
  }

  // The rank's kernels' failure, if one was recorded (mapped memory the GPU writes).
  Status kernelFailure(int rank) {
    peer::ErrorRecord* e = ranks_[rank]->error;
    if (std::atomic_ref<uint32_t>(e->failure).load(std::memory_order_acquire) == 0)
      return Status::ok();
    return peer::failureStatus(*e, timeoutNs());
  }

  Status submit(int rank, std::vector<BatchOp>& ops) {
    TUTTI_TRY(failure());
    if (Status k = kernelFailure(rank); !k.isOk()) {
      fail(k, false);
      return k;
    }
    Rank& r = *ranks_[rank];
    std::lock_guard<std::mutex> lock(r.mu);
    TUTTI_TRY_ASSIGN(const int previous, dev_->currentDevice());
    TUTTI_TRY(dev_->setDevice(r.device));
    // The collectives in issue order, then every send and receive as one program (as the host
    // path runs a batch: core/batch.h).
    Status st;
    std::vector<const BatchOp*> messages;
    for (const BatchOp& op : ops) {
      if (op.kind != BatchOp::Kind::kColl) {
        messages.push_back(&op);
        continue;
      }
      st = launch(rank, r, op);
      if (!st.isOk()) break;
    }
    if (st.isOk() && !messages.empty()) st = launchMessages(rank, r, messages);
    if (Status back = dev_->setDevice(previous); st.isOk()) st = back;
    return st;
  }

 private:
  uint64_t timeoutNs() const { return static_cast<uint64_t>(waitLimit().count()) * 1000000ull; }

  Result<const Placed*> program(int rank, Rank& r, const BatchOp& op) {
    const bool inPlace = inPlaceOn(op, rank, nranks_);
    int64_t scalar = 0;
    if (op.preMul) std::memcpy(&scalar, op.scalar.data(), dataTypeBytes(op.dtype));
    const Key key{static_cast<int>(op.coll),
                  op.count,
                  static_cast<int>(op.dtype),
                  static_cast<int>(op.op),
                  op.root,
                  inPlace,
                  op.preMul,
                  scalar};
    if (auto it = r.cache.find(key); it != r.cache.end()) return &it->second;
    const algo::CollShape shape{op.coll,  rank,  nranks_, op.count,
                                op.dtype, op.op, op.root, inPlace};
    const uint64_t callBytes = messageBytes(op.coll, op.count, op.dtype, nranks_);
    PeerCompileConfig cfg;
    cfg.protocol = callBytes <= static_cast<uint64_t>(std::max<int64_t>(kPeerLlBytes.get(), 0))
                       ? peer::Protocol::kLowLatency
                       : peer::Protocol::kSimple;
    cfg.channels = static_cast<int>(
        std::clamp<uint64_t>(callBytes / kBytesPerChannel, 1, layout_.config.channels));
    cfg.payloadBytes = peer::payloadBytes(layout_.config, cfg.protocol);
    cfg.scratchBytes = layout_.config.scratchBytes;
    Status first;
    for (const std::string& name : candidates(shape)) {
      const algo::AlgorithmInfo* info = algo::find(shape.coll, name);
      if (info == nullptr) {
        if (first.isOk())
          first = invalidArgument("{}: no algorithm {} for {} (TUTTI_ALGO)", op.api, name,
                                  collInfo(shape.coll).name);
        continue;
      }
      auto compiled = compilePeer(shape, *info, cfg, op.preMul ? op.scalar.data() : nullptr);
      if (!compiled.isOk()) {
        if (first.isOk()) first = compiled.status();
        continue;
      }
      const PeerProgram& p = compiled.value();
      TUTTI_TRY_ASSIGN(Placed placed, place(r, p, op.api, rank));
      TUTTI_LOG_INFO(Subsys::kTuning,
                     "peer group {:#x} rank {}: {} of {} {}{}: {} ({}, {} channels, {} pieces)",
                     key_, rank, collInfo(op.coll).name, op.count, dataTypeName(op.dtype),
                     inPlace ? " in place" : "", p.algorithm(),
                     cfg.protocol == peer::Protocol::kSimple ? "simple" : "low latency",
                     p.header()->nchannels, p.header()->npieces);
      return &r.cache.emplace(key, std::move(placed)).first->second;
    }
    return first.isOk() ? invalidUsage("{}: no algorithm runs {} on the peer executor", op.api,
                                       collInfo(shape.coll).name)
                        : first;
  }

  // Places a compiled program in the rank's program area (once): copies it there and caches it.
  Result<Placed> place(Rank& r, const PeerProgram& p, const char* api, int rank) {
    const uint64_t bytes = peer::alignUp(p.bytes(), 256);
    if (r.used + bytes > programBytes_)
      return invalidUsage(
          "{}: rank {}: the peer program area ({} bytes, "
          "TUTTI_PEER_PROGRAM_BYTES) is full after {} programs",
          api, rank, programBytes_, r.cache.size() + r.messageCache.size());
    std::memcpy(r.mirror + r.used, p.header(), p.bytes());
    TUTTI_TRY(dev_->upload(r.programs + r.used, r.mirror + r.used, p.bytes()));
    Placed placed;
    placed.offset = r.used;
    placed.header = *p.header();
    placed.algorithm = p.algorithm();
    r.used += bytes;
    return placed;
  }

  peer::Launch launchFor(Rank& r, const Placed& placed) const {
    peer::Launch l;
    l.program = reinterpret_cast<const peer::ProgramHeader*>(r.programs + placed.offset);
    for (int q = 0; q < nranks_; ++q) l.arenas[q] = ranks_[q]->arena;
    l.layout = layout_;
    l.error = r.error;
    l.abortFlag = abort_;
    l.timeoutNs = timeoutNs();
    return l;
  }

  // A batch's sends and receives: one program (the simple protocol, whatever the sizes: both
  // sides of a FIFO must agree, and each knows only its own messages), cached by the sequence of
  // (direction, peer, bytes); each message's buffer goes in the launch.
  Status launchMessages(int rank, Rank& r, const std::vector<const BatchOp*>& msgs) {
    const char* api = msgs.front()->api;
    if (msgs.size() > static_cast<size_t>(peer::kMaxBuffers))
      return invalidUsage(
          "{}: rank {}: {} sends and receives in one group; the peer executor "
          "takes at most {}",
          api, rank, msgs.size(), peer::kMaxBuffers);
    std::vector<PeerMessage> list;
    std::string key;
    for (size_t i = 0; i < msgs.size(); ++i) {
      const BatchOp& op = *msgs[i];
      const bool send = op.kind == BatchOp::Kind::kSend;
      const uint64_t bytes = op.count * dataTypeBytes(op.dtype);
      list.push_back({send, op.peer, bytes, static_cast<int>(i)});
      key += fmt::format("{}{}:{},", send ? 's' : 'r', op.peer, bytes);
    }
    auto it = r.messageCache.find(key);
    if (it == r.messageCache.end()) {
      PeerCompileConfig cfg;
      cfg.channels = layout_.config.channels;
      cfg.protocol = peer::Protocol::kSimple;
      cfg.payloadBytes = peer::payloadBytes(layout_.config, cfg.protocol);
      cfg.messageBytesPerChannel = kBytesPerChannel;
      TUTTI_TRY_ASSIGN(PeerProgram p, compilePeerMessages(rank, nranks_, list, cfg));
      TUTTI_TRY_ASSIGN(Placed placed, place(r, p, api, rank));
      it = r.messageCache.emplace(key, std::move(placed)).first;
    }
    peer::Launch l = launchFor(r, it->second);
    for (size_t i = 0; i < msgs.size(); ++i)
      l.buffers[i] =
          msgs[i]->kind == BatchOp::Kind::kSend ? const_cast<void*>(msgs[i]->send) : msgs[i]->recv;
    return dev_->launch(l, it->second.header, msgs.front()->stream);
  }

  Status launch(int rank, Rank& r, const BatchOp& op) {
    TUTTI_TRY_ASSIGN(const Placed* placed, program(rank, r, op));
    peer::Launch l = launchFor(r, *placed);
    l.input = op.send;
    l.output = op.recv;
    return dev_->launch(l, placed->header, op.stream);
  }

  const uint64_t key_;
  const int nranks_;
  PeerDevice* const dev_;
  const peer::ArenaLayout layout_;
  const uint64_t programBytes_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  uint32_t* abort_ = nullptr;  // mapped host memory, shared by the group's kernels
  std::mutex mu_;              // abort_'s allocation, failure_
  std::atomic<bool> failed_{false};
  Status failure_;
};

Result<std::shared_ptr<PeerGroup>> joinPeerGroup(uint64_t key, int nranks, int rank, int device,
                                                 PeerDevice* dev, const peer::ArenaConfig& config) {
  if (nranks < 1 || nranks > peer::kMaxRanks)
    return invalidUsage("peer group: nranks={} outside [1, {}]", nranks, peer::kMaxRanks);
  if (rank < 0 || rank >= nranks)
    return invalidUsage("peer group: rank={} outside [0, {})", rank, nranks);
  if (dev == nullptr)
    return invalidUsage("peer group: no device operations (a build without CUDA)");
  std::shared_ptr<PeerGroup> g;
  {
    std::lock_guard<std::mutex> lock(PeerGroup::registryMu());
    auto& reg = PeerGroup::registry();
    if (auto it = reg.find(key); it != reg.end()) g = it->second.lock();
    if (g && g->nranks() != nranks)
      return invalidUsage("peer group {:#x}: rank {} joins with {} ranks, the group has {}", key,
                          rank, nranks, g->nranks());
    if (!g) {
      g = std::make_shared<PeerGroup>(key, nranks, dev, config);
      reg[key] = g;
    }
  }
  TUTTI_TRY(g->allocate(rank, device));
  return g;
}

Status connectPeerGroup(PeerGroup& group, int rank) { return group.connect(rank); }

namespace {

class PeerExecutor final : public Executor {
 public:
  PeerExecutor(std::shared_ptr<PeerGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  const char* name() const override { return "peer"; }

  Status submit(std::span<const RankBatch> batches) override {
    Status first;
    for (const RankBatch& b : batches) {
      if (b.owner->deviceAborted())
        group_->fail(invalidUsage("peer executor: rank {} was aborted", rank_), true);
      Status st = group_->submit(rank_, *b.ops);
      if (!st.isOk()) b.owner->recordDeviceError(st, true);
      if (first.isOk() && !st.isOk()) first = st;
    }
    return first;
  }

  void fail(const Status& why, bool abort) override {
    if (abort) group_->fail(why, true);
  }

  Status poll() override {
    Status k = group_->kernelFailure(rank_);
    if (!k.isOk()) group_->fail(k, false);
    return k;
  }

 private:
  std::shared_ptr<PeerGroup> group_;
  const int rank_;
};

}  // namespace

std::unique_ptr<Executor> makePeerExecutor(std::shared_ptr<PeerGroup> group, int rank) {
  return std::make_unique<PeerExecutor>(std::move(group), rank);
}

}  // namespace tutti::device
