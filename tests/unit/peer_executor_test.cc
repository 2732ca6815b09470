// File: tests/unit/peer_executor_test.cc
// The peer executor (core/device/peer.h) without a GPU: its device is emulated on CPU threads
// (tests/unit/emu_peer_device.h: a stream is a worker thread running its queue in order, a
// kernel launch runs the peer program in the host emulator, kernels/peer_host.h). Ranks are
// threads of this process, as the executor takes them: they join one group, connect, and submit
// batches of collectives as the NCCL layer's device path does. Checked: every collective's
// result against the host engine on exact arithmetic (integer sum, float max), programs compiled
// and uploaded once per shape and rank, counters carried across calls of many shapes, a group
// of ranks on several emulated devices, abort releasing kernels that wait for a rank that never
// calls, a kernel timeout reported by the rank's next call naming the peer, and the eligibility
// rules. Ranks that are processes: peer_process_test.cc.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>

#include "core/batch.h"
#include "core/device/executor.h"
#include "core/device/peer.h"
#include "tests/unit/emu_peer_device.h"

namespace tutti::device {
namespace {

namespace peer = kernels::peer;
using namespace tutti::test;  // NOLINT: the reference helpers

// TUTTI_TIMEOUT is read once per process: 2 s for the kernel-timeout case below.
const bool kTimeoutSet = [] { return setenv("TUTTI_TIMEOUT", "2", 1) == 0; }();

using tutti::test::EmuStream;
using namespace emu;  // NOLINT: the emulated device and its helpers

// n ranks on devices devices[r], joined and connected; one executor, owner and stream each.
struct Group {
  EmuPeerDevice dev;
  std::vector<std::unique_ptr<FakeOwner>> owners;
  std::vector<std::unique_ptr<Executor>> executors;
  std::vector<std::unique_ptr<EmuStream>> streams;
  Status joined;

  Group(int n, std::vector<int> devices, uint64_t key, int unreachable = -1) {
    dev.unreachable_ = unreachable;
    std::vector<std::shared_ptr<PeerGroup>> groups(n);
    for (int r = 0; r < n; ++r) {
      auto g = joinPeerGroup(key, n, r, devices[r], &dev, smallArena(n));
      if (!g.isOk()) {
        joined = g.status();
        return;
      }
      groups[r] = std::move(g).value();
    }
    for (int r = 0; r < n; ++r) {
      if (Status s = connectPeerGroup(*groups[r], r); !s.isOk() && joined.isOk()) joined = s;
      owners.push_back(std::make_unique<FakeOwner>(r, n));
      executors.push_back(makePeerExecutor(groups[r], r));
      streams.push_back(std::make_unique<EmuStream>(static_cast<uint32_t>(key + r)));
    }
  }

  // Each rank submits its ops from its own thread (as one thread per GPU does), then the
  // streams are drained. Returns each rank's submit status.
  std::vector<Status> submit(std::vector<std::vector<BatchOp>>& ops, std::vector<int> which = {}) {
    const int n = static_cast<int>(owners.size());
    if (which.empty())
      for (int r = 0; r < n; ++r) which.push_back(r);
    std::vector<Status> out(n);
    std::vector<std::thread> threads;
    for (int r : which) {
      threads.emplace_back([&, r] {
        for (BatchOp& op : ops[r]) op.stream = streams[r].get();
        const RankBatch rb{owners[r].get(), &ops[r], nullptr};
        out[r] = executors[r]->submit(std::span(&rb, 1));
      });
    }
    for (auto& t : threads) t.join();
    for (int r : which) streams[r]->synchronize();
    return out;
  }
};

// One call of every rank: the executor's results against the engine's (on exact arithmetic the
// algorithm and pieces do not matter).
std::string runOnce(Group& g, Coll coll, size_t count, DataType dtype, RedOp op, int root,
                    bool inPlace) {
  const int n = static_cast<int>(g.owners.size());
  Reference ref = reference(CollShape{coll, 0, n, count, dtype, op, root, inPlace});
  if (!ref.err.empty()) return ref.err;
  std::vector<UserRank>& users = ref.users;
  std::vector<std::vector<BatchOp>> ops(n);
  for (int r = 0; r < n; ++r)
    ops[r].push_back(collOp(coll, users[r], count, dtype, op, root, "test"));
  for (const Status& s : g.submit(ops))
    if (!s.isOk()) return "submit: " + s.message();
  {
    std::lock_guard<std::mutex> lock(g.dev.mu_);
    if (!g.dev.kernelErrors_.empty()) return "kernel: " + g.dev.kernelErrors_.front();
  }
  return compareMemory(users, ref.want, dtype);
}

}  // namespace

TEST_CASE("peer executor: every collective, exact against the host engine", "[peer]") {
  Group g(4, {0, 0, 0, 0}, 0x1001);
  REQUIRE(g.joined.isOk());
  for (Coll coll : kColls)
    for (size_t count : {size_t{1}, size_t{37}, size_t{5000}, size_t{20000}})
      for (bool inPlace : {false, true}) {
        if (inPlace && (!inPlaceDefined(coll) || coll == Coll::kAllToAll)) continue;
        for (int root : {0, 3}) {
          if (root != 0 && !rooted(coll)) continue;
          const DataType dtype = reducing(coll) ? DataType::kInt32 : DataType::kFloat32;
          INFO(fmt::format("{} count={} root={} {}", collName(coll), count, root,
                           inPlace ? "in place" : "out of place"));
          REQUIRE(runOnce(g, coll, count, dtype, RedOp::kSum, root, inPlace) == "");
        }
      }
}

TEST_CASE("peer executor: one program per shape, counters carried across calls", "[peer]") {
  Group g(3, {0, 0, 0}, 0x1002);
  REQUIRE(g.joined.isOk());
  for (int round = 0; round < 20; ++round) {
    for (size_t count : {size_t{3}, size_t{100}, size_t{40000}})
      REQUIRE(runOnce(g, Coll::kAllReduce, count, DataType::kFloat32, RedOp::kMax, 0, false) == "");
    REQUIRE(runOnce(g, Coll::kAllGather, 77, DataType::kFloat32, RedOp::kSum, 0, false) == "");
  }
  CHECK(g.dev.uploads_.load() == 4 * 3);  // 4 shapes, 3 ranks, each uploaded once
  CHECK(g.dev.launches_.load() == 20 * 4 * 3);
}

TEST_CASE("peer executor: ranks on several devices", "[peer]") {
  Group g(4, {0, 1, 2, 3}, 0x1003);
  REQUIRE(g.joined.isOk());
  REQUIRE(runOnce(g, Coll::kAllReduce, 9000, DataType::kInt64, RedOp::kSum, 0, true) == "");
  REQUIRE(runOnce(g, Coll::kReduceScatter, 333, DataType::kInt32, RedOp::kSum, 0, false) == "");
  // A device the others cannot reach: connect fails (the caller then takes the staged path).
  Group bad(2, {0, 1}, 0x1004, /*unreachable=*/1);
  CHECK(bad.joined.code() == Code::kInvalidUsage);
  CHECK_THAT(bad.joined.message(), Catch::Contains("cannot access"));
}

TEST_CASE("peer executor: abort releases the kernels of every rank", "[peer]") {
  Group g(3, {0, 0, 0}, 0x1005);
  REQUIRE(g.joined.isOk());
  const CollShape shape{Coll::kAllReduce, 0, 3, 1000, DataType::kFloat32, RedOp::kSum, 0, false};
  std::vector<UserRank> users = layOut(shape, DataType::kFloat32);
  std::vector<std::vector<BatchOp>> ops(3);
  for (int r = 0; r < 3; ++r)
    ops[r].push_back(collOp(Coll::kAllReduce, users[r], 1000, DataType::kFloat32, RedOp::kSum, 0,
                            "ncclAllReduce"));
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    g.executors[2]->fail(invalidUsage("rank 2 aborted"), true);  // ncclCommAbort on rank 2
  });
  const auto t0 = std::chrono::steady_clock::now();
  g.submit(ops, {0, 1});  // rank 2 never calls; its peers' kernels wait until the abort
  aborter.join();
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1200));
  {
    std::lock_guard<std::mutex> lock(g.dev.mu_);
    REQUIRE(g.dev.kernelErrors_.size() == 2);
    for (const std::string& e : g.dev.kernelErrors_) CHECK_THAT(e, Catch::Contains("aborted"));
  }
  // Every later call of every rank fails with the abort's reason.
  std::vector<std::vector<BatchOp>> again = ops;
  for (const Status& s : g.submit(again, {0, 1})) {
    if (s.isOk()) continue;
    CHECK(s.code() == Code::kInvalidUsage);
    CHECK_THAT(s.message(), Catch::Contains("rank 2 aborted"));
  }
  CHECK_FALSE(g.owners[0]->recorded.isOk());
}

TEST_CASE("peer executor: a kernel that times out is reported by the next call", "[peer]") {
  REQUIRE(kTimeoutSet);
  Group g(2, {0, 0}, 0x1006);
  REQUIRE(g.joined.isOk());
  const CollShape shape{Coll::kBroadcast, 0, 2, 64, DataType::kFloat32, RedOp::kSum, 1, false};
  std::vector<UserRank> users = layOut(shape, DataType::kFloat32);
  std::vector<std::vector<BatchOp>> ops(2);
  for (int r = 0; r < 2; ++r)
    ops[r].push_back(
        collOp(Coll::kBroadcast, users[r], 64, DataType::kFloat32, RedOp::kSum, 1, "ncclBcast"));
  const auto t0 = std::chrono::steady_clock::now();
  g.submit(ops, {0});  // the root (rank 1) never calls: rank 0's kernel waits 2 s, then fails
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(4));
  // Known before any further call (ncclCommGetAsyncError polls it).
  const Status polled = g.executors[0]->poll();
  CHECK(polled.code() == Code::kTimeout);
  CHECK_THAT(polled.message(), Catch::Contains("data from peer 1"));
  std::vector<std::vector<BatchOp>> again = ops;
  const Status s = g.submit(again, {0})[0];
  CHECK(s.code() == Code::kTimeout);
  CHECK_THAT(s.message(), Catch::Contains("rank 0") && Catch::Contains("data from peer 1"));
}

TEST_CASE("peer executor: grouped sends and receives after the collectives", "[peer]") {
  // Each step, every rank: an allreduce, then in one group a send to the next rank, a receive
  // from the previous one, a message to itself, and an all-to-all made of sends and receives
  // (as torch's all_to_all on NCCL), sizes changing from step to step.
  const int n = 4;
  Group g(n, {0, 1, 2, 3}, 0x1007);
  REQUIRE(g.joined.isOk());
  for (int step = 0; step < 6; ++step) {
    const size_t count = step % 2 ? 70000 : 1 + step * 17;  // the large ones span channels
    struct Bufs {
      std::vector<int32_t> in, sum, ring, self, a2aIn, a2aOut;
    };
    std::vector<Bufs> b(n);
    for (int r = 0; r < n; ++r) {
      b[r].in.resize(count);
      for (size_t i = 0; i < count; ++i) b[r].in[i] = static_cast<int32_t>(r * 1000003 + i * 7);
      b[r].sum.assign(count, -1);
      b[r].ring.assign(count, -1);
      b[r].self.assign(count, -1);
      b[r].a2aIn.resize(n * count);
      for (size_t i = 0; i < n * count; ++i) b[r].a2aIn[i] = static_cast<int32_t>(r * 7919 + i);
      b[r].a2aOut.assign(n * count, -1);
    }
    std::vector<std::vector<BatchOp>> ops(n);
    for (int r = 0; r < n; ++r) {
      auto msg = [&](BatchOp::Kind kind, int peerRank, void* p) {
        BatchOp o;
        o.kind = kind;
        o.peer = peerRank;
        o.count = count;
        o.dtype = DataType::kInt32;
        if (kind == BatchOp::Kind::kSend) {
          o.send = p;
        } else {
          o.recv = p;
        }
        o.sendDevice = o.recvDevice = o.sendReachable = o.recvReachable = true;
        o.api = "ncclSend";
        ops[r].push_back(o);
      };
      BatchOp ar;
      ar.coll = Coll::kAllReduce;
      ar.send = b[r].in.data();
      ar.recv = b[r].sum.data();
      ar.count = count;
      ar.dtype = DataType::kInt32;
      ar.sendDevice = ar.recvDevice = ar.sendReachable = ar.recvReachable = true;
      ar.api = "ncclAllReduce";
      ops[r].push_back(ar);
      msg(BatchOp::Kind::kSend, (r + 1) % n, b[r].in.data());
      msg(BatchOp::Kind::kRecv, (r + n - 1) % n, b[r].ring.data());
      msg(BatchOp::Kind::kRecv, r, b[r].self.data());
      msg(BatchOp::Kind::kSend, r, b[r].in.data());
      for (int q = 0; q < n; ++q) {
        msg(BatchOp::Kind::kSend, q, b[r].a2aIn.data() + q * count);
        msg(BatchOp::Kind::kRecv, q, b[r].a2aOut.data() + q * count);
      }
    }
    for (const Status& s : g.submit(ops)) REQUIRE(s.isOk());
    {
      std::lock_guard<std::mutex> lock(g.dev.mu_);
      REQUIRE(g.dev.kernelErrors_.empty());
    }
    INFO("step " << step << " count " << count);
    for (int r = 0; r < n; ++r) {
      const int prev = (r + n - 1) % n;
      size_t wrongSum = 0, wrongRing = 0, wrongSelf = 0, wrongA2a = 0;
      for (size_t i = 0; i < count; ++i) {
        int32_t want = 0;
        for (int q = 0; q < n; ++q) want += static_cast<int32_t>(q * 1000003 + i * 7);
        wrongSum += b[r].sum[i] != want;
        wrongRing += b[r].ring[i] != b[prev].in[i];
        wrongSelf += b[r].self[i] != b[r].in[i];
        for (int q = 0; q < n; ++q)
          wrongA2a += b[r].a2aOut[q * count + i] != b[q].a2aIn[r * count + i];
      }
      INFO("rank " << r);
      CHECK(wrongSum == 0);
      CHECK(wrongRing == 0);
      CHECK(wrongSelf == 0);
      CHECK(wrongA2a == 0);
    }
  }
}

TEST_CASE("peer executor: a premulsum by -1 does not reuse the plain sum's program", "[peer]") {
  // int64 scalar -1 has every bit set, as the cache once marked "no premulsum".
  constexpr int n = 3;
  constexpr size_t count = 8;
  Group g(n, {0, 0, 0}, 0x1008);
  REQUIRE(g.joined.isOk());
  std::vector<std::vector<int64_t>> in(n, std::vector<int64_t>(count)), out = in;
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<std::vector<BatchOp>> ops(n);
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) in[r][i] = static_cast<int64_t>(r * 100 + i);
      BatchOp o;
      o.coll = Coll::kAllReduce;
      o.send = in[r].data();
      o.recv = out[r].data();
      o.count = count;
      o.dtype = DataType::kInt64;
      o.sendDevice = o.recvDevice = o.sendReachable = o.recvReachable = true;
      if (pass == 1) {
        o.preMul = true;
        const int64_t minusOne = -1;
        std::memcpy(o.scalar.data(), &minusOne, sizeof minusOne);
      }
      ops[r].push_back(o);
    }
    for (const Status& s : g.submit(ops)) REQUIRE(s.isOk());
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) {
        int64_t want = 0;
        for (int q = 0; q < n; ++q) want += q * 100 + static_cast<int64_t>(i);
        INFO("pass " << pass << " rank " << r << " element " << i);
        CHECK(out[r][i] == (pass == 1 ? -want : want));
      }
  }
}

TEST_CASE("peer executor: which batches it takes", "[peer]") {
  UserRank u;
  u.mem.resize(64);
  BatchOp a = collOp(Coll::kAllReduce, u, 4, DataType::kFloat32, RedOp::kSum, 0, "x");
  CHECK(peerEligible({a, a}, 0, 2));
  BatchOp send = a;
  send.kind = BatchOp::Kind::kSend;
  send.peer = 1;
  CHECK(peerEligible({a, send}, 0, 2));  // sends and receives: one program after the collectives
  BatchOp task;
  task.kind = BatchOp::Kind::kTask;
  CHECK_FALSE(peerEligible({a, task}, 0, 2));  // tasks: staged
  BatchOp other = a;
  other.stream = reinterpret_cast<void*>(0x10);
  CHECK_FALSE(peerEligible({a, other}, 0, 2));  // two streams
  BatchOp pm = a;
  pm.preMul = true;
  pm.recv = const_cast<void*>(pm.send);
  CHECK_FALSE(peerEligible({pm}, 0, 2));  // premulsum in place
  BatchOp host = a;
  host.sendReachable = false;
  CHECK_FALSE(peerEligible({host}, 0, 2));
  CHECK_FALSE(peerEligible({}, 0, 2));
}

}  // namespace tutti::device
