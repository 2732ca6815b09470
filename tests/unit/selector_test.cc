// File: tests/unit/selector_test.cc
// The selector on the shipped example topologies (the expected regimes: a log-depth algorithm
// at latency-bound sizes, a bandwidth-optimal one at large sizes, hierarchical ones on the
// clusters), judged by properties of the winner's schedules (rounds, bytes sent per rank) rather
// than by names; override parsing (NCCL_ALGO syntax and NCCL names) and how overrides, forced
// algorithms and declines decide; the TUNING log line.
#include <catch2/catch.hpp>

#include <cmath>

#include "algorithms/link_model.h"
#include "algorithms/selector.h"
#include "topology/topology.h"

namespace tutti::algo {
namespace {

topo::Topology loadExample(const std::string& name) {
  auto t = topo::loadFile(std::string(TUTTI_SOURCE_DIR) + "/topology/examples/" + name + ".json");
  REQUIRE(t.isOk());
  return t.value();
}

CollShape allreduceShape(const topo::Topology& t, size_t bytes) {
  CollShape s{Coll::kAllReduce, 0, static_cast<int>(t.ranks.size()), bytes / 4,
              DataType::kFloat32, RedOp::kSum, 0, false};
  s.hostOf = hierarchyGroups(t);
  return s;
}

struct Footprint {
  size_t rounds = 0;         // most rounds of any rank
  size_t maxBytesSent = 0;   // most bytes any rank sends (forwarded data included)
};

Footprint footprint(const AlgorithmInfo& a, const CollShape& shape) {
  Footprint f;
  for (int r = 0; r < shape.nranks; ++r) {
    CollShape s = shape;
    s.rank = r;
    auto sched = a.build(s);
    REQUIRE(sched.isOk());
    f.rounds = std::max(f.rounds, sched.value().rounds.size());
    size_t sent = 0;
    for (const auto& round : sched.value().rounds)
      for (const Step& st : round)
        if (st.op == Op::kSend || st.op == Op::kRecvCopySend || st.op == Op::kRecvReduceSend)
          sent += st.count * dataTypeBytes(s.dtype);
    f.maxBytesSent = std::max(f.maxBytesSent, sent);
  }
  return f;
}

}  // namespace

TEST_CASE("on every example the selector picks by regime", "[selector]") {
  const std::string name =
      GENERATE("cpu-2socket", "dgx-h100-8gpu", "tcp-4host", "ib-2host-8gpu");
  INFO(name);
  const topo::Topology t = loadExample(name);
  const LinkModel model = linkModelFor(t);
  const int n = static_cast<int>(t.ranks.size());
  const int logN = static_cast<int>(std::ceil(std::log2(n)));
  const bool cluster = t.hosts.size() > 1;

  // Latency-bound: a log-depth schedule, far fewer rounds than the ring's 2(n-1).
  {
    CollShape s = allreduceShape(t, 8);
    auto d = select(s, model, {});
    REQUIRE(d.isOk());
    INFO(describe(s, d.value()));
    CHECK(d.value().reason == "model");
    const Footprint f = footprint(*d.value().algo, s);
    CHECK(f.rounds <= static_cast<size_t>(2 * logN + 2));
    CHECK(f.rounds < static_cast<size_t>(2 * (n - 1)));
  }
  // Bandwidth-bound: no rank sends more than 2 S, the most of the bandwidth-optimal algorithms
  // (ring and Rabenseifner send 2(n-1)/n S; the double binary tree 2 S: S/2 up and S down in the
  // tree where a rank is interior, S/2 up in the other); log-depth ones send log2(n) S
  // (recursive doubling) or (n-1) S (one-shot).
  {
    const size_t bytes = size_t{256} << 20;
    CollShape s = allreduceShape(t, bytes);
    auto d = select(s, model, {});
    REQUIRE(d.isOk());
    INFO(describe(s, d.value()));
    const Footprint f = footprint(*d.value().algo, s);
    CHECK(f.maxBytesSent <= 2 * bytes);
    for (const Candidate& c : d.value().candidates) CHECK(c.predictedUs >= d.value().predictedUs);
  }
  // Hierarchical algorithms are candidates exactly when the ranks form several groups (hosts,
  // else NUMA nodes), and win somewhere on the clusters.
  bool hierarchicalCandidate = false, hierarchicalWins = false;
  for (size_t bytes = 8; bytes <= (size_t{256} << 20); bytes *= 4) {
    CollShape s = allreduceShape(t, bytes);
    auto d = select(s, model, {});
    REQUIRE(d.isOk());
    for (const Candidate& c : d.value().candidates)
      hierarchicalCandidate |= c.algo->name.starts_with("hierarchical");
    hierarchicalWins |= d.value().algo->name.starts_with("hierarchical");
  }
  // (The single-host examples place their ranks on two NUMA nodes: those are the groups.)
  CHECK(hierarchicalCandidate == !hierarchyGroups(t).empty());
  if (cluster) CHECK(hierarchicalWins);
}

TEST_CASE("the selector is the same on every rank and the argmin of its candidates",
          "[selector]") {
  const topo::Topology t = loadExample("tcp-4host");
  const LinkModel model = linkModelFor(t);
  for (size_t bytes : {size_t{64}, size_t{1} << 20}) {
    CollShape s = allreduceShape(t, bytes);
    auto d0 = select(s, model, {});
    s.rank = 5;
    auto d5 = select(s, model, {});
    REQUIRE(d0.isOk());
    REQUIRE(d5.isOk());
    CHECK(d0.value().algo == d5.value().algo);
    CHECK(d0.value().predictedUs == d5.value().predictedUs);
    for (const Candidate& c : d0.value().candidates) {
      REQUIRE(c.predictedUs >= 0);
      CHECK(c.predictedUs >= d0.value().predictedUs);
      // Every candidate's prediction is the simulator's.
      auto p = predict(*c.algo, s, model);
      REQUIRE(p.isOk());
      CHECK(p.value() == c.predictedUs);
    }
  }
}

TEST_CASE("override strings follow NCCL_ALGO's syntax and names", "[selector]") {
  auto o = parseAlgoOverrides("allreduce:ring;allgather:^bruck", "TUTTI_ALGO", true);
  REQUIRE(o.isOk());
  REQUIRE(o.value().size() == 2);
  const AlgoRule& ar = o.value().at(Coll::kAllReduce);
  CHECK(ar.names == std::vector<std::string>{"ring"});
  CHECK(!ar.exclude);
  CHECK(ar.allows("ring"));
  CHECK(!ar.allows("one_shot"));
  CHECK(ar.source == "TUTTI_ALGO=allreduce:ring");
  const AlgoRule& ag = o.value().at(Coll::kAllGather);
  CHECK(ag.exclude);
  CHECK(!ag.allows("bruck"));
  CHECK(ag.allows("ring"));

  // NCCL names, case-insensitive, mapped per collective; a bare list applies where it maps.
  auto nccl = parseAlgoOverrides("Tree,Ring", "NCCL_ALGO", false);
  REQUIRE(nccl.isOk());
  CHECK(nccl.value().at(Coll::kAllReduce).names ==
        std::vector<std::string>{"double_binary_tree", "ring"});
  CHECK(nccl.value().at(Coll::kBroadcast).names == std::vector<std::string>{"chain"});
  CHECK(nccl.value().at(Coll::kAllGather).names == std::vector<std::string>{"ring"});
  CHECK(nccl.value().count(Coll::kAllToAll) == 0);  // nothing maps: left free
  auto pat = parseAlgoOverrides("allgather:PAT;reducescatter:pat", "NCCL_ALGO", false);
  REQUIRE(pat.isOk());
  CHECK(pat.value().at(Coll::kAllGather).names ==
        std::vector<std::string>{"bruck", "recursive_doubling"});
  CHECK(pat.value().at(Coll::kReduceScatter).names ==
        std::vector<std::string>{"recursive_halving"});
  auto excl = parseAlgoOverrides("^tree", "NCCL_ALGO", false);
  REQUIRE(excl.isOk());
  CHECK(excl.value().at(Coll::kAllReduce).exclude);
  CHECK(!excl.value().at(Coll::kAllReduce).allows("double_binary_tree"));

  // CollNet and NVLS have no counterpart: reported, not fatal.
  std::vector<std::string> ignored;
  auto cn = parseAlgoOverrides("allreduce:CollNetDirect,NVLS", "NCCL_ALGO", false, &ignored);
  REQUIRE(cn.isOk());
  CHECK(ignored.size() == 2);

  // Errors name the variable and the bad part.
  auto badColl = parseAlgoOverrides("allreduc:ring", "TUTTI_ALGO", true);
  REQUIRE(!badColl.isOk());
  CHECK(badColl.status().message().find("TUTTI_ALGO: unknown collective 'allreduc'") !=
        std::string::npos);
  auto badName = parseAlgoOverrides("allreduce:rnig", "TUTTI_ALGO", true);
  REQUIRE(!badName.isOk());
  CHECK(badName.status().message().find("no algorithm 'rnig' for allreduce") != std::string::npos);
  CHECK(parseAlgoOverrides("", "TUTTI_ALGO", true).value().empty());
}

TEST_CASE("overrides, forced algorithms and declines decide as documented", "[selector]") {
  const topo::Topology t = loadExample("tcp-4host");
  const LinkModel model = linkModelFor(t);
  CollShape s = allreduceShape(t, 4096);

  auto free = select(s, model, {});
  REQUIRE(free.isOk());
  const std::string modelWinner(free.value().algo->name);

  auto onlyRing = parseAlgoOverrides("allreduce:ring", "TUTTI_ALGO", true).value();
  auto r = select(s, model, onlyRing);
  REQUIRE(r.isOk());
  CHECK(r.value().algo->name == "ring");
  CHECK(r.value().reason == "model among those allowed by TUTTI_ALGO=allreduce:ring");
  CHECK(r.value().predictedUs > free.value().predictedUs);

  auto notWinner = parseAlgoOverrides("allreduce:^" + modelWinner, "NCCL_ALGO", false).value();
  auto x = select(s, model, notWinner);
  REQUIRE(x.isOk());
  CHECK(x.value().algo->name != modelWinner);
  bool excludedShown = false;
  for (const Candidate& c : x.value().candidates)
    excludedShown |= c.algo->name == modelWinner && !c.allowed && c.predictedUs >= 0;
  CHECK(excludedShown);
  CHECK(describe(s, x.value()).find("(excluded)") != std::string::npos);

  // Forced: wins even when the model disagrees; only it is simulated unless asked.
  SelectOptions forced{.forced = "ring", .forcedSource = "setAlgorithm"};
  auto f = select(s, model, {}, forced);
  REQUIRE(f.isOk());
  CHECK(f.value().algo->name == "ring");
  CHECK(f.value().reason == "forced by setAlgorithm");
  CHECK(f.value().predictedUs > 0);
  for (const Candidate& c : f.value().candidates)
    if (c.algo->name != "ring") CHECK(c.predictedUs < 0);

  // A forced or allowed algorithm that declines the call: the model decides, and says why.
  CollShape flat = s;
  flat.hostOf.clear();
  SelectOptions forcedHier{.forced = "hierarchical", .forcedSource = "setAlgorithm"};
  auto fd = select(flat, model, {}, forcedHier);
  REQUIRE(fd.isOk());
  CHECK(fd.value().algo->name != "hierarchical");
  CHECK(fd.value().reason.find("forced 'hierarchical' (setAlgorithm) declines") !=
        std::string::npos);
  auto onlyHier = parseAlgoOverrides("allreduce:hierarchical", "TUTTI_ALGO", true).value();
  auto od = select(flat, model, onlyHier);
  REQUIRE(od.isOk());
  CHECK(od.value().reason.find("allows no algorithm that supports this call") !=
        std::string::npos);
}

TEST_CASE("oversubscribed shm: the cache term (0.2 beyond L2 / (2 load)) and the cost of a round",
          "[selector]") {
  // The development VM: 2 PUs, 1 MiB of L2 per core, all ranks on one host.
  auto host = [](int nranks) {
    topo::Topology t;
    topo::Host h;
    h.cores = h.pus = 2;
    h.caches.push_back({.level = 2, .type = "unified", .sizeBytes = 1 << 20, .count = 2});
    t.hosts.push_back(h);
    t.ranks.assign(nranks, topo::RankPlace{});
    return t;
  };
  const LinkModel two = linkModelFor(host(2));
  CHECK(two.links[static_cast<int>(LinkClass::kShm)].streamFactor == Approx(0.6));
  CHECK(two.cacheBytes == size_t{2} << 20);
  // The CPU that copies a rank's shm messages also reduces (memoryBound: neither overlaps the
  // other), so ring's slices buy 2 ranks nothing and the selector takes Rabenseifner at 1-4 MiB:
  // level with ring on the idle VM, 2-2.7x faster beside a busy process (docs/PERFORMANCE.md).
  CHECK(two.links[static_cast<int>(LinkClass::kShm)].memoryBound);
  const topo::Topology pair = host(2);
  for (size_t bytes : {size_t{1} << 20, size_t{4} << 20}) {
    CollShape s = allreduceShape(pair, bytes);
    auto d = select(s, two, {});
    REQUIRE(d.isOk());
    INFO(describe(s, d.value()));
    CHECK(std::string(d.value().algo->name) == "rabenseifner");
  }
  const topo::Topology four = host(4);
  const LinkModel m = linkModelFor(four);
  CHECK(m.cpuLoad == 2.0);
  CHECK(m.links[static_cast<int>(LinkClass::kShm)].streamFactor == Approx(0.2));
  CHECK(m.cacheBytes == size_t{256} << 10);  // L2 / (2 x load)
  // 2 MiB: ring's and Rabenseifner's blocks (at most 1 MiB per step) pay the cache term on their
  // bytes beyond 256 KiB, and a block algorithm (at most 2(n-1) rounds) still wins. 32 MiB: the
  // pipelined tree's pieces fit, the blocks do not, and the tree wins.
  // (the TUNING line, for the report; the winner's rounds; its name)
  auto winner = [&](size_t bytes) {
    CollShape s = allreduceShape(four, bytes);
    auto d = select(s, m, {});
    REQUIRE(d.isOk());
    return std::tuple{describe(s, d.value()), footprint(*d.value().algo, s).rounds,
                      std::string(d.value().algo->name)};
  };
  const auto [why2M, rounds2M, name2M] = winner(size_t{2} << 20);
  INFO(why2M);
  CHECK(rounds2M <= 6u);
  const auto [why32M, rounds32M, name32M] = winner(size_t{32} << 20);
  INFO(why32M);
  CHECK(rounds32M > 6u);
  // 8 B: a round costs a wake-up of a peer that shares a core (alpha 0.3 + 0.6 load, o 0.5 load):
  // one round of three messages (one_shot) beats recursive doubling's two rounds of one.
  const auto [why8, rounds8, name8] = winner(8);
  INFO(why8);
  CHECK(name8 == "one_shot");
  CHECK(m.links[static_cast<int>(LinkClass::kShm)].latencyUs == Approx(1.5));
  CHECK(m.links[static_cast<int>(LinkClass::kShm)].overheadUs == Approx(1.0));
}

TEST_CASE("the TUNING line lists every candidate, the winner and why", "[selector]") {
  const topo::Topology t = loadExample("ib-2host-8gpu");
  CollShape s = allreduceShape(t, 1 << 20);
  auto d = select(s, linkModelFor(t), {});
  REQUIRE(d.isOk());
  const std::string line = describe(s, d.value());
  INFO(line);
  CHECK(line.starts_with("allreduce bytes=1048576 count=262144 nranks=16 hierarchy=yes:"));
  for (const Candidate& c : d.value().candidates)
    CHECK(line.find(" " + std::string(c.algo->name) + "=") != std::string::npos);
  CHECK(line.find("-> " + std::string(d.value().algo->name)) != std::string::npos);
  CHECK(line.ends_with("(model)"));
}

}  // namespace tutti::algo
