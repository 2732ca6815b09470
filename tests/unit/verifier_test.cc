// File: tests/unit/verifier_test.cc
// The schedule verifier (algorithms/verifier.h): it accepts every registered algorithm over
// nranks 1..16, counts from 0 to 1<<20, roots and placements (hierarchical ones on multi-host
// layouts, nranks 2..12), and rejects hand-built broken schedules, one per check, with a message
// that names the rank, round and step.
#include "algorithms/verifier.h"

#include <catch2/catch.hpp>
#include <chrono>

#include <fmt/ranges.h>

#include "tests/unit/host_layouts.h"

namespace tutti::algo {
namespace {

using Rounds = std::vector<std::vector<Step>>;

Step send(int peer, Buf src, size_t off, size_t n) {
  return {.op = Op::kSend, .peer = peer, .src = src, .srcOffset = off, .count = n};
}
Step recv(int peer, Buf dst, size_t off, size_t n) {
  return {.op = Op::kRecv, .peer = peer, .dst = dst, .dstOffset = off, .count = n};
}
Step recvReduce(int peer, Buf src, size_t srcOff, Buf dst, size_t dstOff, size_t n) {
  return {.op = Op::kRecvReduce,
          .peer = peer,
          .src = src,
          .srcOffset = srcOff,
          .dst = dst,
          .dstOffset = dstOff,
          .count = n};
}
Step recvCopySend(int peer, int sendPeer, Buf dst, size_t dstOff, size_t n) {
  return {.op = Op::kRecvCopySend,
          .peer = peer,
          .sendPeer = sendPeer,
          .dst = dst,
          .dstOffset = dstOff,
          .count = n};
}
Step copy(Buf src, size_t srcOff, Buf dst, size_t dstOff, size_t n) {
  return {.op = Op::kCopy,
          .src = src,
          .srcOffset = srcOff,
          .dst = dst,
          .dstOffset = dstOff,
          .count = n};
}
Step reduce(Buf src, size_t srcOff, Buf dst, size_t dstOff, size_t n) {
  return {.op = Op::kReduce,
          .src = src,
          .srcOffset = srcOff,
          .dst = dst,
          .dstOffset = dstOff,
          .count = n};
}
Schedule sched(Rounds rounds, size_t scratch = 0) { return Schedule{std::move(rounds), scratch}; }

CollShape shapeOf(Coll coll, int n, size_t count, bool inPlace = false, int root = 0) {
  return CollShape{coll, 0, n, count, DataType::kFloat32, RedOp::kSum, root, inPlace};
}

// The verifier's message, or "ok".
std::string check(const CollShape& s, const std::vector<Schedule>& perRank) {
  Status st = verify(s, perRank);
  if (st.isOk()) return "ok";
  CHECK(st.code() == Code::kInvalidUsage);
  return st.message();
}

// A correct two-rank allreduce: exchange inputs, reduce the peer's into the own.
std::vector<Schedule> pairAllReduce(size_t c) {
  std::vector<Schedule> out;
  for (int r = 0; r < 2; ++r)
    out.push_back(sched(
        {{send(1 - r, Buf::kInput, 0, c), recvReduce(1 - r, Buf::kInput, 0, Buf::kOutput, 0, c)}}));
  return out;
}

bool inPlaceDefined(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kAllGather || c == Coll::kReduceScatter ||
         c == Coll::kBroadcast || c == Coll::kReduce;
}

}  // namespace

TEST_CASE("the verifier accepts every registered algorithm", "[verifier]") {
  REQUIRE(!registry().empty());
  const auto start = std::chrono::steady_clock::now();
  for (const AlgorithmInfo& algo : registry()) {
    if (algo.loaded) continue;
    for (int n = 1; n <= 16; ++n) {
      for (size_t count : {size_t{0}, size_t{1}, static_cast<size_t>(n - 1),
                           static_cast<size_t>(n + 1), size_t{1009}, size_t{1} << 20}) {
        for (bool inPlace : {false, true}) {
          if (inPlace && !inPlaceDefined(algo.coll)) continue;
          for (int root : {0, n / 2, n - 1}) {
            CollShape s = shapeOf(algo.coll, n, count, inPlace, root);
            Status st = verifyAlgorithm(algo, s);
            INFO(fmt::format("{} {} nranks={} count={} root={} {}", collName(algo.coll), algo.name,
                             n, count, root, inPlace ? "in-place" : "out-of-place"));
            INFO(st.message());
            REQUIRE(st.isOk());
          }
        }
      }
    }
  }
  // Run-length buffers: a count of 1<<20 costs what a count of 1 costs.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
}

TEST_CASE("the verifier accepts every hierarchical algorithm on multi-host layouts",
          "[verifier]") {
  // The test above gives no host map, so hierarchical algorithms decline there. Here every
  // algorithm that declines without one runs on hostLayouts (hosts of 2 and of 3 ranks, ranks
  // dealt round-robin over 2 hosts), with counts up to 8 MiB + 12 bytes of float, where the
  // pipelined hierarchical allreduce cuts 2 and 4 pieces.
  size_t verified = 0, pipelined = 0;
  for (const AlgorithmInfo& algo : registry()) {
    if (algo.loaded) continue;
    for (int n = 2; n <= 12; ++n) {
      for (const std::vector<int>& hostOf : hostLayouts(n)) {
        if (hostOf.empty()) continue;
        for (size_t count : {size_t{0}, size_t{1}, static_cast<size_t>(n + 1), size_t{1009},
                             size_t{1} << 20, (size_t{1} << 21) + 3}) {
          for (bool inPlace : {false, true}) {
            if (inPlace && !inPlaceDefined(algo.coll)) continue;
            for (int root : {0, n - 1}) {
              CollShape s = shapeOf(algo.coll, n, count, inPlace, root);
              if (!algo.supports || algo.supports(s)) continue;  // runs without a host map
              s.hostOf = hostOf;
              if (!algo.supports(s)) continue;
              Status st = verifyAlgorithm(algo, s);
              INFO(fmt::format("{} {} nranks={} count={} root={} {} hostOf=[{}]",
                               collName(algo.coll), algo.name, n, count, root,
                               inPlace ? "in-place" : "out-of-place", fmt::join(hostOf, ",")));
              INFO(st.message());
              REQUIRE(st.isOk());
              ++verified;
              pipelined += algo.name == "hierarchical_pipelined";
            }
          }
        }
      }
    }
  }
  CHECK(verified > 1000);
  CHECK(pipelined > 0);
}

TEST_CASE("the verifier is count-oblivious: 64 ranks and 1<<20 elements", "[verifier]") {
  const AlgorithmInfo* ring = find(Coll::kAllReduce, "ring");
  REQUIRE(ring);
  const auto start = std::chrono::steady_clock::now();
  Status st = verifyAlgorithm(*ring, shapeOf(Coll::kAllReduce, 64, size_t{1} << 20));
  INFO(st.message());
  REQUIRE(st.isOk());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
}

TEST_CASE("in place, input and output alias as in NCCL", "[verifier]") {
  CHECK(check(shapeOf(Coll::kAllReduce, 2, 4), pairAllReduce(4)) == "ok");
  // In place the send reads the range that the concurrent recvReduce writes.
  CHECK_THAT(check(shapeOf(Coll::kAllReduce, 2, 4, true), pairAllReduce(4)),
             Catch::StartsWith("verify: rank 0 round 0 step 1 (op recvReduce, peer 1): writes "
                               "output that step 0 of the same round reads"));
  // Staging the own input in scratch first makes it correct in place too.
  std::vector<Schedule> p;
  for (int r = 0; r < 2; ++r)
    p.push_back(sched(
        {{copy(Buf::kInput, 0, Buf::kScratch, 0, 4)},
         {send(1 - r, Buf::kScratch, 0, 4), recvReduce(1 - r, Buf::kInput, 0, Buf::kOutput, 0, 4)}},
        4));
  CHECK(check(shapeOf(Coll::kAllReduce, 2, 4), p) == "ok");
  CHECK(check(shapeOf(Coll::kAllReduce, 2, 4, true), p) == "ok");
}

TEST_CASE("verify rejects a message size mismatch", "[verifier]") {
  auto p = pairAllReduce(4);
  p[1].rounds[0][1].count = 3;
  CHECK_THAT(check(shapeOf(Coll::kAllReduce, 2, 4), p),
             Catch::StartsWith("verify: rank 1 round 0 step 1 (op recvReduce, peer 0): receives "
                               "3 elements but the matching message from rank 0") &&
                 Catch::EndsWith("(range [0,+3))"));
}

TEST_CASE("verify rejects a send to the wrong peer", "[verifier]") {
  // Gather to root 0 over 3 ranks; rank 1 sends to rank 2 instead.
  const size_t c = 2;
  std::vector<Schedule> p{sched({{copy(Buf::kInput, 0, Buf::kOutput, 0, c),
                                  recv(1, Buf::kOutput, c, c), recv(2, Buf::kOutput, 2 * c, c)}}),
                          sched({{send(2, Buf::kInput, 0, c)}}),
                          sched({{send(0, Buf::kInput, 0, c)}})};
  CHECK_THAT(check(shapeOf(Coll::kGather, 3, c), p),
             Catch::StartsWith("verify: rank 0 round 0 step 1 (op recv, peer 1): no matching "
                               "send from rank 1 in round 0"));
  p[1].rounds[0][0].peer = 0;
  CHECK(check(shapeOf(Coll::kGather, 3, c), p) == "ok");
}

TEST_CASE("verify rejects a send received in a later round", "[verifier]") {
  const size_t c = 3;
  std::vector<Schedule> p{
      sched({{copy(Buf::kInput, 0, Buf::kOutput, 0, c), send(1, Buf::kInput, 0, c)}}),
      sched({{}, {recv(0, Buf::kOutput, 0, c)}})};
  CHECK_THAT(check(shapeOf(Coll::kBroadcast, 2, c), p),
             Catch::StartsWith("verify: rank 0 round 0 step 1 (op send, peer 1): rank 1 does not "
                               "receive this message in round 0"));
}

TEST_CASE("verify rejects a missing contribution", "[verifier]") {
  const AlgorithmInfo* ring = find(Coll::kAllReduce, "ring");
  REQUIRE(ring);
  const int n = 4;
  const size_t c = 8;
  std::vector<Schedule> p;
  for (int r = 0; r < n; ++r) {
    CollShape s = shapeOf(Coll::kAllReduce, n, c);
    s.rank = r;
    p.push_back(ring->build(s).value());
  }
  REQUIRE(check(shapeOf(Coll::kAllReduce, n, c), p) == "ok");
  REQUIRE(p[2].rounds[1][1].op == Op::kRecvReduce);
  p[2].rounds[1][1].op = Op::kRecv;  // rank 2 forgets to add its own chunk
  const std::string msg = check(shapeOf(Coll::kAllReduce, n, c), p);
  CHECK_THAT(msg, Catch::StartsWith("verify: rank ") && Catch::Contains(" round ") &&
                      Catch::Contains(" step ") && Catch::Contains("(missing ranks 2)") &&
                      Catch::Contains("(range ["));
}

TEST_CASE("verify rejects a double contribution", "[verifier]") {
  auto p = pairAllReduce(4);
  p[0].rounds.push_back({reduce(Buf::kInput, 0, Buf::kOutput, 0, 4)});
  CHECK_THAT(check(shapeOf(Coll::kAllReduce, 2, 4), p),
             Catch::StartsWith("verify: rank 0 round 1 step 0 (op reduce): double contribution: "
                               "rank 0") &&
                 Catch::EndsWith("(range [0,+4))"));
}

TEST_CASE("verify rejects reducing different elements", "[verifier]") {
  auto p = pairAllReduce(4);
  p[1].rounds[0][1] = recvReduce(0, Buf::kInput, 1, Buf::kOutput, 0, 3);
  p[0].rounds[0][0].count = 3;
  CHECK_THAT(check(shapeOf(Coll::kAllReduce, 2, 4), p),
             Catch::StartsWith("verify: rank 1 round 0 step 1 (op recvReduce, peer 0): reduces "
                               "source index 1 with incoming index 0"));
}

TEST_CASE("verify rejects a read of scratch that nothing wrote", "[verifier]") {
  const size_t c = 4;
  std::vector<Schedule> p{
      sched({{copy(Buf::kInput, 0, Buf::kOutput, 0, c), send(1, Buf::kScratch, 0, c)}}, c),
      sched({{recv(0, Buf::kOutput, 0, c)}})};
  CHECK(check(shapeOf(Coll::kBroadcast, 2, c), p) ==
        "verify: rank 0 round 0 step 1 (op send, peer 1): reads scratch that nothing wrote "
        "(range [0,+4))");
  // A non-root output that nothing wrote is just as uninitialised.
  p = {sched({{copy(Buf::kInput, 0, Buf::kOutput, 0, c), recv(1, Buf::kScratch, 0, c)}}, c),
       sched({{send(0, Buf::kOutput, 0, c)}})};
  CHECK(check(shapeOf(Coll::kBroadcast, 2, c), p) ==
        "verify: rank 1 round 0 step 0 (op send, peer 0): reads output that nothing wrote "
        "(range [0,+4))");
}

TEST_CASE("verify rejects ranges outside their buffers and writes to the input", "[verifier]") {
  auto p = pairAllReduce(4);
  p[0].rounds[0][0] = send(1, Buf::kInput, 2, 4);
  CHECK(check(shapeOf(Coll::kAllReduce, 2, 4), p) ==
        "verify: rank 0 round 0 step 0 (op send, peer 1): reads input out of bounds (size 4) "
        "(range [2,+4))");
  p = pairAllReduce(4);
  p[1].rounds[0][1] = recvReduce(0, Buf::kInput, 0, Buf::kInput, 0, 4);
  CHECK_THAT(check(shapeOf(Coll::kAllReduce, 2, 4), p),
             Catch::StartsWith("verify: rank 1 round 0 step 1") &&
                 Catch::Contains("writes the input buffer"));
  p = pairAllReduce(4);
  p[1].rounds[0][1] = recvReduce(0, Buf::kInput, 0, Buf::kScratch, 0, 4);  // no scratch
  CHECK_THAT(check(shapeOf(Coll::kAllReduce, 2, 4), p),
             Catch::Contains("writes scratch out of bounds (size 0)"));
}

TEST_CASE("verify rejects a forwarding cycle and a receive nothing sends", "[verifier]") {
  const size_t c = 2;
  // Broadcast from 0 where ranks 1 and 2 each wait for the other to forward first.
  std::vector<Schedule> p{sched({{copy(Buf::kInput, 0, Buf::kOutput, 0, c)}}),
                          sched({{recvCopySend(2, 2, Buf::kOutput, 0, c)}}),
                          sched({{recvCopySend(1, 1, Buf::kOutput, 0, c)}})};
  CHECK_THAT(check(shapeOf(Coll::kBroadcast, 3, c), p),
             Catch::StartsWith("verify: rank 1 round 0 step 0 (op recvCopySend, peer 2, "
                               "sendPeer 2): deadlock: rank 1 step 0 waits for the message "
                               "forwarded by rank 2 step 0") &&
                 Catch::Contains("forwarding cycle"));
  // An acyclic chain 0 -> 1 -> 2 in one round is fine.
  p[0].rounds[0].push_back(send(1, Buf::kInput, 0, c));
  p[1].rounds[0][0] = recvCopySend(0, 2, Buf::kOutput, 0, c);
  p[2].rounds[0][0] = recv(1, Buf::kOutput, 0, c);
  CHECK(check(shapeOf(Coll::kBroadcast, 3, c), p) == "ok");
  // Rank 2 waits for a message that rank 1 never sends.
  p[1].rounds[0][0] = recv(0, Buf::kOutput, 0, c);
  CHECK_THAT(check(shapeOf(Coll::kBroadcast, 3, c), p),
             Catch::StartsWith("verify: rank 2 round 0 step 0 (op recv, peer 1): no matching "
                               "send from rank 1 in round 0"));
}

TEST_CASE("verify rejects an allgather with swapped blocks", "[verifier]") {
  const size_t c = 4;
  auto rank = [&](int r, size_t own, size_t other) {
    return sched({{copy(Buf::kInput, 0, Buf::kOutput, own, c), send(1 - r, Buf::kInput, 0, c),
                   recv(1 - r, Buf::kOutput, other, c)}});
  };
  CHECK(check(shapeOf(Coll::kAllGather, 2, c), {rank(0, 0, c), rank(1, c, 0)}) == "ok");
  CHECK_THAT(check(shapeOf(Coll::kAllGather, 2, c), {rank(0, 0, c), rank(1, 0, c)}),
             Catch::StartsWith("verify: rank 1 round 0 step 0 (op copy): leaves output holding "
                               "rank 1's input [0,+4) where rank 0's input [0,+4) is required") &&
                 Catch::EndsWith("(range [0,+4))"));
}

TEST_CASE("verify rejects steps of one round that touch the same range", "[verifier]") {
  const size_t c = 4;
  // Out of place this is correct; in place the receive overwrites the input being sent.
  std::vector<Schedule> p;
  for (int r = 0; r < 2; ++r)
    p.push_back(sched({{send(1 - r, Buf::kInput, 0, c), recv(1 - r, Buf::kOutput, 0, c)},
                       {reduce(Buf::kInput, 0, Buf::kOutput, 0, c)}}));
  CHECK(check(shapeOf(Coll::kAllReduce, 2, c), p) == "ok");
  CHECK_THAT(check(shapeOf(Coll::kAllReduce, 2, c, true), p),
             Catch::StartsWith("verify: rank 0 round 0 step 1 (op recv, peer 1): writes output "
                               "that step 0 of the same round reads"));
}

TEST_CASE("verify rejects forwards to one peer that would interleave", "[verifier]") {
  const size_t c = 2;
  std::vector<Schedule> p{
      sched({{send(2, Buf::kInput, 0, c)}}), sched({{send(2, Buf::kInput, 0, c)}}),
      sched({{recvCopySend(0, 3, Buf::kOutput, 0, c), recvCopySend(1, 3, Buf::kOutput, c, c)}}),
      sched({{recv(2, Buf::kOutput, 0, c), recv(2, Buf::kOutput, c, c)}})};
  CHECK_THAT(check(shapeOf(Coll::kAllReduce, 4, 2 * c), p),
             Catch::StartsWith("verify: rank 2 round 0 step 1") &&
                 Catch::Contains("slices would interleave"));
}

TEST_CASE("verify rejects a barrier where a rank does not hear from everyone", "[verifier]") {
  std::vector<Schedule> p;
  for (int r = 0; r < 3; ++r)  // one ring step: rank r hears from r-1 only
    p.push_back(sched(
        {{send((r + 1) % 3, Buf::kScratch, 0, 1), recv((r + 2) % 3, Buf::kScratch, 1, 1)}}, 2));
  CHECK_THAT(check(shapeOf(Coll::kBarrier, 3, 0), p),
             Catch::StartsWith("verify: rank 0 round 0: finishes the barrier without having "
                               "heard from rank 1"));
  for (int r = 0; r < 3; ++r)  // a second step forwards what was heard
    p[r].rounds.push_back(
        {send((r + 1) % 3, Buf::kScratch, 0, 1), recv((r + 2) % 3, Buf::kScratch, 1, 1)});
  CHECK(check(shapeOf(Coll::kBarrier, 3, 0), p) == "ok");
}

TEST_CASE("verifyAlgorithm: declines and inconsistent declines", "[verifier]") {
  AlgorithmInfo declines{.name = "test_declines",
                         .coll = Coll::kAllReduce,
                         .summary = "declines everything",
                         .supports = [](const CollShape&) { return false; },
                         .build = [](const CollShape&) -> Result<Schedule> { return Schedule{}; }};
  CHECK(verifyAlgorithm(declines, shapeOf(Coll::kAllReduce, 4, 8)).isOk());
  AlgorithmInfo partial = declines;
  partial.supports = [](const CollShape& s) { return s.rank == 0; };
  Status st = verifyAlgorithm(partial, shapeOf(Coll::kAllReduce, 4, 8));
  CHECK_THAT(st.message(), Catch::Contains("declines rank 1"));
  AlgorithmInfo nothing = declines;
  nothing.supports = nullptr;  // builds empty schedules: the output is never written
  st = verifyAlgorithm(nothing, shapeOf(Coll::kAllReduce, 2, 8));
  CHECK_THAT(st.message(), Catch::StartsWith("verify: rank 0: output is never written"));
}

// ---- lastTouchWrites: which receives and copies no later step reads back (streaming) ----

// The same question answered by brute force: a plain receive or a copy is a last touch when no
// step of a later round names an element of its range (in place: input and output are one
// buffer).
std::vector<std::vector<uint8_t>> lastTouchBruteForce(const Schedule& s, bool inPlace,
                                                      bool receives) {
  auto domain = [&](Buf b) { return inPlace && b == Buf::kInput ? Buf::kOutput : b; };
  std::vector<std::vector<uint8_t>> out(s.rounds.size());
  for (size_t r = 0; r < s.rounds.size(); ++r)
    for (const Step& st : s.rounds[r]) {
      bool last = (st.op == Op::kCopy || (receives && st.op == Op::kRecv)) && st.count > 0;
      for (size_t q = r + 1; last && q < s.rounds.size(); ++q)
        for (const Step& o : s.rounds[q]) {
          if (o.count == 0) continue;
          const bool reads = o.op != Op::kRecv && o.op != Op::kRecvCopySend;
          const bool writes = o.op != Op::kSend;
          auto hits = [&](Buf b, size_t off) {
            if (domain(b) != domain(st.dst)) return false;
            if (inPlace && domain(b) == Buf::kOutput) return true;  // displacement unknown
            return off < st.dstOffset + st.count && st.dstOffset < off + o.count;
          };
          if ((reads && hits(o.src, o.srcOffset)) || (writes && hits(o.dst, o.dstOffset)))
            last = false;
        }
      out[r].push_back(last);
    }
  return out;
}

TEST_CASE("lastTouchWrites marks the receives and copies that no later round touches",
          "[schedule]") {
  const Schedule s = sched({{recv(1, Buf::kOutput, 0, 4), recv(2, Buf::kScratch, 0, 4)},
                            {send(1, Buf::kOutput, 2, 2), recv(1, Buf::kOutput, 4, 4),
                             copy(Buf::kScratch, 0, Buf::kOutput, 8, 4)},
                            {recv(2, Buf::kOutput, 12, 4), send(2, Buf::kInput, 0, 4)}},
                           4);
  using V = std::vector<std::vector<uint8_t>>;
  // output[0,4) is sent later, scratch is copied later, the rest is never touched again.
  CHECK(lastTouchWrites(s, false, true) == V{{0, 0}, {0, 1, 1}, {1, 0}});
  CHECK(lastTouchWrites(s, false, false) == V{{0, 0}, {0, 0, 1}, {0, 0}});
  // In place the later send of input could read output[4,12): only the final round's receive.
  CHECK(lastTouchWrites(s, true, true) == V{{0, 0}, {0, 0, 0}, {1, 0}});
  CHECK(lastTouchWrites(Schedule{}, false, true).empty());
}

TEST_CASE("lastTouchWrites agrees with brute force on every algorithm", "[schedule]") {
  for (const AlgorithmInfo& algo : registry()) {
    if (algo.loaded) continue;
    for (int n = 2; n <= 9; ++n)
      for (size_t count : {size_t{7}, size_t{1009}, size_t{1} << 16})
        for (bool inPlace : {false, true}) {
          CollShape shape = shapeOf(algo.coll, n, count, inPlace);
          for (int r = 0; r < n; ++r) {
            shape.rank = r;
            auto built = algo.build(shape);
            if (!built.isOk()) continue;  // declines this shape (hierarchical without groups)
            INFO(fmt::format("{} nranks={} rank={} count={} {}", algo.name, n, r, count,
                             inPlace ? "in place" : "out of place"));
            for (bool receives : {false, true})
              REQUIRE(lastTouchWrites(built.value(), inPlace, receives) ==
                      lastTouchBruteForce(built.value(), inPlace, receives));
          }
        }
  }
  // Not vacuous: out of place, every rank of the 4-rank tree is a leaf of one tree and takes its
  // final pieces with plain receives that nothing reads back.
  const AlgorithmInfo* dbt = find(Coll::kAllReduce, "double_binary_tree");
  REQUIRE(dbt);
  for (int r = 0; r < 4; ++r) {
    CollShape shape = shapeOf(Coll::kAllReduce, 4, size_t{1} << 20);
    shape.rank = r;
    auto built = dbt->build(shape);
    REQUIRE(built.isOk());
    size_t marked = 0;
    for (const auto& round : lastTouchWrites(built.value(), false, true))
      for (uint8_t m : round) marked += m;
    CHECK(marked > 0);
  }
  // And copies: the 2-rank ring allgather's copy of its own block into the output, out of place.
  const AlgorithmInfo* ring = find(Coll::kAllGather, "ring");
  REQUIRE(ring);
  auto built = ring->build(shapeOf(Coll::kAllGather, 2, 1000));
  REQUIRE(built.isOk());
  const auto marks = lastTouchWrites(built.value(), false, false);
  size_t copies = 0;
  for (size_t r = 0; r < marks.size(); ++r)
    for (size_t i = 0; i < marks[r].size(); ++i)
      if (built.value().rounds[r][i].op == Op::kCopy) copies += marks[r][i];
  CHECK(copies == 1);
}

}  // namespace tutti::algo
