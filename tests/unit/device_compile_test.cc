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
#include "tests/unit/host_layouts.h"

namespace tutti::device {
namespace {

namespace prog = kernels::program;
using algo::AlgorithmInfo;
using algo::Buf;
using algo::CollShape;
using algo::Op;
using algo::Schedule;
using algo::Step;

constexpr Coll kColls[] = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter,
                           Coll::kBroadcast, Coll::kReduce,    Coll::kAllToAll,
                           Coll::kGather,    Coll::kScatter};

bool reducing(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce;
}
bool inPlaceDefined(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kAllGather || c == Coll::kReduceScatter ||
         c == Coll::kBroadcast || c == Coll::kReduce;
}
bool rooted(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather || c == Coll::kScatter;
}

// What a call computes: the op, or premulsum (op sum plus a scalar).
struct Arith {
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  bool preMul = false;
  std::string name() const {
    return fmt::format("{} {}", dataTypeName(dtype), preMul ? "premulsum" : redOpName(op));
  }
};

// One rank's memory laid out as NCCL lays out the call's buffers (in place: one inside the
// other). `send` and `recv` are what the user passes.
struct UserRank {
  std::vector<std::byte> mem;
  size_t sendOff = 0, recvOff = 0;
  std::byte* send() { return mem.data() + sendOff; }
  std::byte* recv() { return mem.data() + recvOff; }
};

// A deterministic input element: nonzero (no -0, so max/min never compare +0 with -0, the one
// case where the op does not commute bit for bit), small enough that sums stay finite, with an
// occasional NaN or infinity in floating types.
void fillInput(DataType dtype, std::byte* p, size_t count, int rank) {
  std::mt19937_64 rng(static_cast<uint64_t>(rank) * 7919 + count * 104729 + 17);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t bits = rng();
    if (!isFloating(dtype)) {
      std::memcpy(p + i * dataTypeBytes(dtype), &bits, dataTypeBytes(dtype));
      continue;
    }
    double v = static_cast<double>(static_cast<int>(bits % 2001) - 1000) / 128.0;
    if (v == 0) v = 0.5;
    if (bits % 251 == 0) v = std::numeric_limits<double>::quiet_NaN();
    if (bits % 257 == 1) v = -std::numeric_limits<double>::infinity();
    kernels::storeFromDouble(dtype, p, i, v);
  }
}

std::vector<UserRank> layOut(const CollShape& shape, DataType dtype) {
  const size_t elem = dataTypeBytes(dtype);
  std::vector<UserRank> out(shape.nranks);
  for (int r = 0; r < shape.nranks; ++r) {
    CollShape s = shape;
    s.rank = r;
    const size_t in = algo::bufferCount(s, Buf::kInput),
                 outCount = algo::bufferCount(s, Buf::kOutput);
    const size_t rc = static_cast<size_t>(r) * shape.count;
    UserRank& u = out[r];
    size_t inAt = 0;  // element offset of the input inside mem
    if (!shape.inPlace) {
      u.mem.resize((in + outCount) * elem);
      u.recvOff = in * elem;
    } else if (shape.coll == Coll::kAllGather) {
      u.mem.resize(outCount * elem);
      inAt = rc;
    } else if (shape.coll == Coll::kReduceScatter) {
      u.mem.resize(in * elem);
      u.recvOff = rc * elem;
    } else {  // send == recv
      u.mem.resize(std::max(in, outCount) * elem);
    }
    u.sendOff = inAt * elem;
    for (size_t i = 0; i < u.mem.size(); ++i) u.mem[i] = std::byte{0x5A};  // never-written marker
    fillInput(dtype, u.send(), in, r);
  }
  return out;
}

// ---- the host engine's model: the schedules on a mailbox, with the engine's kernels ----

struct RefRank {
  Schedule sched;
  std::byte* input = nullptr;
  std::byte* output = nullptr;
  std::vector<std::byte> scratch;
  std::byte* at(Buf b, size_t off, size_t elem) {
    std::byte* base = b == Buf::kInput ? input : b == Buf::kOutput ? output : scratch.data();
    return base + off * elem;
  }
};

// Rounds in order; in a round, steps run as their messages arrive (as schedule_sim_test's run()).
std::string runMailbox(std::vector<RefRank>& ranks, size_t elem, kernels::Reduce2Fn reduce) {
  const int n = static_cast<int>(ranks.size());
  std::map<std::pair<int, int>, std::deque<std::vector<std::byte>>> mail;
  size_t nrounds = 0;
  for (auto& r : ranks) nrounds = std::max(nrounds, r.sched.rounds.size());
  for (size_t round = 0; round < nrounds; ++round) {
    std::vector<std::vector<bool>> done(n);
    for (int r = 0; r < n; ++r)
      done[r].assign(round < ranks[r].sched.rounds.size() ? ranks[r].sched.rounds[round].size() : 0,
                     false);
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < n; ++r) {
        for (size_t k = 0; k < done[r].size(); ++k) {
          if (done[r][k]) continue;
          const Step& st = ranks[r].sched.rounds[round][k];
          const size_t bytes = st.count * elem;
          std::byte* src = ranks[r].at(st.src, st.srcOffset, elem);
          std::byte* dst = ranks[r].at(st.dst, st.dstOffset, elem);
          std::vector<std::byte> in;
          if (st.op != Op::kSend && st.op != Op::kCopy && st.op != Op::kReduce) {
            auto& q = mail[{st.peer, r}];
            if (q.empty()) continue;
            in = std::move(q.front());
            q.pop_front();
            if (in.size() != bytes)
              return fmt::format("round {}: size mismatch at rank {}", round, r);
          }
          switch (st.op) {
            case Op::kSend:
              mail[{r, st.peer}].emplace_back(src, src + bytes);
              break;
            case Op::kRecv:
            case Op::kRecvCopySend:
              if (bytes) std::memcpy(dst, in.data(), bytes);
              break;
            case Op::kRecvReduce:
            case Op::kRecvReduceSend:
              if (bytes) reduce(dst, src, in.data(), st.count);
              break;
            case Op::kCopy:
              if (bytes && dst != src) std::memmove(dst, src, bytes);
              break;
            case Op::kReduce:
              if (bytes) reduce(dst, dst, src, st.count);
              break;
          }
          if (st.op == Op::kRecvCopySend || st.op == Op::kRecvReduceSend)
            mail[{r, st.sendPeer}].emplace_back(dst, dst + bytes);
          done[r][k] = true;
          progress = true;
        }
      }
    }
    for (int r = 0; r < n; ++r)
      for (size_t k = 0; k < done[r].size(); ++k)
        if (!done[r][k]) return fmt::format("deadlock in round {} at rank {} step {}", round, r, k);
  }
  return "";
}

std::vector<std::byte> scalarOf(DataType dtype) {
  std::vector<std::byte> s(8);
  kernels::storeFromDouble(dtype, s.data(), 0, isFloating(dtype) ? 0.75 : 3.0);
  return s;
}

// What the engine leaves in the users' buffers: premulsum scales into staging and runs the
// out-of-place schedule from there (nccl/group.cc runColl); avg divides the result at the end.
std::string runEngine(const CollShape& shape, const AlgorithmInfo& info, const Arith& a,
                      std::vector<UserRank>& users) {
  const size_t elem = dataTypeBytes(a.dtype);
  CollShape run = shape;
  run.dtype = a.dtype;
  run.op = a.op;
  if (a.preMul) run.inPlace = false;
  std::vector<RefRank> ranks(shape.nranks);
  std::vector<std::vector<std::byte>> staging(shape.nranks);
  const std::vector<std::byte> scalar = scalarOf(a.dtype);
  for (int r = 0; r < shape.nranks; ++r) {
    CollShape s = run;
    s.rank = r;
    auto built = info.build(s);
    if (!built.isOk()) return "build: " + built.status().message();
    RefRank& rk = ranks[r];
    rk.sched = std::move(built).value();
    rk.scratch.assign(rk.sched.scratchCount * elem, std::byte{0});
    rk.input = users[r].send();
    rk.output = users[r].recv();
    if (a.preMul) {
      const size_t in = algo::bufferCount(s, Buf::kInput);
      staging[r].resize(in * elem + 1);
      kernels::scaleFn(a.dtype)(staging[r].data(), users[r].send(), in, scalar.data());
      rk.input = staging[r].data();
    }
  }
  const RedOp kernelOp = a.op == RedOp::kAvg ? RedOp::kSum : a.op;
  if (std::string err = runMailbox(ranks, elem, kernels::reduce2Fn(a.dtype, kernelOp));
      !err.empty())
    return err;
  if (a.op == RedOp::kAvg && shape.nranks > 1)
    for (int r = 0; r < shape.nranks; ++r) {
      const bool holds = shape.coll == Coll::kAllReduce || shape.coll == Coll::kReduceScatter ||
                         (shape.coll == Coll::kReduce && r == shape.root);
      if (holds && shape.count > 0)
        kernels::divideFn(a.dtype)(users[r].recv(), shape.count, shape.nranks);
    }
  return "";
}

// Byte for byte, except that two NaNs of a floating type are equal.
std::string compareMemory(const std::vector<UserRank>& got, const std::vector<UserRank>& want,
                          DataType dtype) {
  const size_t elem = dataTypeBytes(dtype);
  for (size_t r = 0; r < got.size(); ++r) {
    const auto &g = got[r].mem, &w = want[r].mem;
    for (size_t i = 0; i < g.size(); i += elem) {
      if (std::memcmp(g.data() + i, w.data() + i, elem) == 0) continue;
      const double x = kernels::loadAsDouble(dtype, g.data(), i / elem);
      const double y = kernels::loadAsDouble(dtype, w.data(), i / elem);
      if (isFloating(dtype) && x != x && y != y) continue;
      return fmt::format("rank {} element {} of its memory: compiled {} engine {}", r, i / elem, x,
                         y);
    }
  }
  return "";
}

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

// Calls fn(info, shape) for every algorithm of the eight collectives and every shape of the
// given nranks and counts (both placements where defined, roots 0 and n-1 for rooted ones, host
// layouts for algorithms that need one).
template <typename Fn>
void forEachShape(std::initializer_list<int> nranks, bool allCounts, Fn&& fn) {
  for (const AlgorithmInfo& info : algo::registry()) {
    if (info.loaded ||
        std::find(std::begin(kColls), std::end(kColls), info.coll) == std::end(kColls))
      continue;
    for (int n : nranks) {
      std::vector<size_t> counts{static_cast<size_t>(n + 1), 1023};
      if (allCounts) counts = {0, 1, static_cast<size_t>(n - 1), static_cast<size_t>(n + 1), 1023};
      for (size_t count : counts)
        for (bool inPlace : {false, true}) {
          if (inPlace && !inPlaceDefined(info.coll)) continue;
          for (int root : {0, n - 1}) {
            if (root != 0 && !rooted(info.coll)) continue;
            for (const std::vector<int>& hostOf : algo::hostLayouts(n)) {
              CollShape shape{info.coll,          0,           n,    count,
                              DataType::kFloat32, RedOp::kSum, root, inPlace};
              const bool plain = !info.supports || info.supports(shape);
              if (!hostOf.empty() && plain) continue;
              shape.hostOf = hostOf;
              if (info.supports && !info.supports(shape)) continue;
              fn(info, shape);
            }
          }
        }
    }
  }
}

std::string label(const AlgorithmInfo& info, const CollShape& s, const Arith& a) {
  return fmt::format("{} {} nranks={} count={} root={} {} {} hostOf=[{}]", collName(info.coll),
                     info.name, s.nranks, s.count, s.root, s.inPlace ? "in place" : "out of place",
                     a.name(), fmt::join(s.hostOf, ","));
}

std::vector<Arith> mainAriths() {
  std::vector<Arith> out;
  for (DataType t : {DataType::kFloat32, DataType::kBfloat16, DataType::kFloat16, DataType::kInt32})
    for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg})
      out.push_back({t, op, false});
  for (DataType t : {DataType::kFloat32, DataType::kBfloat16, DataType::kFloat16})
    out.push_back({t, RedOp::kSum, true});
  return out;
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
  forEachShape({1, 2, 3, 4, 5, 6, 7, 8, 9, 16}, true,
               [&](const AlgorithmInfo& info, const CollShape& shape) {
                 one(info, shape, reducing(info.coll) ? ariths[which++ % ariths.size()] : Arith{});
               });
  // Every arithmetic on every shape.
  forEachShape({1, 2, 3, 4, 5, 6, 7, 8, 9, 16}, true,
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
  forEachShape({2, 5, 8}, false, [&](const AlgorithmInfo& info, const CollShape& shape) {
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
