// File: tests/mp/collectives_test.cc
// Every collective over real transports (shm, tcp) with forked ranks: nranks 1, 2, 3, 4, 5, 8;
// counts 0, 1, n-1, n+1, 1000003; in place and out of place; roots first and last; allreduce for
// every dtype x op. Each output element is checked against a float64 reference computed here.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "tests/mp/mp_common.h"

namespace tutti::test {
namespace {

constexpr DataType kAllTypes[] = {DataType::kInt8,    DataType::kUint8,    DataType::kInt32,
                                  DataType::kUint32,  DataType::kInt64,    DataType::kUint64,
                                  DataType::kFloat16, DataType::kFloat32,  DataType::kFloat64,
                                  DataType::kBfloat16, DataType::kFp8E4M3, DataType::kFp8E5M2};
constexpr RedOp kAllOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};

std::vector<size_t> countsFor(int n, bool large) {
  std::vector<size_t> c = {0, 1, static_cast<size_t>(n - 1), static_cast<size_t>(n + 1)};
  if (large) c.push_back(1000003);
  return c;
}

std::string describeCall(const char* coll, size_t count, DataType t, RedOp op, bool inPlace,
                         int root = -1) {
  return fmt::format("{} count={} dtype={} op={} {}{}", coll, count, dataTypeName(t),
                     redOpName(op), inPlace ? "in-place" : "out-of-place",
                     root >= 0 ? fmt::format(" root={}", root) : "");
}

#define CHECK_STATUS(expr, what)                                                               \
  do {                                                                                         \
    Status s_ = (expr);                                                                        \
    if (!s_.isOk()) {                                                                          \
      std::fprintf(stderr, "rank %d: %s: %s\n", r, (what).c_str(), s_.toString().c_str());     \
      return 1;                                                                                \
    }                                                                                          \
  } while (0)

// allreduce for one (dtype, op, count), in place and out of place.
int allReduceCase(Communicator& c, DataType t, RedOp op, size_t count) {
  const int r = c.rank(), n = c.size();
  for (bool inPlace : {false, true}) {
    const std::string what = describeCall("allreduce", count, t, op, inPlace);
    Buffer in(t, count), out(t, count);
    for (size_t i = 0; i < count; ++i) in.set(i, reductionInput(t, op, r, i));
    out.poison();
    Buffer& dst = inPlace ? in : out;
    CHECK_STATUS(c.allReduce(in.data(), dst.data(), count, t, op), what);
    if (countWrong(dst, 0, count, tolerance(t, op), what, r,
                   [&](size_t i) { return reductionExpected(t, op, n, i); }))
      return 1;
  }
  return 0;
}

int reduceScatterCase(Communicator& c, DataType t, RedOp op, size_t count) {
  const int r = c.rank(), n = c.size();
  for (bool inPlace : {false, true}) {
    const std::string what = describeCall("reducescatter", count, t, op, inPlace);
    const size_t total = count * n;
    Buffer in(t, total), out(t, count);
    for (size_t i = 0; i < total; ++i) in.set(i, reductionInput(t, op, r, i));
    out.poison();
    void* dst = inPlace ? in.at(static_cast<size_t>(r) * count) : out.data();
    CHECK_STATUS(c.reduceScatter(in.data(), dst, count, t, op), what);
    const Buffer& got = inPlace ? in : out;
    const size_t first = inPlace ? static_cast<size_t>(r) * count : 0;
    if (countWrong(got, first, count, tolerance(t, op), what, r, [&](size_t i) {
          return reductionExpected(t, op, n, static_cast<size_t>(r) * count + i);
        }))
      return 1;
  }
  return 0;
}

int reduceCase(Communicator& c, DataType t, RedOp op, size_t count, int root) {
  const int r = c.rank(), n = c.size();
  for (bool inPlace : {false, true}) {
    const std::string what = describeCall("reduce", count, t, op, inPlace, root);
    Buffer in(t, count), out(t, count);
    for (size_t i = 0; i < count; ++i) in.set(i, reductionInput(t, op, r, i));
    out.poison();
    Buffer& dst = inPlace ? in : out;
    CHECK_STATUS(c.reduce(in.data(), dst.data(), count, t, op, root), what);
    if (r == root && countWrong(dst, 0, count, tolerance(t, op), what, r, [&](size_t i) {
          return reductionExpected(t, op, n, i);
        }))
      return 1;
    if (r != root && !inPlace) {  // a non-root recv buffer must be untouched
      Buffer ref(t, count);
      ref.poison();
      if (count && std::memcmp(out.data(), ref.data(), count * dataTypeBytes(t)) != 0) {
        std::fprintf(stderr, "rank %d: %s: non-root recvbuff was written\n", r, what.c_str());
        return 1;
      }
    }
  }
  return 0;
}

int allGatherCase(Communicator& c, DataType t, size_t count) {
  const int r = c.rank(), n = c.size();
  for (bool inPlace : {false, true}) {
    const std::string what = describeCall("allgather", count, t, RedOp::kSum, inPlace);
    const size_t total = count * n;
    Buffer in(t, count), out(t, total);
    out.poison();
    const void* src = in.data();
    if (inPlace) {
      for (size_t i = 0; i < count; ++i) out.set(static_cast<size_t>(r) * count + i, movementInput(t, r, i));
      src = out.at(static_cast<size_t>(r) * count);
    } else {
      for (size_t i = 0; i < count; ++i) in.set(i, movementInput(t, r, i));
    }
    CHECK_STATUS(c.allGather(src, out.data(), count, t), what);
    if (countWrong(out, 0, total, 0, what, r, [&](size_t i) {
          return movementInput(t, static_cast<int>(i / count), i % count);
        }))
      return 1;
  }
  return 0;
}

int broadcastCase(Communicator& c, DataType t, size_t count, int root) {
  const int r = c.rank();
  for (bool inPlace : {false, true}) {
    const std::string what = describeCall("broadcast", count, t, RedOp::kSum, inPlace, root);
    Buffer in(t, count), out(t, count);
    in.poison();
    out.poison();
    if (r == root)
      for (size_t i = 0; i < count; ++i) in.set(i, movementInput(t, root, i));
    Buffer& dst = inPlace ? in : out;
    CHECK_STATUS(c.broadcast(in.data(), dst.data(), count, t, root), what);
    if (countWrong(dst, 0, count, 0, what, r, [&](size_t i) { return movementInput(t, root, i); }))
      return 1;
  }
  return 0;
}

int allToAllCase(Communicator& c, DataType t, size_t count) {
  const int r = c.rank(), n = c.size();
  const std::string what = describeCall("alltoall", count, t, RedOp::kSum, false);
  const size_t total = count * n;
  Buffer in(t, total), out(t, total);
  // Block j of rank r's input goes to rank j: value identifies (sender, destination, index).
  for (size_t i = 0; i < total; ++i) in.set(i, movementInput(t, r, i));
  out.poison();
  CHECK_STATUS(c.allToAll(in.data(), out.data(), count, t), what);
  // Output block j of rank r came from rank j's input block r.
  return countWrong(out, 0, total, 0, what, r, [&](size_t i) {
           const size_t j = i / count, k = i % count;
           return movementInput(t, static_cast<int>(j), static_cast<size_t>(r) * count + k);
         }) != 0;
}

int gatherScatterCase(Communicator& c, DataType t, size_t count, int root) {
  const int r = c.rank(), n = c.size();
  const size_t total = count * n;
  {
    const std::string what = describeCall("gather", count, t, RedOp::kSum, false, root);
    Buffer in(t, count), out(t, total);
    for (size_t i = 0; i < count; ++i) in.set(i, movementInput(t, r, i));
    out.poison();
    CHECK_STATUS(c.gather(in.data(), r == root ? out.data() : nullptr, count, t, root), what);
    if (r == root && countWrong(out, 0, total, 0, what, r, [&](size_t i) {
          return movementInput(t, static_cast<int>(i / count), i % count);
        }))
      return 1;
  }
  {
    const std::string what = describeCall("scatter", count, t, RedOp::kSum, false, root);
    Buffer in(t, total), out(t, count);
    if (r == root)
      for (size_t i = 0; i < total; ++i) in.set(i, movementInput(t, root, i));
    out.poison();
    CHECK_STATUS(c.scatter(r == root ? in.data() : nullptr, out.data(), count, t, root), what);
    if (countWrong(out, 0, count, 0, what, r, [&](size_t i) {
          return movementInput(t, root, static_cast<size_t>(r) * count + i);
        }))
      return 1;
  }
  return 0;
}

int pointToPointCase(Communicator& c, DataType t, size_t count) {
  const int r = c.rank(), n = c.size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  {
    const std::string what = describeCall("sendrecv(ring)", count, t, RedOp::kSum, false);
    Buffer in(t, count), out(t, count);
    for (size_t i = 0; i < count; ++i) in.set(i, movementInput(t, r, i));
    out.poison();
    CHECK_STATUS(c.sendRecv(in.data(), next, out.data(), prev, count, t), what);
    if (countWrong(out, 0, count, 0, what, r, [&](size_t i) { return movementInput(t, prev, i); }))
      return 1;
  }
  if (n >= 2 && (n % 2 == 0 || r != n - 1)) {  // pairs (0,1), (2,3), ...: send then recv / recv then send
    const std::string what = describeCall("send/recv(pairs)", count, t, RedOp::kSum, false);
    const int partner = r % 2 == 0 ? r + 1 : r - 1;
    Buffer in(t, count), out(t, count);
    for (size_t i = 0; i < count; ++i) in.set(i, movementInput(t, r, i));
    out.poison();
    if (r % 2 == 0) {
      CHECK_STATUS(c.send(in.data(), count, t, partner), what);
      CHECK_STATUS(c.recv(out.data(), count, t, partner), what);
    } else {
      CHECK_STATUS(c.recv(out.data(), count, t, partner), what);
      CHECK_STATUS(c.send(in.data(), count, t, partner), what);
    }
    if (countWrong(out, 0, count, 0, what, r, [&](size_t i) { return movementInput(t, partner, i); }))
      return 1;
  }
  return 0;
}

int everyCollective(Communicator& c) {
  const int n = c.size();
  for (size_t count : countsFor(n, true)) {
    for (DataType t : {DataType::kInt32, DataType::kFloat32})
      for (RedOp op : {RedOp::kSum, RedOp::kMax})
        if (reduceScatterCase(c, t, op, count)) return 1;
    for (int root : {0, n - 1}) {
      if (reduceCase(c, DataType::kFloat32, RedOp::kSum, count, root)) return 1;
      if (reduceCase(c, DataType::kInt64, RedOp::kMin, count, root)) return 1;
      if (broadcastCase(c, DataType::kInt32, count, root)) return 1;
      if (broadcastCase(c, DataType::kUint8, count, root)) return 1;
      if (gatherScatterCase(c, DataType::kInt32, count, root)) return 1;
      if (gatherScatterCase(c, DataType::kFloat16, count, root)) return 1;
    }
    for (DataType t : {DataType::kInt32, DataType::kInt8}) {
      if (allGatherCase(c, t, count)) return 1;
      if (allToAllCase(c, t, count)) return 1;
      if (pointToPointCase(c, t, count)) return 1;
    }
    if (allReduceCase(c, DataType::kFloat32, RedOp::kSum, count)) return 1;
  }
  return 0;
}

int everyTypeAndOp(Communicator& c) {
  const int n = c.size();
  for (DataType t : kAllTypes)
    for (RedOp op : kAllOps)
      for (size_t count : countsFor(n, op == RedOp::kSum || t == DataType::kFloat32))
        if (allReduceCase(c, t, op, count)) return 1;
  return 0;
}

}  // namespace

TEST_CASE("every collective, every count, in place and out of place", "[mp]") {
  const std::string transport = GENERATE("shm", "tcp");
  const int nranks = GENERATE(1, 2, 3, 4, 5, 8);
  INFO("transport=" << transport << " nranks=" << nranks);
  runOnRanks(nranks, transport, [](Communicator& c) { return everyCollective(c); });
}

TEST_CASE("allreduce for every dtype x op", "[mp]") {
  const std::string transport = GENERATE("shm", "tcp");
  const int nranks = GENERATE(1, 2, 3, 5, 8);
  INFO("transport=" << transport << " nranks=" << nranks);
  runOnRanks(nranks, transport, [](Communicator& c) { return everyTypeAndOp(c); });
}

TEST_CASE("asynchronous Work completes in issue order with correct data", "[mp]") {
  const std::string transport = GENERATE("shm", "tcp");
  runOnRanks(3, transport, [](Communicator& c) {
    const int r = c.rank(), n = c.size();
    constexpr size_t kCount = 100003;
    std::vector<std::unique_ptr<Buffer>> ins, outs;
    std::vector<Work> works;
    for (int k = 0; k < 4; ++k) {
      ins.push_back(std::make_unique<Buffer>(DataType::kFloat32, kCount));
      outs.push_back(std::make_unique<Buffer>(DataType::kFloat32, kCount));
      for (size_t i = 0; i < kCount; ++i) ins[k]->set(i, reductionInput(DataType::kFloat32, RedOp::kSum, r + k, i));
      outs[k]->poison();
      auto w = c.allReduceAsync(ins[k]->data(), outs[k]->data(), kCount, DataType::kFloat32,
                                RedOp::kSum);
      TUTTI_CHILD_CHECK(w.isOk());
      works.push_back(w.value());
    }
    auto b = c.barrierAsync();
    TUTTI_CHILD_CHECK(b.isOk());
    for (auto& w : works) TUTTI_CHILD_CHECK(w.wait().isOk());
    TUTTI_CHILD_CHECK(b->wait().isOk());
    TUTTI_CHILD_CHECK(b->test());
    for (int k = 0; k < 4; ++k) {
      int wrong = countWrong(*outs[k], 0, kCount, 0, "async allreduce", r, [&](size_t i) {
        double e = 0;
        for (int q = 0; q < n; ++q) e += reductionInput(DataType::kFloat32, RedOp::kSum, q + k, i);
        return e;
      });
      TUTTI_CHILD_CHECK(wrong == 0);
    }
    // A blocking call after async work runs after it.
    TUTTI_CHILD_CHECK(c.barrier().isOk());
    return 0;
  });
}

TEST_CASE("allReduceFused: bit-identical to separate allReduce calls, bad buffers refused", "[mp]") {
  const std::string transport = GENERATE("shm", "tcp");
  // 3 ranks: non-power-of-two, so the algorithms' summation orders differ from a plain sum.
  runOnRanks(3, transport, [](Communicator& c) {
    const int r = c.rank();
    // Sizes straddling the fusion limit (64 KiB): small runs fuse, the 40000-element buffer does
    // not; the third buffer is in place.
    const std::vector<size_t> counts = {1, 700, 33, 40000, 5, 2048};
    std::vector<std::vector<float>> in(counts.size()), fused(counts.size()), alone(counts.size());
    for (size_t k = 0; k < counts.size(); ++k) {
      in[k].resize(counts[k]);
      for (size_t i = 0; i < counts[k]; ++i)
        in[k][i] = 1.0f / static_cast<float>(1 + i + 7 * k + 13 * r);  // inexact sums
      fused[k] = k == 2 ? in[k] : std::vector<float>(counts[k], -1.0f);
      alone[k] = k == 2 ? in[k] : std::vector<float>(counts[k], -1.0f);
    }
    std::vector<Communicator::ReduceBuffer> bufs;
    for (size_t k = 0; k < counts.size(); ++k)
      bufs.push_back({k == 2 ? fused[k].data() : in[k].data(), fused[k].data(), counts[k]});
    TUTTI_CHILD_CHECK(c.allReduceFused(bufs, DataType::kFloat32, RedOp::kSum).isOk());
    for (size_t k = 0; k < counts.size(); ++k)
      TUTTI_CHILD_CHECK(c.allReduce(k == 2 ? alone[k].data() : in[k].data(), alone[k].data(),
                                    counts[k], DataType::kFloat32, RedOp::kSum)
                            .isOk());
    for (size_t k = 0; k < counts.size(); ++k)
      TUTTI_CHILD_CHECK(std::memcmp(fused[k].data(), alone[k].data(), counts[k] * 4) == 0);
    // The sum itself, against a float64 reference.
    for (size_t k = 0; k < counts.size(); ++k)
      for (size_t i = 0; i < counts[k]; i += 97) {
        double e = 0;
        for (int q = 0; q < c.size(); ++q) e += 1.0 / static_cast<double>(1 + i + 7 * k + 13 * q);
        TUTTI_CHILD_CHECK(std::abs(fused[k][i] - e) <= 1e-6 * e);
      }
    // A null buffer anywhere: refused before anything runs, naming its index.
    std::vector<float> untouched(8, 3.0f);
    std::vector<Communicator::ReduceBuffer> bad = {{untouched.data(), untouched.data(), 8},
                                                   {nullptr, untouched.data(), 4}};
    Status s = c.allReduceFused(bad, DataType::kFloat32, RedOp::kSum);
    TUTTI_CHILD_CHECK(s.code() == Code::kInvalidArgument);
    TUTTI_CHILD_CHECK(s.message().find("buffers[1]") != std::string::npos);
    TUTTI_CHILD_CHECK(untouched == std::vector<float>(8, 3.0f));
    TUTTI_CHILD_CHECK(c.barrier().isOk());
    return 0;
  });
}

TEST_CASE("allReduceFused: a repeated shape with other buffers and in-place flags, as alone", "[mp]") {
  // The fused plan is cached by the calls' counts and in-place flags (core/plan_cache.h): a batch
  // of the same counts must still read each call's own buffers, and one whose calls switch
  // between in and out of place must not reuse the other's plan (in-place segments read the
  // staging output, out-of-place ones the staging input).
  const int n = GENERATE(2, 3);
  runOnRanks(n, "shm", [](Communicator& c) {
    const int r = c.rank();
    const std::vector<size_t> counts = {3, 500, 64, 1, 1200};
    for (int pass = 0; pass < 4; ++pass) {
      auto inPlace = [&](size_t k) { return pass % 2 == 1 && k % 2 == 0; };
      std::vector<std::vector<float>> in(counts.size()), fused(counts.size()),
          alone(counts.size());
      for (size_t k = 0; k < counts.size(); ++k) {
        in[k].resize(counts[k]);
        for (size_t i = 0; i < counts[k]; ++i)
          in[k][i] = 1.0f / static_cast<float>(1 + i + 5 * k + 11 * r + 17 * pass);
        fused[k] = inPlace(k) ? in[k] : std::vector<float>(counts[k], -1.0f);
        alone[k] = inPlace(k) ? in[k] : std::vector<float>(counts[k], -1.0f);
      }
      std::vector<Communicator::ReduceBuffer> bufs;
      for (size_t k = 0; k < counts.size(); ++k)
        bufs.push_back({inPlace(k) ? fused[k].data() : in[k].data(), fused[k].data(), counts[k]});
      TUTTI_CHILD_CHECK(c.allReduceFused(bufs, DataType::kFloat32, RedOp::kSum).isOk());
      for (size_t k = 0; k < counts.size(); ++k)
        TUTTI_CHILD_CHECK(c.allReduce(inPlace(k) ? alone[k].data() : in[k].data(),
                                      alone[k].data(), counts[k], DataType::kFloat32,
                                      RedOp::kSum)
                              .isOk());
      for (size_t k = 0; k < counts.size(); ++k) {
        TUTTI_CHILD_CHECK(std::memcmp(fused[k].data(), alone[k].data(), counts[k] * 4) == 0);
        for (size_t i = 0; i < counts[k]; i += 37) {
          double e = 0;
          for (int q = 0; q < c.size(); ++q)
            e += 1.0 / static_cast<double>(1 + i + 5 * k + 11 * q + 17 * pass);
          TUTTI_CHILD_CHECK(std::abs(fused[k][i] - e) <= 1e-6 * e);
        }
      }
    }
    TUTTI_CHILD_CHECK(c.barrier().isOk());
    return 0;
  });
}

TEST_CASE("allReduceFused: each allreduce algorithm forced, fused bit-identical to alone", "[mp]") {
  // Forced, every call of the run takes one algorithm, so the fused plan merges its rounds with
  // themselves; a round that forwards (a ring's recvReduceSend) is shared with no other forwarding
  // call (algorithms/fusion.h), and calls that forward in every round run one by one. Either way
  // the results must be those of the calls alone. Hierarchical ones decline on one host.
  const int n = GENERATE(2, 3, 4);
  runOnRanks(n, "shm", [](Communicator& c) {
    const int r = c.rank();
    const std::vector<size_t> counts = {1, 700, 33, 4096, 5, 2048};
    for (const char* name :
         {"ring", "one_shot", "two_shot", "recursive_doubling", "rabenseifner",
          "double_binary_tree"}) {
      if (!c.setAlgorithm(Coll::kAllReduce, name).isOk()) continue;
      std::vector<std::vector<float>> in(counts.size()), fused(counts.size()),
          alone(counts.size());
      for (size_t k = 0; k < counts.size(); ++k) {
        in[k].resize(counts[k]);
        for (size_t i = 0; i < counts[k]; ++i)
          in[k][i] = 1.0f / static_cast<float>(1 + i + 7 * k + 13 * r);
        fused[k].assign(counts[k], -1.0f);
        alone[k].assign(counts[k], -1.0f);
      }
      std::vector<Communicator::ReduceBuffer> bufs;
      for (size_t k = 0; k < counts.size(); ++k)
        bufs.push_back({in[k].data(), fused[k].data(), counts[k]});
      TUTTI_CHILD_CHECK(c.allReduceFused(bufs, DataType::kFloat32, RedOp::kSum).isOk());
      for (size_t k = 0; k < counts.size(); ++k)
        TUTTI_CHILD_CHECK(c.allReduce(in[k].data(), alone[k].data(), counts[k],
                                      DataType::kFloat32, RedOp::kSum)
                              .isOk());
      for (size_t k = 0; k < counts.size(); ++k) {
        const bool same = std::memcmp(fused[k].data(), alone[k].data(), counts[k] * 4) == 0;
        if (!same)
          fprintf(stderr, "rank %d: %s: fused call %zu (%zu elements) differs\n", r, name, k,
                  counts[k]);
        TUTTI_CHILD_CHECK(same);
      }
      for (size_t k = 0; k < counts.size(); ++k)  // the sum itself
        for (size_t i = 0; i < counts[k]; i += 97) {
          double e = 0;
          for (int q = 0; q < c.size(); ++q) e += 1.0 / static_cast<double>(1 + i + 7 * k + 13 * q);
          TUTTI_CHILD_CHECK(std::abs(alone[k][i] - e) <= 1e-6 * e);
        }
    }
    TUTTI_CHILD_CHECK(c.barrier().isOk());
    return 0;
  });
}

TEST_CASE("sendRecvGroup: every rank sends 4 MiB to every peer before it receives", "[mp]") {
  const std::string transport = GENERATE("shm", "tcp");
  // Sends listed before receives on every rank: as separate blocking calls this waits forever
  // (each send needs the peer's receive, queued behind the peer's own sends). Two messages to
  // each peer, so that per-pair order matters; mixed dtypes; a message to this rank itself.
  runOnRanks(3, transport, [](Communicator& c) {
    const int n = c.size(), r = c.rank();
    const size_t big = (4u << 20) / 4, small = 1000;
    std::vector<std::vector<int32_t>> sendBig(n), recvBig(n);
    std::vector<std::vector<double>> sendSmall(n), recvSmall(n);
    std::vector<Communicator::PeerTransfer> ops;
    for (int q = 0; q < n; ++q) {
      sendBig[q].resize(big);
      for (size_t i = 0; i < big; ++i) sendBig[q][i] = static_cast<int32_t>(r * 1000003 + q * 7 + i);
      sendSmall[q].assign(small, r + q / 8.0);
      recvBig[q].assign(big, -1);
      recvSmall[q].assign(small, -1.0);
      ops.push_back({true, sendBig[q].data(), big, DataType::kInt32, q});
      ops.push_back({true, sendSmall[q].data(), small, DataType::kFloat64, q});
    }
    for (int q = 0; q < n; ++q) {
      ops.push_back({false, recvBig[q].data(), big, DataType::kInt32, q});
      ops.push_back({false, recvSmall[q].data(), small, DataType::kFloat64, q});
    }
    TUTTI_CHILD_CHECK(c.sendRecvGroup(ops).isOk());
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < big; i += 4099)
        TUTTI_CHILD_CHECK(recvBig[q][i] == static_cast<int32_t>(q * 1000003 + r * 7 + i));
      TUTTI_CHILD_CHECK(recvBig[q][big - 1] == static_cast<int32_t>(q * 1000003 + r * 7 + big - 1));
      TUTTI_CHILD_CHECK(recvSmall[q] == std::vector<double>(small, q + r / 8.0));
    }
    // A bad message anywhere: refused before anything is sent, naming its index.
    std::vector<int32_t> untouched(8, 5);
    std::vector<Communicator::PeerTransfer> bad = {
        {false, untouched.data(), 8, DataType::kInt32, (r + 1) % n},
        {true, untouched.data(), 8, DataType::kInt32, n + 4}};
    Status s = c.sendRecvGroup(bad);
    TUTTI_CHILD_CHECK(s.code() == Code::kInvalidArgument);
    TUTTI_CHILD_CHECK(s.message().find("ops[1]") != std::string::npos);
    TUTTI_CHILD_CHECK(s.message().find(std::to_string(n + 4)) != std::string::npos);
    bad[1] = {true, nullptr, 8, DataType::kInt32, 0};
    s = c.sendRecvGroup(bad);
    TUTTI_CHILD_CHECK(s.code() == Code::kInvalidArgument);
    TUTTI_CHILD_CHECK(s.message().find("ops[1]: buf is NULL") != std::string::npos);
    TUTTI_CHILD_CHECK(untouched == std::vector<int32_t>(8, 5));
    TUTTI_CHILD_CHECK(c.barrier().isOk());
    return 0;
  });
}

TEST_CASE("recvAny: each message from whichever rank sends first, per-sender order kept", "[mp]") {
  const std::string transport = GENERATE("shm", "tcp");
  // Rank 0 receives from any of the others; sizes cover an inline message, one through the byte
  // ring, and one larger than the ring (shm's default ring is 1 MiB).
  runOnRanks(4, transport, [](Communicator& c) {
    const int n = c.size(), r = c.rank();
    const std::vector<int> others = [&] {
      std::vector<int> v;
      for (int q = 1; q < n; ++q) v.push_back(q);
      return v;
    }();
    auto value = [](int sender, int msg, size_t i) {
      return static_cast<int32_t>(sender * 1000003 + msg * 7919 + i);
    };
    for (const size_t count : {size_t{16}, size_t{25000}, size_t{600000}}) {
      constexpr int kPerSender = 2;
      if (r != 0) {
        std::vector<int32_t> buf(count);
        for (int m = 0; m < kPerSender; ++m) {
          for (size_t i = 0; i < count; ++i) buf[i] = value(r, m, i);
          TUTTI_CHILD_CHECK(c.send(buf.data(), count, DataType::kInt32, 0).isOk());
        }
        // Into the barrier only once rank 0 has received everything: its probe would take this
        // rank's barrier message for a send (recvAny's documented limit).
        int token = 0;
        TUTTI_CHILD_CHECK(c.recv(&token, 1, DataType::kInt32, 0).isOk() && token == 1);
      } else {
        std::vector<int> got(n, 0);  // messages received per sender, in order
        for (int k = 0; k < kPerSender * (n - 1); ++k) {
          std::vector<int32_t> buf(count, -1);
          Result<int> from = c.recvAny(buf.data(), count, DataType::kInt32, others);
          TUTTI_CHILD_CHECK(from.isOk());
          const int q = from.value();
          TUTTI_CHILD_CHECK(q >= 1 && q < n && got[q] < kPerSender);
          for (size_t i = 0; i < count; i += 997)
            TUTTI_CHILD_CHECK(buf[i] == value(q, got[q], i));
          TUTTI_CHILD_CHECK(buf[count - 1] == value(q, got[q], count - 1));
          ++got[q];
        }
        for (int q = 1; q < n; ++q) TUTTI_CHILD_CHECK(got[q] == kPerSender);
        const int token = 1;
        for (int q = 1; q < n; ++q)
          TUTTI_CHILD_CHECK(c.send(&token, 1, DataType::kInt32, q).isOk());
      }
      TUTTI_CHILD_CHECK(c.barrier().isOk());
    }
    // Bad arguments: refused, naming the argument, nothing received.
    std::vector<int32_t> untouched(8, 5);
    Status s = c.recvAny(untouched.data(), 8, DataType::kInt32, {}).status();
    TUTTI_CHILD_CHECK(s.code() == Code::kInvalidArgument &&
                      s.message().find("peers is empty") != std::string::npos);
    const std::vector<int> self = {(r + 1) % n, r};
    s = c.recvAny(untouched.data(), 8, DataType::kInt32, self).status();
    TUTTI_CHILD_CHECK(s.code() == Code::kInvalidArgument &&
                      s.message().find("peers[1]") != std::string::npos);
    const std::vector<int> outside = {n + 3};
    s = c.recvAny(untouched.data(), 8, DataType::kInt32, outside).status();
    TUTTI_CHILD_CHECK(s.code() == Code::kInvalidArgument &&
                      s.message().find(std::to_string(n + 3)) != std::string::npos);
    s = c.recvAny(untouched.data(), 0, DataType::kInt32, std::vector<int>{(r + 1) % n}).status();
    TUTTI_CHILD_CHECK(s.code() == Code::kInvalidArgument &&
                      s.message().find("0 bytes") != std::string::npos);
    TUTTI_CHILD_CHECK(untouched == std::vector<int32_t>(8, 5));
    TUTTI_CHILD_CHECK(c.barrier().isOk());
    return 0;
  });
}

TEST_CASE("stream-ordered calls on host memory run after the stream, as the blocking calls", "[mp]") {
  // No stream (nullptr) and host buffers: every overload taking a stream runs the blocking call;
  // the same calls on device memory are tests/gpu/cpp_stream_test.cc.
  runOnRanks(3, "shm", [](Communicator& c) {
    const int n = c.size(), r = c.rank();
    const size_t count = 1000;
    std::vector<float> in(count * n), out(count * n, -1.0f);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(r * 10000 + i);
    TUTTI_CHILD_CHECK(
        c.allReduce(in.data(), out.data(), count, DataType::kFloat32, RedOp::kSum, nullptr).isOk());
    for (size_t i = 0; i < count; ++i) {
      double e = 0;
      for (int q = 0; q < n; ++q) e += q * 10000.0 + i;
      TUTTI_CHILD_CHECK(out[i] == static_cast<float>(e));
    }
    TUTTI_CHILD_CHECK(
        c.allGather(in.data(), out.data(), count, DataType::kFloat32, nullptr).isOk());
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i)
        TUTTI_CHILD_CHECK(out[q * count + i] == static_cast<float>(q * 10000 + i));
    TUTTI_CHILD_CHECK(
        c.broadcast(in.data(), out.data(), count, DataType::kFloat32, 2, nullptr).isOk());
    for (size_t i = 0; i < count; ++i)
      TUTTI_CHILD_CHECK(out[i] == static_cast<float>(20000 + i));
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    if (r % 2 == 0) {
      TUTTI_CHILD_CHECK(c.send(in.data(), count, DataType::kFloat32, next, nullptr).isOk());
      TUTTI_CHILD_CHECK(c.recv(out.data(), count, DataType::kFloat32, prev, nullptr).isOk());
    } else {
      TUTTI_CHILD_CHECK(c.recv(out.data(), count, DataType::kFloat32, prev, nullptr).isOk());
      TUTTI_CHILD_CHECK(c.send(in.data(), count, DataType::kFloat32, next, nullptr).isOk());
    }
    for (size_t i = 0; i < count; ++i)
      TUTTI_CHILD_CHECK(out[i] == static_cast<float>(prev * 10000 + i));
    // Bad arguments: the blocking calls' errors, nothing run.
    Status s = c.reduce(in.data(), out.data(), count, DataType::kFloat32, RedOp::kSum, n, nullptr);
    TUTTI_CHILD_CHECK(s.code() == Code::kInvalidArgument);
    TUTTI_CHILD_CHECK(s.message().find("root") != std::string::npos);
    s = c.send(nullptr, count, DataType::kFloat32, next, nullptr);
    TUTTI_CHILD_CHECK(s.code() == Code::kInvalidArgument);
    TUTTI_CHILD_CHECK(c.barrier().isOk());
    return 0;
  });
}

TEST_CASE("barrier waits for the slowest rank", "[mp]") {
  const std::string transport = GENERATE("shm", "tcp");
  runOnRanks(4, transport, [](Communicator& c) {
    TUTTI_CHILD_CHECK(c.barrier().isOk());
    if (c.rank() == 2) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto t0 = std::chrono::steady_clock::now();
    TUTTI_CHILD_CHECK(c.barrier().isOk());
    auto waited = std::chrono::steady_clock::now() - t0;
    if (c.rank() != 2) TUTTI_CHILD_CHECK(waited >= std::chrono::milliseconds(200));
    return 0;
  });
}

}  // namespace tutti::test
