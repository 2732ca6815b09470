// File: transports/tcp/tcp_transport.cc
// The tcp transport. Pairing is deadlock-free by construction: the lower rank of a pair dials and
// never waits for the higher rank's application (the kernel completes the TCP handshake from the
// listen backlog and buffers our 24-byte hello), the higher rank accepts and stashes hellos from
// other lower ranks until their connect() comes. Data: sendmsg/recvmsg straight from/to the user
// buffers; reducing receives go through a per-connection staging buffer, whole elements only.
//
// Why connect() in increasing rank order cannot deadlock: rank r first accepts from every p < r,
// then dials every q > r. Dials never block on a peer's progress, so rank 0 finishes. Assume
// ranks 0..r-1 finish their accepts; each then dials r without waiting on anything, so r's accepts
// complete (whatever order the hellos arrive in, thanks to the stash) and r finishes too.

#include "transports/tcp/tcp_transport.h"
#include "transports/tcp/tcp_wire.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
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
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "core/env.h"
#include "core/log.h"
#include "core/socket.h"
#include "core/status.h"

namespace tutti::transport {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kListenBacklog = 4096;                     // the kernel caps it at somaxconn
constexpr size_t kStagingBytes = 256 * 1024;
constexpr int kMaxIov = 64;
constexpr int kMaxBackoffMs = 100;
constexpr int64_t kMaxConnectTimeoutMs = int64_t{30} * 24 * 3600 * 1000;  // no clock overflow

using tcp_wire::AddrBlob;
using tcp_wire::Hello;
using tcp_wire::kBlobMagic;
using tcp_wire::kHelloMagic;

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

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

Status setConnectedOptions(int fd, const Context& ctx, int peer) {
  const int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return systemError("tcp: setsockopt(TCP_NODELAY) failed: {} (rank={}, peer={})",
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
Status sendHello(int fd, const Context& ctx, int peer, const std::string& addr,
                 Clock::time_point deadline) {
  const Hello hello{kHelloMagic, ctx.secret, ctx.rank, peer};
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
Result<UniqueFd> dialPeer(const Context& ctx, int peer, const AddrBlob& blob,
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
      TUTTI_TRY(sendHello(fd.get(), ctx, peer, addr, deadline));
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

// ---------------------------------------------------------------------------------------------
// The connection: queued sends and receives over one byte stream.

class TcpConnection final : public Connection {
 public:
  TcpConnection(UniqueFd fd, int rank, int peer, std::string peerHost)
      : fd_(std::move(fd)), rank_(rank), peer_(peer), peerHost_(std::move(peerHost)) {}

  uint64_t postSend(const void* src, size_t bytes) override {
    if (bytes == 0 && sends_.empty()) {
      ++sendsDone_;
    } else {
      sends_.push_back(SendOp{static_cast<const std::byte*>(src), bytes, 0});
    }
    return ++sendsPosted_;
  }

  uint64_t postRecv(const RecvSpec& spec) override {
    const size_t elem = std::max<size_t>(spec.elemBytes, 1);
    if (isReducing(spec) && spec.bytes % elem != 0 && error_.isOk()) {
      error_ = invalidArgument(
          "tcp: reducing receive of {} bytes is not a multiple of the element size {} (rank={}, "
          "peer={})",
          spec.bytes, elem, rank_, peer_);
    }
    if (spec.bytes == 0 && recvs_.empty()) {
      ++recvsDone_;
    } else {
      recvs_.push_back(RecvOp{spec, 0});
    }
    return ++recvsPosted_;
  }

  Status progress() override {
    if (!error_.isOk()) return error_;
    Status s = progressSends();
    if (s.isOk()) s = progressRecvs();
    if (!s.isOk()) error_ = s;
    return s;
  }

  uint64_t sendsDone() const override { return sendsDone_; }
  uint64_t recvsDone() const override { return recvsDone_; }
  int pollFd() const override { return fd_.get(); }
  // POLLIN only while a receive is pending (or nothing is pending at all, to notice a dead peer):
  // data the peer sent ahead of our next postRecv must not keep waking a sender-only wait.
  short pollEvents() const override {
    short ev = 0;
    if (!recvs_.empty() || sends_.empty()) ev |= POLLIN;
    if (!sends_.empty()) ev |= POLLOUT;
    return ev;
  }

 private:
  struct SendOp {
    const std::byte* src;
    size_t bytes;
    size_t doneBytes;
  };
  struct RecvOp {
    RecvSpec spec;
    size_t doneBytes;
  };

  static bool isReducing(const RecvSpec& spec) {
    return spec.reduce != nullptr && spec.src != nullptr;
  }

  Status closedByPeer(int err) const {
    return remoteError(
        "tcp: connection to rank {} (host {}) closed by peer{}{} (rank={}, peer={}, "
        "pendingSends={}, pendingRecvs={})",
        peer_, peerHost_, err != 0 ? ": " : "", err != 0 ? errnoString(err) : std::string(), rank_,
        peer_, sends_.size(), recvs_.size());
  }
  Status ioError(const char* call, int err) const {
    return systemError(
        "tcp: {} failed on the connection to rank {} (host {}): {} (rank={}, peer={})", call, peer_,
        peerHost_, errnoString(err), rank_, peer_);
  }

  /// Writes as much of the queue as the socket takes, several messages per sendmsg.
  Status progressSends() {
    while (true) {
      while (!sends_.empty() && sends_.front().doneBytes == sends_.front().bytes) {
        sends_.pop_front();
        ++sendsDone_;
      }
      if (sends_.empty()) return Status::ok();
      std::array<iovec, kMaxIov> iov;
      int niov = 0;
      size_t want = 0;
      for (auto it = sends_.begin(); it != sends_.end() && niov < kMaxIov; ++it) {
        const size_t left = it->bytes - it->doneBytes;
        if (left == 0) continue;
        iov[niov++] = iovec{const_cast<std::byte*>(it->src + it->doneBytes), left};
        want += left;
      }
      msghdr msg{};
      msg.msg_iov = iov.data();
      msg.msg_iovlen = static_cast<size_t>(niov);
      const ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        const int err = errno;
        if (err == EINTR) continue;
        if (err == EAGAIN || err == EWOULDBLOCK) return Status::ok();
        if (err == EPIPE || err == ECONNRESET) return closedByPeer(err);
        return ioError("sendmsg", err);
      }
      bytesSent += static_cast<uint64_t>(n);
      size_t left = static_cast<size_t>(n);
      for (auto it = sends_.begin(); it != sends_.end() && left > 0; ++it) {
        const size_t take = std::min(left, it->bytes - it->doneBytes);
        it->doneBytes += take;
        left -= take;
      }
      if (static_cast<size_t>(n) < want) {  // socket buffer full: retire what finished, stop
        while (!sends_.empty() && sends_.front().doneBytes == sends_.front().bytes) {
          sends_.pop_front();
          ++sendsDone_;
        }
        return Status::ok();
      }
    }
  }

  /// Reads whatever is available into the queued receives.
  Status progressRecvs() {
    while (true) {
      while (!recvs_.empty() && recvs_.front().doneBytes == recvs_.front().spec.bytes) {
        recvs_.pop_front();
        ++recvsDone_;
      }
      if (recvs_.empty()) return Status::ok();
      TUTTI_TRY_ASSIGN(const bool more,
                       isReducing(recvs_.front().spec) ? readReduce(recvs_.front()) : readPlain());
      if (!more) {
        while (!recvs_.empty() && recvs_.front().doneBytes == recvs_.front().spec.bytes) {
          recvs_.pop_front();
          ++recvsDone_;
        }
        return Status::ok();
      }
    }
  }

  /// One recv call of `want` bytes into `iov`; the count read (0 when the socket is drained).
  Result<size_t> readSome(iovec* iov, int niov, size_t want) {
    while (true) {
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(niov);
      const ssize_t n = ::recvmsg(fd_.get(), &msg, MSG_DONTWAIT);
      if (n > 0) {
        bytesReceived += static_cast<uint64_t>(n);
        return static_cast<size_t>(n);
      }
      if (n == 0 && want > 0) return closedByPeer(0);
      const int err = errno;
      if (err == EINTR) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return size_t{0};
      if (err == ECONNRESET || err == EPIPE) return closedByPeer(err);
      return ioError("recvmsg", err);
    }
  }

  /// Scatters into the consecutive plain receives at the front. True if the socket may hold more.
  Result<bool> readPlain() {
    std::array<iovec, kMaxIov> iov;
    int niov = 0;
    size_t want = 0;
    for (auto it = recvs_.begin(); it != recvs_.end() && niov < kMaxIov; ++it) {
      if (isReducing(it->spec)) break;
      const size_t left = it->spec.bytes - it->doneBytes;
      if (left == 0) continue;
      iov[niov++] = iovec{static_cast<std::byte*>(it->spec.dst) + it->doneBytes, left};
      want += left;
    }
    TUTTI_TRY_ASSIGN(const size_t n, readSome(iov.data(), niov, want));
    size_t left = n;
    for (auto it = recvs_.begin(); it != recvs_.end() && left > 0; ++it) {
      const size_t take = std::min(left, it->spec.bytes - it->doneBytes);
      it->doneBytes += take;
      left -= take;
    }
    return n == want;
  }

  /// Reads into the staging buffer and reduces the whole elements received; a partial element
  /// stays staged until its remaining bytes arrive. True if the socket may hold more.
  Result<bool> readReduce(RecvOp& op) {
    const size_t elem = std::max<size_t>(op.spec.elemBytes, 1);
    if (staging_.empty()) staging_.resize(std::max(kStagingBytes, elem));
    const size_t want = std::min(staging_.size() - staged_, op.spec.bytes - op.doneBytes - staged_);
    iovec iov{staging_.data() + staged_, want};
    TUTTI_TRY_ASSIGN(const size_t n, readSome(&iov, 1, want));
    staged_ += n;
    const size_t whole = staged_ / elem * elem;
    if (whole > 0) {
      auto* dst = static_cast<std::byte*>(op.spec.dst) + op.doneBytes;
      const auto* src = static_cast<const std::byte*>(op.spec.src) + op.doneBytes;
      op.spec.reduce(dst, src, staging_.data(), whole / elem);
      op.doneBytes += whole;
      staged_ -= whole;
      if (staged_ > 0) std::memmove(staging_.data(), staging_.data() + whole, staged_);
    }
    return n == want;
  }

  UniqueFd fd_;
  int rank_;
  int peer_;
  std::string peerHost_;
  std::deque<SendOp> sends_;
  std::deque<RecvOp> recvs_;
  uint64_t sendsDone_ = 0;
  uint64_t recvsDone_ = 0;
  std::vector<std::byte> staging_;  // allocated on the first reducing receive
  size_t staged_ = 0;               // bytes of the front reducing receive held in staging_
  Status error_;                    // first failure; the connection is unusable afterwards
};

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
  std::map<int, UniqueFd> stashed;  // by source rank: hellos that arrived before their connect()

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
    } else if (stashed.count(h.srcRank) != 0) {
      TUTTI_LOG_WARN(Subsys::kNet,
                     "tcp: closed a second connection from {} claiming to be rank {} (rank={})",
                     p.addr, h.srcRank, ctx.rank);
    } else {
      stashed.emplace(h.srcRank, std::move(p.fd));
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

  /// Accepts until the hello of `peer` (a lower rank) has arrived, stashing the others.
  Result<UniqueFd> acceptPeer(const Context& ctx, int peer, Clock::time_point deadline) {
    while (true) {
      if (auto it = stashed.find(peer); it != stashed.end()) {
        UniqueFd fd = std::move(it->second);
        stashed.erase(it);
        return fd;
      }
      TUTTI_TRY(acceptNew(ctx));
      readHellos(ctx);
      if (stashed.count(peer) != 0) continue;
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
  AddrBlob blob{};
  blob.magic = kBlobMagic;
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
  UniqueFd fd;
  if (peer > ctx.rank) {
    TUTTI_TRY_ASSIGN(fd, dialPeer(ctx, peer, blob, deadline));
  } else {
    if (!state_->listenFd) {
      return invalidUsage(
          "tcp: accepting from a lower rank needs the listener: setup() first, finishSetup() "
          "after every connect (rank={}, peer={})",
          ctx.rank, peer);
    }
    TUTTI_TRY_ASSIGN(fd, state_->acceptPeer(ctx, peer, deadline));
  }
  TUTTI_TRY(setConnectedOptions(fd.get(), ctx, peer));
  sockaddr_storage remote{};
  socklen_t len = sizeof(remote);
  const std::string remoteAddr =
      ::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&remote), &len) == 0
          ? formatAddr(reinterpret_cast<sockaddr*>(&remote))
          : std::string("?");
  TUTTI_LOG_INFO(Subsys::kNet, "tcp: rank {} connected to rank {} (host {}): {} {} {}", ctx.rank,
                 peer, peerHost(ctx, peer), localAddr(fd.get()),
                 peer > ctx.rank ? "dialled" : "accepted from", remoteAddr);
  std::unique_ptr<Connection> conn =
      std::make_unique<TcpConnection>(std::move(fd), ctx.rank, peer, peerHost(ctx, peer));
  return conn;
}

void TcpTransport::finishSetup() {
  state_->listenFd.reset();
  state_->pending.clear();
  if (!state_->stashed.empty()) {
    std::string ranks;
    for (const auto& [rank, fd] : state_->stashed)
      ranks += fmt::format("{}{}", ranks.empty() ? "" : ",", rank);
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
