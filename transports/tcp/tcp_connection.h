// File: transports/tcp/tcp_connection.h
// The tcp transport's data path (tcp_connection.cc): a Connection over one or more connected,
// non-blocking sockets to one peer. Messages of at least `stripeBytes` go round-robin over the
// sockets (both sides count them the same way: the k-th send of one side is the k-th receive of
// the other, with the same size); smaller ones use the first socket. Completion is reported in
// posting order. Internal to transports/tcp.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "transports/transport.h"

namespace tutti::transport::tcp_detail {

/// Owns a file descriptor (closed on destruction); movable.
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

/// A connection over `fds` (at least one, already connected, non-blocking, TCP_NODELAY set).
/// `epollFd` is an epoll instance when there are several sockets (pollFd() returns it), else
/// invalid. Errors from progress() name rank, peer, peerHost and the socket index.
std::unique_ptr<Connection> makeTcpConnection(std::vector<UniqueFd> fds, int rank, int peer,
                                              std::string peerHost, size_t stripeBytes,
                                              UniqueFd epollFd);

}  // namespace tutti::transport::tcp_detail
