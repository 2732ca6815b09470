// File: tests/unit/simulator_test.cc
// The alpha-beta-gamma simulator against the closed forms of Thakur, Rabenseifner and Gropp
// (IJHPCA 2005) for every algorithm that has one, on a power-of-two and a non-power-of-two n,
// plus its error paths (unmatched and mis-sized messages, forwarding cycles, declined shapes) and
// zero-count calls. Algorithms written elsewhere are looked up by name and skipped with a warning
// until they are registered.
#include "algorithms/simulator.h"
#include "algorithms/link_model.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <optional>

namespace tutti::algo {
namespace {

// alpha, beta, gamma and the copy cost per byte of the default model's shm links.
struct Costs {
  double a, b, g, copy;
};
Costs costs(const LinkModel& m, LinkClass c = LinkClass::kShm) {
  const LinkParams& p = m.links[static_cast<int>(c)];
  return {p.latencyUs, 1.0 / (p.bandwidthGBps * 1e3), 1.0 / (m.reduceGBps * 1e3),
          1.0 / (m.copyGBps * 1e3)};
}

int ceilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

CollShape shapeOf(Coll coll, int n, size_t count, bool inPlace = false, int root = 0) {
  return CollShape{coll, 0, n, count, DataType::kFloat32, RedOp::kSum, root, inPlace};
}

// The predicted time, or nullopt (with a warning) when `name` is not registered yet.
std::optional<double> predictUs(Coll coll, std::string_view name, const CollShape& shape,
                                const LinkModel& model = LinkModel::defaults()) {
  const AlgorithmInfo* info = find(coll, name);
  if (!info) {
    WARN(fmt::format("{}:{} not registered yet: closed form not checked", collName(coll), name));
    return std::nullopt;
  }
  auto t = predict(*info, shape, model);
  INFO(t.status().message());
  REQUIRE(t.isOk());
  return t.value();
}

#define TUTTI_REQUIRE_EXACT(t, expected) REQUIRE((t) == Approx(expected).epsilon(1e-9))

}  // namespace

TEST_CASE("simulator: ring allreduce: 2(n-1)a + 2(n-1)/n S b + (n-1)/n S g", "[simulator]") {
  const Costs c = costs(LinkModel::defaults());
  for (int n : {4, 5, 8}) {
    for (bool inPlace : {false, true}) {
      const size_t count = static_cast<size_t>(n) * 25000;  // chunks of S/n
      const double S = count * 4.0;
      auto t = predictUs(Coll::kAllReduce, "ring", shapeOf(Coll::kAllReduce, n, count, inPlace));
      if (!t) return;
      INFO("n=" << n << " inPlace=" << inPlace);
      TUTTI_REQUIRE_EXACT(
          *t, 2 * (n - 1) * c.a + 2.0 * (n - 1) / n * S * c.b + 1.0 * (n - 1) / n * S * c.g);
    }
  }
}

TEST_CASE(
    "simulator: ring allreduce with uneven chunks lies between the floor and ceiling chunk forms",
    "[simulator]") {
  const Costs c = costs(LinkModel::defaults());
  for (int n : {4, 5}) {
    const size_t count = static_cast<size_t>(n) * 1000 + 3;
    auto t = predictUs(Coll::kAllReduce, "ring", shapeOf(Coll::kAllReduce, n, count));
    if (!t) return;
    auto form = [&](double chunkBytes) {
      return 2 * (n - 1) * (c.a + chunkBytes * c.b) + (n - 1) * chunkBytes * c.g;
    };
    INFO("n=" << n);
    REQUIRE(*t >= form(count / n * 4.0) * (1 - 1e-12));
    REQUIRE(*t <= form((count / n + 1) * 4.0) * (1 + 1e-12));
  }
}

TEST_CASE("simulator: shared CPUs slow multi-peer shm rounds, not single-peer ones",
          "[simulator]") {
  // cpuLoad 2 (4 ranks on 2 cores): ring and recursive doubling talk to one peer per direction
  // per round and keep their time; direct gather's root receives from n-1 peers at once, so its
  // data term doubles: a + 2 (n-1)/n S b.
  LinkModel shared = LinkModel::defaults();
  shared.cpuLoad = 2.0;
  const Costs c = costs(shared);
  const int n = 4;
  const size_t count = n * 25000;
  const double S = count * 4.0;
  for (const char* name : {"ring", "recursive_doubling"}) {
    auto plain = predictUs(Coll::kAllReduce, name, shapeOf(Coll::kAllReduce, n, count));
    auto loaded = predictUs(Coll::kAllReduce, name, shapeOf(Coll::kAllReduce, n, count), shared);
    if (!plain || !loaded) return;
    INFO(name);
    TUTTI_REQUIRE_EXACT(*loaded, *plain);
  }
  auto gather = predictUs(Coll::kGather, "direct", shapeOf(Coll::kGather, n, count / n), shared);
  if (!gather) return;
  TUTTI_REQUIRE_EXACT(*gather, c.a + 2.0 * (n - 1) / n * S * c.b);
  // A load of 1.5 divides by 1.5, not by the 3 peers.
  shared.cpuLoad = 1.5;
  gather = predictUs(Coll::kGather, "direct", shapeOf(Coll::kGather, n, count / n), shared);
  TUTTI_REQUIRE_EXACT(*gather, c.a + 1.5 * (n - 1) / n * S * c.b);
}

TEST_CASE("simulator: the cache term slows the bytes of a message beyond cacheBytes",
          "[simulator]") {
  // Direct gather of S/n per rank: the root receives n-1 messages of S/n bytes. With
  // streamFactor f and cacheBytes c < S/n, each message's data takes c b + (S/n - c) b / f.
  LinkModel m = LinkModel::defaults();
  const Costs c = costs(m);
  const int n = 4;
  const size_t perRank = 1 << 20;  // floats: 4 MiB per message
  const double msg = perRank * 4.0;
  auto plain = predictUs(Coll::kGather, "direct", shapeOf(Coll::kGather, n, perRank), m);
  if (!plain) return;
  TUTTI_REQUIRE_EXACT(*plain, c.a + (n - 1) * msg * c.b);
  m.links[static_cast<int>(LinkClass::kShm)].streamFactor = 0.5;
  m.cacheBytes = 1 << 20;
  auto slowed = predictUs(Coll::kGather, "direct", shapeOf(Coll::kGather, n, perRank), m);
  if (!slowed) return;
  const double per = (double(m.cacheBytes) + (msg - double(m.cacheBytes)) / 0.5) * c.b;
  TUTTI_REQUIRE_EXACT(*slowed, c.a + (n - 1) * per);
  // Messages that fit keep the plain cost.
  m.cacheBytes = 8 << 20;
  auto fits = predictUs(Coll::kGather, "direct", shapeOf(Coll::kGather, n, perRank), m);
  if (!fits) return;
  TUTTI_REQUIRE_EXACT(*fits, *plain);
}

TEST_CASE("simulator: a bandwidth curve is interpolated in log2(bytes) and clamped at its ends",
          "[simulator]") {
  // Direct gather on 2 ranks: the root receives one message of S bytes: a + S / bw(S).
  LinkModel m = LinkModel::defaults();
  const double a = costs(m).a;
  LinkParams& shm = m.links[static_cast<int>(LinkClass::kShm)];
  shm.bandwidthCurve = {{1024, 1.0}, {4096, 4.0}};
  REQUIRE(shm.bandwidthFor(2048) == Approx(2.5));  // halfway in log2 between 1 KiB and 4 KiB
  REQUIRE(shm.bandwidthFor(8) == Approx(1.0));
  REQUIRE(shm.bandwidthFor(1 << 20) == Approx(4.0));
  for (auto [floats, gbps] : {std::pair{size_t{512}, 2.5}, {size_t{64}, 1.0}, {size_t{8192}, 4.0}}) {
    auto t = predictUs(Coll::kGather, "direct", shapeOf(Coll::kGather, 2, floats), m);
    if (!t) return;
    INFO(floats);
    TUTTI_REQUIRE_EXACT(*t, a + floats * 4.0 / (gbps * 1e3));
  }
  // A curve that is not increasing in bytes is rejected.
  shm.bandwidthCurve = {{4096, 4.0}, {1024, 1.0}};
  auto bad = predict(*find(Coll::kGather, "direct"), shapeOf(Coll::kGather, 2, 64), m);
  REQUIRE(bad.status().code() == Code::kInvalidArgument);
}

TEST_CASE("simulator: the memory term slows every copy of a call whose footprint is beyond the "
          "cache", "[simulator]") {
  // Two-shot allreduce on 2 ranks (two rounds: S/2 each way, then S/2 back), out of place:
  // footprint F = 2 S per rank. Beyond c, the link
  // bandwidth and the reduction rate are both multiplied by F / (c + (F - c) / f).
  LinkModel m = LinkModel::defaults();
  const Costs c = costs(m);
  const size_t count = 1 << 20;  // S = 4 MiB
  const double S = count * 4.0;
  auto plain = predictUs(Coll::kAllReduce, "two_shot", shapeOf(Coll::kAllReduce, 2, count), m);
  if (!plain) return;
  TUTTI_REQUIRE_EXACT(*plain, 2 * c.a + S * c.b + S / 2 * c.g);
  m.footprintCacheBytes = 2 << 20;
  m.footprintStreamFactor = 0.5;
  const double F = 2 * S, cb = 2 << 20;
  const double g = F / (cb + (F - cb) / 0.5);
  auto slowed = predictUs(Coll::kAllReduce, "two_shot", shapeOf(Coll::kAllReduce, 2, count), m);
  TUTTI_REQUIRE_EXACT(*slowed, 2 * c.a + (S * c.b + S / 2 * c.g) / g);
  // The same pair joined by tcp with shm's figures: slowed alike when the class is memoryBound
  // (loopback: the CPUs copy every byte), else only the reduction is.
  LinkModel net = m;
  net.links[static_cast<int>(LinkClass::kTcp)] = net.links[static_cast<int>(LinkClass::kShm)];
  net.classOf = [](int s, int d) { return s == d ? LinkClass::kSelf : LinkClass::kTcp; };
  net.links[static_cast<int>(LinkClass::kTcp)].memoryBound = true;
  auto bound = predictUs(Coll::kAllReduce, "two_shot", shapeOf(Coll::kAllReduce, 2, count), net);
  TUTTI_REQUIRE_EXACT(*bound, *slowed);
  net.links[static_cast<int>(LinkClass::kTcp)].memoryBound = false;
  auto wire = predictUs(Coll::kAllReduce, "two_shot", shapeOf(Coll::kAllReduce, 2, count), net);
  TUTTI_REQUIRE_EXACT(*wire, 2 * c.a + S * c.b + S / 2 * c.g / g);
  // In place the footprint is S: the same call fits a cache of S.
  auto inPlacePlain = predictUs(Coll::kAllReduce, "two_shot",
                                shapeOf(Coll::kAllReduce, 2, count, true), LinkModel::defaults());
  m.footprintCacheBytes = static_cast<size_t>(S);
  auto inPlace =
      predictUs(Coll::kAllReduce, "two_shot", shapeOf(Coll::kAllReduce, 2, count, true), m);
  TUTTI_REQUIRE_EXACT(*inPlace, *inPlacePlain);
  // Rooted: the root's buffers count on every rank, so all ranks predict alike.
  CollShape gather = shapeOf(Coll::kGather, 4, count / 4, false, 2);
  auto atRoot = predictUs(Coll::kGather, "direct", gather, m);
  gather.rank = 1;
  auto elsewhere = predictUs(Coll::kGather, "direct", gather, m);
  TUTTI_REQUIRE_EXACT(*elsewhere, *atRoot);
}

TEST_CASE("simulator: reduceOnReceive charges only the reduction's excess over a copy",
          "[simulator]") {
  // Ring allreduce on 2 ranks: 2a + S b + S/2 g; with the receiver reducing as it copies out of
  // the transport, the gamma term becomes S/2 (g - copy), and nothing when a copy costs as much.
  LinkModel m = LinkModel::defaults();
  m.reduceGBps = 5.0;
  m.copyGBps = 20.0;
  const Costs c = costs(m);
  const size_t count = 1 << 16;
  const double S = count * 4.0;
  m.links[static_cast<int>(LinkClass::kShm)].reduceOnReceive = true;
  auto fused = predictUs(Coll::kAllReduce, "ring", shapeOf(Coll::kAllReduce, 2, count), m);
  if (!fused) return;
  TUTTI_REQUIRE_EXACT(*fused, 2 * c.a + S * c.b + S / 2 * (c.g - c.copy));
  m.copyGBps = m.reduceGBps;
  auto free = predictUs(Coll::kAllReduce, "ring", shapeOf(Coll::kAllReduce, 2, count), m);
  TUTTI_REQUIRE_EXACT(*free, 2 * c.a + S * c.b);
}

TEST_CASE("simulator: a memoryBound class's messages and its ranks' reductions do not overlap",
          "[simulator]") {
  // Ring allreduce on 2 ranks, one round: S/2 each way, then each received slice is reduced and
  // forwarded. Over a wire the reductions hide behind the transfers but for one slice; when the
  // CPUs copy the bytes themselves (loopback tcp) the reduction of S/2 comes on top.
  LinkModel m = LinkModel::defaults();
  m.links[static_cast<int>(LinkClass::kTcp)] = m.links[static_cast<int>(LinkClass::kShm)];
  m.classOf = [](int s, int d) { return s == d ? LinkClass::kSelf : LinkClass::kTcp; };
  m.reduceGBps = 20.0;  // faster than the link (5 GB/s): over a wire the transfers rule
  const Costs c = costs(m, LinkClass::kTcp);
  const size_t count = 1 << 20;  // S = 4 MiB, 16 slices per half
  const double S = count * 4.0;
  auto wire = predictUs(Coll::kAllReduce, "ring", shapeOf(Coll::kAllReduce, 2, count), m);
  if (!wire) return;
  const double slice = static_cast<double>(m.sliceBytes);
  // (Over the wire: 2a + S b and about one slice's reduction.)
  REQUIRE(*wire < 2 * c.a + S * c.b + 2 * slice * c.g);
  m.links[static_cast<int>(LinkClass::kTcp)].memoryBound = true;
  auto bound = predictUs(Coll::kAllReduce, "ring", shapeOf(Coll::kAllReduce, 2, count), m);
  INFO("wire " << *wire << " bound " << *bound);
  // (At most a latency per forwarded slice more: the forwards wait for the CPU too.)
  const double serial = 2 * c.a + S * c.b + S / 2 * c.g;
  REQUIRE(*bound >= serial * (1 - 1e-9));
  REQUIRE(*bound <= serial + S / 2 / slice * c.a);
}

TEST_CASE("link model file: bandwidth_curve, reduce_on_receive and the memory term",
          "[simulator]") {
  LinkModel m = LinkModel::defaults();
  REQUIRE(applyLinkText(R"({"links": {"shm": {"bandwidth_curve": [[4096, 2], [65536, 8]],
                                               "reduce_on_receive": true},
                                       "tcp": {"memory_bound": true},
                                       "footprint_cache_bytes": 1048576,
                                       "footprint_stream_factor": 0.25}})",
                        "test", m)
              .isOk());
  const LinkParams& shm = m.links[static_cast<int>(LinkClass::kShm)];
  REQUIRE(shm.bandwidthCurve.size() == 2);
  REQUIRE(shm.bandwidthFor(65536) == Approx(8.0));
  REQUIRE(shm.reduceOnReceive);
  REQUIRE(m.links[static_cast<int>(LinkClass::kTcp)].memoryBound);
  REQUIRE(m.footprintCacheBytes == 1048576);
  REQUIRE(m.footprintStreamFactor == Approx(0.25));
  // A plain bandwidth replaces the curve.
  REQUIRE(applyLinkText(R"({"links": {"shm": {"bandwidth_gbps": 3}}})", "test", m).isOk());
  REQUIRE(shm.bandwidthCurve.empty());
  REQUIRE(shm.bandwidthFor(65536) == Approx(3.0));
  // Bad values name the path and change nothing.
  for (const char* bad : {R"({"links": {"shm": {"bandwidth_curve": [[4096, 2], [1024, 8]]}}})",
                          R"({"links": {"shm": {"bandwidth_curve": [[4096]]}}})",
                          R"({"links": {"shm": {"reduce_on_receive": 1}}})",
                          R"({"links": {"tcp": {"memory_bound": "yes"}}})",
                          R"({"links": {"footprint_stream_factor": 1.5}})"}) {
    LinkModel before = m;
    Status st = applyLinkText(bad, "test", m);
    INFO(bad);
    REQUIRE(st.code() == Code::kInvalidArgument);
    CHECK(st.message().find("test: links.") != std::string::npos);
    CHECK(m.footprintStreamFactor == before.footprintStreamFactor);
    const int k = static_cast<int>(LinkClass::kShm);
    CHECK(m.links[k].bandwidthCurve.empty());
    CHECK(m.links[k].reduceOnReceive == before.links[k].reduceOnReceive);
    CHECK(m.links[static_cast<int>(LinkClass::kTcp)].memoryBound);
  }
}

TEST_CASE("link model: host-mates joined by tcp are costed as loopback tcp", "[simulator]") {
  LinkModel m = LinkModel::defaults();
  useNetworkOnHost(m, LinkClass::kTcp, true);
  REQUIRE(m.linkClass(0, 1) == LinkClass::kTcp);
  REQUIRE(m.linkClass(1, 1) == LinkClass::kSelf);
  REQUIRE(m.link(0, 1).latencyUs == 2.9);
  REQUIRE(m.link(0, 1).overheadUs == 1.6);
  REQUIRE(m.link(0, 1).bandwidthFor(1 << 20) == 4.5);
  REQUIRE(m.link(0, 1).memoryBound);
  REQUIRE(!m.portOf);
  // More ranks than PUs: each message waits for its peer to be scheduled, and ranks that share
  // a PU share its copies.
  LinkModel loaded = LinkModel::defaults();
  loaded.cpuLoad = 2.0;
  useNetworkOnHost(loaded, LinkClass::kTcp, true);
  REQUIRE(loaded.link(0, 1).overheadUs == 8.0);
  REQUIRE(loaded.link(0, 1).bandwidthFor(1 << 20) == 2.25);
  LinkModel keep = LinkModel::defaults();
  useNetworkOnHost(keep, LinkClass::kShm, true);  // shm: nothing changes
  REQUIRE(keep.linkClass(0, 1) == LinkClass::kShm);
}

TEST_CASE("simulator: ring allgather: (n-1)a + (n-1)/n S b", "[simulator]") {
  const Costs c = costs(LinkModel::defaults());
  for (int n : {4, 5}) {
    for (bool inPlace : {false, true}) {
      const size_t count = 30000;  // per rank; S = n * count elements
      const double S = n * count * 4.0;
      auto t = predictUs(Coll::kAllGather, "ring", shapeOf(Coll::kAllGather, n, count, inPlace));
      if (!t) return;
      INFO("n=" << n << " inPlace=" << inPlace);
      // The round-0 copy of the own block overlaps the first transfer (it is shorter).
      TUTTI_REQUIRE_EXACT(*t, (n - 1) * c.a + 1.0 * (n - 1) / n * S * c.b);
    }
  }
}

TEST_CASE("simulator: ring reduce-scatter: (n-1)a + (n-1)/n S b + (n-1)/n S g", "[simulator]") {
  const Costs c = costs(LinkModel::defaults());
  for (int n : {2, 4, 5}) {
    for (bool inPlace : {false, true}) {
      const size_t count = 30000;
      const double S = n * count * 4.0;
      auto t =
          predictUs(Coll::kReduceScatter, "ring", shapeOf(Coll::kReduceScatter, n, count, inPlace));
      if (!t) return;
      INFO("n=" << n << " inPlace=" << inPlace);
      TUTTI_REQUIRE_EXACT(*t, (n - 1) * c.a + 1.0 * (n - 1) / n * S * (c.b + c.g));
    }
  }
}

TEST_CASE("simulator: chain broadcast pipelines: (n-2+k)(a + s b) for k slices of s bytes",
          "[simulator]") {
  LinkModel m = LinkModel::defaults();
  const Costs c = costs(m);
  for (size_t sliceBytes : {size_t{128} << 10, size_t{16} << 10}) {
    m.sliceBytes = sliceBytes;
    const double s = static_cast<double>(sliceBytes);
    for (int n : {3, 4, 5, 8}) {
      for (int k : {1, 2, 7, 16}) {
        const size_t count = static_cast<size_t>(k) * sliceBytes / 4;
        for (int root : {0, n - 1}) {
          auto t = predictUs(Coll::kBroadcast, "chain",
                             shapeOf(Coll::kBroadcast, n, count, false, root), m);
          if (!t) return;
          INFO("n=" << n << " k=" << k << " s=" << s << " root=" << root);
          TUTTI_REQUIRE_EXACT(*t, (n - 2 + k) * (c.a + s * c.b));
        }
      }
    }
  }
  // Two ranks: one message, no pipeline.
  auto t = predictUs(Coll::kBroadcast, "chain", shapeOf(Coll::kBroadcast, 2, 8 << 15), m);
  if (!t) return;
  TUTTI_REQUIRE_EXACT(*t, c.a + (8 << 17) * c.b);
  // A short last slice: between k-1 and k full slices.
  m.sliceBytes = 128 << 10;
  const size_t count = (5 * (128 << 10) + 1000) / 4;  // k = 6, the last slice 1000 bytes
  for (int n : {4, 5}) {
    auto u = predictUs(Coll::kBroadcast, "chain", shapeOf(Coll::kBroadcast, n, count), m);
    const double full = c.a + (128 << 10) * c.b;
    REQUIRE(*u > (n - 2 + 5) * full);
    REQUIRE(*u <= (n - 2 + 6) * full);
  }
  // sliceBytes 0: every hop forwards the whole message.
  m.sliceBytes = 0;
  auto w = predictUs(Coll::kBroadcast, "chain", shapeOf(Coll::kBroadcast, 5, 1 << 18), m);
  TUTTI_REQUIRE_EXACT(*w, 4 * (c.a + (1 << 20) * c.b));
}

TEST_CASE("simulator: chain reduce pipelines: (n-2+k)(a + s b) + (n-1) s g", "[simulator]") {
  // Reduction of a slice overlaps the transfer of the next one (own compute unit), so each hop
  // adds s g once; the per-slice period is a + s b, which exceeds s g in the default model. The
  // reduce_chain.cc bound (n-2+k)(a + s (b+g)) is an upper bound of this.
  const LinkModel m = LinkModel::defaults();
  const Costs c = costs(m);
  const double s = static_cast<double>(m.sliceBytes);
  REQUIRE(s * c.g <= c.a + s * c.b);
  for (int n : {3, 4, 5, 8}) {
    for (int k : {1, 3, 8}) {
      const size_t count = static_cast<size_t>(k) * m.sliceBytes / 4;
      auto t = predictUs(Coll::kReduce, "chain", shapeOf(Coll::kReduce, n, count, false, n / 2), m);
      if (!t) return;
      INFO("n=" << n << " k=" << k);
      TUTTI_REQUIRE_EXACT(*t, (n - 2 + k) * (c.a + s * c.b) + (n - 1) * s * c.g);
      REQUIRE(*t <= (n - 2 + k) * (c.a + s * (c.b + c.g)));
    }
  }
  auto t = predictUs(Coll::kReduce, "chain", shapeOf(Coll::kReduce, 2, 100000), m);
  if (!t) return;
  TUTTI_REQUIRE_EXACT(*t, c.a + 400000 * (c.b + c.g));
}

TEST_CASE("simulator: pairwise alltoall: own-block copy + (n-1)a + (n-1)/n S b", "[simulator]") {
  const Costs c = costs(LinkModel::defaults());
  for (int n : {4, 5}) {
    const size_t count = 20000;
    const double S = n * count * 4.0, block = count * 4.0;
    auto t = predictUs(Coll::kAllToAll, "pairwise", shapeOf(Coll::kAllToAll, n, count));
    if (!t) return;
    INFO("n=" << n);
    // Round 0 only copies the own block; it is a round of its own.
    TUTTI_REQUIRE_EXACT(*t, block * c.copy + (n - 1) * c.a + 1.0 * (n - 1) / n * S * c.b);
  }
}

TEST_CASE("simulator: direct gather and scatter share the root's port: a + (n-1)/n S b",
          "[simulator]") {
  // The n-1 messages overlap their latencies; their data goes through the root's port one at a
  // time. The root's copy of its own block overlaps the transfers.
  const Costs c = costs(LinkModel::defaults());
  for (int n : {4, 5}) {
    for (int root : {0, n - 1}) {
      const size_t count = 20000;
      const double S = n * count * 4.0;
      const double expected = c.a + 1.0 * (n - 1) / n * S * c.b;
      INFO("n=" << n << " root=" << root);
      auto g = predictUs(Coll::kGather, "direct", shapeOf(Coll::kGather, n, count, false, root));
      if (g) TUTTI_REQUIRE_EXACT(*g, expected);
      auto s = predictUs(Coll::kScatter, "direct", shapeOf(Coll::kScatter, n, count, false, root));
      if (s) TUTTI_REQUIRE_EXACT(*s, expected);
    }
  }
}

TEST_CASE("simulator: dissemination barrier: ceil(log2 n)(a + 1 byte b)", "[simulator]") {
  const Costs c = costs(LinkModel::defaults());
  for (int n : {1, 2, 4, 5, 8, 13}) {
    auto t = predictUs(Coll::kBarrier, "dissemination", shapeOf(Coll::kBarrier, n, 0));
    if (!t) return;
    INFO("n=" << n);
    TUTTI_REQUIRE_EXACT(*t + 1.0, 1.0 + ceilLog2(n) * (c.a + c.b));  // +1: n=1 predicts 0
  }
}

TEST_CASE("simulator: recursive doubling allreduce: log2(n)(a + S b + S g)", "[simulator]") {
  const Costs c = costs(LinkModel::defaults());
  const size_t count = 10000;
  const double S = count * 4.0;
  for (int n : {2, 4, 8, 16}) {
    auto t = predictUs(Coll::kAllReduce, "recursive_doubling", shapeOf(Coll::kAllReduce, n, count));
    if (!t) return;
    INFO("n=" << n);
    TUTTI_REQUIRE_EXACT(*t, std::log2(n) * (c.a + S * c.b + S * c.g));
  }
  // Not a power of two: fold (a + S b + S g), log2 p exchanges, unfold (a + S b).
  for (int n : {3, 5, 6, 12}) {
    auto t = predictUs(Coll::kAllReduce, "recursive_doubling", shapeOf(Coll::kAllReduce, n, count));
    INFO("n=" << n);
    const int lg = ceilLog2(n) - 1;
    TUTTI_REQUIRE_EXACT(*t, (lg + 2) * (c.a + S * c.b) + (lg + 1) * S * c.g);
  }
}

TEST_CASE("simulator: rabenseifner allreduce: 2 log2(n) a + 2(n-1)/n S b + (n-1)/n S g",
          "[simulator]") {
  const Costs c = costs(LinkModel::defaults());
  for (int n : {2, 4, 8, 16}) {
    const size_t count = static_cast<size_t>(n) * 5000;
    const double S = count * 4.0;
    auto t = predictUs(Coll::kAllReduce, "rabenseifner", shapeOf(Coll::kAllReduce, n, count));
    if (!t) return;
    INFO("n=" << n);
    TUTTI_REQUIRE_EXACT(
        *t, 2 * std::log2(n) * c.a + 2.0 * (n - 1) / n * S * c.b + 1.0 * (n - 1) / n * S * c.g);
  }
  // Not a power of two: the same on p = 2^floor(log2 n) ranks plus fold and unfold.
  for (int n : {3, 5, 6, 12}) {
    const int p = 1 << (ceilLog2(n) - 1);
    const size_t count = static_cast<size_t>(p) * 5000;
    const double S = count * 4.0;
    auto t = predictUs(Coll::kAllReduce, "rabenseifner", shapeOf(Coll::kAllReduce, n, count));
    INFO("n=" << n);
    TUTTI_REQUIRE_EXACT(*t, 2 * std::log2(p) * c.a + 2.0 * (p - 1) / p * S * c.b +
                                1.0 * (p - 1) / p * S * c.g + 2 * (c.a + S * c.b) + S * c.g);
  }
}

TEST_CASE("simulator: bruck allgather: ceil(log2 n) a + (n-1)/n S b + S copy", "[simulator]") {
  // The final local rotation copies S; the round-0 copy of the own block overlaps the send.
  const Costs c = costs(LinkModel::defaults());
  for (int n : {4, 5, 8, 13}) {
    const size_t count = 10000;
    const double S = n * count * 4.0;
    auto t = predictUs(Coll::kAllGather, "bruck", shapeOf(Coll::kAllGather, n, count));
    if (!t) return;
    INFO("n=" << n);
    TUTTI_REQUIRE_EXACT(*t, ceilLog2(n) * c.a + 1.0 * (n - 1) / n * S * c.b + S * c.copy);
  }
}

TEST_CASE("simulator: binomial broadcast: ceil(log2 n)(a + S b)", "[simulator]") {
  const Costs c = costs(LinkModel::defaults());
  for (int n : {2, 4, 5, 8, 13}) {
    for (int root : {0, n - 1}) {
      const size_t count = 10000;
      const double S = count * 4.0;
      auto t =
          predictUs(Coll::kBroadcast, "binomial", shapeOf(Coll::kBroadcast, n, count, false, root));
      if (!t) return;
      INFO("n=" << n << " root=" << root);
      TUTTI_REQUIRE_EXACT(*t, ceilLog2(n) * (c.a + S * c.b));
    }
  }
}

namespace {

// One closed form: `expected(n, cb)` in microseconds, cb = count * 4 bytes (the API count).
struct ClosedForm {
  Coll coll;
  const char* name;
  std::vector<int> ns;
  std::function<double(int n, double cb)> expected;
};

}  // namespace

TEST_CASE("simulator: closed forms of the other registered algorithms", "[simulator]") {
  // count = 55440 is divisible by every n used (even chunks). S: the vector the formulas of
  // Thakur et al. call S (n * count for allgather, gather, scatter, reduce-scatter, alltoall).
  const Costs c = costs(LinkModel::defaults());
  const double a = c.a, b = c.b, g = c.g;
  auto lg = [](int n) { return static_cast<double>(ceilLog2(n)); };
  auto frac = [](int n) { return (n - 1.0) / n; };
  const std::vector<ClosedForm> forms = {
      {Coll::kAllGather,
       "direct",
       {2, 4, 5, 8, 12},
       [&](int n, double cb) { return a + frac(n) * n * cb * b; }},
      {Coll::kAllGather,
       "recursive_doubling",
       {2, 4, 8, 16},
       [&](int n, double cb) { return lg(n) * a + frac(n) * n * cb * b; }},
      {Coll::kGather,
       "binomial",
       {2, 4, 5, 8, 12},
       [&](int n, double cb) { return lg(n) * a + frac(n) * n * cb * b; }},
      {Coll::kScatter,
       "binomial",
       {2, 4, 5, 8, 12},
       [&](int n, double cb) { return lg(n) * a + frac(n) * n * cb * b; }},
      {Coll::kReduce,
       "binomial",
       {2, 4, 5, 8, 12},
       [&](int n, double S) { return lg(n) * (a + S * b + S * g); }},
      {Coll::kReduce,
       "reducescatter_gather",
       {2, 4, 5, 8, 12},
       [&](int n, double S) { return n * a + 2 * frac(n) * S * b + frac(n) * S * g; }},
      {Coll::kReduceScatter,
       "pairwise",
       {2, 4, 5, 8, 12},
       [&](int n, double cb) { return (n - 1) * a + frac(n) * n * cb * (b + g); }},
      // Power-of-two n only: the fold of other n leaves uneven halves (see below).
      {Coll::kReduceScatter,
       "recursive_halving",
       {2, 4, 8, 16},
       [&](int n, double cb) { return lg(n) * a + frac(n) * n * cb * (b + g); }},
      {Coll::kBroadcast,
       "scatter_allgather",
       {2, 4, 8, 16},
       [&](int n, double S) { return (lg(n) + n - 1) * a + 2 * frac(n) * S * b; }},
      // Every rank sums the n inputs once they have all arrived (the canonical tree), so all
      // n-1 reductions follow the transfers: (n-1) S gamma.
      {Coll::kAllReduce,
       "one_shot",
       {2, 3, 4, 5, 8},
       [&](int n, double S) { return a + (n - 1) * S * b + (n - 1) * S * g; }},
      {Coll::kAllReduce,
       "two_shot",
       {2, 3, 4, 5, 8, 12, 16},
       [&](int n, double S) {
         return 2 * a + 2 * frac(n) * S * b + std::max(1, n - 2) * S / n * g;
       }},
  };
  const size_t count = 55440;
  for (const ClosedForm& f : forms) {
    for (int n : f.ns) {
      for (int root : {0, n - 1}) {
        auto t = predictUs(f.coll, f.name, shapeOf(f.coll, n, count, false, root));
        if (!t) break;
        INFO(fmt::format("{}:{} n={} root={}", collName(f.coll), f.name, n, root));
        TUTTI_REQUIRE_EXACT(*t, f.expected(n, count * 4.0));
      }
    }
  }
}

TEST_CASE("simulator: bounds where the schedule differs from the textbook", "[simulator]") {
  const Costs c = costs(LinkModel::defaults());
  const size_t count = 55440;
  const double cb = count * 4.0;
  SECTION(
      "scatter_allgather broadcast, n not a power of two: the root's copy of S in round 0 "
      "outlasts its first (smaller) scatter message") {
    for (int n : {3, 5, 6, 12}) {
      auto t =
          predictUs(Coll::kBroadcast, "scatter_allgather", shapeOf(Coll::kBroadcast, n, count));
      if (!t) return;
      const double form = (ceilLog2(n) + n - 1) * c.a + 2.0 * (n - 1) / n * cb * c.b;
      INFO("n=" << n);
      REQUIRE(*t >= form * (1 - 1e-12));
      REQUIRE(*t <= form + cb * c.copy);
    }
  }
  SECTION("bruck alltoall: ceil(log2 n) a + n/2 ceil(log2 n) count b, plus packing copies") {
    for (int n : {2, 3, 4, 5, 8, 12}) {
      auto t = predictUs(Coll::kAllToAll, "bruck", shapeOf(Coll::kAllToAll, n, count));
      if (!t) return;
      const double comm = ceilLog2(n) * (c.a + n / 2.0 * cb * c.b);
      INFO("n=" << n);
      REQUIRE(*t >= comm * (1 - 1e-12));
      REQUIRE(*t <= comm + (n / 2.0 * ceilLog2(n) + n) * cb * c.copy * (1 + 1e-12));
    }
  }
  SECTION("double binary tree: at most (K + 3 log2 n)(a + 2 S/K b) + S g") {
    for (int n : {2, 3, 4, 5, 8, 12, 16}) {
      for (size_t elems : {size_t{1000}, size_t{720720}}) {
        auto t =
            predictUs(Coll::kAllReduce, "double_binary_tree", shapeOf(Coll::kAllReduce, n, elems));
        if (!t) return;
        const double S = elems * 4.0;
        const double K = std::min(32.0, std::max(1.0, std::ceil(S / 2 / (256 << 10))));
        INFO("n=" << n << " S=" << S);
        REQUIRE(*t >= 1.0 * (n - 1) / n * S * c.b);
        REQUIRE(*t <= (K + 3 * std::log2(n)) * (c.a + 2 * S / K * c.b) + S * c.g);
      }
    }
  }
}

TEST_CASE("simulator: link classes: per-class parameters and independent ports", "[simulator]") {
  LinkModel m = LinkModel::defaults();
  const Costs tcp = costs(m, LinkClass::kTcp);
  m.classOf = [](int src, int dst) { return src == dst ? LinkClass::kSelf : LinkClass::kTcp; };
  const int n = 4;
  const size_t count = n * 10000;
  const double S = count * 4.0;
  auto t = predictUs(Coll::kAllReduce, "ring", shapeOf(Coll::kAllReduce, n, count), m);
  if (t) {
    const Costs c = costs(m);
    TUTTI_REQUIRE_EXACT(
        *t, 2 * (n - 1) * tcp.a + 2.0 * (n - 1) / n * S * tcp.b + 1.0 * (n - 1) / n * S * c.g);
  }
  // Rank 0 sends to rank 1 over shm and to rank 2 over ib in one round: the ports of different
  // classes are independent; two shm messages share rank 0's port (latencies overlap).
  const Costs shm = costs(m), ib = costs(m, LinkClass::kIb);
  auto run = [&](LinkClass to2) {
    LinkModel mm = LinkModel::defaults();
    mm.classOf = [to2](int src, int dst) {
      return (src == 0 && dst == 2) || (src == 2 && dst == 0) ? to2 : LinkClass::kShm;
    };
    CollShape s = shapeOf(Coll::kAllReduce, 3, 1000);
    std::vector<Schedule> perRank(3);
    perRank[0].rounds = {{Step{.op = Op::kSend, .peer = 1, .src = Buf::kInput, .count = 1000},
                          Step{.op = Op::kSend, .peer = 2, .src = Buf::kInput, .count = 1000}}};
    perRank[1].rounds = {{Step{.op = Op::kRecv, .peer = 0, .dst = Buf::kOutput, .count = 1000}}};
    perRank[2].rounds = {{Step{.op = Op::kRecv, .peer = 0, .dst = Buf::kOutput, .count = 1000}}};
    auto r = simulate(s, perRank, mm);
    REQUIRE(r.isOk());
    return r.value();
  };
  TUTTI_REQUIRE_EXACT(run(LinkClass::kIb), std::max(shm.a + 4000 * shm.b, ib.a + 4000 * ib.b));
  TUTTI_REQUIRE_EXACT(run(LinkClass::kShm), shm.a + 2 * 4000 * shm.b);
}

TEST_CASE("simulator: zero-count calls predict 0 for every registered algorithm", "[simulator]") {
  const LinkModel m = LinkModel::defaults();
  for (const AlgorithmInfo& algo : registry()) {
    if (algo.coll == Coll::kBarrier) continue;  // a barrier moves its token whatever the count
    for (int n : {1, 2, 3, 4, 5, 8}) {
      for (bool inPlace : {false, true}) {
        CollShape s = shapeOf(algo.coll, n, 0, inPlace);
        if (algo.supports && !algo.supports(s)) continue;
        INFO(fmt::format("{}:{} n={} inPlace={}", collName(algo.coll), algo.name, n, inPlace));
        auto t = predict(algo, s, m);
        INFO(t.status().message());
        REQUIRE(t.isOk());
        REQUIRE(t.value() == 0.0);
      }
    }
  }
}

TEST_CASE("simulator: every registered algorithm simulates without mismatch or deadlock",
          "[simulator]") {
  const LinkModel m = LinkModel::defaults();
  for (const AlgorithmInfo& algo : registry()) {
    for (int n : {1, 2, 3, 4, 5, 7, 8, 16, 33, 64}) {
      for (size_t count : {size_t{1}, static_cast<size_t>(n + 1), size_t{100003}}) {
        for (int root : {0, n - 1}) {
          CollShape s = shapeOf(algo.coll, n, count, false, root);
          bool declined = false;
          for (int r = 0; r < n && !declined; ++r) {
            s.rank = r;
            declined = algo.supports && !algo.supports(s);
          }
          s.rank = 0;
          if (declined) continue;
          INFO(fmt::format("{}:{} n={} count={} root={}", collName(algo.coll), algo.name, n, count,
                           root));
          auto t = predict(algo, s, m);
          INFO(t.status().message());
          REQUIRE(t.isOk());
          REQUIRE(std::isfinite(t.value()));
          REQUIRE(t.value() >= 0.0);
          if (n > 1 && algo.coll != Coll::kBarrier) REQUIRE(t.value() > 0.0);
        }
      }
    }
  }
}

TEST_CASE("simulator: mismatched schedules are rejected, not hung", "[simulator]") {
  const LinkModel m = LinkModel::defaults();
  const CollShape s = shapeOf(Coll::kAllReduce, 2, 8);
  auto requireInternal = [&](const std::vector<Schedule>& perRank, const char* needle) {
    auto r = simulate(s, perRank, m);
    REQUIRE_FALSE(r.isOk());
    INFO(r.status().message());
    REQUIRE(r.status().code() == Code::kInternalError);
    REQUIRE_THAT(r.status().message(), Catch::Contains(needle));
  };
  const Step recv0{.op = Op::kRecv, .peer = 1, .dst = Buf::kOutput, .count = 8};
  const Step send1{.op = Op::kSend, .peer = 0, .src = Buf::kInput, .count = 8};

  SECTION("a receive whose send is missing") {
    std::vector<Schedule> perRank(2);
    perRank[0].rounds = {{recv0}};
    perRank[1].rounds = {{}};
    requireInternal(perRank, "rank 1 sends 0 message(s) to rank 0");
  }
  SECTION("a send nobody receives") {
    std::vector<Schedule> perRank(2);
    perRank[1].rounds = {{send1}};
    requireInternal(perRank, "rank 1 sends 1 message(s) to rank 0");
  }
  SECTION("the send is in another round") {
    std::vector<Schedule> perRank(2);
    perRank[0].rounds = {{recv0}, {}};
    perRank[1].rounds = {{}, {send1}};
    requireInternal(perRank, "round 0");
  }
  SECTION("sizes differ") {
    std::vector<Schedule> perRank(2);
    Step shorter = send1;
    shorter.count = 4;
    perRank[0].rounds = {{recv0}};
    perRank[1].rounds = {{shorter}};
    requireInternal(perRank, "rank 1 sends 4 elements");
  }
  SECTION("a peer out of range") {
    std::vector<Schedule> perRank(2);
    Step bad = send1;
    bad.peer = 2;
    perRank[1].rounds = {{bad}};
    requireInternal(perRank, "outside [0, 2)");
  }
  SECTION("a cycle of forwarding steps deadlocks") {
    std::vector<Schedule> perRank(2);
    perRank[0].rounds = {
        {Step{.op = Op::kRecvCopySend, .peer = 1, .sendPeer = 1, .dst = Buf::kOutput, .count = 8}}};
    perRank[1].rounds = {
        {Step{.op = Op::kRecvCopySend, .peer = 0, .sendPeer = 0, .dst = Buf::kOutput, .count = 8}}};
    requireInternal(perRank, "deadlock");
  }
  SECTION("matched zero-count and matched messages are fine") {
    std::vector<Schedule> perRank(2);
    Step zero = recv0;
    zero.count = 0;
    perRank[0].rounds = {{recv0, zero}};
    perRank[1].rounds = {{send1}};
    auto r = simulate(s, perRank, m);
    REQUIRE(r.isOk());
    const Costs c = costs(m);
    TUTTI_REQUIRE_EXACT(r.value(), c.a + 32 * c.b);
  }
}

TEST_CASE("simulator: bad inputs: declined shapes, wrong rank count, bad model", "[simulator]") {
  const LinkModel m = LinkModel::defaults();
  AlgorithmInfo declining{
      .name = "declining",
      .coll = Coll::kAllReduce,
      .summary = "declines odd ranks",
      .supports = [](const CollShape& s) { return s.rank % 2 == 0; },
      .build = [](const CollShape& s) -> Result<Schedule> { return ScheduleBuilder(s).finish(); }};
  auto t = predict(declining, shapeOf(Coll::kAllReduce, 2, 8), m);
  REQUIRE_FALSE(t.isOk());
  REQUIRE(t.status().code() == Code::kInvalidArgument);
  REQUIRE_THAT(t.status().message(), Catch::Contains("declines"));

  auto u = simulate(shapeOf(Coll::kAllReduce, 3, 8), std::vector<Schedule>(2), m);
  REQUIRE(u.status().code() == Code::kInvalidArgument);

  LinkModel bad = m;
  bad.links[static_cast<int>(LinkClass::kShm)].bandwidthGBps = 0;
  auto v = simulate(shapeOf(Coll::kAllReduce, 2, 8), std::vector<Schedule>(2), bad);
  REQUIRE(v.status().code() == Code::kInvalidArgument);

  REQUIRE(std::string(linkClassName(LinkClass::kNvlink)) == "nvlink");
  REQUIRE(m.linkClass(1, 1) == LinkClass::kSelf);
  REQUIRE(m.link(0, 1).latencyUs == 0.5);
}

}  // namespace tutti::algo
