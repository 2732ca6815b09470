// File: tests/unit/wait_test.cc
// SpinClock (core/wait.h): the 2 ms cap on one stretch of spinning. Short stretches never read
// the clock; from pass 1024 on it is read every 256 passes; a stretch it did not see start is
// spent at once.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "core/wait.h"

namespace tutti {
namespace {

using Clock = std::chrono::steady_clock;

TEST_CASE("SpinClock ends a stretch of spinning after 2 ms, and only then", "[wait]") {
  SpinClock clock;
  // Below pass 1024, however long the stretch has taken, it is not spent.
  for (int pass = 1; pass < 1024; ++pass) REQUIRE_FALSE(clock.spent(pass));
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  REQUIRE_FALSE(clock.spent(1000));
  const auto start = Clock::now();
  REQUIRE_FALSE(clock.spent(1024));  // the stretch's clock starts here
  // Between the checkpoints (every 256 passes) nothing is read.
  for (int pass = 1025; pass < 1280; ++pass) REQUIRE_FALSE(clock.spent(pass));
  const bool early = clock.spent(1280);
  if (Clock::now() - start < SpinClock::kMaxSpin) REQUIRE_FALSE(early);
  std::this_thread::sleep_for(SpinClock::kMaxSpin + std::chrono::milliseconds(1));
  REQUIRE_FALSE(clock.spent(1281));  // not a checkpoint
  REQUIRE(clock.spent(1536));
}

TEST_CASE("SpinClock counts a stretch it did not see reach pass 1024 as spent", "[wait]") {
  SpinClock clock;
  REQUIRE_FALSE(clock.spent(1500));  // not a checkpoint
  REQUIRE(clock.spent(1536));
  // A later stretch that passes 1024 starts the clock again.
  REQUIRE_FALSE(clock.spent(1024));
  REQUIRE_FALSE(clock.spent(1100));
}

}  // namespace
}  // namespace tutti
