// File: tests/unit/schedule_sim_test.cc
// Runs every registered algorithm's schedules for all ranks on an in-memory mailbox (float64
// elements), for nranks 1..9 and 16 and counts 0, 1, n-1, n+1, 1023, in place and out of place
// (hierarchical algorithms also on synthetic multi-host layouts, see hostLayouts),
// and checks: messages of the same size matched in order per (src, dst) pair, every message of
// round k consumed in round k (the engine's deadlock-freedom rule), no deadlock inside a round,
// and the collective's result against a reference. A new algorithm is tested with no new code.
#include <catch2/catch.hpp>

#include <cstring>
#include <deque>
#include <map>
#include <numeric>

#include <fmt/ranges.h>

#include "algorithms/algorithm.h"
#include "tests/unit/host_layouts.h"

namespace tutti::algo {
namespace {

struct RankState {
  Schedule sched;
  std::vector<double> input, output, scratch;
  // In place, one buffer lives inside the other (NCCL's layout): input at output + aliasOffset
  // (allreduce, allgather, broadcast, reduce) or output at input + aliasOffset (reducescatter).
  bool inputInOutput = false, outputInInput = false;
  size_t aliasOffset = 0;
  std::pair<std::vector<double>*, size_t> at(Buf b, size_t off) {
    if (b == Buf::kInput) return inputInOutput ? std::make_pair(&output, aliasOffset + off)
                                               : std::make_pair(&input, off);
    if (b == Buf::kOutput) return outputInInput ? std::make_pair(&input, aliasOffset + off)
                                                : std::make_pair(&output, off);
    return {&scratch, off};
  }
};

double inputValue(int rank, size_t i) { return rank * 1000.0 + static_cast<double>(i) + 1.0; }

// In-place calls read their input from (a copy of) the output buffer at NCCL's offset.
void setUpBuffers(const CollShape& s, RankState& st) {
  const size_t inCount = bufferCount(s, Buf::kInput), outCount = bufferCount(s, Buf::kOutput);
  st.input.resize(inCount);
  for (size_t i = 0; i < inCount; ++i) st.input[i] = inputValue(s.rank, i);
  st.output.assign(outCount, -1.0);
  st.scratch.assign(st.sched.scratchCount, std::nan(""));
}

std::string run(std::vector<RankState>& ranks) {
  const int n = static_cast<int>(ranks.size());
  std::map<std::pair<int, int>, std::deque<std::vector<double>>> mail;
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
        if (round >= ranks[r].sched.rounds.size()) continue;
        auto& steps = ranks[r].sched.rounds[round];
        for (size_t k = 0; k < steps.size(); ++k) {
          if (done[r][k]) continue;
          const Step& st = steps[k];
          auto [src, srcOff] = ranks[r].at(st.src, st.srcOffset);
          auto [dst, dstOff] = ranks[r].at(st.dst, st.dstOffset);
          auto slice = [&](std::vector<double>* v, size_t off) {
            return std::vector<double>(v->begin() + off, v->begin() + off + st.count);
          };
          std::vector<double> in;
          const bool receives = st.op == Op::kRecv || st.op == Op::kRecvReduce ||
                                st.op == Op::kRecvReduceSend || st.op == Op::kRecvCopySend;
          if (receives) {
            auto& q = mail[{st.peer, r}];
            if (q.empty()) continue;  // not yet: maybe later in this round
            in = std::move(q.front());
            q.pop_front();
            if (in.size() != st.count)
              return fmt::format("round {}: rank {} receives {} elements from rank {} which sent {}",
                                 round, r, st.count, st.peer, in.size());
          }
          switch (st.op) {
            case Op::kSend: mail[{r, st.peer}].push_back(slice(src, srcOff)); break;
            case Op::kRecv:
            case Op::kRecvCopySend:
              std::copy(in.begin(), in.end(), dst->begin() + dstOff);
              break;
            case Op::kRecvReduce:
            case Op::kRecvReduceSend: {
              auto s = slice(src, srcOff);
              for (size_t i = 0; i < st.count; ++i) (*dst)[dstOff + i] = s[i] + in[i];
              break;
            }
            case Op::kCopy: {
              auto s = slice(src, srcOff);
              std::copy(s.begin(), s.end(), dst->begin() + dstOff);
              break;
            }
            case Op::kReduce:
              for (size_t i = 0; i < st.count; ++i) (*dst)[dstOff + i] += (*src)[srcOff + i];
              break;
          }
          if (st.op == Op::kRecvCopySend || st.op == Op::kRecvReduceSend)
            mail[{r, st.sendPeer}].push_back(slice(dst, dstOff));
          done[r][k] = true;
          progress = true;
        }
      }
    }
    for (int r = 0; r < n; ++r)
      for (size_t k = 0; k < done[r].size(); ++k)
        if (!done[r][k])
          return fmt::format("deadlock in round {}: rank {} step {} ({} from rank {}) never "
                             "matched",
                             round, r, k, opName(ranks[r].sched.rounds[round][k].op),
                             ranks[r].sched.rounds[round][k].peer);
    for (auto& [pair, q] : mail)
      if (!q.empty())
        return fmt::format("round {}: {} message(s) from rank {} to rank {} were not received in "
                           "the same round",
                           round, q.size(), pair.first, pair.second);
  }
  return "";
}

// The expected output element i of rank r (nullopt: not checked).
std::optional<double> expected(const CollShape& s, int r, size_t i) {
  const int n = s.nranks;
  const size_t c = s.count;
  auto sumOver = [&](size_t idx) {
    double v = 0;
    for (int q = 0; q < n; ++q) v += inputValue(q, idx);
    return v;
  };
  switch (s.coll) {
    case Coll::kAllReduce: return sumOver(i);
    case Coll::kReduce: return r == s.root ? std::optional<double>(sumOver(i)) : std::nullopt;
    case Coll::kReduceScatter: return sumOver(static_cast<size_t>(r) * c + i);
    case Coll::kAllGather: return inputValue(static_cast<int>(i / c), i % c);
    case Coll::kBroadcast: return inputValue(s.root, i);
    case Coll::kAllToAll: return inputValue(static_cast<int>(i / c), static_cast<size_t>(r) * c + i % c);
    case Coll::kGather:
      return r == s.root ? std::optional<double>(inputValue(static_cast<int>(i / c), i % c))
                         : std::nullopt;
    case Coll::kScatter: return inputValue(s.root, static_cast<size_t>(r) * c + i);
    default: return std::nullopt;
  }
}

bool inPlaceDefined(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kAllGather || c == Coll::kReduceScatter ||
         c == Coll::kBroadcast || c == Coll::kReduce;
}

}  // namespace

TEST_CASE("every registered algorithm is correct on an in-memory mailbox", "[schedule]") {
  REQUIRE(!registry().empty());
  for (const AlgorithmInfo& algo : registry()) {
    for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16}) {
      for (size_t count : {size_t{0}, size_t{1}, static_cast<size_t>(n - 1),
                           static_cast<size_t>(n + 1), size_t{1023}}) {
        for (bool inPlace : {false, true}) {
          if (inPlace && !inPlaceDefined(algo.coll)) continue;
          for (int root : {0, n - 1}) for (const std::vector<int>& hostOf : hostLayouts(n)) {
            CollShape shape{algo.coll, 0, n, count, DataType::kFloat64, RedOp::kSum, root, inPlace};
            // Algorithms that run without a host map are not run again with one (they ignore it).
            if (!hostOf.empty() && (!algo.supports || algo.supports(shape))) continue;
            shape.hostOf = hostOf;
            INFO(fmt::format("{}:{} nranks={} count={} {} root={} hostOf=[{}]", collName(algo.coll),
                             algo.name, n, count, inPlace ? "in-place" : "out-of-place", root,
                             fmt::join(hostOf, ",")));
            std::vector<RankState> ranks(n);
            bool supported = true;
            for (int r = 0; r < n; ++r) {
              CollShape s = shape;
              s.rank = r;
              if (algo.supports && !algo.supports(s)) supported = false;
              if (!supported) break;
              auto sched = algo.build(s);
              REQUIRE(sched.isOk());
              ranks[r].sched = std::move(sched).value();
              setUpBuffers(s, ranks[r]);
              if (inPlace) {
                RankState& st = ranks[r];
                const size_t rankOffset = static_cast<size_t>(r) * count;
                if (algo.coll == Coll::kReduceScatter) {
                  st.outputInInput = true;
                  st.aliasOffset = rankOffset;
                } else if (st.output.size() >= st.input.size()) {  // not a non-root reduce
                  st.inputInOutput = true;
                  st.aliasOffset = algo.coll == Coll::kAllGather ? rankOffset : 0;
                  // Non-root broadcast ranks have no input; the others' input values move in.
                  for (size_t i = 0; i < st.input.size(); ++i)
                    st.output[st.aliasOffset + i] = st.input[i];
                }
              }
            }
            if (!supported) continue;
            std::string err = run(ranks);
            INFO(err);
            REQUIRE(err.empty());
            if (algo.coll == Coll::kBarrier) continue;
            for (int r = 0; r < n; ++r) {
              CollShape s = shape;
              s.rank = r;
              const size_t outCount = bufferCount(s, Buf::kOutput);
              for (size_t i = 0; i < outCount; ++i) {
                auto e = expected(s, r, i);
                if (!e) continue;
                auto [v, off] = ranks[r].at(Buf::kOutput, i);
                INFO("rank " << r << " element " << i);
                REQUIRE((*v)[off] == *e);
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("hierarchical_pipelined runs the hierarchical allreduce in pieces", "[schedule]") {
  // From 4 MiB the vector is cut into pieces of at least 2 MiB (at most 8), piece p's stage t in
  // round p + t: 2(L-1) + 2(H-1) + P - 1 rounds ("hierarchical" runs one piece). Counts of
  // float64: 3 MiB (declined: one piece), 4 MiB (2 pieces), 10 MiB + 7 elements (5). Results
  // exact on every layout, in and out of place.
  for (std::string_view name : {"hierarchical", "hierarchical_pipelined"}) {
    const AlgorithmInfo* algo = find(Coll::kAllReduce, name);
    REQUIRE(algo != nullptr);
    for (int n : {4, 6}) {  // 2 and 3 hosts of 2 ranks, 2 hosts of 3, groups not contiguous
      for (const std::vector<int>& hostOf : hostLayouts(n)) {
        if (hostOf.empty()) continue;
        const int H = *std::max_element(hostOf.begin(), hostOf.end()) + 1, L = n / H;
        for (auto [count, pieces] : {std::pair{size_t{393216}, size_t{1}},
                                     std::pair{size_t{524288}, size_t{2}},
                                     std::pair{size_t{1310727}, size_t{5}}}) {
          for (bool inPlace : {false, true}) {
            CollShape shape{Coll::kAllReduce, 0, n, count, DataType::kFloat64, RedOp::kSum, 0,
                            inPlace};
            shape.hostOf = hostOf;
            INFO(fmt::format("{} nranks={} count={} {} hostOf=[{}]", name, n, count,
                             inPlace ? "in place" : "out of place", fmt::join(hostOf, ",")));
            const bool pipelined = name == "hierarchical_pipelined";
            REQUIRE(algo->supports(shape) == (!pipelined || pieces > 1));
            if (!algo->supports(shape)) continue;
            if (!pipelined) pieces = 1;
            std::vector<RankState> ranks(n);
            for (int r = 0; r < n; ++r) {
              CollShape sr = shape;
              sr.rank = r;
              auto sched = algo->build(sr);
              REQUIRE(sched.isOk());
              ranks[r].sched = std::move(sched).value();
              REQUIRE(ranks[r].sched.rounds.size() == 2 * (L - 1) + 2 * (H - 1) + pieces - 1);
              setUpBuffers(sr, ranks[r]);
              if (inPlace) {
                ranks[r].inputInOutput = true;
                ranks[r].output = ranks[r].input;
              }
            }
            const std::string err = run(ranks);
            INFO(err);
            REQUIRE(err.empty());
            for (int r = 0; r < n; ++r)
              for (size_t i = 0; i < count; ++i) {
                auto [v, off] = ranks[r].at(Buf::kOutput, i);
                if ((*v)[off] != *expected(shape, r, i)) FAIL("rank " << r << " element " << i);
              }
          }
        }
      }
    }
  }
}

TEST_CASE("every allreduce algorithm leaves the same bits on every rank", "[schedule]") {
  // Floating-point sums depend on their grouping: with inputs of both signs around 1e16 (whose
  // ulp is 2), two groupings of the same n inputs round differently. Data-parallel training
  // keeps its replicas identical only if every rank gets the same bits, so an algorithm must
  // reduce each element in one grouping (one rank reduces it, or every rank in one canonical
  // tree; a op b == b op a may differ in operand order).
  auto value = [](int q, size_t i) {
    return (q % 2 == 0 ? 1e16 : -1e16) + 0.3 * (q + 1) + 0.7 * static_cast<double>(i % 5);
  };
  for (const AlgorithmInfo& algo : registry()) {
    if (algo.coll != Coll::kAllReduce) continue;
    for (int n : {3, 4, 5, 6, 7, 8}) {
      for (bool inPlace : {false, true}) {
        for (const std::vector<int>& hostOf : hostLayouts(n)) {
          const size_t count = static_cast<size_t>(n) + 1;
          CollShape shape{algo.coll, 0, n, count, DataType::kFloat64, RedOp::kSum, 0, inPlace};
          if (!hostOf.empty() && (!algo.supports || algo.supports(shape))) continue;
          shape.hostOf = hostOf;
          INFO(fmt::format("allreduce:{} nranks={} {} hostOf=[{}]", algo.name, n,
                           inPlace ? "in-place" : "out-of-place", fmt::join(hostOf, ",")));
          std::vector<RankState> ranks(n);
          bool supported = true;
          for (int r = 0; r < n && supported; ++r) {
            CollShape sr = shape;
            sr.rank = r;
            if (algo.supports && !algo.supports(sr)) {
              supported = false;
              break;
            }
            auto sched = algo.build(sr);
            REQUIRE(sched.isOk());
            ranks[r].sched = std::move(sched).value();
            setUpBuffers(sr, ranks[r]);
            for (size_t i = 0; i < count; ++i) ranks[r].input[i] = value(r, i);
            if (inPlace) {
              ranks[r].inputInOutput = true;
              ranks[r].output = ranks[r].input;
            }
          }
          if (!supported) continue;
          const std::string err = run(ranks);
          INFO(err);
          REQUIRE(err.empty());
          for (int r = 1; r < n; ++r)
            for (size_t i = 0; i < count; ++i) {
              auto [a, ao] = ranks[0].at(Buf::kOutput, i);
              auto [v, vo] = ranks[r].at(Buf::kOutput, i);
              INFO("rank " << r << " element " << i);
              REQUIRE(std::memcmp(&(*v)[vo], &(*a)[ao], sizeof(double)) == 0);
            }
        }
      }
    }
  }
}

TEST_CASE("evenChunk covers the range without gaps", "[schedule]") {
  for (int n : {1, 2, 3, 7, 16})
    for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{1000003}}) {
      size_t next = 0;
      for (int i = 0; i < n; ++i) {
        auto c = patterns::evenChunk(count, n, i);
        REQUIRE(c.offset == next);
        REQUIRE(c.count <= count / n + 1);
        next += c.count;
      }
      REQUIRE(next == count);
    }
}

TEST_CASE("the builder rejects schedules that leave their buffers", "[schedule]") {
  CollShape s{Coll::kAllReduce, 0, 2, 10, DataType::kFloat32, RedOp::kSum, 0, false};
  {
    ScheduleBuilder b(s);
    b.send(1, Buf::kInput, 5, 6);
    auto r = b.finish();
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.status().message(), Catch::Contains("out of bounds"));
  }
  {
    ScheduleBuilder b(s);
    b.send(0, Buf::kInput, 0, 1);  // to itself
    REQUIRE_FALSE(b.finish().isOk());
  }
  {
    ScheduleBuilder b(s);
    b.recv(1, Buf::kInput, 0, 1);  // writes the input
    REQUIRE_FALSE(b.finish().isOk());
  }
}

}  // namespace tutti::algo
