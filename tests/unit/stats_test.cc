// File: tests/unit/stats_test.cc
// StatsTable: rows per (collective, algorithm), sampled timing of short calls (each untimed call
// is charged the last timed duration), and reset() starting the counts over.
#include <catch2/catch.hpp>

#include "core/stats.h"

namespace tutti {
namespace {

// Runs `calls` calls on `slot` that each "take" `ticks`; returns how many read the clock.
int runCalls(StatsTable& t, StatsTable::Slot& slot, Coll coll, const char* algo, int calls,
             uint64_t ticks) {
  int timed = 0;
  for (int i = 0; i < calls; ++i) {
    const bool on = t.timeThis(slot);
    timed += on;
    t.record(slot, coll, algo, 8, 16, on, on ? ticks : 0);
  }
  return timed;
}

}  // namespace

TEST_CASE("stats time short calls one in kSampleEvery and charge the others the sample",
          "[stats]") {
  StatsTable t;
  StatsTable::Slot slot;
  const int n = 5 * StatsTable::kSampleEvery + 1;
  // 100 ticks is short (under 1 us in either clock): the first call and then one call in
  // kSampleEvery read the clock.
  REQUIRE(runCalls(t, slot, Coll::kAllReduce, "ring", n, 100) == 6);
  // A long shape (1e6 ticks: at least 250 us) is timed on every call.
  StatsTable::Slot longSlot;
  REQUIRE(runCalls(t, longSlot, Coll::kAllReduce, "one_shot", 3, 1000000) == 3);
  const auto rows = t.snapshot();
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].calls == static_cast<uint64_t>(n));
  CHECK(rows[0].bytes == 8u * n);
  CHECK(rows[0].wireBytes == 16u * n);
  CHECK(rows[1].calls == 3);
  // Every call was charged its duration: n x 100 ticks against 3 x 1e6 (one snapshot, one rate).
  REQUIRE(rows[0].seconds > 0);
  CHECK(rows[1].seconds / rows[0].seconds == Approx(3e6 / (n * 100.0)).epsilon(1e-9));
}

TEST_CASE("stats rows are per collective and algorithm and reset starts them over", "[stats]") {
  StatsTable t;
  StatsTable::Slot a, b, c;
  runCalls(t, a, Coll::kAllReduce, "ring", 4, 5000);
  runCalls(t, b, Coll::kAllReduce, "recursive_doubling", 2, 5000);
  runCalls(t, c, Coll::kBroadcast, "ring", 1, 5000);
  auto rows = t.snapshot();
  REQUIRE(rows.size() == 3);  // first-use order
  CHECK((rows[0].coll == Coll::kAllReduce && rows[0].algorithm == "ring" && rows[0].calls == 4));
  CHECK((rows[1].algorithm == "recursive_doubling" && rows[1].calls == 2));
  CHECK((rows[2].coll == Coll::kBroadcast && rows[2].calls == 1));

  t.reset();
  CHECK(t.snapshot().empty());
  runCalls(t, b, Coll::kAllReduce, "recursive_doubling", 3, 5000);
  rows = t.snapshot();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].algorithm == "recursive_doubling");
  CHECK(rows[0].calls == 3);
  CHECK(rows[0].bytes == 24);
  CHECK(rows[0].seconds > 0);
}

}  // namespace tutti
