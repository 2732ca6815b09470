// File: tests/ib/ib_test_util.h
// Helpers for the multi-process ib tests: whether this machine has an active InfiniBand/RoCE
// port (probed in a forked child, so the test process never opens a device before forking
// ranks), and a two-"host" launch where each rank gets its own TUTTI_HOSTID.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <tutti/tutti.hpp>
#include <utility>
#include <vector>

#include "base/env.h"
#include "base/log.h"
#include "tools/launch/launcher.h"
#include "transports/ib/device_select.h"
#include "transports/ib/verbs.h"

namespace tutti::test {

/// True when libibverbs loads and some port is active and passes TUTTI_IB_HCA / NCCL_IB_HCA.
inline bool haveActiveIbPort() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    using namespace transport::ib;
    bool ok = verbs::load().isOk();
    if (ok) {
      auto devs = verbs::listDevices();
      auto filter = parseHcaList(env::get({"TUTTI_IB_HCA", "NCCL_IB_HCA"}).value_or(""));
      ok = devs.isOk() && filter.isOk() && selectPort(devs.value(), filter.value(), 0).isOk();
    }
    std::fflush(nullptr);
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/// Runs body(comm) on `nranks` forked ranks, rank r on pretend host "ibtest-host<r>" (so every
/// pair of ranks is "between hosts"), with `env` added. Returns the outcomes; `initError`
/// receives rank r's init failure text when init fails (the body is then not run, exit code 3).
inline std::vector<launch::RankOutcome> runOnHosts(
    int nranks, std::vector<std::pair<std::string, std::string>> env,
    std::function<int(Communicator&)> body) {
  launch::LaunchOptions opts;
  opts.nranks = nranks;
  opts.timeout = std::chrono::seconds(100);
  // Pretend hosts would make tcp listen on an external interface: keep it on loopback.
  opts.env = {
      {"TUTTI_BOOTSTRAP_TIMEOUT", "30"}, {"TUTTI_TRANSPORTS", ""}, {"TUTTI_SOCKET_IFNAME", "lo"}};
  for (auto& kv : env) opts.env.push_back(kv);
  return launch::runRanks(opts, [&](int rank, int) -> int {
    ::setenv("TUTTI_HOSTID", ("ibtest-host" + std::to_string(rank)).c_str(), 1);
    // The parent may have initialised logging before forking; apply TUTTI_DEBUG=INFO here.
    if (const char* lvl = std::getenv("TUTTI_DEBUG"); lvl && std::string(lvl) == "INFO")
      log::setLevel(LogLevel::kInfo);
    auto comm = Communicator::fromEnvironment();
    if (!comm.isOk()) {
      std::fprintf(stderr, "rank %d: init failed: %s\n", rank, comm.status().toString().c_str());
      return 3;
    }
    return body(comm.value());
  });
}

inline void requireAllPassed(const std::vector<launch::RankOutcome>& outcomes) {
  const bool ok = launch::allPassed(outcomes);
  if (!ok) {
    for (const auto& o : outcomes)
      if (!(o.exited && o.exitCode == 0)) UNSCOPED_INFO(launch::describe(o) << "\n" << o.output);
  }
  REQUIRE(ok);
}

/// Allreduce (sum) of `count` floats and int64s over the communicator, checked exactly.
inline int allReduceCheck(Communicator& c, size_t count) {
  const int r = c.rank(), n = c.size();
  std::vector<float> f(count);
  std::vector<int64_t> in(count), out(count, -7);
  for (size_t i = 0; i < count; ++i) {
    f[i] = static_cast<float>((i * 7 + r) % 13);
    in[i] = static_cast<int64_t>(i) * (r + 1) - 5;
  }
  Status s = c.allReduce(f.data(), f.data(), count, DataType::kFloat32, RedOp::kSum);
  if (s.isOk()) s = c.allReduce(in.data(), out.data(), count, DataType::kInt64, RedOp::kSum);
  if (!s.isOk()) {
    std::fprintf(stderr, "rank %d: allreduce of %zu failed: %s\n", r, count, s.toString().c_str());
    return 1;
  }
  for (size_t i = 0; i < count; ++i) {
    float ef = 0;
    int64_t ei = 0;
    for (int q = 0; q < n; ++q) {
      ef += static_cast<float>((i * 7 + q) % 13);
      ei += static_cast<int64_t>(i) * (q + 1) - 5;
    }
    if (f[i] != ef || out[i] != ei) {
      std::fprintf(stderr, "rank %d: count %zu element %zu: got %g/%lld, expected %g/%lld\n", r,
                   count, i, f[i], static_cast<long long>(out[i]), ef, static_cast<long long>(ei));
      return 1;
    }
  }
  return 0;
}

}  // namespace tutti::test
