// File: tests/unit/bootstrap_ring_test.cc
// The bootstrap ring (core/bootstrap.h) carries both allGather blocks and failure notices. A rank
// that still waits in a collective polls its ring sockets for notices while its previous rank may
// already have entered the next allGather: that block must be kept for the allGather, not read
// as a malformed notice and dropped (which left the allGather waiting until its timeout).
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>
#include <vector>

#include "core/bootstrap.h"

namespace tutti {
namespace {

using namespace std::chrono_literals;

// Joins `n` ranks on loopback in threads; returns them in rank order.
std::vector<std::unique_ptr<bootstrap::Bootstrap>> ring(int n) {
  bootstrap::IdData id;
  id.secret = bootstrap::randomSecret();
  auto addr = net::parseHostPort("127.0.0.1:0");
  REQUIRE(addr.isOk());
  auto root = bootstrap::startRoot(addr.value(), id.secret, 10s);
  REQUIRE(root.isOk());
  id.root = root.value();
  std::vector<std::unique_ptr<bootstrap::Bootstrap>> out(n);
  std::vector<std::thread> threads;
  std::vector<Status> status(n);
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto b = bootstrap::Bootstrap::join(id, r, n, 10s);
      status[r] = b.status();
      if (b.isOk()) out[r] = std::move(b).value();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) REQUIRE(status[r].isOk());
  return out;
}

TEST_CASE("an allGather block that arrives while the next rank polls for notices is kept",
          "[bootstrap]") {
  const int n = GENERATE(2, 3, 4);
  CAPTURE(n);
  auto ranks = ring(n);
  // Rank 1 polls for notices (as a rank waiting in a collective does) while every other rank has
  // already entered two allGathers in a row; then rank 1 joins them.
  std::vector<std::vector<std::string>> first(n), second(n);
  std::vector<Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      bootstrap::Bootstrap& b = *ranks[r];
      if (r == 1) {
        const auto until = std::chrono::steady_clock::now() + 300ms;
        while (std::chrono::steady_clock::now() < until) {
          auto notice = b.pollNotice(20ms);
          if (notice) {
            status[r] = internalError("a notice that nobody sent: {}", notice->text);
            return;
          }
        }
      }
      auto a = b.allGather("first from " + std::to_string(r));
      if (!a.isOk()) {
        status[r] = a.status();
        return;
      }
      first[r] = std::move(a).value();
      auto c = b.allGather(std::string(r + 1, 'x'));  // 1 byte from rank 0, as a barrier's
      if (!c.isOk()) {
        status[r] = c.status();
        return;
      }
      second[r] = std::move(c).value();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    REQUIRE(status[r].isOk());
    REQUIRE(first[r].size() == static_cast<size_t>(n));
    REQUIRE(second[r].size() == static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) {
      CHECK(first[r][q] == "first from " + std::to_string(q));
      CHECK(second[r][q] == std::string(q + 1, 'x'));
    }
  }
  // A real notice still gets through after kept blocks: rank 0 tells its neighbours.
  ranks[0]->sendNotice(bootstrap::wire::Notice{Code::kInternalError, 0, "rank 0 failed"});
  auto notice = ranks[1]->pollNotice(2s);
  REQUIRE(notice.has_value());
  CHECK(notice->origin == 0);
  CHECK(notice->text == "rank 0 failed");
}

}  // namespace
}  // namespace tutti
