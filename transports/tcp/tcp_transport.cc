// File: transports/tcp/tcp_transport.cc
// The tcp transport. Pairing is deadlock-free by construction: the lower rank of a pair dials and
// never waits for the higher rank's application (the kernel completes the TCP handshake from the
// listen backlog and buffers our 32-byte hello), the higher rank accepts and stashes hellos from
// other lower ranks until their connect() comes. Each pair has TUTTI_SOCKET_NSOCKS sockets (the
// hello names which one it is); messages of at least TUTTI_SOCKET_STRIPE_BYTES go round-robin over
// them, smaller ones use the first. Data: sendmsg/recvmsg straight from/to the user buffers,
// several queued messages per call; reducing receives go through a per-socket staging buffer,
// whole elements only. To a peer on the same machine each data socket's SO_SNDBUF is capped
// (TUTTI_SOCKET_SNDBUF; why at kSameMachineSndBuf). Waiting is the engine's: it spins on
// progress() (non-blocking calls), then polls the socket, or an epoll set of the pair's sockets
// when there are several.
//
// Why connect() in increasing rank order cannot deadlock: rank r first accepts from every p < r,
// then dials every q > r. Dials never block on a peer's progress, so rank 0 finishes. Assume
// ranks 0..r-1 finish their accepts; each then dials r without waiting on anything, so r's accepts
// complete (whatever order the hellos arrive in, thanks to the stash) and r finishes too.

#include "transports/tcp/tcp_transport.h"
#include "transports/tcp/tcp_wire.h"

#include "transports/tcp/tcp_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>

#include "base/env.h"
#include "base/host_id.h"
#include "base/log.h"
#include "base/socket.h"
#include "base/status.h"

namespace tutti::transport {
namespace {

using tcp_detail::UniqueFd;
using Clock = std::chrono::steady_clock;

TUTTI_PARAM_INT(kNsocks, "TUTTI_SOCKET_NSOCKS", nullptr, "NET", 0,
                "TCP sockets per pair of ranks (1..16, same value on every rank; 0: 2); "
                "messages of at least TUTTI_SOCKET_STRIPE_BYTES go round-robin over them");
TUTTI_PARAM_INT(kStripeBytes, "TUTTI_SOCKET_STRIPE_BYTES", nullptr, "NET", 64 << 10,
                "smallest message that may use a pair's second and later sockets");

TUTTI_PARAM_STRING(kSndBuf, "TUTTI_SOCKET_SNDBUF", nullptr, "NET", "auto",
                   "SO_SNDBUF of each data socket, bytes (K/M suffixes; the kernel doubles it); "
                   "auto: 128 KiB to a peer on the same machine (loopback, or another network "
                   "namespace), the kernel's autotuning to other hosts; 0: always the kernel's "
                   "autotuning");

// Between two processes of one machine (loopback or veth) the kernel's send-buffer autotuning
// (up to net.ipv4.tcp_wmem's 4 MiB) lets one sendmsg queue MiBs that the peer copies out only
// after they left the cache. With 128 KiB (256 KiB as the kernel counts it, four 64 KiB loopback
// segments) a 2-rank allreduce over loopback ran 1.1-2.2x faster at 2-64 MiB, 4 ranks up to 1.7x
// at 256 KiB-64 MiB, 2 ranks across two network namespaces 2-3x at 4-64 MiB; small sizes
// unchanged (interleaved runs, docs/PERFORMANCE.md). Much smaller buffers stall:
// at 16-32 KiB fewer than two segments fit in flight and an exchange waits out the peer's 40 ms
// delayed ACK. To another host a fixed buffer would only cap the bytes in flight, so the kernel
// keeps tuning it.
constexpr int kSameMachineSndBuf = 128 << 10;

constexpr int kListenBacklog = 4096;  // the kernel caps it at somaxconn
constexpr int kMaxBackoffMs = 100;
constexpr int64_t kMaxConnectTimeoutMs = int64_t{30} * 24 * 3600 * 1000;  // no clock overflow

using tcp_wire::AddrBlob;
using tcp_wire::Hello;
using tcp_wire::kBlobMagic;
using tcp_wire::kHelloMagic;
using tcp_wire::kMaxStreams;

std::string formatAddr(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    return fmt::format("{}:{}", host, ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    return fmt::format("[{}]:{}", host, ntohs(in6->sin6_port));
  }
  return fmt::format("<address family {}>", sa->sa_family);
}

std::string localAddr(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return formatAddr(reinterpret_cast<sockaddr*>(&ss));
}

std::string peerHost(const Context& ctx, int peer) {
  if (peer >= 0 && static_cast<size_t>(peer) < ctx.peers.size() &&
      !ctx.peers[peer].hostname.empty()) {
    return ctx.peers[peer].hostname;
  }
  return "?";
}

int remainingMs(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count() + 1;
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

/// Waits until `fd` reports one of `events` (true) or the deadline passes (false).
Result<bool> waitFd(int fd, short events, Clock::time_point deadline) {
  while (true) {
    if (Clock::now() >= deadline) return false;
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, remainingMs(deadline));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return systemError("tcp: poll failed: {}", errnoString(errno));
  }
}

/// The address to listen on (port 0): loopback when every rank is local, else the interface
/// chosen by TUTTI_SOCKET_IFNAME / NCCL_SOCKET_IFNAME (net::chooseInterface).
Result<net::InterfaceAddr> chooseListenAddr(const Context& ctx) {
  if (ctx.loopbackOnly) return net::loopbackInterface();
  auto chosen = net::chooseInterface(net::socketIfnameSpec());
  if (!chosen.isOk())
    return Status(chosen.status().code(),
                  fmt::format("tcp: {} (rank={})", chosen.status().message(), ctx.rank));
  return chosen;
}

Result<AddrBlob> parseBlob(const Context& ctx, int peer, std::span<const std::byte> bytes) {
  return tcp_wire::parseAddrBlob(bytes, ctx.rank, peer);
}

/// This kernel's boot id into the blob, NUL-padded (all zero when unknown).
void putBootId(AddrBlob& blob) {
  std::memset(blob.bootId, 0, sizeof(blob.bootId));
  std::memcpy(blob.bootId, bootId().data(), std::min(bootId().size(), sizeof(blob.bootId) - 1));
}

/// Whether the peer that sent `blob` runs under this kernel (a known, equal boot id).
bool sameMachine(const AddrBlob& blob) {
  const std::string_view peer(blob.bootId, ::strnlen(blob.bootId, sizeof(blob.bootId)));
  return !bootId().empty() && peer == bootId();
}

/// TUTTI_SOCKET_SNDBUF: bytes, 0 to leave the kernel's autotuning, -1 for auto.
Result<int> sendBufferSetting(const Context& ctx) {
  const std::string text = kSndBuf.get();
  if (text.empty() || text == "auto") return -1;
  const std::optional<int64_t> v = env::parseInt(text);
  if (!v || *v < 0 || *v > INT_MAX / 2) {
    return invalidArgument(
        "tcp: TUTTI_SOCKET_SNDBUF must be auto, 0 or a size in bytes up to {} (value='{}', "
        "rank={})",
        INT_MAX / 2, text, ctx.rank);
  }
  return static_cast<int>(*v);
}

Status setConnectedOptions(int fd, const Context& ctx, int peer, int sndBuf) {
  const int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return systemError("tcp: setsockopt(TCP_NODELAY) failed: {} (rank={}, peer={})",
                       errnoString(errno), ctx.rank, peer);
  }
  if (sndBuf > 0 && ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndBuf, sizeof(sndBuf)) != 0) {
    return systemError("tcp: setsockopt(SO_SNDBUF, {}) failed: {} (rank={}, peer={})", sndBuf,
                       errnoString(errno), ctx.rank, peer);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return systemError("tcp: fcntl(O_NONBLOCK) failed: {} (rank={}, peer={})", errnoString(errno),
                       ctx.rank, peer);
  }
  return Status::ok();
}

bool isRetryableConnectError(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == ECONNABORTED ||
         err == EHOSTUNREACH || err == ENETUNREACH || err == EAGAIN || err == EADDRNOTAVAIL;
}

/// Writes the hello on a freshly connected socket, waiting for buffer space until `deadline`.
Status sendHello(int fd, const Context& ctx, int peer, int stream, int nstreams,
                 const std::string& addr, Clock::time_point deadline) {
  const Hello hello{kHelloMagic, ctx.secret, ctx.rank, peer, stream, nstreams};
  const auto* p = reinterpret_cast<const char*>(&hello);
  size_t done = 0;
  while (done < sizeof(hello)) {
    const ssize_t n = ::send(fd, p + done, sizeof(hello) - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      done += static_cast<size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      TUTTI_TRY_ASSIGN(const bool ready, waitFd(fd, POLLOUT, deadline));
      if (!ready) {
        return timeoutError(
            "tcp: timed out sending the handshake to {} (rank={}, peer={}, host={})", addr,
            ctx.rank, peer, peerHost(ctx, peer));
      }
    } else if (errno != EINTR) {
      return remoteError("tcp: sending the handshake to {} failed: {} (rank={}, peer={}, host={})",
                         addr, errnoString(errno), ctx.rank, peer, peerHost(ctx, peer));
    }
  }
  return Status::ok();
}

/// Connects to the peer's listener, retrying refused/unreachable attempts with exponential
/// backoff (1 ms .. 100 ms) until `deadline`, then sends the hello.
Result<UniqueFd> dialPeer(const Context& ctx, int peer, int stream, const AddrBlob& blob,
                          Clock::time_point deadline) {
  const auto* sa = reinterpret_cast<const sockaddr*>(&blob.addr);
  const std::string addr = formatAddr(sa);
  int backoffMs = 1;
  while (true) {
    UniqueFd fd(::socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) {
      return systemError("tcp: socket() failed: {} (rank={}, peer={})", errnoString(errno),
                         ctx.rank, peer);
    }
    int err = 0;
    if (::connect(fd.get(), sa, blob.addrLen) != 0) {
      err = errno;
      if (err == EINPROGRESS || err == EINTR) {  // completes asynchronously either way
        TUTTI_TRY_ASSIGN(const bool ready, waitFd(fd.get(), POLLOUT, deadline));
        socklen_t len = sizeof(err);
        if (!ready) {
          err = ETIMEDOUT;
        } else if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
          err = errno;
        }
      }
    }
    if (err == 0) {
      TUTTI_TRY(sendHello(fd.get(), ctx, peer, stream, static_cast<int>(blob.nstreams), addr,
                          deadline));
      return fd;
    }
    if (!isRetryableConnectError(err)) {
      return systemError("tcp: connect to {} failed: {} (rank={}, peer={}, host={})", addr,
                         errnoString(err), ctx.rank, peer, peerHost(ctx, peer));
    }
    if (Clock::now() + std::chrono::milliseconds(backoffMs) >= deadline) {
      return timeoutError(
          "tcp: could not connect to rank {} at {} within {} ms, last error: {} (rank={}, "
          "peer={}, host={})",
          peer, addr, ctx.connectTimeoutMs, errnoString(err), ctx.rank, peer, peerHost(ctx, peer));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(backoffMs));
    backoffMs = std::min(backoffMs * 2, kMaxBackoffMs);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The transport: listener, accept side with its stash, dial side.

struct TcpTransport::State {
  struct PendingHello {  // accepted socket whose hello has not fully arrived
    UniqueFd fd;
    std::string addr;
    std::array<std::byte, sizeof(Hello)> buf{};
    size_t got = 0;
  };

  int rank = -1;
  UniqueFd listenFd;
  std::string listenAddr;
  std::vector<PendingHello> pending;
  int nstreams = 1;  // sockets per peer pair
  int sndBuf = -1;   // TUTTI_SOCKET_SNDBUF (sendBufferSetting)
  // by (source rank, stream): hellos that arrived before their connect()
  std::map<std::pair<int, int>, UniqueFd> stashed;

  Status acceptNew(const Context& ctx) {
    while (true) {
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      const int fd = ::accept4(listenFd.get(), reinterpret_cast<sockaddr*>(&ss), &len,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        pending.push_back(
            PendingHello{UniqueFd(fd), formatAddr(reinterpret_cast<sockaddr*>(&ss)), {}, 0});
        continue;
      }
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return Status::ok();
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      return systemError("tcp: accept on {} failed: {} (rank={})", listenAddr, errnoString(err),
                         ctx.rank);
    }
  }

  /// Checks a complete hello; stashes the socket when it is valid, else warns and drops it.
  void admit(const Context& ctx, PendingHello& p) {
    Hello h;
    std::memcpy(&h, p.buf.data(), sizeof(h));
    if (Status bad = tcp_wire::checkHello(p.buf, ctx.secret, ctx.rank, ctx.nranks); !bad.isOk()) {
      TUTTI_LOG_WARN(Subsys::kNet, "tcp: closed a connection from {}: {} (rank={})", p.addr,
                     bad.message(), ctx.rank);
    } else if (h.nstreams != nstreams) {
      TUTTI_LOG_WARN(Subsys::kNet,
                     "tcp: closed a connection from {} (rank {}): socket {} of {} per peer, but "
                     "this rank uses {} (set the same TUTTI_SOCKET_NSOCKS on every rank; rank={})",
                     p.addr, h.srcRank, h.stream, h.nstreams, nstreams, ctx.rank);
    } else if (stashed.count({h.srcRank, h.stream}) != 0) {
      TUTTI_LOG_WARN(Subsys::kNet,
                     "tcp: closed a second connection from {} claiming to be rank {} socket {} "
                     "(rank={})",
                     p.addr, h.srcRank, h.stream, ctx.rank);
    } else {
      stashed.emplace(std::make_pair(h.srcRank, h.stream), std::move(p.fd));
    }
  }

  /// Reads what has arrived of each pending hello.
  void readHellos(const Context& ctx) {
    for (size_t i = 0; i < pending.size();) {
      PendingHello& p = pending[i];
      bool drop = false;
      const ssize_t n =
          ::recv(p.fd.get(), p.buf.data() + p.got, p.buf.size() - p.got, MSG_DONTWAIT);
      if (n > 0) {
        p.got += static_cast<size_t>(n);
        if (p.got == p.buf.size()) {
          admit(ctx, p);
          drop = true;
        }
      } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        TUTTI_LOG_WARN(Subsys::kNet,
                       "tcp: connection from {} closed before its handshake completed: {} "
                       "(rank={})",
                       p.addr, n == 0 ? std::string("end of stream") : errnoString(errno),
                       ctx.rank);
        drop = true;
      }
      if (drop) {
        if (i + 1 != pending.size()) pending[i] = std::move(pending.back());
        pending.pop_back();
      } else {
        ++i;
      }
    }
  }

  /// Accepts until the hello of `peer` (a lower rank) for socket `stream` has arrived, stashing
  /// the others.
  Result<UniqueFd> acceptPeer(const Context& ctx, int peer, int stream,
                              Clock::time_point deadline) {
    const std::pair<int, int> key{peer, stream};
    while (true) {
      if (auto it = stashed.find(key); it != stashed.end()) {
        UniqueFd fd = std::move(it->second);
        stashed.erase(it);
        return fd;
      }
      TUTTI_TRY(acceptNew(ctx));
      readHellos(ctx);
      if (stashed.count(key) != 0) continue;
      if (Clock::now() >= deadline) {
        return timeoutError(
            "tcp: rank {} (host {}) did not connect within {} ms (rank={}, peer={}, host={}, "
            "listening on {})",
            peer, peerHost(ctx, peer), ctx.connectTimeoutMs, ctx.rank, peer, peerHost(ctx, peer),
            listenAddr);
      }
      std::vector<pollfd> fds;
      fds.reserve(pending.size() + 1);
      fds.push_back(pollfd{listenFd.get(), POLLIN, 0});
      for (const PendingHello& p : pending) fds.push_back(pollfd{p.fd.get(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), std::min(remainingMs(deadline), 1000)) < 0 &&
          errno != EINTR) {
        return systemError("tcp: poll failed: {} (rank={}, peer={})", errnoString(errno), ctx.rank,
                           peer);
      }
    }
  }
};

TcpTransport::TcpTransport() : state_(std::make_unique<State>()) {}
TcpTransport::~TcpTransport() = default;

Result<std::vector<std::byte>> TcpTransport::setup(const Context& ctx) {
  if (state_->listenFd) return invalidUsage("tcp: setup called twice (rank={})", ctx.rank);
  TUTTI_TRY_ASSIGN(net::InterfaceAddr la, chooseListenAddr(ctx));
  auto* sa = reinterpret_cast<sockaddr*>(&la.addr.storage);
  UniqueFd fd(::socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) {
    return systemError("tcp: socket() failed: {} (rank={})", errnoString(errno), ctx.rank);
  }
  if (::bind(fd.get(), sa, la.addr.len) != 0) {
    return systemError("tcp: bind to {} (interface {}) failed: {} (rank={})", formatAddr(sa),
                       la.ifName, errnoString(errno), ctx.rank);
  }
  if (::listen(fd.get(), kListenBacklog) != 0) {
    return systemError("tcp: listen on {} failed: {} (rank={})", formatAddr(sa), errnoString(errno),
                       ctx.rank);
  }
  int64_t nsocks = kNsocks.get();
  // Two streams, on loopback too: a 2-rank allreduce over loopback ran 1.2-1.5x faster at
  // 2-16 MiB with two than with one (and bench/tcp_ceiling.cc's bare exchange likewise).
  if (nsocks == 0) nsocks = 2;
  if (nsocks < 1 || nsocks > kMaxStreams) {
    return invalidArgument("tcp: TUTTI_SOCKET_NSOCKS must be in [1, {}] (value={}, rank={})",
                           kMaxStreams, nsocks, ctx.rank);
  }
  state_->nstreams = static_cast<int>(nsocks);
  TUTTI_TRY_ASSIGN(state_->sndBuf, sendBufferSetting(ctx));
  AddrBlob blob{};
  blob.magic = kBlobMagic;
  blob.nstreams = static_cast<uint32_t>(nsocks);
  putBootId(blob);
  socklen_t len = sizeof(blob.addr);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&blob.addr), &len) != 0) {
    return systemError("tcp: getsockname failed: {} (rank={})", errnoString(errno), ctx.rank);
  }
  blob.addrLen = static_cast<uint32_t>(len);
  state_->listenAddr = formatAddr(reinterpret_cast<sockaddr*>(&blob.addr));
  state_->listenFd = std::move(fd);
  state_->rank = ctx.rank;
  TUTTI_LOG_INFO(Subsys::kNet, "tcp: rank {} listening on {} (interface {})", ctx.rank,
                 state_->listenAddr, la.ifName);
  std::vector<std::byte> out(sizeof(blob));
  std::memcpy(out.data(), &blob, sizeof(blob));
  return out;
}

bool TcpTransport::canConnect(const Context& ctx, int peer) const {
  return peer != ctx.rank && peer >= 0 && peer < ctx.nranks;
}

Result<std::unique_ptr<Connection>> TcpTransport::connect(const Context& ctx, int peer,
                                                          std::span<const std::byte> peerBlob) {
  if (peer < 0 || peer >= ctx.nranks || peer == ctx.rank) {
    return invalidArgument("tcp: cannot connect to peer {} (rank={}, nranks={})", peer, ctx.rank,
                           ctx.nranks);
  }
  TUTTI_TRY_ASSIGN(const AddrBlob blob, parseBlob(ctx, peer, peerBlob));
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::clamp<int64_t>(
                                           ctx.connectTimeoutMs, 0, kMaxConnectTimeoutMs));
  if (blob.nstreams != static_cast<uint32_t>(state_->nstreams)) {
    return invalidUsage(
        "tcp: rank {} uses {} sockets per peer and this rank {}: set the same "
        "TUTTI_SOCKET_NSOCKS on every rank (rank={}, peer={})",
        peer, blob.nstreams, state_->nstreams, ctx.rank, peer);
  }
  if (peer < ctx.rank && !state_->listenFd) {
    return invalidUsage(
        "tcp: accepting from a lower rank needs the listener: setup() first, finishSetup() "
        "after every connect (rank={}, peer={})",
        ctx.rank, peer);
  }
  const int sndBuf = state_->sndBuf >= 0  ? state_->sndBuf
                     : sameMachine(blob) ? kSameMachineSndBuf
                                         : 0;
  std::vector<UniqueFd> fds(static_cast<size_t>(state_->nstreams));
  for (int i = 0; i < state_->nstreams; ++i) {
    if (peer > ctx.rank) {
      TUTTI_TRY_ASSIGN(fds[i], dialPeer(ctx, peer, i, blob, deadline));
    } else {
      TUTTI_TRY_ASSIGN(fds[i], state_->acceptPeer(ctx, peer, i, deadline));
    }
    TUTTI_TRY(setConnectedOptions(fds[i].get(), ctx, peer, sndBuf));
  }
  if (log::enabled(LogLevel::kInfo, Subsys::kNet)) {
    sockaddr_storage remote{};
    socklen_t len = sizeof(remote);
    const std::string remoteAddr =
        ::getpeername(fds[0].get(), reinterpret_cast<sockaddr*>(&remote), &len) == 0
            ? formatAddr(reinterpret_cast<sockaddr*>(&remote))
            : std::string("?");
    TUTTI_LOG_INFO(Subsys::kNet,
                   "tcp: rank {} connected to rank {} (host {}): {} {} {}, {} sockets, SO_SNDBUF {}",
                   ctx.rank, peer, peerHost(ctx, peer), localAddr(fds[0].get()),
                   peer > ctx.rank ? "dialled" : "accepted from", remoteAddr, fds.size(),
                   sndBuf > 0 ? fmt::format("{} bytes", sndBuf) : std::string("autotuned"));
  }
  UniqueFd epollFd;
  if (fds.size() > 1) {
    epollFd = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
    if (!epollFd) {
      return systemError("tcp: epoll_create1 failed: {} (rank={}, peer={})", errnoString(errno),
                         ctx.rank, peer);
    }
  }
  return tcp_detail::makeTcpConnection(std::move(fds), ctx.rank, peer, peerHost(ctx, peer),
                                       static_cast<size_t>(std::max<int64_t>(kStripeBytes.get(), 1)),
                                       std::move(epollFd));
}

void TcpTransport::finishSetup() {
  state_->listenFd.reset();
  state_->pending.clear();
  if (!state_->stashed.empty()) {
    std::string ranks;
    for (const auto& [key, fd] : state_->stashed)
      ranks += fmt::format("{}{}", ranks.empty() ? "" : ",", key.first);
    TUTTI_LOG_WARN(Subsys::kNet,
                   "tcp: closing connections from ranks {} that connect() never asked for "
                   "(rank={})",
                   ranks, state_->rank);
    state_->stashed.clear();
  }
}

TUTTI_REGISTER_TRANSPORT({.name = "tcp", .priority = 10, .make = [] {
                            return std::make_unique<TcpTransport>();
                          }});

}  // namespace tutti::transport
