// File: bench/tcp_ceiling.cc
// tutti-tcp-ceiling: the fastest this machine exchanges S bytes each way between two processes over
// TCP loopback, with no collective library involved. A 2-rank allreduce of S bytes must deliver at
// least S bytes to each rank (each rank's result determines the other rank's input, given its own),
// and both ranks receive at the same time, so S / (this time) bounds a 2-rank allreduce's busbw
// over TCP from above (busbw = algbw for 2 ranks). The reductions an allreduce also has to do only
// make it slower.
//
// Unlike ../shared/peers' ceilings (streams from 256 MiB buffers, so DRAM-bound), this reuses the
// same S-byte buffers in every exchange, as a collective benchmark does, so that small sizes run
// from cache. Every exchange: both processes write S bytes and read S bytes, non-blocking, with
// poll(), over K sockets (the message striped over them), in writes of at most W bytes, with the
// sockets' SO_SNDBUF left to the kernel's autotuning or set to B. The best median over K in
// {1, 2, 4}, W in {256 KiB, 1 MiB, 4 MiB} and B in {autotuned, 128 KiB} is reported (128 KiB:
// what the tcp transport uses between processes of one machine; it ran up to 2x faster here at
// 4-64 MiB).
//
// Usage: tutti-tcp-ceiling [-p CPU_A CPU_B] [-t SECONDS_PER_CASE] [SIZE ...]
//   SIZE in bytes with an optional K/M/G suffix (powers of 1024); default 1M 16M 256M.
// Under a launcher of 2 ranks (TUTTI_RANK, TUTTI_NRANKS, TUTTI_COMM_ID=IPv4:PORT set) the two
// ranks are the two sides instead of a forked pair over loopback: rank 0 listens on the root
// address, rank 1 connects, pinned to CPU_A and CPU_B. Between two emulated hosts:
//   tutti-run --emulate-hosts 2x1 --link rate=10gbit -- tutti-tcp-ceiling 1M 16M
// Prints one line per size and configuration, then per size:
//   tcp_exchange bytes=S best_us=T busbw_bound_gbps=G nsocks=K write=W sndbuf=B (0: autotuned)
// Exit 0; 1 on a socket error or a wrong byte; 2 for bad arguments.
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/page_buffer.h"

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

void pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  if (sched_setaffinity(0, sizeof s, &s) != 0) die("sched_setaffinity");
}

size_t parseSize(const char* s) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  size_t mul = 1;
  if (*end == 'K' || *end == 'k') mul = size_t(1) << 10;
  else if (*end == 'M' || *end == 'm') mul = size_t(1) << 20;
  else if (*end == 'G' || *end == 'g') mul = size_t(1) << 30;
  else if (*end != '\0') return 0;
  return size_t(v) * mul;
}

void setFlags(int fd, int sndbuf) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("TCP_NODELAY");
  if (sndbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf) != 0)
    die("SO_SNDBUF");
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) die("O_NONBLOCK");
}

// One exchange: send `bytes` from `src` striped over `fds`, receive as many into `dst`.
void exchange(const std::vector<int>& fds, const char* src, char* dst, size_t bytes, size_t write) {
  const size_t k = fds.size(), stripe = (bytes + k - 1) / k;
  std::vector<size_t> sent(k, 0), got(k, 0), len(k);
  for (size_t i = 0; i < k; ++i) len[i] = std::min(stripe, bytes - std::min(bytes, i * stripe));
  std::vector<pollfd> pfd(k);
  for (;;) {
    bool done = true;
    for (size_t i = 0; i < k; ++i) {
      pfd[i] = {fds[i], 0, 0};
      if (sent[i] < len[i]) pfd[i].events |= POLLOUT;
      if (got[i] < len[i]) pfd[i].events |= POLLIN;
      if (pfd[i].events) done = false;
    }
    if (done) return;
    // Try first, poll only when nothing moved (the loop a tuned transport would run).
    bool moved = false;
    for (size_t i = 0; i < k; ++i) {
      if (sent[i] < len[i]) {
        const ssize_t n = ::send(fds[i], src + i * stripe + sent[i],
                                 std::min(write, len[i] - sent[i]), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) sent[i] += size_t(n), moved = true;
        else if (n < 0 && errno != EAGAIN) die("send");
      }
      if (got[i] < len[i]) {
        const ssize_t n = ::recv(fds[i], dst + i * stripe + got[i], len[i] - got[i], MSG_DONTWAIT);
        if (n > 0) got[i] += size_t(n), moved = true;
        else if (n == 0) { std::fprintf(stderr, "tutti-tcp-ceiling: peer closed\n"); std::exit(1); }
        else if (errno != EAGAIN) die("recv");
      }
    }
    if (!moved && ::poll(pfd.data(), k, 10000) < 0) die("poll");
  }
}

// Runs exchanges for about `secs` (at least 5 after 3 warm-ups); median microseconds. Both sides
// run the same loop; the child's count follows the parent's through a first 8-byte message.
double run(const std::vector<int>& fds, size_t bytes, size_t write, double secs, bool parent) {
  // Page-aligned, as a benchmark's buffers are: the kernel copied into a destination 16 bytes
  // past a cache line (std::vector's, from malloc) 1.8-3x slower here at 64 KiB-1 MiB.
  tutti::PageBuffer srcMem, dstMem;
  srcMem.grow(bytes);
  dstMem.grow(bytes);
  char* const src = reinterpret_cast<char*>(srcMem.data());
  char* const dst = reinterpret_cast<char*>(dstMem.data());
  for (size_t i = 0; i < bytes; ++i) src[i] = char(i * 7 + (parent ? 1 : 2));
  // The parent decides the number of exchanges from one timed exchange and tells the child.
  uint64_t iters = 0;
  if (parent) {
    const auto t0 = Clock::now();
    exchange(fds, src, dst, bytes, write);
    const double one = std::chrono::duration<double>(Clock::now() - t0).count();
    iters = std::clamp<uint64_t>(uint64_t(secs / std::max(one, 1e-7)), 5, 100000);
    uint64_t msg[1] = {iters};
    exchange({fds[0]}, reinterpret_cast<char*>(msg), reinterpret_cast<char*>(&iters), 8, 8);
    iters = msg[0];
  } else {
    exchange(fds, src, dst, bytes, write);
    uint64_t zero = 0;
    exchange({fds[0]}, reinterpret_cast<char*>(&zero), reinterpret_cast<char*>(&iters), 8, 8);
  }
  for (int w = 0; w < 3; ++w) exchange(fds, src, dst, bytes, write);
  std::vector<double> us;
  for (uint64_t it = 0; it < iters; ++it) {
    const auto t0 = Clock::now();
    exchange(fds, src, dst, bytes, write);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  for (size_t i = 0; i < bytes; i += 4093)  // the peer's pattern arrived intact
    if (dst[i] != char(i * 7 + (parent ? 2 : 1))) {
      std::fprintf(stderr, "tutti-tcp-ceiling: wrong byte at %zu\n", i);
      std::exit(1);
    }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int cpuA = 0, cpuB = 1;
  double secs = 0.3;
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-p" && i + 2 < argc) {
      cpuA = std::atoi(argv[++i]);
      cpuB = std::atoi(argv[++i]);
    } else if (a == "-t" && i + 1 < argc) {
      secs = std::atof(argv[++i]);
    } else if (const size_t s = parseSize(argv[i]); s > 0) {
      sizes.push_back(s);
    } else {
      std::fprintf(stderr, "usage: tutti-tcp-ceiling [-p CPU_A CPU_B] [-t SECONDS] [SIZE ...]\n"
                           "tutti-tcp-ceiling: bad argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (sizes.empty()) sizes = {size_t(1) << 20, size_t(16) << 20, size_t(256) << 20};
  if (!(secs > 0)) {
    std::fprintf(stderr, "tutti-tcp-ceiling: -t must be > 0 (got %g)\n", secs);
    return 2;
  }
  constexpr int kMaxSocks = 4;
  // One set of kMaxSocks connections per SO_SNDBUF (once set, a socket never autotunes again).
  constexpr int kSndBufs[] = {0, 128 << 10};
  constexpr int kSets = 2;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // Under a launcher (2 ranks: TUTTI_RANK, TUTTI_NRANKS, TUTTI_COMM_ID=ADDR:PORT, as tutti-run
  // and tools/hosts.sh set them) rank 0 listens on the root address and rank 1 connects to it,
  // from another host or emulated host; otherwise the process forks its peer over loopback.
  const char* rankEnv = std::getenv("TUTTI_RANK");
  const bool launched = rankEnv != nullptr;
  int rank = 0;
  if (launched) {
    const char* n = std::getenv("TUTTI_NRANKS");
    const char* id = std::getenv("TUTTI_COMM_ID");
    const std::string root = id ? id : "";
    const size_t colon = root.rfind(':');
    rank = std::atoi(rankEnv);
    if (!n || std::atoi(n) != 2 || (rank != 0 && rank != 1) || colon == std::string::npos ||
        ::inet_pton(AF_INET, root.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
      std::fprintf(stderr, "tutti-tcp-ceiling: under a launcher it needs TUTTI_NRANKS=2, "
                           "TUTTI_RANK 0 or 1 and TUTTI_COMM_ID=IPv4:PORT (got %s, %s, %s)\n",
                   n ? n : "unset", rankEnv, id ? id : "unset");
      return 2;
    }
    addr.sin_port = htons(static_cast<uint16_t>(std::atoi(root.c_str() + colon + 1)));
  }
  int lfd = -1;
  if (!launched || rank == 0) {
    lfd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0) die("socket");
    const int one = 1;
    ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    socklen_t alen = sizeof addr;
    if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) die("bind");
    if (::listen(lfd, kMaxSocks * kSets) != 0) die("listen");
    if (::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) die("getsockname");
  }
  std::fflush(stdout);
  pid_t pid = 0;
  if (!launched) {
    pid = ::fork();
    if (pid < 0) die("fork");
  }
  const bool parent = launched ? rank == 0 : pid != 0;
  std::vector<int> all;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  for (int i = 0; i < kMaxSocks * kSets; ++i) {
    int fd;
    if (parent) {
      fd = ::accept(lfd, nullptr, nullptr);
      if (fd < 0) die("accept");
    } else {
      for (;;) {  // rank 0 of a launched pair may not listen yet
        fd = ::socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) die("socket");
        if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) break;
        if (!launched || Clock::now() > deadline) die("connect");
        ::close(fd);
        ::usleep(20000);
      }
    }
    setFlags(fd, kSndBufs[i / kMaxSocks]);
    all.push_back(fd);
  }
  if (lfd >= 0) ::close(lfd);
  pin(parent ? cpuA : cpuB);
  for (const size_t bytes : sizes) {
    double best = 0;
    int bestK = 0, bestB = 0;
    size_t bestW = 0;
    for (int set = 0; set < kSets; ++set) {
      for (const int k : {1, 2, 4}) {
        for (const size_t w : {size_t(256) << 10, size_t(1) << 20, size_t(4) << 20}) {
          const auto first = all.begin() + set * kMaxSocks;
          const std::vector<int> fds(first, first + k);
          const double us = run(fds, bytes, w, secs, parent);
          if (parent) {
            std::printf(
                "tcp_exchange_case bytes=%zu nsocks=%d write=%zu sndbuf=%d median_us=%.1f "
                "gbps=%.2f\n",
                bytes, k, w, kSndBufs[set], us, bytes / us / 1e3);
            if (best == 0 || us < best) best = us, bestK = k, bestW = w, bestB = kSndBufs[set];
          }
        }
      }
    }
    if (parent)
      std::printf(
          "tcp_exchange bytes=%zu best_us=%.1f busbw_bound_gbps=%.2f nsocks=%d write=%zu "
          "sndbuf=%d\n",
          bytes, best, bytes / best / 1e3, bestK, bestW, bestB);
    std::fflush(stdout);
  }
  if (!parent || launched) return 0;
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "tutti-tcp-ceiling: the child process failed\n");
    return 1;
  }
  return 0;
}
