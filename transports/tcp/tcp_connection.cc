// File: transports/tcp/tcp_connection.cc
// The tcp data path: per socket, queued sends and receives with no per-message header, written
// and read with sendmsg/recvmsg straight from/to the user buffers (up to 64 queued messages per
// call); reducing receives go through a per-socket staging buffer, whole elements only. A
// connection stripes large messages over its sockets (see tcp_connection.h). Queues keep their
// capacity, so a repeated call allocates nothing.
#include "transports/tcp/tcp_connection.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "base/page_buffer.h"
#include "base/status.h"
#include "transports/fifo.h"

namespace tutti::transport::tcp_detail {
namespace {

constexpr size_t kStagingBytes = 256 * 1024;
constexpr int kMaxIov = 64;

/// Who a stream belongs to, for messages.
struct PeerTag {
  int rank;
  int peer;
  std::string peerHost;
};

/// One socket: queued sends and receives in order, no per-message header.
class Stream {
 public:
  Stream(UniqueFd fd, const PeerTag* tag, int index) : fd_(std::move(fd)), tag_(tag), index_(index) {}

  void postSend(const std::byte* src, size_t bytes) {
    if (bytes == 0 && sends_.empty()) ++sendsDone_;
    else sends_.push(SendOp{src, bytes, 0});
    ++sendsPosted_;
  }
  void postRecv(const RecvSpec& spec) {
    if (spec.bytes == 0 && recvs_.empty()) ++recvsDone_;
    else recvs_.push(RecvOp{spec, 0});
    ++recvsPosted_;
  }
  uint64_t sendsPosted() const { return sendsPosted_; }
  uint64_t recvsPosted() const { return recvsPosted_; }
  uint64_t sendsDone() const { return sendsDone_; }
  uint64_t recvsDone() const { return recvsDone_; }
  /// Whether unread bytes wait in the socket (a peek: nothing is consumed).
  Result<bool> bytesWaiting() const {
    while (true) {
      std::byte b;
      const ssize_t n = ::recv(fd_.get(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) return true;
      if (n == 0) return closedByPeer(0);
      const int err = errno;
      if (err == EINTR) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return false;
      if (err == ECONNRESET || err == EPIPE) return closedByPeer(err);
      return ioError("recv(MSG_PEEK)", err);
    }
  }
  bool sendsPending() const { return !sends_.empty(); }
  bool recvsPending() const { return !recvs_.empty(); }
  int fd() const { return fd_.get(); }
  // POLLIN only while a receive is pending (or nothing is pending at all, to notice a dead peer):
  // data the peer sent ahead of our next postRecv must not keep waking a sender-only wait.
  short events() const {
    short ev = 0;
    if (!recvs_.empty() || sends_.empty()) ev |= POLLIN;
    if (!sends_.empty()) ev |= POLLOUT;
    return ev;
  }

  /// Writes as much of the queue as the socket takes, several messages per sendmsg.
  Status progressSends(uint64_t& bytesSent) {
    while (true) {
      retireSends();
      if (sends_.empty()) return Status::ok();
      std::array<iovec, kMaxIov> iov;
      int niov = 0;
      size_t want = 0;
      for (size_t i = 0; i < sends_.size() && niov < kMaxIov; ++i) {
        const SendOp& op = sends_[i];
        const size_t left = op.bytes - op.doneBytes;
        if (left == 0) continue;
        iov[niov++] = iovec{const_cast<std::byte*>(op.src + op.doneBytes), left};
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
      for (size_t i = 0; i < sends_.size() && left > 0; ++i) {
        SendOp& op = sends_[i];
        const size_t take = std::min(left, op.bytes - op.doneBytes);
        op.doneBytes += take;
        left -= take;
      }
      if (static_cast<size_t>(n) < want) {  // socket buffer full: retire what finished, stop
        retireSends();
        return Status::ok();
      }
    }
  }

  /// Reads whatever is available into the queued receives.
  Status progressRecvs(uint64_t& bytesReceived) {
    while (true) {
      retireRecvs();
      if (recvs_.empty()) return Status::ok();
      TUTTI_TRY_ASSIGN(const bool more, isReducing(recvs_.front().spec)
                                            ? readReduce(recvs_.front(), bytesReceived)
                                            : readPlain(bytesReceived));
      if (!more) {
        retireRecvs();
        return Status::ok();
      }
    }
  }

  static bool isReducing(const RecvSpec& spec) {
    return spec.reduce != nullptr && spec.src != nullptr;
  }

  Status closedByPeer(int err) const {
    return remoteError(
        "tcp: connection to rank {} (host {}) closed by peer{}{} (rank={}, peer={}, socket={}, "
        "pendingSends={}, pendingRecvs={})",
        tag_->peer, tag_->peerHost, err != 0 ? ": " : "", err != 0 ? errnoString(err) : std::string(),
        tag_->rank, tag_->peer, index_, sends_.size(), recvs_.size());
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

  void retireSends() {
    while (!sends_.empty() && sends_.front().doneBytes == sends_.front().bytes) {
      sends_.pop();
      ++sendsDone_;
    }
  }
  void retireRecvs() {
    while (!recvs_.empty() && recvs_.front().doneBytes == recvs_.front().spec.bytes) {
      recvs_.pop();
      ++recvsDone_;
    }
  }

  Status ioError(const char* call, int err) const {
    return systemError(
        "tcp: {} failed on the connection to rank {} (host {}): {} (rank={}, peer={}, socket={})",
        call, tag_->peer, tag_->peerHost, errnoString(err), tag_->rank, tag_->peer, index_);
  }

  /// One recv call of `want` bytes into `iov`; the count read (0 when the socket is drained).
  Result<size_t> readSome(iovec* iov, int niov, size_t want, uint64_t& bytesReceived) {
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
  Result<bool> readPlain(uint64_t& bytesReceived) {
    std::array<iovec, kMaxIov> iov;
    int niov = 0;
    size_t want = 0;
    for (size_t i = 0; i < recvs_.size() && niov < kMaxIov; ++i) {
      RecvOp& op = recvs_[i];
      if (isReducing(op.spec)) break;
      const size_t left = op.spec.bytes - op.doneBytes;
      if (left == 0) continue;
      iov[niov++] = iovec{static_cast<std::byte*>(op.spec.dst) + op.doneBytes, left};
      want += left;
    }
    TUTTI_TRY_ASSIGN(const size_t n, readSome(iov.data(), niov, want, bytesReceived));
    size_t left = n;
    for (size_t i = 0; i < recvs_.size() && left > 0; ++i) {
      RecvOp& op = recvs_[i];
      const size_t take = std::min(left, op.spec.bytes - op.doneBytes);
      op.doneBytes += take;
      left -= take;
    }
    return n == want;
  }

  /// Reads into the staging buffer and reduces the whole elements received; a partial element
  /// stays staged until its remaining bytes arrive. True if the socket may hold more.
  Result<bool> readReduce(RecvOp& op, uint64_t& bytesReceived) {
    const size_t elem = std::max<size_t>(op.spec.elemBytes, 1);
    if (staging_.empty()) staging_.grow(std::max(kStagingBytes, elem));
    const size_t want = std::min(staging_.size() - staged_, op.spec.bytes - op.doneBytes - staged_);
    iovec iov{staging_.data() + staged_, want};
    TUTTI_TRY_ASSIGN(const size_t n, readSome(&iov, 1, want, bytesReceived));
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
  const PeerTag* tag_;
  int index_;
  Fifo<SendOp> sends_;
  Fifo<RecvOp> recvs_;
  uint64_t sendsPosted_ = 0, recvsPosted_ = 0;
  uint64_t sendsDone_ = 0, recvsDone_ = 0;
  PageBuffer staging_;  // allocated on the first reducing receive (page-aligned: page_buffer.h)
  size_t staged_ = 0;               // bytes of the front reducing receive held in staging_
};

/// Messages of at least `stripeBytes` go round-robin over the streams (both sides count them the
/// same way, since the k-th send of one side is the k-th receive of the other with the same size);
/// smaller ones use stream 0. Completion is reported in posting order.
class TcpConnection final : public Connection {
 public:
  TcpConnection(std::vector<UniqueFd> fds, int rank, int peer, std::string peerHost,
                size_t stripeBytes, UniqueFd epollFd)
      : tag_{rank, peer, std::move(peerHost)}, stripeBytes_(stripeBytes), epoll_(std::move(epollFd)) {
    streams_.reserve(fds.size());
    for (size_t i = 0; i < fds.size(); ++i)
      streams_.emplace_back(std::move(fds[i]), &tag_, static_cast<int>(i));
    interest_.assign(streams_.size(), 0);
  }

  uint64_t postSend(const void* src, size_t bytes) override {
    const uint32_t s = pick(bytes, nextSendStream_);
    streams_[s].postSend(static_cast<const std::byte*>(src), bytes);
    sendMsgs_.push(Msg{s, streams_[s].sendsPosted()});
    ++sendsPosted_;
    retire(sendMsgs_, sendsDone_, &Stream::sendsDone);
    return sendsPosted_;
  }

  uint64_t postRecv(const RecvSpec& spec) override {
    const size_t elem = std::max<size_t>(spec.elemBytes, 1);
    if (Stream::isReducing(spec) && spec.bytes % elem != 0 && error_.isOk()) {
      error_ = invalidArgument(
          "tcp: reducing receive of {} bytes is not a multiple of the element size {} (rank={}, "
          "peer={})",
          spec.bytes, elem, tag_.rank, tag_.peer);
    }
    const uint32_t s = pick(spec.bytes, nextRecvStream_);
    streams_[s].postRecv(spec);
    recvMsgs_.push(Msg{s, streams_[s].recvsPosted()});
    ++recvsPosted_;
    retire(recvMsgs_, recvsDone_, &Stream::recvsDone);
    return recvsPosted_;
  }

  Status progress() override {
    if (!error_.isOk()) return error_;
    for (Stream& st : streams_) {
      Status s = st.progressSends(bytesSent);
      if (s.isOk()) s = st.progressRecvs(bytesReceived);
      if (!s.isOk()) {
        error_ = s;
        return s;
      }
    }
    retire(sendMsgs_, sendsDone_, &Stream::sendsDone);
    retire(recvMsgs_, recvsDone_, &Stream::recvsDone);
    if (epoll_) updateInterest();
    return Status::ok();
  }

  uint64_t sendsDone() const override { return sendsDone_; }
  uint64_t recvsDone() const override { return recvsDone_; }
  // A large message may start on any socket (striping): any of them holding bytes counts.
  Result<bool> incomingPending() override {
    if (!error_.isOk()) return error_;
    for (const Stream& st : streams_) {
      Result<bool> r = st.bytesWaiting();
      if (!r) {
        error_ = r.status();
        return error_;
      }
      if (r.value()) return true;
    }
    return false;
  }
  // One socket: poll it directly. Several: an epoll set of them (readable when any is ready),
  // whose interest progress() keeps in step with what each stream waits for.
  int pollFd() const override { return epoll_ ? epoll_.get() : streams_[0].fd(); }
  short pollEvents() const override { return epoll_ ? POLLIN : streams_[0].events(); }

 private:
  struct Msg {
    uint32_t stream;
    uint64_t seq;  // the stream's sequence number of this message
  };

  uint32_t pick(size_t bytes, uint32_t& next) const {
    if (streams_.size() == 1 || bytes < stripeBytes_) return 0;
    const uint32_t s = next;
    next = next + 1 == streams_.size() ? 0 : next + 1;
    return s;
  }

  void retire(Fifo<Msg>& msgs, uint64_t& done, uint64_t (Stream::*count)() const) {
    while (!msgs.empty() && (streams_[msgs.front().stream].*count)() >= msgs.front().seq) {
      msgs.pop();
      ++done;
    }
  }

  void updateInterest() {
    for (size_t i = 0; i < streams_.size(); ++i) {
      const short ev = streams_[i].events();
      if (ev == interest_[i]) continue;
      epoll_event e{};
      e.events = ((ev & POLLIN) ? EPOLLIN : 0u) | ((ev & POLLOUT) ? EPOLLOUT : 0u);
      e.data.u32 = static_cast<uint32_t>(i);
      ::epoll_ctl(epoll_.get(), interest_[i] == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD,
                  streams_[i].fd(), &e);
      interest_[i] = ev;
    }
  }

  PeerTag tag_;
  size_t stripeBytes_;
  UniqueFd epoll_;  // only with several streams
  std::vector<Stream> streams_;
  std::vector<short> interest_;  // events registered in epoll_, per stream (0: not yet)
  uint32_t nextSendStream_ = 0, nextRecvStream_ = 0;
  Fifo<Msg> sendMsgs_, recvMsgs_;
  uint64_t sendsDone_ = 0, recvsDone_ = 0;
  Status error_;  // first failure; the connection is unusable afterwards
};

}  // namespace

std::unique_ptr<Connection> makeTcpConnection(std::vector<UniqueFd> fds, int rank, int peer,
                                              std::string peerHost, size_t stripeBytes,
                                              UniqueFd epollFd) {
  return std::make_unique<TcpConnection>(std::move(fds), rank, peer, std::move(peerHost),
                                         stripeBytes, std::move(epollFd));
}

}  // namespace tutti::transport::tcp_detail
