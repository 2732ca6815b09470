// File: core/bootstrap.cc
// Rendezvous root, UniqueId encoding and the bootstrap ring (allgather, barrier).
#include "core/bootstrap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>

#include <cstring>
#include <map>
#include <thread>
#include <unistd.h>

#include "base/log.h"
#include "core/bootstrap_wire.h"

namespace tutti::bootstrap {

namespace {
using namespace wire;
constexpr size_t kMaxPendingHellos = 256;
constexpr auto kHelloWait = std::chrono::seconds(5);  // per connection: a silent client is dropped

template <typename T>
std::string podBytes(const T& v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}

// Logs rejected connections: the first few in full, then a count (a flood must not flood the log).
struct Rejects {
  std::string where;
  int count = 0;
  void operator()(const std::string& from, const std::string& why) {
    if (++count <= 8)
      TUTTI_LOG_WARN(Subsys::kBootstrap, "bootstrap: {} rejected a connection from {}: {}", where,
                     from, why);
  }
  ~Rejects() {
    if (count > 8)
      TUTTI_LOG_WARN(Subsys::kBootstrap, "bootstrap: {} rejected {} connections in all", where,
                     count);
  }
};

std::string peerName(const sockaddr_storage& ss) {
  net::SockAddr a;
  a.storage = ss;
  a.len = ss.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  return ss.ss_family == AF_INET || ss.ss_family == AF_INET6 ? a.toString() : std::string("?");
}

// Accepts connections on `listenFd` and reads a `helloBytes` hello from each, all concurrently,
// so that a silent, slow or malicious client delays nobody: each must complete its hello within
// kHelloWait, at most kMaxPendingHellos are pending, and a short or closed one is dropped and
// logged. onHello(fd, bytes, from) decides; it returns true when the wait is over. Timeout at the
// deadline.
template <typename OnHello>
Status acceptHellos(int listenFd, size_t helloBytes, net::Deadline deadline, Rejects& reject,
                    OnHello onHello) {
  struct Pending {
    net::Fd fd;
    std::vector<std::byte> buf;
    size_t got = 0;
    net::Deadline due;
    std::string from;
  };
  std::vector<Pending> pending;
  std::vector<pollfd> fds;
  const int flags = fcntl(listenFd, F_GETFL);
  if (flags >= 0) fcntl(listenFd, F_SETFL, flags | O_NONBLOCK);  // accept until EAGAIN
  for (;;) {
    auto now = net::Clock::now();
    if (now >= deadline) return timeoutError("timed out");
    auto wake = deadline;
    for (size_t i = 0; i < pending.size();) {
      if (pending[i].due <= now) {
        reject(pending[i].from, fmt::format("it sent {} of the {} hello bytes within {} s",
                                            pending[i].got, helloBytes, kHelloWait.count()));
        pending.erase(pending.begin() + static_cast<long>(i));
        continue;
      }
      wake = std::min(wake, pending[i].due);
      ++i;
    }
    fds.assign(1, pollfd{listenFd, POLLIN, 0});
    for (auto& p : pending) fds.push_back(pollfd{p.fd.get(), POLLIN, 0});
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
    if (poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(ms, 1000))) < 0 &&
        errno != EINTR)
      return systemError("poll: {}", errnoString(errno));
    for (size_t i = pending.size(); i-- > 0;) {  // back to front: erasing keeps indices valid
      if (fds[i + 1].revents == 0) continue;
      Pending& p = pending[i];
      const ssize_t n = recv(p.fd.get(), p.buf.data() + p.got, helloBytes - p.got, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) {
        reject(p.from, fmt::format("it closed after {} of the {} hello bytes", p.got, helloBytes));
        pending.erase(pending.begin() + static_cast<long>(i));
        continue;
      }
      p.got += static_cast<size_t>(n);
      if (p.got < helloBytes) continue;
      Pending done = std::move(p);
      pending.erase(pending.begin() + static_cast<long>(i));
      if (onHello(std::move(done.fd), std::span<const std::byte>(done.buf), done.from))
        return Status::ok();
    }
    if (fds[0].revents == 0) continue;
    for (;;) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      int fd = accept4(listenFd, reinterpret_cast<sockaddr*>(&ss), &len,
                       SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) break;
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (pending.size() >= kMaxPendingHellos) {
        reject(peerName(ss), "too many connections are pending");
        close(fd);
        continue;
      }
      pending.push_back(Pending{net::Fd(fd), std::vector<std::byte>(helloBytes), 0,
                                net::Clock::now() + kHelloWait, peerName(ss)});
    }
  }
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
  Rejects reject{"the root at " + where};
  Status st = acceptHellos(
      listen.get(), sizeof(Hello), deadline, reject,
      [&](net::Fd fd, std::span<const std::byte> bytes, const std::string& from) {
        auto parsed = parseHello(bytes);
        if (!parsed.isOk()) {
          reject(from, parsed.status().message());
          return false;
        }
        const Hello& h = parsed.value();
        if ((h.secret ^ secret) != 0) {
          // A well-formed hello with another secret: a rank of this job given a wrong or stale
          // UniqueId. Tell it (InvalidUsage on its side) instead of only closing; the text says
          // nothing about the secret itself.
          reject(from, "it did not present the UniqueId's secret");
          (void)net::sendMsg(fd.get(),
                             fmt::format("Ebootstrap: the root at {} refused rank {}: its "
                                         "UniqueId carries another secret (an id from another "
                                         "job or an earlier run, or corrupted bytes)",
                                         where, h.rank),
                             net::deadlineAfter(std::chrono::seconds(1)), "bootstrap root reply");
          return false;
        }
        std::string err;
        if (nranks < 0) nranks = h.nranks;
        if (h.nranks != nranks)
          err = fmt::format("bootstrap: rank {} says nranks={} but rank(s) before it said "
                            "nranks={}",
                            h.rank, h.nranks, nranks);
        else if (joined.count(h.rank))
          err = fmt::format("bootstrap: rank {} joined twice", h.rank);
        if (!err.empty()) {
          TUTTI_LOG_WARN(Subsys::kBootstrap, "{}", err);
          (void)net::sendMsg(fd.get(), "E" + err, net::deadlineAfter(std::chrono::seconds(5)),
                             "bootstrap root reply");
          return false;
        }
        joined.emplace(h.rank, std::make_pair(std::move(fd), h.ringAddr));
        return static_cast<int>(joined.size()) == nranks;
      });
  if (!st.isOk()) {
    std::vector<int> missing;
    for (int r = 0; r < std::max(nranks, 0); ++r)
      if (!joined.count(r)) missing.push_back(r);
    failure = nranks < 0
                  ? fmt::format("bootstrap: no rank joined the root at {} within {} ms", where,
                                timeout.count())
                  : fmt::format("bootstrap: timed out after {} ms waiting for ranks {} to join "
                                "the root at {} ({} of {} arrived)",
                                timeout.count(), rankList(missing), where, joined.size(), nranks);
    if (st.code() != Code::kTimeout) failure += ": " + st.message();
  }
  // Close the listener before any reply: rank 0 may create its next communicator on the same
  // fixed TUTTI_COMM_ID as soon as it has its reply, and its bind must not find this socket.
  listen.reset();
  std::string reply;
  if (failure.empty()) {
    reply = "T";
    for (auto& [r, v] : joined) reply += podBytes(v.second);
  } else {
    TUTTI_LOG_WARN(Subsys::kBootstrap, "{}", failure);
    reply = "E" + failure;
  }
  // Rank 0 last: it hosts this thread, and on a failure it returns (and its process may exit,
  // ending this detached thread) as soon as it has its own reply. A reply already written is
  // delivered even then; one not yet written would reach the other ranks as a closed connection
  // instead of the failure that names the missing ranks.
  auto replyDeadline = net::deadlineAfter(std::chrono::seconds(10));
  for (auto it = joined.rbegin(); it != joined.rend(); ++it)
    (void)net::sendMsg(it->second.first.get(), reply, replyDeadline, "bootstrap root reply");
}
}  // namespace

UniqueId encodeId(const IdData& d) {
  UniqueId id;
  IdLayout l{kIdMagic, d.secret, pack(d.root)};
  std::memcpy(id.bytes.data(), &l, sizeof l);
  return id;
}

Result<IdData> decodeId(const UniqueId& id) {
  TUTTI_TRY_ASSIGN(IdLayout l, parseId(std::span<const std::byte>(
                                   reinterpret_cast<const std::byte*>(id.bytes.data()),
                                   id.bytes.size())));
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
  TUTTI_TRY_ASSIGN(std::vector<net::SockAddr> table,
                   parseAddressTable(wire::asBytes(reply.value()), nranks));
  root.reset();
  b->table_ = table;
  b->secret_ = id.secret;
  if (nranks == 1) {
    b->listen_ = std::move(listen);
    return b;
  }

  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  TUTTI_TRY_ASSIGN(b->next_, net::connectTo(table[next], deadline,
                                            fmt::format("{}: connecting to rank {}", who, next)));
  RingHello rh{kRingMagic, id.secret, rank};
  TUTTI_TRY(net::sendAll(b->next_.get(), &rh, sizeof rh, deadline,
                         fmt::format("{}: handshake to rank {}", who, next)));
  Rejects reject{fmt::format("rank {}'s ring listener", rank)};
  Status st = acceptHellos(
      listen.get(), sizeof(RingHello), deadline, reject,
      [&](net::Fd fd, std::span<const std::byte> bytes, const std::string& from) {
        auto in = parseRingHello(bytes);
        if (!in.isOk()) {
          reject(from, in.status().message());
          return false;
        }
        if ((in->secret ^ id.secret) != 0 || in->rank != prev) {
          reject(from, fmt::format("ring hello from rank {} with {} secret (expected rank {})",
                                   in->rank, in->secret == id.secret ? "the right" : "a wrong",
                                   prev));
          return false;
        }
        b->prev_ = std::move(fd);
        return true;
      });
  if (!st.isOk())
    return Status(st.code(), fmt::format("{}: waiting for rank {} to connect: {}", who, prev,
                                         st.message()));
  TUTTI_LOG_INFO(Subsys::kBootstrap, "{}: ring connected (next {}, prev {})", who, next, prev);
  b->listen_ = std::move(listen);
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
    const std::string what = fmt::format("bootstrap allgather (rank {}/{}, step {}, waiting for "
                                         "rank {})",
                                         rank_, nranks_, k, (rank_ + nranks_ - 1) % nranks_);
    std::optional<std::string> early;  // this step's block, already read by pollNotice
    {
      std::lock_guard<std::mutex> lock(ringMu_);
      if (!ringEarly_.empty()) {
        early = std::move(ringEarly_.front());
        ringEarly_.pop_front();
      }
    }
    if (early) {
      TUTTI_TRY(net::sendMsg(next_.get(), all[sendIdx], deadline, what));
      all[recvIdx] = std::move(*early);
      continue;
    }
    auto got = net::exchange(next_.get(), all[sendIdx], prev_.get(), deadline, what);
    if (!got.isOk()) return got.status();
    all[recvIdx] = std::move(got).value();
  }
  return all;
}

Status Bootstrap::barrier() {
  auto r = allGather(std::string(1, 'b'));
  return r.status();
}

// ---- point-to-point messages ----

Status Bootstrap::sendTo(int peer, uint64_t tag, const std::string& body,
                         std::chrono::milliseconds timeout) {
  if (peer < 0 || peer >= nranks_ || peer == rank_)
    return invalidArgument("bootstrap sendTo: peer {} is not another rank of [0, {})", peer,
                           nranks_);
  if (body.size() > kMaxP2pBytes)
    return invalidArgument("bootstrap sendTo: {} bytes (at most {})", body.size(), kMaxP2pBytes);
  const auto deadline = net::deadlineAfter(timeout);
  const std::string what = fmt::format("bootstrap message (tag {:#x}) from rank {} to rank {} at {}",
                                       tag, rank_, peer, table_[peer].toString());
  TUTTI_TRY_ASSIGN(net::Fd fd, net::connectTo(table_[peer], deadline, what));
  P2pHello h{kP2pMagic, secret_, tag, rank_, static_cast<uint32_t>(body.size())};
  std::string msg = podBytes(h) + body;
  // The kernel holds it until the receiver accepts: the sender does not wait for the receiver.
  return net::sendAll(fd.get(), msg.data(), msg.size(), deadline, what);
}

Result<std::string> Bootstrap::recvFrom(int peer, uint64_t tag, std::chrono::milliseconds timeout) {
  if (peer < 0 || peer >= nranks_ || peer == rank_)
    return invalidArgument("bootstrap recvFrom: peer {} is not another rank of [0, {})", peer,
                           nranks_);
  std::lock_guard<std::mutex> lock(p2pMu_);
  if (auto it = stash_.find({peer, tag}); it != stash_.end()) {
    std::string body = std::move(it->second);
    stash_.erase(it);
    return body;
  }
  if (!listen_.valid()) return invalidUsage("bootstrap recvFrom: no listener");
  std::string result;
  Rejects reject{fmt::format("rank {}'s bootstrap listener", rank_)};
  Status st = acceptHellos(
      listen_.get(), sizeof(P2pHello), net::deadlineAfter(timeout), reject,
      [&](net::Fd fd, std::span<const std::byte> bytes, const std::string& from) {
        auto h = parseP2pHello(bytes, nranks_);
        if (!h.isOk()) {
          reject(from, h.status().message());
          return false;
        }
        if ((h->secret ^ secret_) != 0) {
          reject(from, fmt::format("a message claiming rank {} with a wrong secret", h->from));
          return false;
        }
        std::string body(h->bytes, '\0');
        const auto by = net::deadlineAfter(std::chrono::seconds(5));
        Status s = net::recvAll(fd.get(), body.data(), body.size(), by, "bootstrap message");
        if (!s.isOk()) {
          reject(from, s.message());
          return false;
        }
        if (h->from == peer && h->tag == tag) {
          result = std::move(body);
          return true;
        }
        if (stash_.size() < 64) stash_[{h->from, h->tag}] = std::move(body);
        else reject(from, "too many unexpected messages are kept");
        return false;
      });
  if (!st.isOk())
    return Status(st.code(),
                  fmt::format("bootstrap (rank {}/{}): waiting for a message (tag {:#x}) from "
                              "rank {}: {}",
                              rank_, nranks_, tag, peer, st.message()));
  return result;
}

// ---- failure notices ----

void Bootstrap::sendNotice(const wire::Notice& n) {
  std::lock_guard<std::mutex> lock(noticeMu_);
  if (noticeSent_) return;
  noticeSent_ = true;
  const std::string body = encodeNotice(n);
  const auto deadline = net::deadlineAfter(std::chrono::milliseconds(200));
  for (int i = 0; i < 2; ++i) {
    net::Fd& fd = i == 0 ? next_ : prev_;
    if (fd.valid() && ringOpen_[i])
      (void)net::sendMsg(fd.get(), body, deadline, "bootstrap failure notice");
  }
}

std::optional<wire::Notice> Bootstrap::pollNotice(std::chrono::milliseconds wait) {
  const auto deadline = net::deadlineAfter(wait);
  for (;;) {
    pollfd fds[2];
    int idx[2], nfds = 0;
    for (int i = 0; i < 2; ++i) {
      const net::Fd& fd = i == 0 ? next_ : prev_;
      if (fd.valid() && ringOpen_[i]) {
        fds[nfds] = pollfd{fd.get(), POLLIN, 0};
        idx[nfds++] = i;
      }
    }
    if (nfds == 0) return std::nullopt;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                            net::Clock::now());
    const int rc = poll(fds, nfds, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (rc <= 0) {
      if (rc < 0 && errno == EINTR) continue;
      return std::nullopt;
    }
    for (int k = 0; k < nfds; ++k) {
      if (fds[k].revents == 0) continue;
      const int i = idx[k];
      // A neighbour that closed its ring socket just exited or destroyed its communicator; that
      // alone says nothing about the running call, so the socket is only no longer watched.
      const auto readBy = net::deadlineAfter(std::chrono::milliseconds(200));
      // Read whole, whatever its length: the previous rank may have entered an allGather (its
      // blocks are up to a host's topology) while this one still waits in a collective.
      Result<std::string> msg = net::recvMsg(fds[k].fd, readBy, "bootstrap failure notice");
      Status s = msg.status();
      std::string body = s.isOk() ? std::move(msg).value() : std::string();
      Result<wire::Notice> n = s.isOk() ? parseNotice(wire::asBytes(body), nranks_)
                                        : Result<wire::Notice>(s);
      if (n.isOk()) return std::move(n).value();
      if (s.isOk() && i == 1) {  // from prev_: the first step of an allGather; keep it
        std::lock_guard<std::mutex> lock(ringMu_);
        ringEarly_.push_back(std::move(body));
        continue;
      }
      ringOpen_[i] = false;
      if (s.isOk())
        TUTTI_LOG_WARN(Subsys::kBootstrap, "bootstrap: rank {} ignores a malformed failure notice "
                       "from rank {}: {}",
                       rank_, i == 0 ? (rank_ + 1) % nranks_ : (rank_ + nranks_ - 1) % nranks_,
                       n.status().message());
    }
    if (net::Clock::now() >= deadline) return std::nullopt;
  }
}

}  // namespace tutti::bootstrap
