// File: base/socket.h
// Small blocking-with-deadline TCP helpers for the bootstrap (not the data path): socket
// addresses as text, listen/connect/accept with deadlines, exact reads/writes, and a concurrent
// send-to-one / receive-from-other exchange used by the ring allgather.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tutti::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

/// An IPv4/IPv6 socket address (POD, memcpy-able into blobs).
struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;
  std::string toString() const;  // "127.0.0.1:5000", "[::1]:5000"
  int port() const;
};

/// Parses "host:port", "[v6]:port" (host may be a name, resolved with getaddrinfo).
Result<SockAddr> parseHostPort(const std::string& text);

/// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  ~Fd();
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  bool valid() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

/// Listening socket bound to `addr` (port 0 = ephemeral); SO_REUSEADDR; backlog 1024.
Result<Fd> listenOn(const SockAddr& addr);
Result<SockAddr> localAddress(int fd);
/// Connects, retrying refused/unreachable connections until the deadline. Timeout names `what`.
Result<Fd> connectTo(const SockAddr& addr, Deadline deadline, const std::string& what);
/// Accepts one connection before the deadline (Timeout otherwise, naming `what`).
Result<Fd> acceptFrom(int listenFd, Deadline deadline, const std::string& what);
/// Exactly `bytes` bytes, or an error: RemoteError on EOF, Timeout at the deadline.
Status sendAll(int fd, const void* buf, size_t bytes, Deadline deadline, const std::string& what);
Status recvAll(int fd, void* buf, size_t bytes, Deadline deadline, const std::string& what);
/// Length-prefixed message helpers.
Status sendMsg(int fd, const std::string& msg, Deadline deadline, const std::string& what);
Result<std::string> recvMsg(int fd, Deadline deadline, const std::string& what);
/// Sends `out` (length-prefixed) on sendFd while receiving one length-prefixed message from
/// recvFd, concurrently (poll), so that a ring of ranks doing this cannot deadlock.
Result<std::string> exchange(int sendFd, const std::string& out, int recvFd, Deadline deadline,
                             const std::string& what);

/// Whether interface `ifName` is selected by `spec` in NCCL_SOCKET_IFNAME syntax: a comma list of
/// name prefixes; a leading '^' makes it an exclude list; a '=' (after any '^') asks for exact
/// names. "eth,ib" selects eth0 and ib1; "^docker,lo" everything else; "=eth0" eth0 only. An
/// empty spec selects nothing (the caller applies its default instead).
bool interfaceMatches(std::string_view spec, std::string_view ifName);

/// TUTTI_SOCKET_IFNAME, else NCCL_SOCKET_IFNAME, else "".
std::string socketIfnameSpec();

/// An interface's address (port 0) and name.
struct InterfaceAddr {
  SockAddr addr;
  std::string ifName;
};
/// The loopback address 127.0.0.1 (port 0).
InterfaceAddr loopbackInterface();
/// With `spec` set: the first interface that is up and matches it, IPv4 preferred over
/// (non-link-local) IPv6; InvalidArgument naming the spec when none matches. With `spec` empty:
/// the first non-loopback, non-docker IPv4 interface that is up (NCCL's default), else loopback.
Result<InterfaceAddr> chooseInterface(std::string_view spec);

inline Deadline deadlineAfter(std::chrono::milliseconds ms) { return Clock::now() + ms; }

}  // namespace tutti::net
