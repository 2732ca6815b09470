// File: tests/unit/plan_cache_test.cc
// PlanCache::clear(coll): an override of one collective forgets that collective's plans (and the
// fused allreduce batches when it is the allreduce) and keeps every other collective's.
#include <catch2/catch.hpp>
#include <memory>

#include "core/plan_cache.h"

namespace tutti::detail {
namespace {

PlanCache::Key keyFor(Coll coll, size_t count) {
  CallArgs a;
  a.coll = coll;
  a.count = count;
  return PlanCache::keyOf(a, false);
}

Plan* put(PlanCache& cache, Coll coll, size_t count) {
  auto p = std::make_unique<Plan>();
  p->coll = coll;
  auto raw = cache.insert(keyFor(coll, count), std::move(p), "test");
  REQUIRE(raw.isOk());
  return raw.value();
}

}  // namespace

TEST_CASE("clear(coll) forgets one collective's plans and keeps the others'", "[plan_cache]") {
  PlanCache cache;
  Plan* ar1 = put(cache, Coll::kAllReduce, 1);
  Plan* ar2 = put(cache, Coll::kAllReduce, 2);
  Plan* bar = put(cache, Coll::kBarrier, 0);
  put(cache, Coll::kBroadcast, 4);
  const PlanCache::FusedKey fk{0, 0, {{1, false}, {2, true}}};
  cache.insertFused(fk, nullptr);
  CHECK(cache.find(keyFor(Coll::kAllReduce, 2)) == ar2);  // the last plan found is remembered

  cache.clear(Coll::kBroadcast);
  CHECK(cache.find(keyFor(Coll::kBroadcast, 4)) == nullptr);
  CHECK(cache.find(keyFor(Coll::kAllReduce, 1)) == ar1);
  CHECK(cache.find(keyFor(Coll::kBarrier, 0)) == bar);
  std::shared_ptr<Plan> fused;
  CHECK(cache.findFused(fk, &fused));  // fused batches are allreduces only

  cache.clear(Coll::kAllReduce);
  CHECK(cache.find(keyFor(Coll::kAllReduce, 1)) == nullptr);
  CHECK(cache.find(keyFor(Coll::kAllReduce, 2)) == nullptr);  // not the remembered last plan
  CHECK_FALSE(cache.findFused(fk, &fused));
  CHECK(cache.find(keyFor(Coll::kBarrier, 0)) == bar);

  cache.clear();
  CHECK(cache.find(keyFor(Coll::kBarrier, 0)) == nullptr);
}

}  // namespace tutti::detail
