// File: tests/unit/tcp_transport_test.cc
// The tcp transport on its own, over 127.0.0.1 only: fork-per-rank runs (2 and 3 ranks) that
// exchange messages of 0, 1, 7 and 1 MiB+3 bytes both ways at once, reducing receives (float32
// sum, accumulate and out-of-place), a killed peer; plus single-process checks of the handshake
// (wrong secret / bad magic rejected), connect timeouts and NCCL_SOCKET_IFNAME matching.

#include "base/socket.h"
#include "transports/tcp/tcp_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "kernels/reduce.h"

namespace tutti::transport {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kSecret = 0x5ec2e7f00dull;

/// In a forked rank: report the failed condition and return 1 (never REQUIRE in a child).
#define TUTTI_TCP_CHECK(cond)                                                              \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "tcp test rank %d: %s:%d: check failed: %s\n", gRank, __FILE__, \
                   __LINE__, #cond);                                                       \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)
#define TUTTI_TCP_CHECK_OK(expr)                                                             \
  do {                                                                                       \
    const ::tutti::Status tcp_check_status_ = (expr);                                        \
    if (!tcp_check_status_.isOk()) {                                                         \
      std::fprintf(stderr, "tcp test rank %d: %s:%d: %s -> %s\n", gRank, __FILE__, __LINE__, \
                   #expr, tcp_check_status_.toString().c_str());                             \
      return 1;                                                                              \
    }                                                                                        \
  } while (0)

int gRank = -1;  // this process's rank, for check messages

std::vector<PeerInfo> makePeers(int nranks) {
  std::vector<PeerInfo> peers(nranks);
  for (int r = 0; r < nranks; ++r) {
    peers[r].rank = r;
    peers[r].hostId = "testhost";
    peers[r].hostname = "host" + std::to_string(r);
  }
  return peers;
}

Context makeContext(int rank, const std::vector<PeerInfo>& peers, int64_t timeoutMs) {
  Context ctx;
  ctx.rank = rank;
  ctx.nranks = static_cast<int>(peers.size());
  ctx.secret = kSecret;
  ctx.peers = peers;
  ctx.connectTimeoutMs = timeoutMs;
  ctx.loopbackOnly = true;
  return ctx;
}

/// One rank's view once every pair is connected.
struct World {
  int rank = -1;
  int nranks = 0;
  std::vector<PeerInfo> peers;
  Context ctx;
  TcpTransport transport;
  std::vector<std::unique_ptr<Connection>> conns;  // by peer rank; null for ourselves
};

/// Loops progress() over `conns` until all are idle, one fails, or `timeoutMs` passes; sleeps in
/// poll() on the fds and events the connections ask for.
Status driveUntilIdle(const std::vector<Connection*>& conns, int timeoutMs) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  while (true) {
    bool idle = true;
    std::vector<pollfd> fds;
    for (Connection* c : conns) {
      TUTTI_TRY(c->progress());
      if (!c->idle()) {
        idle = false;
        fds.push_back(pollfd{c->pollFd(), c->pollEvents(), 0});
      }
    }
    if (idle) return Status::ok();
    if (Clock::now() > deadline) return timeoutError("test: still busy after {} ms", timeoutMs);
    ::poll(fds.data(), fds.size(), 100);
  }
}

std::vector<Connection*> allConns(World& w) {
  std::vector<Connection*> out;
  for (auto& c : w.conns) {
    if (c) out.push_back(c.get());
  }
  return out;
}

bool writeAll(int fd, const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool readAll(int fd, void* data, size_t bytes, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    pollfd pfd{fd, POLLIN, 0};
    const auto leftMs =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (leftMs <= 0 || ::poll(&pfd, 1, static_cast<int>(leftMs)) == 0) return false;
    const ssize_t n = ::read(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

using Body = std::function<int(World&)>;

/// The forked child: set up, hand the blob to the parent, get everyone's, connect every pair in
/// increasing rank order (as the communicator does), then run the body.
int childMain(int rank, int nranks, int upFd, int downFd, const Body& body) {
  gRank = rank;
  World w;
  w.rank = rank;
  w.nranks = nranks;
  w.peers = makePeers(nranks);
  w.ctx = makeContext(rank, w.peers, 20000);
  w.conns.resize(nranks);
  auto blob = w.transport.setup(w.ctx);
  TUTTI_TCP_CHECK_OK(blob.status());
  const uint32_t len = static_cast<uint32_t>(blob->size());
  TUTTI_TCP_CHECK(writeAll(upFd, &len, sizeof(len)) && writeAll(upFd, blob->data(), len));
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  std::vector<std::vector<std::byte>> blobs(nranks);
  for (int r = 0; r < nranks; ++r) {
    uint32_t n = 0;
    TUTTI_TCP_CHECK(readAll(downFd, &n, sizeof(n), deadline));
    blobs[r].resize(n);
    TUTTI_TCP_CHECK(readAll(downFd, blobs[r].data(), n, deadline));
  }
  for (int p = 0; p < nranks; ++p) {
    if (p == rank) continue;
    TUTTI_TCP_CHECK(w.transport.canConnect(w.ctx, p));
    auto conn = w.transport.connect(w.ctx, p, blobs[p]);
    TUTTI_TCP_CHECK_OK(conn.status());
    w.conns[p] = std::move(conn).value();
  }
  TUTTI_TCP_CHECK(!w.transport.canConnect(w.ctx, rank));
  w.transport.finishSetup();
  return body(w);
}

struct Outcome {
  bool exited = false;
  int exitCode = -1;
  int signal = 0;
};

/// Forks `nranks` children running `body`, relays the address blobs, and waits for all of them
/// (SIGKILL after `timeoutMs`).
std::vector<Outcome> runRanks(int nranks, const Body& body, int timeoutMs = 60000) {
  ::signal(SIGPIPE, SIG_IGN);  // a child that died early must not kill the test with SIGPIPE
  std::vector<std::array<int, 2>> up(nranks), down(nranks);
  for (int r = 0; r < nranks; ++r) {
    REQUIRE(::pipe(up[r].data()) == 0);
    REQUIRE(::pipe(down[r].data()) == 0);
  }
  std::fflush(nullptr);
  std::vector<pid_t> pids(nranks, -1);
  for (int r = 0; r < nranks; ++r) {
    pids[r] = ::fork();
    REQUIRE(pids[r] >= 0);
    if (pids[r] == 0) {
      for (int j = 0; j < nranks; ++j) {
        ::close(up[j][0]);
        ::close(down[j][1]);
        if (j != r) {
          ::close(up[j][1]);
          ::close(down[j][0]);
        }
      }
      ::_exit(childMain(r, nranks, up[r][1], down[r][0], body));
    }
  }
  for (int r = 0; r < nranks; ++r) {
    ::close(up[r][1]);
    ::close(down[r][0]);
  }
  // Relay: every child's blob to every child (a child that died early just gets nothing).
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  std::vector<std::byte> all;
  bool relayed = true;
  for (int r = 0; r < nranks && relayed; ++r) {
    uint32_t len = 0;
    std::vector<std::byte> blob;
    relayed = readAll(up[r][0], &len, sizeof(len), deadline) && len < 4096;
    if (relayed) {
      blob.resize(len);
      relayed = readAll(up[r][0], blob.data(), len, deadline);
    }
    const auto* l = reinterpret_cast<const std::byte*>(&len);
    all.insert(all.end(), l, l + sizeof(len));
    all.insert(all.end(), blob.begin(), blob.end());
  }
  for (int r = 0; r < nranks && relayed; ++r) (void)writeAll(down[r][1], all.data(), all.size());
  for (int r = 0; r < nranks; ++r) {
    ::close(up[r][0]);
    ::close(down[r][1]);
  }
  std::vector<Outcome> out(nranks);
  std::vector<bool> done(nranks, false);
  int remaining = nranks;
  while (remaining > 0) {
    for (int r = 0; r < nranks; ++r) {
      int status = 0;
      if (done[r] || ::waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      done[r] = true;
      --remaining;
      out[r].exited = WIFEXITED(status);
      out[r].exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      out[r].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
    if (remaining > 0 && Clock::now() > deadline) {
      for (int r = 0; r < nranks; ++r) {
        if (!done[r]) ::kill(pids[r], SIGKILL);
      }
    }
    if (remaining > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return out;
}

void requireAllPassed(const std::vector<Outcome>& out) {
  for (size_t r = 0; r < out.size(); ++r) {
    INFO("rank " << r << " exited=" << out[r].exited << " code=" << out[r].exitCode
                 << " signal=" << out[r].signal);
    REQUIRE(out[r].exited);
    REQUIRE(out[r].exitCode == 0);
  }
}

/// Deterministic bytes for message `idx` from `src` to `dst`; no short period.
uint8_t patternByte(int src, int dst, size_t idx, size_t i) {
  const uint32_t x = static_cast<uint32_t>(i) ^ (static_cast<uint32_t>(src) << 24) ^
                     (static_cast<uint32_t>(dst) << 16) ^ (static_cast<uint32_t>(idx) << 20);
  return static_cast<uint8_t>((x * 2654435761u) >> 24);
}

/// Per peer, message k of sizes[k] bytes of patternByte(this rank, peer, k, i).
std::vector<std::vector<std::vector<uint8_t>>> patternMessages(const World& w,
                                                               const std::vector<size_t>& sizes) {
  std::vector<std::vector<std::vector<uint8_t>>> out(w.nranks);
  for (int p = 0; p < w.nranks; ++p) {
    if (p == w.rank) continue;
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<uint8_t> s(sizes[k]);
      for (size_t i = 0; i < s.size(); ++i) s[i] = patternByte(w.rank, p, k, i);
      out[p].push_back(std::move(s));
    }
  }
  return out;
}

int exchangeBody(World& w) {
  const std::vector<size_t> sizes = {0, 1, 7, (size_t{1} << 20) + 3, 0, 7};
  const auto sendBufs = patternMessages(w, sizes);
  std::vector<std::vector<std::vector<uint8_t>>> recvBufs(w.nranks);
  for (int p = 0; p < w.nranks; ++p) {
    if (p == w.rank) continue;
    for (size_t k = 0; k < sizes.size(); ++k) recvBufs[p].emplace_back(sizes[k], uint8_t{0xEE});
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    for (int p = 0; p < w.nranks; ++p) {
      if (p == w.rank) continue;
      Connection& c = *w.conns[p];
      TUTTI_TCP_CHECK(c.postSend(sendBufs[p][k].data(), sizes[k]) == k + 1);
      TUTTI_TCP_CHECK(c.postRecv(RecvSpec{.dst = recvBufs[p][k].data(), .bytes = sizes[k]}) ==
                      k + 1);
      if (k == 0) {  // a zero-byte message with nothing before it completes at once
        TUTTI_TCP_CHECK(c.sendsDone() == 1 && c.recvsDone() == 1);
      }
    }
  }
  TUTTI_TCP_CHECK_OK(driveUntilIdle(allConns(w), 30000));
  for (int p = 0; p < w.nranks; ++p) {
    if (p == w.rank) continue;
    const Connection& c = *w.conns[p];
    TUTTI_TCP_CHECK(c.sendsDone() == sizes.size() && c.recvsDone() == sizes.size());
    uint64_t total = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      total += sizes[k];
      for (size_t i = 0; i < sizes[k]; ++i) {
        if (recvBufs[p][k][i] != patternByte(p, w.rank, k, i)) {
          std::fprintf(stderr, "rank %d: wrong byte from %d, message %zu, offset %zu\n", w.rank, p,
                       k, i);
          return 1;
        }
      }
    }
    TUTTI_TCP_CHECK(c.bytesSent == total && c.bytesReceived == total);
  }
  return 0;
}

/// What peer `src` sends to `dst` in the reduce test: small integers, exact in float32.
float sentValue(int src, int dst, size_t i) {
  return static_cast<float>(src * 100 + dst + static_cast<int>(i % 1000));
}

int reduceBody(World& w) {
  const kernels::Reduce2Fn sum = kernels::reduce2Fn(DataType::kFloat32, RedOp::kSum);
  TUTTI_TCP_CHECK(sum != nullptr);
  const size_t count = (size_t{1} << 18) + 3;  // 1 MiB + 12 bytes: several staging refills
  const size_t bytes = count * sizeof(float);
  struct PerPeer {
    std::vector<float> out, accum, src, dst;
  };
  std::vector<PerPeer> bufs(w.nranks);
  for (int p = 0; p < w.nranks; ++p) {
    if (p == w.rank) continue;
    PerPeer& b = bufs[p];
    b.out.resize(count);
    b.accum.resize(count);
    b.src.resize(count);
    b.dst.assign(count, std::numeric_limits<float>::quiet_NaN());
    for (size_t i = 0; i < count; ++i) {
      b.out[i] = sentValue(w.rank, p, i);
      b.accum[i] = static_cast<float>(i % 7);
      b.src[i] = static_cast<float>(i % 11);
    }
    Connection& c = *w.conns[p];
    c.postSend(b.out.data(), bytes);
    c.postSend(b.out.data(), bytes);
    // dst == src: accumulate in place.
    c.postRecv(RecvSpec{.dst = b.accum.data(),
                        .bytes = bytes,
                        .src = b.accum.data(),
                        .reduce = sum,
                        .elemBytes = sizeof(float)});
    // dst != src: out-of-place, src left untouched.
    c.postRecv(RecvSpec{.dst = b.dst.data(),
                        .bytes = bytes,
                        .src = b.src.data(),
                        .reduce = sum,
                        .elemBytes = sizeof(float)});
  }
  TUTTI_TCP_CHECK_OK(driveUntilIdle(allConns(w), 30000));
  for (int p = 0; p < w.nranks; ++p) {
    if (p == w.rank) continue;
    const PerPeer& b = bufs[p];
    for (size_t i = 0; i < count; ++i) {
      const float in = sentValue(p, w.rank, i);
      if (b.accum[i] != static_cast<float>(i % 7) + in ||
          b.dst[i] != static_cast<float>(i % 11) + in || b.src[i] != static_cast<float>(i % 11)) {
        std::fprintf(stderr, "rank %d: wrong sum from %d at %zu: accum=%g dst=%g src=%g\n", w.rank,
                     p, i, b.accum[i], b.dst[i], b.src[i]);
        return 1;
      }
    }
  }
  return 0;
}

/// Rank 0 delivers one reduced message in pieces split inside an element (5 bytes, then the
/// rest after a pause), so rank 1 must keep a partial element staged. The byte stream carries no
/// message boundaries, which is what lets the sender split it.
int partialElementBody(World& w) {
  const kernels::Reduce2Fn sum = kernels::reduce2Fn(DataType::kFloat32, RedOp::kSum);
  TUTTI_TCP_CHECK(sum != nullptr);
  const size_t count = 1001;
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(i) + 0.5f;
  Connection& c = *w.conns[1 - w.rank];
  if (w.rank == 0) {
    const auto* p = reinterpret_cast<const std::byte*>(data.data());
    c.postSend(p, 5);
    TUTTI_TCP_CHECK_OK(driveUntilIdle({&c}, 10000));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    c.postSend(p + 5, count * sizeof(float) - 5);
    TUTTI_TCP_CHECK_OK(driveUntilIdle({&c}, 10000));
    return 0;
  }
  std::vector<float> acc(count, 1.0f);
  c.postRecv(RecvSpec{.dst = acc.data(),
                      .bytes = count * sizeof(float),
                      .src = acc.data(),
                      .reduce = sum,
                      .elemBytes = sizeof(float)});
  TUTTI_TCP_CHECK_OK(driveUntilIdle({&c}, 10000));
  for (size_t i = 0; i < count; ++i) TUTTI_TCP_CHECK(acc[i] == data[i] + 1.0f);
  return 0;
}

/// Rank 1 dies after connecting; rank 0 (receiving from it) and rank 2 (sending 64 MiB to it)
/// must get RemoteError naming rank 1, and still talk to each other.
int killedPeerBody(World& w) {
  if (w.rank == 1) ::raise(SIGKILL);
  Connection& dead = *w.conns[1];
  std::vector<uint8_t> big(size_t{64} << 20, uint8_t{1});
  if (w.rank == 0) {
    dead.postRecv(RecvSpec{.dst = big.data(), .bytes = size_t{1} << 20});
  } else {
    dead.postSend(big.data(), big.size());
  }
  const Status s = driveUntilIdle({&dead}, 20000);
  std::fprintf(stderr, "rank %d saw: %s\n", w.rank, s.toString().c_str());
  TUTTI_TCP_CHECK(s.code() == Code::kRemoteError);
  TUTTI_TCP_CHECK(s.message().find("rank 1 (host host1)") != std::string::npos);
  TUTTI_TCP_CHECK(s.message().find("rank=" + std::to_string(w.rank)) != std::string::npos);
  TUTTI_TCP_CHECK(dead.progress().code() == Code::kRemoteError);  // sticky
  // The surviving pair still works.
  Connection& other = *w.conns[2 - w.rank];
  std::vector<uint8_t> out(1000, static_cast<uint8_t>(w.rank + 1)), in(1000, 0);
  other.postSend(out.data(), out.size());
  other.postRecv(RecvSpec{.dst = in.data(), .bytes = in.size()});
  TUTTI_TCP_CHECK_OK(driveUntilIdle({&other}, 10000));
  TUTTI_TCP_CHECK(in[0] == static_cast<uint8_t>(3 - w.rank) && in[999] == in[0]);
  return 0;
}

TEST_CASE("tcp: interface names follow NCCL_SOCKET_IFNAME syntax", "[tcp]") {
  using net::interfaceMatches;
  CHECK(interfaceMatches("eth", "eth0"));
  CHECK(interfaceMatches("ib,eth", "eth1"));
  CHECK_FALSE(interfaceMatches("eth", "ens3"));
  CHECK_FALSE(interfaceMatches("^eth,lo", "eth0"));
  CHECK_FALSE(interfaceMatches("^eth,lo", "lo"));
  CHECK(interfaceMatches("^docker,lo", "ens3"));
  CHECK(interfaceMatches("=eth0", "eth0"));
  CHECK_FALSE(interfaceMatches("=eth0", "eth01"));
  CHECK(interfaceMatches("^=eth0", "eth01"));
  CHECK_FALSE(interfaceMatches("^=eth0", "eth0"));
  CHECK_FALSE(interfaceMatches("", "eth0"));
}

TEST_CASE("tcp: TUTTI_SOCKET_IFNAME selects the listening interface", "[tcp]") {
  auto peers = makePeers(2);
  Context ctx = makeContext(0, peers, 1000);
  ctx.loopbackOnly = false;
  ::setenv("TUTTI_SOCKET_IFNAME", "=lo", 1);
  {
    TcpTransport t;
    auto blob = t.setup(ctx);
    INFO(blob.status().toString());
    REQUIRE(blob.isOk());
  }
  ::setenv("TUTTI_SOCKET_IFNAME", "=no_such_if0", 1);
  {
    TcpTransport t;
    auto blob = t.setup(ctx);
    CHECK(blob.status().code() == Code::kInvalidArgument);
    CHECK_THAT(blob.status().message(), Catch::Contains("no_such_if0"));
  }
  ::unsetenv("TUTTI_SOCKET_IFNAME");
}

TEST_CASE("tcp: 2 and 3 ranks exchange 0, 1, 7 and 1 MiB+3 byte messages both ways", "[tcp]") {
  const int nranks = GENERATE(2, 3);
  requireAllPassed(runRanks(nranks, exchangeBody));
}

/// Plain receives into destinations at assorted offsets from a cache line, mixed with aligned
/// and small ones, in order, some larger than a reducing receive's staging buffer: every byte
/// exact, nothing written before or after.
int offsetExchangeBody(World& w) {
  const std::vector<size_t> sizes = {4096, 70001, 300000, 5, (size_t{256} << 10) + 17, 8192};
  const std::vector<size_t> offsets = {16, 0, 1, 63, 48, 64};
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  const auto sendBufs = patternMessages(w, sizes);
  std::vector<std::vector<std::unique_ptr<uint8_t[], Free>>> recvMem(w.nranks);
  for (int p = 0; p < w.nranks; ++p) {
    if (p == w.rank) continue;
    for (size_t k = 0; k < sizes.size(); ++k) {
      const size_t rounded = (sizes[k] + 64 + 4095) / 4096 * 4096;
      recvMem[p].emplace_back(static_cast<uint8_t*>(std::aligned_alloc(4096, rounded)));
      TUTTI_TCP_CHECK(recvMem[p].back() != nullptr);
      std::memset(recvMem[p].back().get(), 0xEE, rounded);
    }
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    for (int p = 0; p < w.nranks; ++p) {
      if (p == w.rank) continue;
      Connection& c = *w.conns[p];
      TUTTI_TCP_CHECK(c.postSend(sendBufs[p][k].data(), sizes[k]) == k + 1);
      const RecvSpec spec{.dst = recvMem[p][k].get() + offsets[k], .bytes = sizes[k]};
      TUTTI_TCP_CHECK(c.postRecv(spec) == k + 1);
    }
  }
  TUTTI_TCP_CHECK_OK(driveUntilIdle(allConns(w), 30000));
  for (int p = 0; p < w.nranks; ++p) {
    if (p == w.rank) continue;
    TUTTI_TCP_CHECK(w.conns[p]->recvsDone() == sizes.size());
    for (size_t k = 0; k < sizes.size(); ++k) {
      const uint8_t* got = recvMem[p][k].get();
      for (size_t i = 0; i < offsets[k]; ++i) TUTTI_TCP_CHECK(got[i] == 0xEE);  // nothing before
      for (size_t i = 0; i < sizes[k]; ++i) {
        if (got[offsets[k] + i] != patternByte(p, w.rank, k, i)) {
          std::fprintf(stderr, "rank %d: wrong byte from %d, message %zu (offset %zu), byte %zu\n",
                       w.rank, p, k, offsets[k], i);
          return 1;
        }
      }
      TUTTI_TCP_CHECK(got[offsets[k] + sizes[k]] == 0xEE);  // nothing after
    }
  }
  return 0;
}

/// Every connected TCP socket of this process has SO_SNDBUF `want` (as the kernel reports it:
/// twice the value set); there are (nranks - 1) * sockets-per-pair of them. Then the exchange.
int sendBufferBody(World& w, int want) {
  int sockets = 0;
  for (int fd = 0; fd < 1024; ++fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 ||
        ss.ss_family != AF_INET)
      continue;
    int v = 0;
    socklen_t vlen = sizeof(v);
    TUTTI_TCP_CHECK(::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &vlen) == 0);
    if (v != want) {
      std::fprintf(stderr, "rank %d: socket fd %d has SO_SNDBUF %d, want %d\n", w.rank, fd, v,
                   want);
      return 1;
    }
    ++sockets;
  }
  TUTTI_TCP_CHECK(sockets == (w.nranks - 1) * 2);  // TUTTI_SOCKET_NSOCKS' default
  return exchangeBody(w);
}

TEST_CASE("tcp: TUTTI_SOCKET_SNDBUF sizes the data sockets' send buffers, bad values are refused",
          "[tcp]") {
  // Unset: 128 KiB over loopback (the kernel reports twice what is set).
  requireAllPassed(runRanks(2, [](World& w) { return sendBufferBody(w, 256 << 10); }));
  ::setenv("TUTTI_SOCKET_SNDBUF", "96K", 1);
  requireAllPassed(runRanks(3, [](World& w) { return sendBufferBody(w, 192 << 10); }));
  ::setenv("TUTTI_SOCKET_SNDBUF", "0", 1);  // the kernel's autotuning: never a set value
  requireAllPassed(runRanks(2, exchangeBody));
  for (const char* bad : {"-1", "4G", "lots"}) {
    INFO(bad);
    ::setenv("TUTTI_SOCKET_SNDBUF", bad, 1);
    auto peers = makePeers(2);
    TcpTransport t;
    auto blob = t.setup(makeContext(0, peers, 1000));
    REQUIRE_FALSE(blob.isOk());
    CHECK(blob.status().code() == Code::kInvalidArgument);
    CHECK_THAT(blob.status().message(), Catch::Contains("TUTTI_SOCKET_SNDBUF"));
    CHECK_THAT(blob.status().message(), Catch::Contains(std::string("'") + bad + "'"));
  }
  ::unsetenv("TUTTI_SOCKET_SNDBUF");
}

TEST_CASE("tcp: plain receives at any offset from a cache line arrive exact", "[tcp]") {
  const int nranks = GENERATE(2, 3);
  requireAllPassed(runRanks(nranks, offsetExchangeBody));
}

TEST_CASE("tcp: reducing receives sum float32 in place and out of place", "[tcp]") {
  const int nranks = GENERATE(2, 3);
  requireAllPassed(runRanks(nranks, reduceBody));
}

TEST_CASE("tcp: a reducing receive keeps a partial element until it completes", "[tcp]") {
  requireAllPassed(runRanks(2, partialElementBody));
}

TEST_CASE("tcp: a killed peer makes progress() fail with RemoteError naming it", "[tcp]") {
  const auto out = runRanks(3, killedPeerBody);
  REQUIRE(out[1].signal == SIGKILL);
  for (int r : {0, 2}) {
    INFO("rank " << r << " code=" << out[r].exitCode << " signal=" << out[r].signal);
    CHECK((out[r].exited && out[r].exitCode == 0));
  }
}

TEST_CASE("tcp: wrong secret, bad magic and silent sockets are rejected", "[tcp]") {
  log::setLevel(LogLevel::kNone);  // the rejections WARN; keep the output quiet
  auto peers = makePeers(2);
  const Context ctx0 = makeContext(0, peers, 5000);
  const Context ctx1 = makeContext(1, peers, 5000);
  TcpTransport t0, t1;
  auto blob0 = t0.setup(ctx0);
  auto blob1 = t1.setup(ctx1);
  REQUIRE(blob0.isOk());
  REQUIRE(blob1.isOk());

  // An impostor with another job's secret: dialling succeeds (no ack), rank 1 must drop it.
  Context wrong = ctx0;
  wrong.secret = kSecret + 1;
  TcpTransport impostor;
  REQUIRE(impostor.setup(wrong).isOk());
  auto bad = impostor.connect(wrong, 1, *blob1);
  REQUIRE(bad.isOk());
  // Raw sockets: one sends garbage (bad magic), one sends nothing at all. The blob holds the
  // listener's sockaddr at offset 8 (after two uint32 fields).
  sockaddr_in addr{};
  std::memcpy(&addr, blob1->data() + 8, sizeof(addr));
  REQUIRE(addr.sin_family == AF_INET);
  const int garbage = ::socket(AF_INET, SOCK_STREAM, 0);
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::connect(garbage, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(::connect(silent, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  const char junk[24] = "GET / HTTP/1.0\r\n\r\n";
  REQUIRE(::send(garbage, junk, sizeof(junk), MSG_NOSIGNAL) == sizeof(junk));

  // The real rank 0 dials after all of them; rank 1 must still pair with it.
  auto c0 = t0.connect(ctx0, 1, *blob1);
  REQUIRE(c0.isOk());
  auto c1 = t1.connect(ctx1, 0, *blob0);
  INFO(c1.status().toString());
  REQUIRE(c1.isOk());
  t0.finishSetup();
  t1.finishSetup();
  CHECK_THAT(log::lastError(), Catch::Contains("tcp: closed a connection from 127.0.0.1:"));

  std::vector<uint8_t> a(3000, 7), b(3000, 0), a2(17, 9), b2(17, 0);
  (*c0)->postSend(a.data(), a.size());
  (*c1)->postRecv(RecvSpec{.dst = b.data(), .bytes = b.size()});
  (*c1)->postSend(a2.data(), a2.size());
  (*c0)->postRecv(RecvSpec{.dst = b2.data(), .bytes = b2.size()});
  const Status s = driveUntilIdle({c0->get(), c1->get()}, 10000);
  INFO(s.toString());
  REQUIRE(s.isOk());
  CHECK(a == b);
  CHECK(a2 == b2);

  // The impostor's connection was closed by rank 1: its next send or receive fails.
  std::vector<uint8_t> x(1 << 20);
  (*bad)->postRecv(RecvSpec{.dst = x.data(), .bytes = x.size()});
  CHECK(driveUntilIdle({bad->get()}, 10000).code() == Code::kRemoteError);
  ::close(garbage);
  ::close(silent);
  log::setLevel(LogLevel::kWarn);
}

TEST_CASE("tcp: connect times out naming both ranks and the peer host", "[tcp]") {
  log::setLevel(LogLevel::kNone);
  auto peers = makePeers(2);
  const Context ctx0 = makeContext(0, peers, 300);
  const Context ctx1 = makeContext(1, peers, 300);
  TcpTransport t0, t1;
  auto blob0 = t0.setup(ctx0);
  auto blob1 = t1.setup(ctx1);
  REQUIRE(blob0.isOk());
  REQUIRE(blob1.isOk());

  SECTION("accepting side: the lower rank never dials") {
    const auto start = Clock::now();
    auto c = t1.connect(ctx1, 0, *blob0);
    CHECK(Clock::now() - start < std::chrono::seconds(5));
    REQUIRE(c.status().code() == Code::kTimeout);
    CHECK_THAT(c.status().message(), Catch::Contains("rank 0 (host host0)") &&
                                         Catch::Contains("rank=1") && Catch::Contains("peer=0"));
  }
  SECTION("dialling side: the listener is gone (connection refused)") {
    t1.finishSetup();
    const auto start = Clock::now();
    auto c = t0.connect(ctx0, 1, *blob1);
    CHECK(Clock::now() - start < std::chrono::seconds(5));
    REQUIRE(c.status().code() == Code::kTimeout);
    CHECK_THAT(c.status().message(), Catch::Contains("rank=0") && Catch::Contains("peer=1") &&
                                         Catch::Contains("host=host1"));
  }
  SECTION("a malformed blob is an invalid argument") {
    std::vector<std::byte> junk(7);
    CHECK(t0.connect(ctx0, 1, junk).status().code() == Code::kInvalidArgument);
  }
  log::setLevel(LogLevel::kWarn);
}

}  // namespace
}  // namespace tutti::transport
