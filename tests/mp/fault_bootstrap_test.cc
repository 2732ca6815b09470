// File: tests/mp/fault_bootstrap_test.cc
// Hostile bootstrap traffic during init: while three ranks wait at the root, the fourth sends the
// root and the other ranks' ring listeners random bytes, truncated and oversized hellos, hellos
// with a wrong secret, and silent connections held open. Every such connection is rejected and
// logged, every listener is bound to 127.0.0.1 only, and the job then completes with right
// results. Also: a trace file (TUTTI_TRACE) that parses as JSON with one event per call, and the
// statistics API.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "base/socket.h"
#include "core/bootstrap_wire.h"
#include "tests/mp/mp_common.h"

namespace tutti::test {
namespace {

// Socket inodes of a process.
std::set<std::string> socketInodes(int pid) {
  std::set<std::string> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    char target[256] = {};
    const std::string p = dir + "/" + e->d_name;
    if (readlink(p.c_str(), target, sizeof target - 1) > 0 &&
        std::string(target).rfind("socket:[", 0) == 0)
      out.insert(std::string(target).substr(8, std::strlen(target) - 9));
  }
  closedir(d);
  return out;
}

struct Listener {
  std::string localHex;  // "0100007F:1F90"
  int port;
};
// Listening IPv4 sockets of a process, from /proc/net/tcp (state 0A).
std::vector<Listener> listenersOf(int pid) {
  std::vector<Listener> out;
  const auto inodes = socketInodes(pid);
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(table);
    std::string line;
    std::getline(f, line);
    while (std::getline(f, line)) {
      std::istringstream in(line);
      std::string sl, local, remote, st, q, tm, retr, uid, timeout, inode;
      in >> sl >> local >> remote >> st >> q >> tm >> retr >> uid >> timeout >> inode;
      if (st != "0A" || !inodes.count(inode)) continue;
      out.push_back({local, std::stoi(local.substr(local.find(':') + 1), nullptr, 16)});
    }
  }
  return out;
}

int dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends hostile traffic to `port`; returns sockets to keep open (silent / truncated clients).
std::vector<int> attack(int port, std::mt19937& rng) {
  std::vector<int> keep;
  bootstrap::wire::Hello h{};
  h.magic = bootstrap::wire::kHelloMagic;
  h.secret = 0xdeadbeef;  // wrong
  h.rank = 0;
  h.nranks = 4;
  h.ringAddr.family = AF_INET;
  for (int variant = 0; variant < 3; ++variant) {
    int fd = dial(port);
    if (fd < 0) continue;
    if (variant == 1) h.nranks = 1 << 30;  // oversized
    if (variant == 2) {                   // truncated, held open
      usleep(20000);  // after the two above, so that the log's first lines show them
      (void)!write(fd, &h, 10);
      keep.push_back(fd);
      continue;
    }
    (void)!write(fd, &h, sizeof h);
    usleep(20000);
    close(fd);
  }
  for (int i = 0; i < 12; ++i) {  // random bytes, random lengths, closed
    int fd = dial(port);
    if (fd < 0) continue;
    std::vector<uint8_t> junk(rng() % 300);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    (void)!write(fd, junk.data(), junk.size());
    close(fd);
  }
  for (int i = 0; i < 3; ++i) {  // silent, held open
    int fd = dial(port);
    if (fd >= 0) keep.push_back(fd);
  }
  return keep;
}

std::vector<int> siblingPids() {
  std::vector<int> out;
  const std::string p = "/proc/" + std::to_string(getppid()) + "/task/" +
                        std::to_string(getppid()) + "/children";
  std::ifstream f(p);
  int pid;
  while (f >> pid)
    if (pid != getpid()) out.push_back(pid);
  return out;
}

}  // namespace

TEST_CASE("hostile bootstrap traffic during init is rejected and the job completes", "[mp]") {
  const std::string transport = GENERATE("shm", "tcp");
  INFO("transport=" << transport);
  launch::LaunchOptions opts;
  opts.nranks = 4;
  opts.timeout = std::chrono::seconds(60);
  opts.env = {{"TUTTI_TRANSPORTS", transport}, {"TUTTI_BOOTSTRAP_TIMEOUT", "30"}};
  auto outcomes = launch::runRanks(opts, [&](int rank, int n) -> int {
    std::vector<int> keep;
    if (rank == 3) {
      std::mt19937 rng(7);
      const char* id = std::getenv("TUTTI_COMM_ID");
      TUTTI_CHILD_CHECK(id != nullptr);
      auto root = net::parseHostPort(id);
      TUTTI_CHILD_CHECK(root.isOk());
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the others are waiting
      keep = attack(root->port(), rng);
      int rings = 0;
      for (int pid : siblingPids()) {
        for (const Listener& l : listenersOf(pid)) {
          std::fprintf(stderr, "rank 3: pid %d listens on %s\n", pid, l.localHex.c_str());
          TUTTI_CHILD_CHECK(l.localHex.rfind("0100007F:", 0) == 0);  // 127.0.0.1 only
          if (l.port == root->port()) continue;
          auto more = attack(l.port, rng);
          keep.insert(keep.end(), more.begin(), more.end());
          ++rings;
        }
      }
      TUTTI_CHILD_CHECK(rings >= 3);  // every other rank's ring listener was attacked
    }
    auto c = Communicator::fromEnvironment();
    TUTTI_CHILD_CHECK(c.isOk());
    for (int fd : keep) close(fd);
    std::vector<int32_t> in(1000), out(1000);
    for (int it = 0; it < 5; ++it) {
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(rank * 1000 + i + it);
      TUTTI_CHILD_CHECK(
          c->allReduce(in.data(), out.data(), in.size(), DataType::kInt32, RedOp::kSum).isOk());
      for (size_t i = 0; i < out.size(); ++i)
        TUTTI_CHILD_CHECK(out[i] == static_cast<int32_t>(6000 + 4 * (i + it)));
    }
    (void)n;
    return 0;
  });
  bool ok = launch::allPassed(outcomes);
  if (!ok)
    for (const auto& o : outcomes) UNSCOPED_INFO(launch::describe(o) << "\n" << o.output);
  REQUIRE(ok);
  INFO(outcomes[0].output);
  REQUIRE(outcomes[0].output.find("rejected a connection") != std::string::npos);
  REQUIRE(outcomes[0].output.find("UniqueId's secret") != std::string::npos);
  REQUIRE(outcomes[0].output.find("nranks=1073741824") != std::string::npos);
}

TEST_CASE("TUTTI_TRACE writes Perfetto-loadable JSON, stats count every call", "[mp]") {
  char dir[] = "/tmp/tutti-trace-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string pattern = std::string(dir) + "/trace.json";
  launch::LaunchOptions opts;
  opts.nranks = 3;
  opts.timeout = std::chrono::seconds(60);
  opts.env = {{"TUTTI_TRACE", pattern}, {"TUTTI_DEBUG", "TRACE"}, {"TUTTI_DEBUG_SUBSYS", "COLL"}};
  auto outcomes = launch::runRanks(opts, [&](int, int) -> int {
    // The log read TUTTI_DEBUG when the parent loaded the library; the child sets TRACE itself.
    log::setLevel(LogLevel::kTrace);
    auto c = Communicator::fromEnvironment();
    TUTTI_CHILD_CHECK(c.isOk());
    std::vector<float> in(1000, 1.f), out(3000);
    for (int i = 0; i < 4; ++i)
      TUTTI_CHILD_CHECK(
          c->allReduce(in.data(), out.data(), 1000, DataType::kFloat32, RedOp::kSum).isOk());
    TUTTI_CHILD_CHECK(c->allGather(in.data(), out.data(), 1000, DataType::kFloat32).isOk());
    TUTTI_CHILD_CHECK(c->barrier().isOk());
    auto st = c->stats();
    uint64_t calls = 0;
    for (const auto& s : st) {
      calls += s.calls;
      if (s.coll == Coll::kAllReduce) {
        TUTTI_CHILD_CHECK(s.calls == 4);
        TUTTI_CHILD_CHECK(s.bytes == 4 * 4000);
        TUTTI_CHILD_CHECK(s.wireBytes > 0);
        TUTTI_CHILD_CHECK(s.seconds > 0);
      }
      if (s.coll == Coll::kAllGather) TUTTI_CHILD_CHECK(s.bytes == 3 * 4000);
    }
    TUTTI_CHILD_CHECK(calls == 6);
    c->resetStats();
    TUTTI_CHILD_CHECK(c->stats().empty());
    return 0;  // the communicator's destructor closes the trace file
  });
  bool ok = launch::allPassed(outcomes);
  if (!ok)
    for (const auto& o : outcomes) UNSCOPED_INFO(launch::describe(o) << "\n" << o.output);
  REQUIRE(ok);
  for (int r = 0; r < 3; ++r) {
    const std::string path = std::string(dir) + "/trace." + std::to_string(r) + ".json";
    INFO(path);
    std::ifstream f(path);
    REQUIRE(f.good());
    nlohmann::json j = nlohmann::json::parse(f);  // throws (fails the test) when invalid
    int colls = 0, rounds = 0, allreduces = 0;
    for (const auto& ev : j.at("traceEvents")) {
      if (ev.at("ph") != "X") continue;
      REQUIRE(ev.contains("ts"));
      REQUIRE(ev.contains("dur"));
      if (ev.at("cat") == "coll") {
        ++colls;
        REQUIRE(ev.at("args").at("status") == "ok");
        if (ev.at("name") == "allreduce") {
          ++allreduces;
          REQUIRE(ev.at("args").at("count") == 1000);
          REQUIRE(ev.at("args").at("dtype") == "float");
        }
      }
      if (ev.at("cat") == "round") ++rounds;
    }
    REQUIRE(colls == 6);
    REQUIRE(allreduces == 4);
    REQUIRE(rounds >= colls);  // TRACE level: one event per round
    std::remove(path.c_str());
  }
  rmdir(dir);
}

}  // namespace tutti::test
