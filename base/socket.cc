// File: base/socket.cc
// Bootstrap socket helpers: every wait is bounded by a deadline and every error names what was
// being waited for.
#include "base/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include "base/env.h"

namespace tutti::net {

namespace {
int msLeft(Deadline d) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1000));
}
Status waitFd(int fd, short events, Deadline deadline, const std::string& what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, msLeft(deadline));
    if (rc > 0) return Status::ok();
    if (rc < 0 && errno != EINTR) return systemError("{}: poll: {}", what, errnoString(errno));
    if (Clock::now() >= deadline) return timeoutError("{}: timed out", what);
  }
}
void setNonBlocking(int fd, bool on) {
  int fl = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK));
}
}  // namespace

std::string SockAddr::toString() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (storage.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    return fmt::format("{}:{}", host, ntohs(a->sin_port));
  }
  if (storage.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    return fmt::format("[{}]:{}", host, ntohs(a->sin6_port));
  }
  return "<unset>";
}

int SockAddr::port() const {
  if (storage.ss_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (storage.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

Result<SockAddr> parseHostPort(const std::string& text) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return invalidArgument("address '{}' is not host:port", text);
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos) return invalidArgument("address '{}' is not host:port", text);
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535)
    return invalidArgument("address '{}' has an invalid port '{}'", text, port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || !res)
    return invalidArgument("address '{}': cannot resolve host '{}': {}", text, host,
                           gai_strerror(rc));
  SockAddr a;
  std::memcpy(&a.storage, res->ai_addr, res->ai_addrlen);
  a.len = res->ai_addrlen;
  freeaddrinfo(res);
  return a;
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}
Fd::~Fd() { reset(); }
void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<Fd> listenOn(const SockAddr& addr) {
  Fd fd(socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return systemError("socket: {}", errnoString(errno));
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) != 0)
    return systemError("bind({}): {}", addr.toString(), errnoString(errno));
  if (listen(fd.get(), 1024) != 0)
    return systemError("listen({}): {}", addr.toString(), errnoString(errno));
  return fd;
}

Result<SockAddr> localAddress(int fd) {
  SockAddr a;
  a.len = sizeof a.storage;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.len) != 0)
    return systemError("getsockname: {}", errnoString(errno));
  return a;
}

Result<Fd> connectTo(const SockAddr& addr, Deadline deadline, const std::string& what) {
  int backoffMs = 1;
  for (;;) {
    Fd fd(socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return systemError("{}: socket: {}", what, errnoString(errno));
    setNonBlocking(fd.get(), true);
    int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.len);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      Status s = waitFd(fd.get(), POLLOUT, deadline, what);
      if (!s.isOk()) return timeoutError("{}: connecting to {} timed out", what, addr.toString());
      socklen_t len = sizeof err;
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) {
      setNonBlocking(fd.get(), false);
      int one = 1;
      setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    if (err != ECONNREFUSED && err != ENETUNREACH && err != EHOSTUNREACH && err != ETIMEDOUT &&
        err != ECONNRESET && err != EAGAIN)
      return systemError("{}: connect({}): {}", what, addr.toString(), errnoString(err));
    if (Clock::now() >= deadline)
      return timeoutError("{}: nobody listens at {} ({})", what, addr.toString(),
                          errnoString(err));
    std::this_thread::sleep_for(std::chrono::milliseconds(backoffMs));
    backoffMs = std::min(backoffMs * 2, 100);
  }
}

Result<Fd> acceptFrom(int listenFd, Deadline deadline, const std::string& what) {
  for (;;) {
    TUTTI_TRY(waitFd(listenFd, POLLIN, deadline, what));
    int fd = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      setNonBlocking(fd, false);
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return Fd(fd);
    }
    if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
      return systemError("{}: accept: {}", what, errnoString(errno));
  }
}

Status sendAll(int fd, const void* buf, size_t bytes, Deadline deadline, const std::string& what) {
  auto* p = static_cast<const char*>(buf);
  while (bytes > 0) {
    ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      TUTTI_TRY(waitFd(fd, POLLOUT, deadline, what));
      continue;
    }
    return remoteError("{}: send failed: {}", what, errnoString(errno));
  }
  return Status::ok();
}

Status recvAll(int fd, void* buf, size_t bytes, Deadline deadline, const std::string& what) {
  auto* p = static_cast<char*>(buf);
  while (bytes > 0) {
    ssize_t n = ::recv(fd, p, bytes, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return remoteError("{}: connection closed by the other side", what);
    if (errno == EAGAIN || errno == EINTR) {
      TUTTI_TRY(waitFd(fd, POLLIN, deadline, what));
      continue;
    }
    return remoteError("{}: recv failed: {}", what, errnoString(errno));
  }
  return Status::ok();
}

Status sendMsg(int fd, const std::string& msg, Deadline deadline, const std::string& what) {
  uint64_t len = msg.size();
  TUTTI_TRY(sendAll(fd, &len, sizeof len, deadline, what));
  return sendAll(fd, msg.data(), msg.size(), deadline, what);
}

Result<std::string> recvMsg(int fd, Deadline deadline, const std::string& what) {
  uint64_t len = 0;
  TUTTI_TRY(recvAll(fd, &len, sizeof len, deadline, what));
  if (len > (uint64_t(1) << 32)) return remoteError("{}: message too large ({} bytes)", what, len);
  std::string msg(len, '\0');
  TUTTI_TRY(recvAll(fd, msg.data(), len, deadline, what));
  return msg;
}

Result<std::string> exchange(int sendFd, const std::string& out, int recvFd, Deadline deadline,
                             const std::string& what) {
  std::string framed(sizeof(uint64_t), '\0');
  uint64_t len = out.size();
  std::memcpy(framed.data(), &len, sizeof len);
  framed += out;
  size_t sent = 0;
  std::string in;
  uint64_t inLen = 0;
  size_t got = 0;  // bytes of (header + body) received
  bool haveLen = false;
  while (sent < framed.size() || !haveLen || got < sizeof(uint64_t) + inLen) {
    pollfd p[2];
    int np = 0;
    if (sent < framed.size()) p[np++] = {sendFd, POLLOUT, 0};
    if (!haveLen || got < sizeof(uint64_t) + inLen) p[np++] = {recvFd, POLLIN, 0};
    int rc = poll(p, np, msLeft(deadline));
    if (rc < 0 && errno != EINTR) return systemError("{}: poll: {}", what, errnoString(errno));
    if (rc <= 0) {
      if (Clock::now() >= deadline) return timeoutError("{}: timed out", what);
      continue;
    }
    for (int i = 0; i < np; ++i) {
      if (p[i].revents == 0) continue;
      if (p[i].events == POLLOUT) {
        ssize_t n = ::send(sendFd, framed.data() + sent, framed.size() - sent,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) sent += static_cast<size_t>(n);
        else if (n < 0 && errno != EAGAIN && errno != EINTR)
          return remoteError("{}: send failed: {}", what, errnoString(errno));
      } else {
        char buf[65536];
        size_t want = !haveLen ? sizeof(uint64_t) - got
                               : std::min(sizeof buf, sizeof(uint64_t) + inLen - got);
        ssize_t n = ::recv(recvFd, buf, want, MSG_DONTWAIT);
        if (n == 0) return remoteError("{}: connection closed by the other side", what);
        if (n < 0) {
          if (errno == EAGAIN || errno == EINTR) continue;
          return remoteError("{}: recv failed: {}", what, errnoString(errno));
        }
        if (!haveLen) {
          std::memcpy(reinterpret_cast<char*>(&inLen) + got, buf, static_cast<size_t>(n));
          got += static_cast<size_t>(n);
          if (got == sizeof(uint64_t)) {
            haveLen = true;
            if (inLen > (uint64_t(1) << 32))
              return remoteError("{}: message too large ({} bytes)", what, inLen);
            in.reserve(inLen);
          }
        } else {
          in.append(buf, static_cast<size_t>(n));
          got += static_cast<size_t>(n);
        }
      }
    }
  }
  return in;
}

bool interfaceMatches(std::string_view spec, std::string_view ifName) {
  bool exclude = false;
  bool exact = false;
  if (spec.starts_with('^')) {
    exclude = true;
    spec.remove_prefix(1);
  }
  if (spec.starts_with('=')) {
    exact = true;
    spec.remove_prefix(1);
  }
  bool listed = false;
  while (!listed) {
    const size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    if (!item.empty()) listed = exact ? ifName == item : ifName.starts_with(item);
    if (comma == std::string_view::npos) break;
    spec.remove_prefix(comma + 1);
  }
  return listed != exclude;
}

namespace {
TUTTI_PARAM_STRING(kSocketIfname, "TUTTI_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NET", "",
                   "network interfaces for bootstrap and tcp (NCCL_SOCKET_IFNAME syntax: "
                   "prefixes, ^ to exclude, = for exact names)");
}  // namespace

std::string socketIfnameSpec() { return kSocketIfname.get(); }

InterfaceAddr loopbackInterface() {
  InterfaceAddr la;
  auto* in = reinterpret_cast<sockaddr_in*>(&la.addr.storage);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  la.addr.len = sizeof(sockaddr_in);
  la.ifName = "loopback";
  return la;
}

Result<InterfaceAddr> chooseInterface(std::string_view spec) {
  ifaddrs* raw = nullptr;
  if (::getifaddrs(&raw) != 0) return systemError("getifaddrs failed: {}", errnoString(errno));
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> list(raw, ::freeifaddrs);
  const ifaddrs* best4 = nullptr;
  const ifaddrs* best6 = nullptr;
  for (const ifaddrs* ifa = list.get(); ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || (ifa->ifa_flags & IFF_UP) == 0) continue;
    const int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    const std::string_view name = ifa->ifa_name;
    if (spec.empty()) {
      if ((ifa->ifa_flags & IFF_LOOPBACK) != 0 || name.starts_with("docker")) continue;
      if (family != AF_INET) continue;
    } else if (!interfaceMatches(spec, name)) {
      continue;
    }
    const bool linkLocal6 =
        family == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr)->sin6_addr);
    if (family == AF_INET && best4 == nullptr) best4 = ifa;
    if (family == AF_INET6 && best6 == nullptr && !linkLocal6) best6 = ifa;
  }
  const ifaddrs* chosen = best4 != nullptr ? best4 : best6;
  if (chosen == nullptr) {
    if (spec.empty()) return loopbackInterface();
    return invalidArgument(
        "no interface that is up matches TUTTI_SOCKET_IFNAME/NCCL_SOCKET_IFNAME='{}'", spec);
  }
  InterfaceAddr la;
  la.ifName = chosen->ifa_name;
  if (chosen->ifa_addr->sa_family == AF_INET) {
    std::memcpy(&la.addr.storage, chosen->ifa_addr, sizeof(sockaddr_in));
    reinterpret_cast<sockaddr_in*>(&la.addr.storage)->sin_port = 0;
    la.addr.len = sizeof(sockaddr_in);
  } else {
    std::memcpy(&la.addr.storage, chosen->ifa_addr, sizeof(sockaddr_in6));
    reinterpret_cast<sockaddr_in6*>(&la.addr.storage)->sin6_port = 0;
    la.addr.len = sizeof(sockaddr_in6);
  }
  return la;
}

}  // namespace tutti::net
