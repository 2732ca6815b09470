// File: tests/unit/fusion_test.cc
// Fused allreduce schedules (algorithms/fusion.h), proven with the verifier: groups of calls of
// mixed sizes, each on one of the registered allreduce algorithms (mixed within a group, and all on
// one), over nranks 1..9 and host layouts where the hierarchical ones run, in place and out of
// place, must compute the allreduce of the packed buffer on every rank. And the naive merge
// (rounds concatenated as they come) must fail where a forwarding round meets another call's.
#include "algorithms/fusion.h"

#include <catch2/catch.hpp>

#include <fmt/ranges.h>

#include "algorithms/verifier.h"
#include "tests/unit/host_layouts.h"

namespace tutti::algo {
namespace {

struct Call {
  const AlgorithmInfo* algo;
  size_t count;
};

CollShape shapeOf(int n, size_t count, bool inPlace, const std::vector<int>& hostOf) {
  CollShape s{Coll::kAllReduce, 0, n, count, DataType::kFloat32, RedOp::kSum, 0, inPlace};
  s.hostOf = hostOf;
  return s;
}

// Every rank's fused schedule for `calls` (packed in order), or the first build error. With
// `naive`, every part claims no forwarding round: rounds are merged as they come.
Result<std::vector<Schedule>> fuseAll(const std::vector<Call>& calls, int n, bool inPlace,
                                      const std::vector<int>& hostOf, bool naive = false) {
  std::vector<std::vector<uint8_t>> fwd;
  for (const Call& c : calls) {
    TUTTI_TRY_ASSIGN(std::vector<uint8_t> f,
                     forwardRounds(*c.algo, shapeOf(n, c.count, inPlace, hostOf)));
    if (naive) f.assign(f.size(), 0);
    fwd.push_back(std::move(f));
  }
  std::vector<Schedule> out;
  for (int r = 0; r < n; ++r) {
    std::vector<Schedule> alone;
    for (const Call& c : calls) {
      CollShape s = shapeOf(n, c.count, inPlace, hostOf);
      s.rank = r;
      TUTTI_TRY_ASSIGN(Schedule sched, c.algo->build(s));
      alone.push_back(std::move(sched));
    }
    std::vector<FusePart> parts;
    size_t off = 0;
    for (size_t i = 0; i < calls.size(); ++i) {
      parts.push_back({.schedule = &alone[i], .offset = off, .inPlace = inPlace,
                       .forwardRounds = fwd[i]});
      off += calls[i].count;
    }
    out.push_back(fuseSchedules(parts));
  }
  return out;
}

size_t totalOf(const std::vector<Call>& calls) {
  size_t t = 0;
  for (const Call& c : calls) t += c.count;
  return t;
}

std::vector<const AlgorithmInfo*> allreduces(int n, const std::vector<int>& hostOf) {
  std::vector<const AlgorithmInfo*> out;
  for (const AlgorithmInfo& a : registry())
    if (a.coll == Coll::kAllReduce && !a.loaded &&
        (!a.supports || a.supports(shapeOf(n, 1 << 12, false, hostOf))))
      out.push_back(&a);
  return out;
}

}  // namespace

TEST_CASE("fused schedules of mixed algorithms compute every call's allreduce", "[fusion]") {
  const size_t sizes[] = {1, 7, 256, 1000, 4096, 3, 33, 1 << 14};
  size_t verified = 0;
  for (int n = 1; n <= 9; ++n) {
    for (const std::vector<int>& hostOf : hostLayouts(n)) {
      const std::vector<const AlgorithmInfo*> algos = allreduces(n, hostOf);
      REQUIRE(!algos.empty());
      // Groups: every algorithm alone on all sizes, then algorithms dealt over the sizes from
      // each starting point (neighbours differ).
      std::vector<std::vector<Call>> groups;
      for (const AlgorithmInfo* a : algos) {
        std::vector<Call> g;
        for (size_t c : sizes) g.push_back({a, c});
        groups.push_back(std::move(g));
      }
      for (size_t first = 0; first < algos.size(); ++first) {
        std::vector<Call> g;
        for (size_t i = 0; i < std::size(sizes); ++i)
          g.push_back({algos[(first + i) % algos.size()], sizes[i]});
        groups.push_back(std::move(g));
      }
      for (const std::vector<Call>& g : groups) {
        for (bool inPlace : {false, true}) {
          std::vector<std::string> names;
          for (const Call& c : g) names.push_back(fmt::format("{}:{}", c.algo->name, c.count));
          INFO(fmt::format("nranks={} hostOf=[{}] {} [{}]", n, fmt::join(hostOf, ","),
                           inPlace ? "in-place" : "out-of-place", fmt::join(names, " ")));
          bool declined = false;
          for (const Call& c : g)
            declined |= c.algo->supports && !c.algo->supports(shapeOf(n, c.count, inPlace, hostOf));
          if (declined) continue;
          auto fused = fuseAll(g, n, inPlace, hostOf);
          REQUIRE(fused.isOk());
          Status st = verify(shapeOf(n, totalOf(g), inPlace, {}), *fused);
          INFO(st.message());
          REQUIRE(st.isOk());
          ++verified;
        }
      }
    }
  }
  CHECK(verified > 200);
}

TEST_CASE("a merge that ignores forwarding rounds breaks the matching order", "[fusion]") {
  // Two 2-rank rings (send, recvReduceSend, recv in one round): concatenated, the second call's
  // plain send goes out before the first call's forwarded one, and the receiver takes one for
  // the other. This is the schedule fusion ran before it knew the forwarding rounds.
  const AlgorithmInfo* ring = find(Coll::kAllReduce, "ring");
  const AlgorithmInfo* oneShot = find(Coll::kAllReduce, "one_shot");
  REQUIRE(ring != nullptr);
  REQUIRE(oneShot != nullptr);
  for (const std::vector<Call>& g : {std::vector<Call>{{ring, 4096}, {ring, 1000}},
                                     std::vector<Call>{{ring, 4096}, {oneShot, 3}}}) {
    auto naive = fuseAll(g, 2, false, {}, /*naive=*/true);
    REQUIRE(naive.isOk());
    REQUIRE((*naive)[0].rounds.size() == 1);
    CHECK(!verify(shapeOf(2, totalOf(g), false, {}), *naive).isOk());
    auto fused = fuseAll(g, 2, false, {});
    REQUIRE(fused.isOk());
    CHECK(verify(shapeOf(2, totalOf(g), false, {}), *fused).isOk());
  }
  // Two rings cannot share their forwarding round: the second starts a round later.
  auto two = fuseAll({{ring, 4096}, {ring, 1000}}, 2, false, {});
  REQUIRE(two.isOk());
  CHECK((*two)[0].rounds.size() == 2);
  // A ring and a one-shot share it, the one-shot's steps first.
  auto mixed = fuseAll({{ring, 4096}, {oneShot, 3}}, 2, false, {});
  REQUIRE(mixed.isOk());
  REQUIRE((*mixed)[0].rounds.size() == 1);
  CHECK((*mixed)[0].rounds[0].front().count == 3);
}

}  // namespace tutti::algo
