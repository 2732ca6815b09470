// File: transports/ib/ib_transport.cc
// The ib transport: one reliable-connected queue pair per peer on another host, over the RDMA
// port this rank selects (NCCL_IB_HCA syntax; ranks of one host spread over its ports), with the
// FIFO/credit protocol of fifo_channel.h. setup() creates every queue pair, FIFO and staging
// buffer and publishes their addresses in the blob (conn_blob.h); connect() moves the queue pair
// to RTR/RTS with the peer's blob and posts the receives. No data moves before the communicator's
// barrier after the connects, so both ends are ready before the first write.
#include <poll.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>

#include "base/env.h"
#include "base/log.h"
#include "transports/ib/conn_blob.h"
#include "transports/ib/device_select.h"
#include "transports/ib/fifo_channel.h"
#include "transports/ib/reg_cache.h"
#include "transports/ib/verbs.h"
#include "transports/transport.h"

namespace tutti::transport::ib {
namespace {

TUTTI_PARAM_INT(kIbDisable, "TUTTI_IB_DISABLE", "NCCL_IB_DISABLE", "NET", 0,
                "1: never offer the ib transport");
TUTTI_PARAM_STRING(kIbHca, "TUTTI_IB_HCA", "NCCL_IB_HCA", "NET", "",
                   "RDMA devices/ports to use: 'mlx5_0:1,mlx5_1', '^mlx5_3' excludes, '=' exact");
TUTTI_PARAM_INT(kIbGidIndex, "TUTTI_IB_GID_INDEX", "NCCL_IB_GID_INDEX", "NET", -1,
                "RoCE GID table index (-1: RoCE v2 with an IPv4-mapped address first)");
TUTTI_PARAM_INT(kIbRoceVersion, "TUTTI_IB_ROCE_VERSION_NUM", "NCCL_IB_ROCE_VERSION_NUM", "NET", 2,
                "RoCE version preferred by the automatic GID choice (1 or 2)");
TUTTI_PARAM_STRING(kIbAddrFamily, "TUTTI_IB_ADDR_FAMILY", "NCCL_IB_ADDR_FAMILY", "NET", "AF_INET",
                   "address family preferred by the automatic GID choice");
TUTTI_PARAM_INT(kIbTimeout, "TUTTI_IB_TIMEOUT", "NCCL_IB_TIMEOUT", "NET", 20,
                "RC ACK timeout exponent: 4.096 us * 2^value per try (1..31)");
TUTTI_PARAM_INT(kIbRetryCnt, "TUTTI_IB_RETRY_CNT", "NCCL_IB_RETRY_CNT", "NET", 7,
                "RC transport retries before a retry-exceeded error (0..7)");
TUTTI_PARAM_INT(kIbSl, "TUTTI_IB_SL", "NCCL_IB_SL", "NET", 0, "InfiniBand service level (0..15)");
TUTTI_PARAM_INT(kIbTc, "TUTTI_IB_TC", "NCCL_IB_TC", "NET", 0, "RoCE traffic class (0..255)");
TUTTI_PARAM_INT(kIbSlotBytes, "TUTTI_IB_SLOT_BYTES", nullptr, "NET", 128 * 1024,
                "bytes per FIFO slot (power of two, 4K..1G); same on every rank");
TUTTI_PARAM_INT(kIbSlots, "TUTTI_IB_SLOTS", nullptr, "NET", 8,
                "FIFO slots per peer (1..4096); same on every rank");
TUTTI_PARAM_INT(kIbRegCache, "TUTTI_IB_REG_CACHE", nullptr, "NET", 0,
                "1: send straight from user buffers registered through a cache (buffers must stay "
                "mapped while the communicator lives; see docs/IB.md)");
TUTTI_PARAM_INT(kIbRegCacheEntries, "TUTTI_IB_REG_CACHE_ENTRIES", nullptr, "NET", 256,
                "registration cache: most cached registrations");

struct Settings {
  int timeout = 20, retryCnt = 7, sl = 0, tc = 0;
  uint32_t slotBytes = 0, slots = 0;
  bool regCache = false;
  GidPolicy gid;
};

Result<Settings> readSettings() {
  Settings s;
  auto inRange = [](int64_t v, int64_t lo, int64_t hi, const char* var) -> Status {
    if (v < lo || v > hi) return invalidArgument("ib: {}={} is outside {}..{}", var, v, lo, hi);
    return Status::ok();
  };
  TUTTI_TRY(inRange(kIbTimeout.get(), 1, 31, "NCCL_IB_TIMEOUT"));
  TUTTI_TRY(inRange(kIbRetryCnt.get(), 0, 7, "NCCL_IB_RETRY_CNT"));
  TUTTI_TRY(inRange(kIbSl.get(), 0, 15, "NCCL_IB_SL"));
  TUTTI_TRY(inRange(kIbTc.get(), 0, 255, "NCCL_IB_TC"));
  TUTTI_TRY(inRange(kIbSlots.get(), 1, kMaxFifoSlots, "TUTTI_IB_SLOTS"));
  TUTTI_TRY(inRange(kIbSlotBytes.get(), kMinSlotBytes, kMaxSlotBytes, "TUTTI_IB_SLOT_BYTES"));
  TUTTI_TRY(inRange(kIbRoceVersion.get(), 1, 2, "NCCL_IB_ROCE_VERSION_NUM"));
  TUTTI_TRY(inRange(kIbGidIndex.get(), -1, 65535, "NCCL_IB_GID_INDEX"));
  const auto slotBytes = static_cast<uint64_t>(kIbSlotBytes.get());
  if ((slotBytes & (slotBytes - 1)) != 0)
    return invalidArgument("ib: TUTTI_IB_SLOT_BYTES={} is not a power of two", slotBytes);
  const std::string fam = kIbAddrFamily.get();
  if (fam != "AF_INET" && fam != "AF_INET6")
    return invalidArgument("ib: NCCL_IB_ADDR_FAMILY='{}' is neither AF_INET nor AF_INET6", fam);
  s.timeout = static_cast<int>(kIbTimeout.get());
  s.retryCnt = static_cast<int>(kIbRetryCnt.get());
  s.sl = static_cast<int>(kIbSl.get());
  s.tc = static_cast<int>(kIbTc.get());
  s.slotBytes = static_cast<uint32_t>(slotBytes);
  s.slots = static_cast<uint32_t>(kIbSlots.get());
  s.regCache = kIbRegCache.get() != 0;
  s.gid.userIndex = kIbGidIndex.get();
  s.gid.roceVersion = static_cast<int>(kIbRoceVersion.get());
  s.gid.preferIpv4 = fam == "AF_INET";
  return s;
}

bool isRemote(const Context& ctx, int peer) {
  return peer != ctx.rank && peer >= 0 && static_cast<size_t>(peer) < ctx.peers.size() &&
         static_cast<size_t>(ctx.rank) < ctx.peers.size() &&
         ctx.peers[peer].hostId != ctx.peers[ctx.rank].hostId;
}

std::string hostOf(const Context& ctx, int peer) {
  return peer >= 0 && static_cast<size_t>(peer) < ctx.peers.size() &&
                 !ctx.peers[peer].hostname.empty()
             ? ctx.peers[peer].hostname
             : std::string("?");
}

struct FreeDeleter {
  void operator()(std::byte* p) const { std::free(p); }
};

/// Everything setup() makes for one peer; a connection takes it over.
struct PeerResources {
  std::shared_ptr<verbs::Device> dev;
  std::unique_ptr<verbs::CompletionQueue> cq;
  std::unique_ptr<verbs::QueuePair> qp;            // declared after cq: destroyed before it
  std::unique_ptr<std::byte, FreeDeleter> memory;  // FIFO (slots*slotBytes), then staging
  verbs::MemoryRegion fifoMr, stagingMr;
  uint32_t psn = 0;

  PeerResources() = default;
  PeerResources(PeerResources&&) = default;
  PeerResources& operator=(PeerResources&&) = delete;
  ~PeerResources() {
    qp.reset();  // before the regions it may still reference
    if (dev) {
      dev->deregister(fifoMr);
      dev->deregister(stagingMr);
    }
  }
};

class IbConnection final : public Connection, private Wire {
 public:
  IbConnection(PeerResources res, std::shared_ptr<RegistrationCache> cache, ChannelConfig cfg,
               uint64_t remoteFifo, uint32_t remoteRkey)
      : res_(std::move(res)),
        cache_(std::move(cache)),
        remoteFifo_(remoteFifo),
        remoteRkey_(remoteRkey),
        channel_(*this, std::move(cfg)) {}

  Status start() { return channel_.start(); }

  uint64_t postSend(const void* src, size_t bytes) override {
    channel_.postSend(src, bytes);
    return ++sendsPosted_;
  }
  uint64_t postRecv(const RecvSpec& spec) override {
    channel_.postRecv(spec);
    return ++recvsPosted_;
  }
  Status progress() override {
    if (armed_) {
      res_.cq->consumeEvents();
      armed_ = false;
    }
    Status s = channel_.progress();
    bytesSent = channel_.bytesSent();
    bytesReceived = channel_.bytesReceived();
    return s;
  }
  // While the engine waits without traffic: a zero-byte RDMA write to the peer, which fails
  // (retry exceeded) if the peer's queue pair is gone, so a dead peer never means a hang.
  Status checkPeer() override { return channel_.checkPeer(); }
  uint64_t sendsDone() const override { return channel_.sendsDone(); }
  uint64_t recvsDone() const override { return channel_.recvsDone(); }
  int pollFd() const override { return res_.cq->fd(); }
  // The engine asks for the events right before it sleeps in poll(): arm the completion channel
  // then, not on every progress call (ibv_req_notify_cq rings a doorbell). A completion that
  // arrived between the last progress() and the arming raises no event; poll()'s 1 ms timeout
  // bounds that delay.
  short pollEvents() const override {
    if (!armed_) armed_ = res_.cq->arm().isOk();
    return POLLIN;
  }

 private:
  Status postWrite(uint64_t wrId, const void* src, uint32_t bytes, uint32_t lkey,
                   uint64_t remoteOffset, uint32_t imm) override {
    return res_.qp->postWrite(wrId, src, bytes, lkey, remoteFifo_ + remoteOffset, remoteRkey_, imm);
  }
  Status postProbe(uint64_t wrId) override {
    return res_.qp->postProbe(wrId, remoteFifo_, remoteRkey_);
  }
  Status postRecv(uint64_t wrId) override { return res_.qp->postRecv(wrId); }
  Result<size_t> poll(std::span<WireCompletion> out) override { return res_.cq->poll(out); }

  PeerResources res_;
  std::shared_ptr<RegistrationCache> cache_;  // outlives the channel's leases
  uint64_t remoteFifo_;
  uint32_t remoteRkey_;
  FifoChannel channel_;
  mutable bool armed_ = false;
};

class IbTransport final : public Transport {
 public:
  std::string_view name() const override { return "ib"; }

  std::string unavailableReason(const Context& ctx) override {
    if (kIbDisable.get() != 0) return "disabled by NCCL_IB_DISABLE/TUTTI_IB_DISABLE";
    bool anyRemote = false;
    for (int p = 0; p < ctx.nranks && !anyRemote; ++p) anyRemote = isRemote(ctx, p);
    if (!anyRemote) return "every peer is on this host";
    if (Status s = verbs::load(); !s.isOk()) return s.message();
    auto devices = verbs::listDevices();
    if (!devices.isOk()) return devices.status().message();
    const std::string hcaText = kIbHca.get();
    auto filter = parseHcaList(hcaText);
    if (!filter.isOk()) return filter.status().message();
    int localRank = 0;
    for (int p = 0; p < ctx.rank; ++p)
      if (!isRemote(ctx, p)) ++localRank;
    auto port = selectPort(devices.value(), filter.value(), localRank, hcaText);
    if (!port.isOk()) return port.status().message();
    choice_ = port.value();
    return {};
  }

  Result<std::vector<std::byte>> setup(const Context& ctx) override {
    if (choice_.device.empty()) {
      if (std::string why = unavailableReason(ctx); !why.empty())
        return invalidUsage("ib: not available: {} (rank={})", why, ctx.rank);
    }
    TUTTI_TRY_ASSIGN(settings_, readSettings());
    TUTTI_TRY_ASSIGN(dev_, verbs::Device::open(choice_.device));
    const int port = choice_.port.port;
    TUTTI_TRY_ASSIGN(const PortInfo pinfo, dev_->queryPort(port));
    TUTTI_TRY_ASSIGN(const std::vector<GidEntry> gids, dev_->queryGids(port, pinfo.gidTableLen));
    TUTTI_TRY_ASSIGN(gid_, chooseGid(pinfo.linkLayer, gids, pinfo.gidTableLen, settings_.gid,
                                     choice_.device, port));
    port_ = pinfo;
    for (const GidEntry& e : gids)
      if (e.index == gid_.index) localGid_ = e.gid;
    if (settings_.regCache) {
      std::weak_ptr<verbs::Device> weak = dev_;
      RegistrationCache::Backend backend{
          [weak](uintptr_t addr, size_t bytes, MemKind kind) -> Result<MemRegistration> {
            if (kind != MemKind::kHost) {
              return invalidUsage(
                  "ib: device-memory registration (dma-buf / peer memory) is not implemented");
            }
            auto dev = weak.lock();
            if (!dev) return internalError("ib: device closed under the registration cache");
            TUTTI_TRY_ASSIGN(verbs::MemoryRegion mr,
                             dev->registerMemory(reinterpret_cast<void*>(addr), bytes, false));
            return MemRegistration{mr.lkey, mr.rkey, mr.handle};
          },
          [weak](const MemRegistration& r) {
            if (auto dev = weak.lock())
              dev->deregister(verbs::MemoryRegion{r.handle, r.lkey, r.rkey});
          }};
      RegistrationCache::Limits limits;
      limits.maxEntries = static_cast<size_t>(std::max<int64_t>(kIbRegCacheEntries.get(), 1));
      cache_ = std::make_shared<RegistrationCache>(std::move(backend), limits);
    }

    ConnBlob blob;
    blob.rank = ctx.rank;
    blob.device = choice_.device;
    blob.port = static_cast<uint8_t>(port);
    blob.linkLayer = pinfo.linkLayer;
    blob.lid = pinfo.lid;
    blob.mtu = pinfo.activeMtu;
    blob.gidIndex = static_cast<uint16_t>(gid_.index);
    blob.gid = localGid_;
    blob.slotBytes = settings_.slotBytes;
    blob.slots = settings_.slots;
    std::random_device rd;
    const size_t fifoBytes = static_cast<size_t>(settings_.slots) * settings_.slotBytes;
    ChannelConfig probe;
    probe.slots = settings_.slots;
    for (int p = 0; p < ctx.nranks; ++p) {
      if (!isRemote(ctx, p)) continue;
      PeerResources r;
      r.dev = dev_;
      TUTTI_TRY_ASSIGN(r.cq, verbs::CompletionQueue::create(
                                 dev_, static_cast<int>(probe.sendDepth() + probe.recvDepth())));
      TUTTI_TRY_ASSIGN(
          r.qp, verbs::QueuePair::createRc(dev_, *r.cq, probe.sendDepth(), probe.recvDepth()));
      TUTTI_TRY(r.qp->toInit(port));
      r.memory.reset(static_cast<std::byte*>(std::aligned_alloc(4096, 2 * fifoBytes)));
      if (!r.memory)
        return systemError("ib: cannot allocate {} bytes of FIFO for peer {} (rank={})",
                           2 * fifoBytes, p, ctx.rank);
      TUTTI_TRY_ASSIGN(r.fifoMr, dev_->registerMemory(r.memory.get(), fifoBytes, true));
      TUTTI_TRY_ASSIGN(r.stagingMr,
                       dev_->registerMemory(r.memory.get() + fifoBytes, fifoBytes, false));
      r.psn = rd() & 0xffffff;
      blob.endpoints.push_back(Endpoint{
          p, r.qp->qpn(), r.psn, reinterpret_cast<uintptr_t>(r.memory.get()), r.fifoMr.rkey});
      peers_.emplace(p, std::move(r));
    }
    TUTTI_LOG_INFO(Subsys::kNet,
                   "ib: rank {} uses {}:{} ({}, {} Mb/s, MTU {}, lid {}; {}); {} queue pairs, "
                   "{} x {} KiB FIFO slots per peer, timeout {} retry {}, {} sends",
                   ctx.rank, choice_.device, port, linkLayerName(pinfo.linkLayer), pinfo.speedMbps,
                   mtuBytes(pinfo.activeMtu), pinfo.lid, gid_.reason, peers_.size(),
                   settings_.slots, settings_.slotBytes / 1024, settings_.timeout,
                   settings_.retryCnt, cache_ ? "zero-copy (registration cache)" : "staged");
    return serializeBlob(blob);
  }

  bool canConnect(const Context&, int peer) const override { return peers_.count(peer) != 0; }

  Result<std::unique_ptr<Connection>> connect(const Context& ctx, int peer,
                                              std::span<const std::byte> peerBlob) override {
    auto it = peers_.find(peer);
    if (it == peers_.end())
      return invalidArgument("ib: no queue pair was made for peer {} (rank={})", peer, ctx.rank);
    TUTTI_TRY_ASSIGN(const ConnBlob remote, parseBlob(peerBlob, peer));
    const std::string peerHost = hostOf(ctx, peer);
    const Endpoint* ep = remote.endpointFor(ctx.rank);
    if (ep == nullptr) {
      return invalidUsage(
          "ib: rank {} (host {}) made no queue pair for this rank: the two ranks disagree on "
          "which of them share a host (TUTTI_HOSTID?) (rank={}, peer={})",
          peer, peerHost, ctx.rank, peer);
    }
    if (remote.linkLayer != port_.linkLayer) {
      return invalidUsage(
          "ib: rank {} (host {}) uses a {} port ({}:{}) and this rank a {} port ({}:{}): they "
          "cannot reach each other; restrict NCCL_IB_HCA, or set NCCL_IB_DISABLE=1 to use tcp "
          "(rank={}, peer={})",
          peer, peerHost, linkLayerName(remote.linkLayer), remote.device, remote.port,
          linkLayerName(port_.linkLayer), choice_.device, port_.port, ctx.rank, peer);
    }
    if (remote.slotBytes != settings_.slotBytes || remote.slots != settings_.slots) {
      return invalidUsage(
          "ib: rank {} uses {} FIFO slots of {} bytes and this rank {} of {}: set "
          "TUTTI_IB_SLOTS and TUTTI_IB_SLOT_BYTES alike on every rank (rank={}, peer={})",
          peer, remote.slots, remote.slotBytes, settings_.slots, settings_.slotBytes, ctx.rank,
          peer);
    }
    PeerResources res = std::move(it->second);
    peers_.erase(it);
    verbs::RemoteAddress addr{ep->qpn, ep->psn, remote.lid, remote.gid};
    verbs::PathParams path;
    path.port = port_.port;
    path.gidIndex = gid_.index;
    path.useGrh = gid_.useGrh;
    path.mtu = std::min(remote.mtu, port_.activeMtu);
    path.timeout = settings_.timeout;
    path.retryCnt = settings_.retryCnt;
    path.serviceLevel = settings_.sl;
    path.trafficClass = settings_.tc;
    Status s = res.qp->connect(addr, res.psn, path);
    if (!s.isOk()) {
      return Status(s.code(), fmt::format("{} (rank={}, peer={}, host={})", s.message(), ctx.rank,
                                          peer, peerHost));
    }
    ChannelConfig cfg;
    cfg.slots = settings_.slots;
    cfg.slotBytes = settings_.slotBytes;
    cfg.fifo = res.memory.get();
    cfg.staging = res.memory.get() + static_cast<size_t>(cfg.slots) * cfg.slotBytes;
    cfg.stagingLkey = res.stagingMr.lkey;
    cfg.cache = cache_.get();
    cfg.rank = ctx.rank;
    cfg.peer = peer;
    cfg.peerHost = peerHost;
    cfg.device = fmt::format("{}:{}", choice_.device, port_.port);
    cfg.timeout = settings_.timeout;
    cfg.retryCnt = settings_.retryCnt;
    const uint32_t localQpn = res.qp->qpn();
    auto conn = std::make_unique<IbConnection>(std::move(res), cache_, std::move(cfg), ep->fifoAddr,
                                               ep->fifoRkey);
    TUTTI_TRY(conn->start());
    TUTTI_LOG_INFO(Subsys::kNet,
                   "ib: rank {} connected to rank {} (host {}): QP {:#x} -> {:#x} on {}:{} -> "
                   "{}:{} (lid {}, gid {}, MTU {})",
                   ctx.rank, peer, peerHost, localQpn, ep->qpn, choice_.device, port_.port,
                   remote.device, remote.port, remote.lid, remote.gid.toString(),
                   mtuBytes(path.mtu));
    std::unique_ptr<Connection> out = std::move(conn);
    return out;
  }

  void finishSetup() override { peers_.clear(); }  // queue pairs no connect() asked for

 private:
  PortChoice choice_;
  Settings settings_;
  PortInfo port_;
  GidChoice gid_;
  Gid localGid_;
  std::shared_ptr<verbs::Device> dev_;
  std::shared_ptr<RegistrationCache> cache_;
  std::map<int, PeerResources> peers_;
};

}  // namespace

// Between shm (80) and tcp (10): preferred over tcp between hosts whenever a port is active.
TUTTI_REGISTER_TRANSPORT({.name = "ib", .priority = 50, .make = [] {
                            return std::make_unique<IbTransport>();
                          }});

}  // namespace tutti::transport::ib
