// File: core/bootstrap.cc
// Rendezvous root, UniqueId encoding and the bootstrap ring (allgather, barrier).
#include "core/bootstrap.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/random.h>

#include <cstring>
#include <map>
#include <thread>

#include "core/log.h"

namespace tutti::bootstrap {

namespace {
constexpr uint64_t kIdMagic = 0x3144495454555431ull;     // "1TUTTID1"
constexpr uint64_t kHelloMagic = 0x4f4c4c4548545431ull;  // hello to the root
constexpr uint64_t kRingMagic = 0x474e495254545431ull;   // ring handshake

// Compact address: family, port (network order), 16 address bytes.
struct PackedAddr {
  uint16_t family = 0;
  uint16_t port = 0;
  uint8_t addr[16] = {};
};
PackedAddr pack(const net::SockAddr& a) {
  PackedAddr p;
  p.family = a.storage.ss_family;
  if (p.family == AF_INET) {
    auto* s = reinterpret_cast<const sockaddr_in*>(&a.storage);
    p.port = s->sin_port;
    std::memcpy(p.addr, &s->sin_addr, 4);
  } else if (p.family == AF_INET6) {
    auto* s = reinterpret_cast<const sockaddr_in6*>(&a.storage);
    p.port = s->sin6_port;
    std::memcpy(p.addr, &s->sin6_addr, 16);
  }
  return p;
}
net::SockAddr unpack(const PackedAddr& p) {
  net::SockAddr a;
  if (p.family == AF_INET) {
    auto* s = reinterpret_cast<sockaddr_in*>(&a.storage);
    s->sin_family = AF_INET;
    s->sin_port = p.port;
    std::memcpy(&s->sin_addr, p.addr, 4);
    a.len = sizeof(sockaddr_in);
  } else if (p.family == AF_INET6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.storage);
    s->sin6_family = AF_INET6;
    s->sin6_port = p.port;
    std::memcpy(&s->sin6_addr, p.addr, 16);
    a.len = sizeof(sockaddr_in6);
  }
  return a;
}

struct IdLayout {
  uint64_t magic;
  uint64_t secret;
  PackedAddr root;
};
static_assert(sizeof(IdLayout) <= sizeof(UniqueId::bytes));

struct Hello {
  uint64_t magic;
  uint64_t secret;
  int32_t rank;
  int32_t nranks;
  PackedAddr ringAddr;
};
struct RingHello {
  uint64_t magic;
  uint64_t secret;
  int32_t rank;
};

template <typename T>
std::string asBytes(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < 32; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 32) s += fmt::format(", ... ({} in all)", ranks.size());
  return s;
}

// Serves one rendezvous on `listen`.
void serveRoot(net::Fd listen, uint64_t secret, std::chrono::milliseconds timeout) {
  const auto deadline = net::deadlineAfter(timeout);
  const std::string where = net::localAddress(listen.get()).isOk()
                                ? net::localAddress(listen.get())->toString()
                                : std::string("?");
  int nranks = -1;
  std::map<int, std::pair<net::Fd, PackedAddr>> joined;
  std::string failure;
  while (nranks < 0 || static_cast<int>(joined.size()) < nranks) {
    auto conn = net::acceptFrom(listen.get(), deadline, "bootstrap root");
    if (!conn.isOk()) {
      std::vector<int> missing;
      for (int r = 0; r < std::max(nranks, 0); ++r)
        if (!joined.count(r)) missing.push_back(r);
      failure = nranks < 0
                    ? fmt::format("bootstrap: no rank joined the root at {} within {} ms", where,
                                  timeout.count())
                    : fmt::format("bootstrap: timed out after {} ms waiting for ranks {} to join "
                                  "the root at {} ({} of {} arrived)",
                                  timeout.count(), rankList(missing), where, joined.size(), nranks);
      break;
    }
    net::Fd fd = std::move(conn).value();
    Hello h{};
    auto shortDeadline = std::min(deadline, net::deadlineAfter(std::chrono::seconds(5)));
    if (!net::recvAll(fd.get(), &h, sizeof h, shortDeadline, "bootstrap root hello").isOk())
      continue;
    if (h.magic != kHelloMagic || h.secret != secret) {
      TUTTI_LOG_WARN(Subsys::kBootstrap,
                     "bootstrap: root at {} rejected a connection that did not present the "
                     "UniqueId's secret",
                     where);
      continue;
    }
    std::string err;
    if (nranks < 0 && h.nranks >= 1) nranks = h.nranks;
    if (h.nranks != nranks)
      err = fmt::format("bootstrap: rank {} says nranks={} but rank(s) before it said nranks={}",
                        h.rank, h.nranks, nranks);
    else if (h.rank < 0 || h.rank >= nranks)
      err = fmt::format("bootstrap: rank {} is out of range (nranks={})", h.rank, nranks);
    else if (joined.count(h.rank))
      err = fmt::format("bootstrap: rank {} joined twice", h.rank);
    if (!err.empty()) {
      TUTTI_LOG_WARN(Subsys::kBootstrap, "{}", err);
      (void)net::sendMsg(fd.get(), "E" + err, shortDeadline, "bootstrap root reply");
      continue;
    }
    joined.emplace(h.rank, std::make_pair(std::move(fd), h.ringAddr));
  }
  std::string reply;
  if (failure.empty()) {
    reply = "T";
    for (auto& [r, v] : joined) reply += asBytes(v.second);
  } else {
    TUTTI_LOG_WARN(Subsys::kBootstrap, "{}", failure);
    reply = "E" + failure;
  }
  auto replyDeadline = net::deadlineAfter(std::chrono::seconds(10));
  for (auto& [r, v] : joined)
    (void)net::sendMsg(v.first.get(), reply, replyDeadline, "bootstrap root reply");
}
}  // namespace

UniqueId encodeId(const IdData& d) {
  UniqueId id;
  IdLayout l{kIdMagic, d.secret, pack(d.root)};
  std::memcpy(id.bytes.data(), &l, sizeof l);
  return id;
}

Result<IdData> decodeId(const UniqueId& id) {
  IdLayout l{};
  std::memcpy(&l, id.bytes.data(), sizeof l);
  if (l.magic != kIdMagic)
    return invalidArgument("UniqueId is not a tutti id (magic={:#x}); pass the bytes produced by "
                           "createUniqueId on the root rank",
                           l.magic);
  if (l.root.family != AF_INET && l.root.family != AF_INET6)
    return invalidArgument("UniqueId has an invalid address family ({})", l.root.family);
  return IdData{l.secret, unpack(l.root)};
}

uint64_t randomSecret() {
  uint64_t s = 0;
  while (getrandom(&s, sizeof s, 0) != sizeof s) {
  }
  return s;
}

Result<net::SockAddr> startRoot(const net::SockAddr& addr, uint64_t secret,
                                std::chrono::milliseconds timeout) {
  TUTTI_TRY_ASSIGN(net::Fd fd, net::listenOn(addr));
  TUTTI_TRY_ASSIGN(net::SockAddr bound, net::localAddress(fd.get()));
  TUTTI_LOG_INFO(Subsys::kBootstrap, "bootstrap: root listening on {}", bound.toString());
  std::thread([fd = std::move(fd), secret, timeout]() mutable {
    serveRoot(std::move(fd), secret, timeout);
  }).detach();
  return bound;
}

Result<std::unique_ptr<Bootstrap>> Bootstrap::join(const IdData& id, int rank, int nranks,
                                                   std::chrono::milliseconds timeout) {
  auto b = std::make_unique<Bootstrap>();
  b->rank_ = rank;
  b->nranks_ = nranks;
  b->timeout_ = timeout;
  // The root's own timeout fires first and sends its explanation; ranks wait a little longer.
  const auto deadline = net::deadlineAfter(timeout + std::chrono::seconds(5));
  const std::string who = fmt::format("bootstrap (rank {}/{})", rank, nranks);

  TUTTI_TRY_ASSIGN(net::Fd root,
                   net::connectTo(id.root, deadline, who + ": connecting to the root"));
  TUTTI_TRY_ASSIGN(b->localAddr_, net::localAddress(root.get()));
  net::SockAddr ringAddr = b->localAddr_;
  if (ringAddr.storage.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&ringAddr.storage)->sin_port = 0;
  else
    reinterpret_cast<sockaddr_in6*>(&ringAddr.storage)->sin6_port = 0;
  TUTTI_TRY_ASSIGN(net::Fd listen, net::listenOn(ringAddr));
  TUTTI_TRY_ASSIGN(ringAddr, net::localAddress(listen.get()));

  Hello h{kHelloMagic, id.secret, rank, nranks, pack(ringAddr)};
  TUTTI_TRY(net::sendAll(root.get(), &h, sizeof h, deadline, who + ": hello to the root"));
  auto reply = net::recvMsg(root.get(), deadline,
                            fmt::format("{}: waiting for the other ranks at the root {}", who,
                                        id.root.toString()));
  if (!reply.isOk()) {
    Status s = reply.status();
    if (s.code() == Code::kRemoteError)
      return remoteError("{}: the root at {} closed the connection: was the UniqueId's secret "
                         "right, and is the root process alive?",
                         who, id.root.toString());
    return s;
  }
  const std::string& msg = reply.value();
  if (msg.empty() || msg[0] != 'T') {
    std::string text = msg.size() > 1 ? msg.substr(1) : "unknown error";
    return text.find("timed out") != std::string::npos ? timeoutError("{}", text)
                                                       : invalidUsage("{}", text);
  }
  if (msg.size() != 1 + sizeof(PackedAddr) * static_cast<size_t>(nranks))
    return internalError("{}: malformed address table ({} bytes)", who, msg.size());
  std::vector<net::SockAddr> table(nranks);
  for (int r = 0; r < nranks; ++r) {
    PackedAddr p;
    std::memcpy(&p, msg.data() + 1 + sizeof(PackedAddr) * r, sizeof p);
    table[r] = unpack(p);
  }
  root.reset();
  if (nranks == 1) return b;

  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  TUTTI_TRY_ASSIGN(b->next_, net::connectTo(table[next], deadline,
                                            fmt::format("{}: connecting to rank {}", who, next)));
  RingHello rh{kRingMagic, id.secret, rank};
  TUTTI_TRY(net::sendAll(b->next_.get(), &rh, sizeof rh, deadline,
                         fmt::format("{}: handshake to rank {}", who, next)));
  for (;;) {
    TUTTI_TRY_ASSIGN(net::Fd fd,
                     net::acceptFrom(listen.get(), deadline,
                                     fmt::format("{}: waiting for rank {} to connect", who, prev)));
    RingHello in{};
    if (!net::recvAll(fd.get(), &in, sizeof in, deadline, who + ": ring handshake").isOk())
      continue;
    if (in.magic != kRingMagic || in.secret != id.secret || in.rank != prev) {
      TUTTI_LOG_WARN(Subsys::kBootstrap, "{}: rejected a ring connection (rank {}, secret {})", who,
                     in.rank, in.secret == id.secret ? "ok" : "wrong");
      continue;
    }
    b->prev_ = std::move(fd);
    break;
  }
  TUTTI_LOG_INFO(Subsys::kBootstrap, "{}: ring connected (next {}, prev {})", who, next, prev);
  return b;
}

Result<std::vector<std::string>> Bootstrap::allGather(const std::string& mine) {
  std::vector<std::string> all(nranks_);
  all[rank_] = mine;
  const auto deadline = net::deadlineAfter(timeout_);
  // Step k: forward the block of rank (rank - k), receive the block of rank (rank - k - 1).
  for (int k = 0; k < nranks_ - 1; ++k) {
    const int sendIdx = (rank_ - k + nranks_) % nranks_;
    const int recvIdx = (rank_ - k - 1 + nranks_) % nranks_;
    auto got = net::exchange(next_.get(), all[sendIdx], prev_.get(), deadline,
                             fmt::format("bootstrap allgather (rank {}/{}, step {}, waiting for "
                                         "rank {})",
                                         rank_, nranks_, k, (rank_ + nranks_ - 1) % nranks_));
    if (!got.isOk()) return got.status();
    all[recvIdx] = std::move(got).value();
  }
  return all;
}

Status Bootstrap::barrier() {
  auto r = allGather(std::string(1, 'b'));
  return r.status();
}

}  // namespace tutti::bootstrap
