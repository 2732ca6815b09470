// File: tests/mp/failures_test.cc
// Failures are reported, never hung on: a peer that dies, ranks that never join the bootstrap,
// a rank with the wrong secret, and a collective that times out. Each error names the rank.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/mp/mp_common.h"

namespace tutti::test {
namespace {

using Clock = std::chrono::steady_clock;

// Runs body(rank) on n ranks with extra env; REQUIREs all passed.
template <typename Body>
void runRaw(int n, std::vector<std::pair<std::string, std::string>> env, Body body) {
  launch::LaunchOptions opts;
  opts.nranks = n;
  opts.timeout = std::chrono::seconds(60);
  opts.failFastGrace = std::chrono::seconds(30);  // survivors must report, not be killed
  opts.env = std::move(env);
  auto outcomes = launch::runRanks(opts, [&](int rank, int) { return body(rank); });
  bool ok = launch::allPassed(outcomes);
  if (!ok)
    for (const auto& o : outcomes) UNSCOPED_INFO(launch::describe(o) << "\n" << o.output);
  REQUIRE(ok);
}

bool mentions(const Status& s, const std::string& what) {
  return s.message().find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("a peer that dies makes the survivors fail with RemoteError naming it", "[mp]") {
  const std::string transport = GENERATE("shm", "tcp");
  INFO("transport=" << transport);
  runRaw(3, {{"TUTTI_TRANSPORTS", transport}}, [](int rank) -> int {
    auto c = Communicator::fromEnvironment();
    TUTTI_CHILD_CHECK(c.isOk());
    TUTTI_CHILD_CHECK(c->barrier().isOk());
    if (rank == 1) _exit(0);  // dies without a word between collectives
    std::vector<float> in(1 << 20, 1.f), out(1 << 20);
    const auto t0 = Clock::now();
    Status s = c->allReduce(in.data(), out.data(), in.size(), DataType::kFloat32, RedOp::kSum);
    const auto took = Clock::now() - t0;
    std::fprintf(stderr, "rank %d: %s\n", rank, s.toString().c_str());
    TUTTI_CHILD_CHECK(s.code() == Code::kRemoteError);
    TUTTI_CHILD_CHECK(mentions(s, "rank 1"));
    TUTTI_CHILD_CHECK(took < std::chrono::seconds(10));
    // The communicator stays failed: the next call reports the same error at once.
    Status again = c->barrier();
    TUTTI_CHILD_CHECK(again.code() == Code::kRemoteError);
    TUTTI_CHILD_CHECK(mentions(again, "failed earlier"));
    return 0;
  });
}

TEST_CASE("ranks that never join make the bootstrap time out naming them", "[mp]") {
  runRaw(3, {{"TUTTI_BOOTSTRAP_TIMEOUT", "2"}}, [](int rank) -> int {
    if (rank == 2) return 0;  // never calls init
    const auto t0 = Clock::now();
    auto c = Communicator::fromEnvironment();
    const auto took = Clock::now() - t0;
    TUTTI_CHILD_CHECK(!c.isOk());
    std::fprintf(stderr, "rank %d: %s\n", rank, c.status().toString().c_str());
    TUTTI_CHILD_CHECK(c.status().code() == Code::kTimeout);
    TUTTI_CHILD_CHECK(mentions(c.status(), "waiting for ranks 2"));
    TUTTI_CHILD_CHECK(took < std::chrono::seconds(15));
    return 0;
  });
}

TEST_CASE("a rank with the wrong secret is refused", "[mp]") {
  runRaw(2, {{"TUTTI_BOOTSTRAP_TIMEOUT", "2"}, {"TUTTI_COMM_SECRET", "1234abcd"}},
         [](int rank) -> int {
           if (rank == 1) setenv("TUTTI_COMM_SECRET", "feedface", 1);
           auto c = Communicator::fromEnvironment();
           TUTTI_CHILD_CHECK(!c.isOk());
           std::fprintf(stderr, "rank %d: %s\n", rank, c.status().toString().c_str());
           if (rank == 0) {
             TUTTI_CHILD_CHECK(c.status().code() == Code::kTimeout);
             TUTTI_CHILD_CHECK(mentions(c.status(), "waiting for ranks 1"));
           } else {
             TUTTI_CHILD_CHECK(mentions(c.status(), "secret"));
           }
           return 0;
         });
}

TEST_CASE("a collective that waits too long fails with Timeout naming the peers", "[mp]") {
  const std::string transport = GENERATE("shm", "tcp");
  INFO("transport=" << transport);
  // The ring, where rank 0 waits on rank 2 and rank 2 on rank 1 (the selector would pick
  // one_shot for 4 KB, where everyone waits on rank 1 and rank 1's late call can still finish).
  std::vector<std::pair<std::string, std::string>> env = {
      {"TUTTI_TRANSPORTS", transport}, {"TUTTI_TIMEOUT", "1"}, {"TUTTI_ALGO", "allreduce:ring"}};
  runRaw(3, env, [](int rank) -> int {
    auto c = Communicator::fromEnvironment();
    TUTTI_CHILD_CHECK(c.isOk());
    TUTTI_CHILD_CHECK(c->barrier().isOk());
    std::vector<float> in(1000, 1.f), out(1000);
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      Status late = c->allReduce(in.data(), out.data(), in.size(), DataType::kFloat32, RedOp::kSum);
      TUTTI_CHILD_CHECK(!late.isOk());  // the others gave up and left
      return 0;
    }
    const auto t0 = Clock::now();
    Status s = c->allReduce(in.data(), out.data(), in.size(), DataType::kFloat32, RedOp::kSum);
    const auto took = Clock::now() - t0;
    std::fprintf(stderr, "rank %d: %s\n", rank, s.toString().c_str());
    TUTTI_CHILD_CHECK(mentions(s, "allreduce #"));
    if (rank == 2) {  // waits on the sleeping rank 1 directly
      TUTTI_CHILD_CHECK(s.code() == Code::kTimeout);
      TUTTI_CHILD_CHECK(mentions(s, "waiting for rank 1"));
      TUTTI_CHILD_CHECK(took >= std::chrono::milliseconds(900));
    } else {  // waits on rank 2: its own timeout, or rank 2 leaving after its timeout
      TUTTI_CHILD_CHECK(s.code() == Code::kTimeout || s.code() == Code::kRemoteError);
      TUTTI_CHILD_CHECK(mentions(s, "rank 2"));
    }
    TUTTI_CHILD_CHECK(took < std::chrono::seconds(3));
    return 0;
  });
}

}  // namespace tutti::test
