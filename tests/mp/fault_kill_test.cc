// File: tests/mp/fault_kill_test.cc
// Fault injection: a rank killed with SIGKILL at a random point of a collective loop (mid-call or
// between calls), over shm and over tcp. Every survivor must fail with RemoteError naming the
// dead rank within the timeout; no survivor may hang and no call may return wrong data.
// TUTTI_FAULT_RUNS (default 25 per transport) sets the number of runs; each run's seed is printed.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "tests/mp/mp_common.h"

namespace tutti::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRanks = 4;
constexpr int kTimeoutSec = 5;   // TUTTI_TIMEOUT: survivors must fail well within it
// Survivors call until they see the failure, for at most this long: the victim dies at most
// 3 ms after its iteration 15. A bound in iterations would not do: 400 small calls can end
// within those 3 ms on an idle machine.
constexpr auto kMaxCalling = std::chrono::seconds(20);

int faultRuns() {
  const char* v = std::getenv("TUTTI_FAULT_RUNS");
  return v ? std::max(1, std::atoi(v)) : 25;
}

// The call of iteration i, the same on every rank: a mix of collectives and sizes.
int runCall(Communicator& c, int rank, int i, std::vector<float>& in, std::vector<float>& out,
            Status* st) {
  const size_t count = 1 + (static_cast<size_t>(i) * 7919) % 3000;
  switch (i % 3) {
    case 0: {
      std::fill(in.begin(), in.begin() + count, static_cast<float>(rank + 1));
      *st = c.allReduce(in.data(), out.data(), count, DataType::kFloat32, RedOp::kSum);
      if (!st->isOk()) return 0;
      for (size_t k = 0; k < count; ++k)
        if (out[k] != kRanks * (kRanks + 1) / 2) return 1;  // wrong data
      return 0;
    }
    case 1: {
      const int root = i % kRanks;
      std::fill(out.begin(), out.begin() + count, rank == root ? 42.f + i : -1.f);
      *st = c.broadcast(out.data(), out.data(), count, DataType::kFloat32, root);
      if (!st->isOk()) return 0;
      for (size_t k = 0; k < count; ++k)
        if (out[k] != 42.f + i) return 1;
      return 0;
    }
    default: {
      std::fill(in.begin(), in.begin() + count, static_cast<float>(rank));
      *st = c.allGather(in.data(), out.data(), count, DataType::kFloat32);
      if (!st->isOk()) return 0;
      for (int r = 0; r < kRanks; ++r)
        for (size_t k = 0; k < count; ++k)
          if (out[r * count + k] != r) return 1;
      return 0;
    }
  }
}

}  // namespace

TEST_CASE("a rank killed at a random point: every survivor fails naming it, none hangs", "[mp]") {
  const std::string transport = GENERATE("shm", "tcp");
  const int runs = faultRuns();
  for (int run = 0; run < runs; ++run) {
    const uint32_t seed = 1000u * (transport == "tcp") + static_cast<uint32_t>(run);
    std::mt19937 rng(seed);
    const int victim = static_cast<int>(rng() % kRanks);
    const int killAt = static_cast<int>(rng() % 16);
    const int delayUs = static_cast<int>(rng() % 3000);
    INFO("transport=" << transport << " run=" << run << " seed=" << seed << " victim=" << victim
                      << " iteration=" << killAt << " delay=" << delayUs << "us");
    launch::LaunchOptions opts;
    opts.nranks = kRanks;
    opts.timeout = std::chrono::seconds(60);
    opts.failFastGrace = std::chrono::seconds(30);  // survivors must report, not be killed
    opts.env = {{"TUTTI_TRANSPORTS", transport},
                {"TUTTI_TIMEOUT", std::to_string(kTimeoutSec)},
                {"TUTTI_BOOTSTRAP_TIMEOUT", "30"}};
    auto outcomes = launch::runRanks(opts, [&](int rank, int) -> int {
      auto c = Communicator::fromEnvironment();
      TUTTI_CHILD_CHECK(c.isOk());
      std::vector<float> in(3000 * kRanks), out(3000 * kRanks);
      std::thread killer;
      const auto deadline = Clock::now() + kMaxCalling;
      for (int i = 0; Clock::now() < deadline; ++i) {
        if (rank == victim && i == killAt)  // dies mid-call or between calls
          killer = std::thread([delayUs] {
            std::this_thread::sleep_for(std::chrono::microseconds(delayUs));
            raise(SIGKILL);
          });
        Status st;
        const auto t0 = Clock::now();
        if (runCall(c.value(), rank, i, in, out, &st) != 0) {
          std::fprintf(stderr, "rank %d: WRONG DATA at iteration %d\n", rank, i);
          return 1;
        }
        if (st.isOk()) continue;
        const auto took = Clock::now() - t0;
        std::fprintf(stderr, "rank %d: iteration %d: %s\n", rank, i, st.toString().c_str());
        TUTTI_CHILD_CHECK(rank != victim);
        TUTTI_CHILD_CHECK(st.code() == Code::kRemoteError);
        TUTTI_CHILD_CHECK(st.message().find("rank " + std::to_string(victim) + " (") !=
                          std::string::npos);
        TUTTI_CHILD_CHECK(took < std::chrono::seconds(kTimeoutSec));
        // The next call fails at once with the same error.
        Status again = c->barrier();
        TUTTI_CHILD_CHECK(again.code() == Code::kRemoteError);
        return 0;
      }
      if (killer.joinable()) killer.join();
      std::fprintf(stderr, "rank %d: finished every iteration although rank %d died\n", rank,
                   victim);
      return 1;
    });
    bool ok = true;
    for (const auto& o : outcomes) {
      if (o.rank == victim) ok = ok && o.signal == SIGKILL && !o.killed && !o.timedOut;
      else ok = ok && o.exited && o.exitCode == 0;
    }
    if (!ok)
      for (const auto& o : outcomes) UNSCOPED_INFO(launch::describe(o) << "\n" << o.output);
    REQUIRE(ok);
  }
}

TEST_CASE("recvAny: a dead sender fails the wait naming it, a silent one times out", "[mp]") {
  const std::string transport = GENERATE("shm", "tcp");
  for (const bool kill : {true, false}) {
    INFO("transport=" << transport << (kill ? " (sender killed)" : " (sender silent)"));
    launch::LaunchOptions opts;
    opts.nranks = 2;
    opts.timeout = std::chrono::seconds(60);
    opts.failFastGrace = std::chrono::seconds(30);
    opts.env = {{"TUTTI_TRANSPORTS", transport},
                {"TUTTI_TIMEOUT", "2"},
                {"TUTTI_BOOTSTRAP_TIMEOUT", "30"}};
    auto outcomes = launch::runRanks(opts, [&](int rank, int) -> int {
      auto c = Communicator::fromEnvironment();
      TUTTI_CHILD_CHECK(c.isOk());
      TUTTI_CHILD_CHECK(c->barrier().isOk());
      if (rank == 1) {
        if (kill) raise(SIGKILL);
        std::this_thread::sleep_for(std::chrono::seconds(4));  // sends nothing
        return 0;
      }
      float x = -1.f;
      const auto t0 = Clock::now();
      Status st = c->recvAny(&x, 1, DataType::kFloat32, std::vector<int>{1}).status();
      std::fprintf(stderr, "rank 0: %s\n", st.toString().c_str());
      TUTTI_CHILD_CHECK(st.code() == (kill ? Code::kRemoteError : Code::kTimeout));
      TUTTI_CHILD_CHECK(st.message().find("recvAny") != std::string::npos);
      TUTTI_CHILD_CHECK(st.message().find(kill ? "rank 1 (" : "ranks 1") != std::string::npos);
      TUTTI_CHILD_CHECK(Clock::now() - t0 < std::chrono::seconds(kill ? 2 : 4));
      TUTTI_CHILD_CHECK(x == -1.f);
      return 0;
    });
    bool ok = true;
    for (const auto& o : outcomes) {
      if (o.rank == 1 && kill) ok = ok && o.signal == SIGKILL;
      else ok = ok && o.exited && o.exitCode == 0;
    }
    if (!ok)
      for (const auto& o : outcomes) UNSCOPED_INFO(launch::describe(o) << "\n" << o.output);
    REQUIRE(ok);
  }
}

}  // namespace tutti::test
