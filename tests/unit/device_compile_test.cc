// File: tests/unit/device_compile_test.cc
// The clique compiler (core/device/compile.h) against the host engine's arithmetic. For every
// registered algorithm of the eight data collectives, the compiled Programs run by the CPU
// evaluator (kernels/program_host.h) must leave every rank's buffers exactly as the algorithm's
// schedules leave them when a mailbox executes them with the engine's kernels (reduce2Fn for
// recvReduce and reduce, scaleFn on the inputs for premulsum, divideFn on the result holders for
// avg), byte for byte (NaN compared as NaN). Also: the traffic compileBest reaches, in-place
// ordering and its limits, the Program invariants, and the errors.
#include <fmt/ranges.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <deque>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "algorithms/verifier.h"
#include "core/device/compile.h"
#include "kernels/convert.h"
#include "kernels/program_host.h"
#include "kernels/reduce.h"
#include "tests/unit/engine_reference.h"

namespace tutti::device {
namespace {

namespace prog = kernels::program;
using namespace tutti::test;  // NOLINT: the reference helpers

// Runs the compiled call on a copy of the users' buffers with the CPU evaluator.
std::string runCompiled(const CompiledCall& call, std::vector<UserRank>& users) {
  prog::Buffers b;
  for (size_t r = 0; r < users.size(); ++r) {
    b.ptr[prog::inputBuffer(static_cast<int>(r))] = users[r].send();
    b.ptr[prog::outputBuffer(static_cast<int>(r))] = users[r].recv();
  }
  for (size_t i = 0; i < call.launches.size(); ++i) {
    if (Status st = prog::validate(call.launches[i]); !st.isOk())
      return fmt::format("launch {} is invalid: {}", i, st.message());
    if (Status st = prog::runOnHost(call.launches[i], b); !st.isOk())
      return fmt::format("launch {} fails: {}", i, st.message());
  }
  return "";
}

// The whole check for one algorithm, shape and arithmetic: "" or what differs.
std::string check(const AlgorithmInfo& info, CollShape shape, const Arith& a) {
  shape.dtype = a.dtype;
  shape.op = a.op;
  const std::vector<std::byte> scalar = scalarOf(a.dtype);
  auto compiled = compile(shape, info, a.preMul ? scalar.data() : nullptr);
  // In place, an algorithm whose ranks build different trees over each other's buffers can need
  // a cycle of overwrites: the documented outcome is this error (the executor falls back).
  if (!compiled.isOk() && shape.inPlace && compiled.status().code() == Code::kInvalidUsage &&
      compiled.status().message().find("form a cycle") != std::string::npos)
    return "cycle";
  if (!compiled.isOk()) return "compile: " + compiled.status().message();
  std::vector<UserRank> engine = layOut(shape, a.dtype), kernel = engine;
  if (std::string err = runEngine(shape, info, a, engine); !err.empty()) return "engine: " + err;
  if (std::string err = runCompiled(compiled.value(), kernel); !err.empty()) return err;
  return compareMemory(kernel, engine, a.dtype);
}

}  // namespace

TEST_CASE("compiled programs match the host engine on every algorithm and shape", "[compile]") {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<Arith> ariths = mainAriths();
  size_t cases = 0, which = 0;
  std::set<std::string> cyclic;  // algorithms that cannot run in place for some shape
  auto one = [&](const AlgorithmInfo& info, const CollShape& shape, const Arith& a) {
    INFO(label(info, shape, a));
    const std::string result = check(info, shape, a);
    if (result == "cycle") {
      cyclic.insert(fmt::format("{} {}", collName(info.coll), info.name));
      CollShape s = shape;
      s.dtype = a.dtype;
      s.op = a.op;
      const std::vector<std::byte> scalar = scalarOf(a.dtype);
      auto best = compileBest(s, "", a.preMul ? scalar.data() : nullptr);
      INFO(best.status().message());
      REQUIRE(best.isOk());  // another algorithm of the collective compiles in place
      REQUIRE(check(*algo::find(info.coll, best->algorithm), shape, a) == "");
    } else {
      REQUIRE(result == "");
    }
    ++cases;
  };
  // Every shape, one arithmetic each (rotating through all of them).
  forEachShape({1, 2, 3, 4, 5, 6, 7, 8, 9, 16}, true, 1023,
               [&](const AlgorithmInfo& info, const CollShape& shape) {
                 one(info, shape, reducing(info.coll) ? ariths[which++ % ariths.size()] : Arith{});
               });
  // Every arithmetic on every shape.
  forEachShape({1, 2, 3, 4, 5, 6, 7, 8, 9, 16}, true, 1023,
               [&](const AlgorithmInfo& info, const CollShape& shape) {
                 if (!reducing(info.coll)) return;
                 for (const Arith& a : ariths) one(info, shape, a);
               });
  WARN(fmt::format("{} cases; in place with a cycle for some shape: {}", cases,
                   fmt::join(cyclic, ", ")));
  CHECK(cases > 5000);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // The budget holds for a normal build; a sanitizer build runs several times slower.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
#else
  (void)start;
#endif
}

TEST_CASE("compiled programs match the host engine on all 12 dtypes", "[compile]") {
  size_t cases = 0;
  forEachShape({2, 5, 8}, false, 1023, [&](const AlgorithmInfo& info, const CollShape& shape) {
    for (int t = 0; t < kNumDataTypes; ++t)
      for (int op = 0; op <= kNumRedOps; ++op) {  // kNumRedOps: premulsum
        if (!reducing(info.coll) && op > 0) continue;
        const Arith a{static_cast<DataType>(t),
                      op == kNumRedOps ? RedOp::kSum : static_cast<RedOp>(op), op == kNumRedOps};
        INFO(label(info, shape, a));
        const std::string result = check(info, shape, a);
        REQUIRE((result == "" || result == "cycle"));
        ++cases;
      }
  });
  CHECK(cases > 10000);
}

namespace {

// The least traffic any compiled call can have: every input element that some output needs is
// read once, every output element that does not already hold its value is written once.
uint64_t minimumBytes(const CollShape& s) {
  const uint64_t n = static_cast<uint64_t>(s.nranks), c = s.count;
  const uint64_t elem = dataTypeBytes(s.dtype);
  uint64_t read = 0, write = 0;
  switch (s.coll) {
    case Coll::kAllReduce:
      read = n * c, write = n * c;
      break;
    case Coll::kAllGather:
      read = n * c, write = (s.inPlace ? n * (n - 1) : n * n) * c;
      break;
    case Coll::kReduceScatter:
      read = n * n * c, write = n * c;
      break;
    case Coll::kBroadcast:
      read = c, write = (s.inPlace ? n - 1 : n) * c;
      break;
    case Coll::kReduce:
      read = n * c, write = c;
      break;
    case Coll::kAllToAll:
      read = n * n * c, write = n * n * c;
      break;
    case Coll::kGather:
    case Coll::kScatter:
      read = n * c, write = n * c;
      break;
    default:
      break;
  }
  if (s.nranks == 1 && s.inPlace) read = write = 0;
  return (read + write) * elem;
}

}  // namespace

TEST_CASE("compileBest reaches the minimum traffic", "[compile]") {
  for (Coll coll : {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast})
    for (bool inPlace : {false, true}) {
      const CollShape shape{coll, 0, 8, 1024, DataType::kFloat32, RedOp::kSum, 0, inPlace};
      auto best = compileBest(shape, "", nullptr);
      INFO(fmt::format("{} {}", collName(coll), inPlace ? "in place" : "out of place"));
      REQUIRE(best.isOk());
      INFO(best->reason);
      CHECK(best->bytesRead + best->bytesWritten == minimumBytes(shape));
      CHECK(best->launches.size() == 1);
    }
  // Ring allreduce, 8 ranks: every input read once, every output written once, one op per chunk
  // with 8 leaves and 8 destinations.
  const CollShape ar{Coll::kAllReduce, 0, 8, 1024, DataType::kFloat32, RedOp::kSum, 0, false};
  auto ring = compile(ar, *algo::find(Coll::kAllReduce, "ring"), nullptr);
  REQUIRE(ring.isOk());
  CHECK(ring->bytesRead == 8u * 1024 * 4);
  CHECK(ring->bytesWritten == 8u * 1024 * 4);
  REQUIRE(ring->launches.size() == 1);
  CHECK(ring->launches[0].nops == 8);
  CHECK(ring->launches[0].ops[0].nleaves == 8);
  CHECK(ring->launches[0].ops[0].ndsts == 8);
  // One-shot: every rank sums in the same canonical tree, so the ranks' trees are one and the
  // compiled program reads every input once too.
  auto oneShot = compile(ar, *algo::find(Coll::kAllReduce, "one_shot"), nullptr);
  REQUIRE(oneShot.isOk());
  CHECK(oneShot->bytesRead + oneShot->bytesWritten == ring->bytesRead + ring->bytesWritten);
  // Requested by name: that algorithm whatever its traffic.
  auto requested = compileBest(ar, "one_shot", nullptr);
  REQUIRE(requested.isOk());
  CHECK(requested->algorithm == "one_shot");
  CHECK(requested->bytesRead == oneShot->bytesRead);
  auto best = compileBest(ar, "", nullptr);
  REQUIRE(best.isOk());
  CHECK_THAT(best->reason, Catch::Contains(best->algorithm) && Catch::Contains("runner-up"));
}

TEST_CASE("compiling costs what the schedules' segments cost, not the count", "[compile]") {
  const auto start = std::chrono::steady_clock::now();
  for (Coll coll : kColls)
    for (size_t count : {size_t{1} << 20, (size_t{1} << 20) + 7}) {
      const CollShape shape{coll, 0, 16, count, DataType::kBfloat16, RedOp::kSum, 15, false};
      auto best = compileBest(shape, "", nullptr);
      REQUIRE(best.isOk());
      CHECK(best->bytesRead + best->bytesWritten == minimumBytes(shape));
    }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("compileBest is deterministic and records why", "[compile]") {
  for (Coll coll : kColls)
    for (int n : {2, 3, 8}) {
      const CollShape shape{coll, 0, n, 100, DataType::kFloat16, RedOp::kSum, n - 1, false};
      auto a = compileBest(shape, "", nullptr), b = compileBest(shape, "", nullptr);
      REQUIRE(a.isOk());
      REQUIRE(b.isOk());
      CHECK(a->algorithm == b->algorithm);
      CHECK(a->reason == b->reason);
      CHECK_THAT(a->reason, Catch::Contains(a->algorithm));
      for (size_t i = 0; i < a->launches.size(); ++i) {
        CHECK(prog::validate(a->launches[i]).isOk());
        CHECK(std::memcmp(&a->launches[i], &b->launches[i], sizeof(prog::Program)) == 0);
      }
    }
}

TEST_CASE("in-place alltoall: blocks swap between ranks, so no launch order exists", "[compile]") {
  const AlgorithmInfo* pairwise = algo::find(Coll::kAllToAll, "pairwise");
  REQUIRE(pairwise);
  for (int n : {2, 3, 8}) {
    const CollShape shape{Coll::kAllToAll, 0, n, 5, DataType::kFloat32, RedOp::kSum, 0, true};
    auto c = compile(shape, *pairwise, nullptr);
    REQUIRE_FALSE(c.isOk());
    CHECK(c.status().code() == Code::kInvalidUsage);
    CHECK_THAT(c.status().message(),
               Catch::Contains("cycle") && Catch::Contains("nranks=" + std::to_string(n)));
    auto best = compileBest(shape, "", nullptr);
    REQUIRE_FALSE(best.isOk());
    CHECK_THAT(best.status().message(), Catch::Contains("cycle"));
  }
  // One rank: its only block stays where it is; count 0: nothing to do.
  for (auto [n, count] : {std::pair{1, 5}, std::pair{4, 0}}) {
    const CollShape shape{Coll::kAllToAll,    0,           n, static_cast<size_t>(count),
                          DataType::kFloat32, RedOp::kSum, 0, true};
    auto c = compile(shape, *pairwise, nullptr);
    REQUIRE(c.isOk());
    CHECK(c->launches.empty());
    CHECK(c->bytesRead + c->bytesWritten == 0);
  }
}

TEST_CASE("in place, outputs that hold their value are not written", "[compile]") {
  // Allgather: each rank's own block is already in place; broadcast: the root's output.
  const CollShape ag{Coll::kAllGather, 0, 4, 10, DataType::kFloat32, RedOp::kSum, 0, true};
  auto c = compile(ag, *algo::find(Coll::kAllGather, "ring"), nullptr);
  REQUIRE(c.isOk());
  CHECK(c->bytesWritten == 4u * 3 * 10 * 4);
  CHECK(c->bytesRead == 4u * 10 * 4);
  // One-rank allreduce in place: nothing to do; with avg too (no division for one rank); with
  // premulsum the output must be scaled.
  CollShape one{Coll::kAllReduce, 0, 1, 10, DataType::kFloat32, RedOp::kAvg, 0, true};
  c = compile(one, *algo::find(Coll::kAllReduce, "ring"), nullptr);
  REQUIRE(c.isOk());
  CHECK(c->launches.empty());
  one.op = RedOp::kSum;
  const float scalar = 2;
  c = compile(one, *algo::find(Coll::kAllReduce, "ring"),
              reinterpret_cast<const std::byte*>(&scalar));
  REQUIRE(c.isOk());
  REQUIRE(c->launches.size() == 1);
  CHECK(c->launches[0].preMul == 1);
  CHECK_FALSE(prog::copyOnly(c->launches[0]));
}

TEST_CASE("avg divides on the ranks that hold the result", "[compile]") {
  const CollShape shape{Coll::kReduce, 0, 4, 10, DataType::kInt32, RedOp::kAvg, 2, false};
  auto c = compile(shape, *algo::find(Coll::kReduce, "binomial"), nullptr);
  REQUIRE(c.isOk());
  REQUIRE(c->launches.size() == 1);
  const prog::Program& p = c->launches[0];
  CHECK(p.op == RedOp::kSum);
  CHECK(p.divisor == 4);
  for (int i = 0; i < p.nops; ++i) {
    CHECK((p.ops[i].flags & prog::kDivide) != 0);
    for (int k = 0; k < p.ops[i].ndsts; ++k)
      CHECK(p.refs[p.ops[i].dsts + k].buf() == prog::outputBuffer(2));
  }
  // Non-reducing collectives are copies.
  auto g = compile(CollShape{Coll::kAllGather, 0, 4, 10, DataType::kFloat32, RedOp::kSum, 0, false},
                   *algo::find(Coll::kAllGather, "bruck"), nullptr);
  REQUIRE(g.isOk());
  for (const auto& p2 : g->launches) CHECK(prog::copyOnly(p2));
}

TEST_CASE("dataflow records the engine's reduction trees", "[compile]") {
  // Ring allreduce on 3 ranks: one tree per chunk, the same on every rank; leaves 0..2 first.
  const AlgorithmInfo* ring = algo::find(Coll::kAllReduce, "ring");
  REQUIRE(ring);
  CollShape s{Coll::kAllReduce, 0, 3, 9, DataType::kFloat32, RedOp::kSum, 0, false};
  std::vector<Schedule> perRank;
  for (int r = 0; r < 3; ++r) {
    s.rank = r;
    perRank.push_back(ring->build(s).value());
  }
  auto flow = algo::dataflow(s, perRank);
  REQUIRE(flow.isOk());
  REQUIRE(flow->outputs.size() == 3);
  for (int r = 0; r < 3; ++r) {
    REQUIRE(flow->outputs[r].size() == 3);
    for (int k = 0; k < 3; ++k) {
      const algo::Dataflow::Piece& p = flow->outputs[r][k];
      CHECK(p.offset == 3u * k);
      CHECK(p.index == 3u * k);
      CHECK(p.count == 3);
      CHECK(p.expr == flow->outputs[0][k].expr);
      const algo::Dataflow::Node& top = flow->nodes[p.expr];
      CHECK(top.rank == -1);
      CHECK(top.a < top.b);
      CHECK(top.b < p.expr);
    }
  }
  for (int r = 0; r < 3; ++r) CHECK(flow->nodes[r].rank == r);
  // A barrier moves no data; a broken schedule fails as verify() does.
  CHECK_FALSE(algo::dataflow(CollShape{Coll::kBarrier, 0, 3, 0}, perRank).isOk());
  perRank[2].rounds[1][1].op = Op::kRecv;
  s.rank = 0;
  auto broken = algo::dataflow(s, perRank);
  REQUIRE_FALSE(broken.isOk());
  CHECK(broken.status().message() == algo::verify(s, perRank).message());
}

TEST_CASE("compile rejects what it cannot compile, naming the argument", "[compile]") {
  const AlgorithmInfo* ring = algo::find(Coll::kAllReduce, "ring");
  const AlgorithmInfo* gather = algo::find(Coll::kGather, "direct");
  REQUIRE(ring);
  REQUIRE(gather);
  auto message = [](const Result<CompiledCall>& r) {
    return r.isOk() ? std::string("ok") : r.status().message();
  };
  CollShape s{Coll::kAllReduce, 0, 17, 8, DataType::kFloat32, RedOp::kSum, 0, false};
  CHECK_THAT(message(compile(s, *ring, nullptr)), Catch::Contains("nranks=17"));
  s.nranks = 4;
  s.coll = Coll::kSendRecv;
  CHECK_THAT(message(compileBest(s, "", nullptr)), Catch::Contains("coll=sendrecv"));
  s.coll = Coll::kBarrier;
  CHECK_THAT(message(compileBest(s, "", nullptr)), Catch::Contains("coll=barrier"));
  s.coll = Coll::kGather;
  s.inPlace = true;
  CHECK_THAT(message(compile(s, *gather, nullptr)), Catch::Contains("no in-place form"));
  s.inPlace = false;
  CHECK_THAT(message(compile(s, *ring, nullptr)), Catch::Contains("algorithm=ring"));
  const float two = 2;
  const auto* scalar = reinterpret_cast<const std::byte*>(&two);
  CHECK_THAT(message(compile(s, *gather, scalar)), Catch::Contains("coll=gather"));
  s.coll = Coll::kAllReduce;
  s.op = RedOp::kMax;
  CHECK_THAT(message(compile(s, *ring, scalar)), Catch::Contains("op=max"));
  s.op = RedOp::kSum;
  CHECK_THAT(message(compileBest(s, "no_such", nullptr)), Catch::Contains("requested=no_such"));
  s.root = 4;
  s.coll = Coll::kGather;
  CHECK_THAT(message(compile(s, *gather, nullptr)), Catch::Contains("root=4"));
}

// Not run by default: what compileBest picks and what every algorithm costs, as a multiple of
// the least traffic (`device_compile_test "[.report]"`).
TEST_CASE("compileBest's choices", "[.report]") {
  for (Coll coll : kColls)
    for (bool inPlace : {false, true}) {
      if (inPlace && !inPlaceDefined(coll)) continue;
      for (int n : {2, 4, 8}) {
        const CollShape shape{coll, 0, n, 1024, DataType::kFloat32, RedOp::kSum, 0, inPlace};
        auto best = compileBest(shape, "", nullptr);
        REQUIRE(best.isOk());
        const double least = static_cast<double>(minimumBytes(shape));
        std::string all;
        for (const AlgorithmInfo& info : algo::registry()) {
          if (info.coll != coll || (info.supports && !info.supports(shape))) continue;
          auto c = compile(shape, info, nullptr);
          all += c.isOk() ? fmt::format(" {} {:.2f}x/{}L", info.name,
                                        static_cast<double>(c->bytesRead + c->bytesWritten) / least,
                                        c->launches.size())
                          : fmt::format(" {} (error)", info.name);
        }
        std::cout << fmt::format("{} {} n={}: {} |{}\n", collName(coll),
                                 inPlace ? "in place" : "out of place", n, best->algorithm, all);
      }
    }
}

}  // namespace tutti::device
