// File: tests/ib/ib_fifo_channel_test.cc
// The ib FIFO/credit protocol (FifoChannel) between two ranks over a fake wire that behaves like
// one RC queue pair: writes are placed at the peer in order and only when the test's "fabric"
// moves them, the source is read at placement time (so reusing a staging slot too early corrupts
// data), every write consumes a posted receive (none posted: receiver-not-ready error), and the
// sender's completion is released separately, later. Random interleavings check that data
// arrives intact, that no receiver-not-ready error ever occurs, and the credit and queue bounds.
#include <catch2/catch.hpp>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include "kernels/reduce.h"
#include "transports/ib/fifo_channel.h"

namespace tutti::transport::ib {
namespace {

struct Write {
  uint64_t wrId;
  const void* src;
  uint32_t bytes;
  uint32_t lkey;
  uint64_t offset;
  uint32_t imm;
  bool withImm = true;
};

class FakeEnd final : public Wire {
 public:
  FakeEnd(uint32_t sendDepth, uint32_t recvDepth) : sendDepth_(sendDepth), recvDepth_(recvDepth) {}

  Status postWrite(uint64_t wrId, const void* src, uint32_t bytes, uint32_t lkey,
                   uint64_t remoteOffset, uint32_t imm) override {
    if (failPosts) return systemError("fake: ibv_post_send failed: Cannot allocate memory");
    if (++sqUsed > sendDepth_) overranSq = true;
    maxSqUsed = std::max(maxSqUsed, sqUsed);
    outbound.push_back(Write{wrId, src, bytes, lkey, remoteOffset, imm});
    if (bytes > 0) lkeysUsed.push_back(lkey);
    return Status::ok();
  }
  Status postProbe(uint64_t wrId) override {
    if (++sqUsed > sendDepth_) overranSq = true;
    outbound.push_back(Write{wrId, nullptr, 0, 0, 0, 0, false});
    ++probes;
    return Status::ok();
  }
  Status postRecv(uint64_t wrId) override {
    recvIds.push_back(wrId);
    if (recvIds.size() > recvDepth_) overranRq = true;
    return Status::ok();
  }
  Result<size_t> poll(std::span<WireCompletion> out) override {
    size_t n = 0;
    while (n < out.size() && !cq.empty()) {
      out[n++] = cq.front();
      cq.pop_front();
    }
    return n;
  }

  std::vector<std::byte> fifo;
  std::deque<Write> outbound;       // posted, not yet placed at the peer
  std::deque<WireCompletion> acks;  // placed; the sender's completion not yet visible
  std::deque<WireCompletion> cq;
  std::deque<uint64_t> recvIds;
  std::vector<uint32_t> lkeysUsed;
  uint32_t sqUsed = 0, maxSqUsed = 0;
  int probes = 0;
  bool peerDead = false;  // writes to this end fail with retry exceeded
  bool overranSq = false, overranRq = false, failPosts = false;

 private:
  uint32_t sendDepth_, recvDepth_;
};

/// Two ends joined by one queue pair.
struct Fabric {
  explicit Fabric(const ChannelConfig& cfg)
      : a(cfg.sendDepth(), cfg.recvDepth()), b(cfg.sendDepth(), cfg.recvDepth()) {
    const size_t bytes = static_cast<size_t>(cfg.slots) * cfg.slotBytes;
    a.fifo.assign(bytes, std::byte{0});
    b.fifo.assign(bytes, std::byte{0});
  }
  FakeEnd a, b;
  int rnr = 0, outOfBounds = 0;

  /// Places the oldest write of `from` at `to`. False when none is in flight.
  bool place(FakeEnd& from, FakeEnd& to) {
    if (from.outbound.empty()) return false;
    const Write w = from.outbound.front();
    from.outbound.pop_front();
    if (to.peerDead) {
      from.cq.push_back(WireCompletion{w.wrId, false, 12, 0, 0});
      --from.sqUsed;
      return true;
    }
    if (!w.withImm) {  // a plain RDMA write: placed, nothing at the receiver
      from.acks.push_back(WireCompletion{w.wrId, false, 0, 0, 0});
      return true;
    }
    if (to.recvIds.empty()) {  // RNR retries exhausted (we count it as a protocol failure)
      ++rnr;
      from.cq.push_back(WireCompletion{w.wrId, false, 13, 0, 0});
      return true;
    }
    if (w.offset + w.bytes > to.fifo.size()) {
      ++outOfBounds;
      from.cq.push_back(WireCompletion{w.wrId, false, 10, 0, 0});
      return true;
    }
    if (w.bytes > 0) std::memcpy(to.fifo.data() + w.offset, w.src, w.bytes);
    to.cq.push_back(WireCompletion{to.recvIds.front(), true, 0, w.imm, 0});
    to.recvIds.pop_front();
    from.acks.push_back(WireCompletion{w.wrId, false, 0, 0, 0});
    return true;
  }
  bool ack(FakeEnd& e) {
    if (e.acks.empty()) return false;
    e.cq.push_back(e.acks.front());
    e.acks.pop_front();
    --e.sqUsed;
    return true;
  }
  void drain() {
    while (place(a, b) || place(b, a) || ack(a) || ack(b)) {
    }
  }
};

ChannelConfig config(uint32_t slots, uint32_t slotBytes, std::vector<std::byte>& staging, int rank,
                     int peer) {
  ChannelConfig c;
  c.slots = slots;
  c.slotBytes = slotBytes;
  staging.assign(static_cast<size_t>(slots) * slotBytes, std::byte{0});
  c.staging = staging.data();
  c.stagingLkey = 77;
  c.rank = rank;
  c.peer = peer;
  c.peerHost = rank == 0 ? "hostB" : "hostA";
  c.device = "fake0:1";
  c.timeout = 20;
  c.retryCnt = 7;
  return c;
}

/// Both channels of one connection plus their fabric.
struct Pair {
  Pair(uint32_t slots, uint32_t slotBytes, RegistrationCache* cacheA = nullptr)
      : fabric(config(slots, slotBytes, stagingA, 0, 1)),
        a(fabric.a, withFifo(config(slots, slotBytes, stagingA, 0, 1), fabric.a, cacheA)),
        b(fabric.b, withFifo(config(slots, slotBytes, stagingB, 1, 0), fabric.b, nullptr)) {
    REQUIRE(a.start().isOk());
    REQUIRE(b.start().isOk());
  }
  static ChannelConfig withFifo(ChannelConfig c, FakeEnd& end, RegistrationCache* cache) {
    c.fifo = end.fifo.data();
    c.cache = cache;
    return c;
  }
  std::vector<std::byte> stagingA, stagingB;
  Fabric fabric;
  FifoChannel a, b;

  Status progressBoth() {
    Status s = a.progress();
    if (s.isOk()) s = b.progress();
    return s;
  }
  /// Progress and move everything until nothing changes (bounded).
  Status settle() {
    for (int i = 0; i < 10000; ++i) {
      TUTTI_TRY(progressBoth());
      const bool idle = fabric.a.outbound.empty() && fabric.b.outbound.empty() &&
                        fabric.a.acks.empty() && fabric.b.acks.empty() && fabric.a.cq.empty() &&
                        fabric.b.cq.empty();
      if (idle) return progressBoth();
      fabric.drain();
    }
    return internalError("did not settle");
  }
};

std::vector<std::byte> pattern(size_t bytes, uint32_t seed) {
  std::vector<std::byte> v(bytes);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return v;
}

RecvSpec plainRecv(std::vector<std::byte>& dst) {
  RecvSpec s;
  s.dst = dst.data();
  s.bytes = dst.size();
  return s;
}

}  // namespace

TEST_CASE("fifo channel: messages of every shape arrive intact in both directions") {
  const uint32_t slotBytes = 64;
  Pair p(3, slotBytes);
  const std::vector<size_t> sizes = {0, 1, 63, 64, 65, 0, 128, 1000, 7, 0, 64 * 9 + 5};
  std::vector<std::vector<std::byte>> outA, outB, inA, inB;
  for (size_t i = 0; i < sizes.size(); ++i) {
    outA.push_back(pattern(sizes[i], static_cast<uint32_t>(i)));
    outB.push_back(pattern(sizes[i], static_cast<uint32_t>(100 + i)));
    inA.emplace_back(sizes[i], std::byte{0xEE});
    inB.emplace_back(sizes[i], std::byte{0xEE});
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    CHECK(p.a.postSend(outA[i].data(), sizes[i]) == i + 1);
    CHECK(p.b.postSend(outB[i].data(), sizes[i]) == i + 1);
    CHECK(p.b.postRecv(plainRecv(inB[i])) == i + 1);
    CHECK(p.a.postRecv(plainRecv(inA[i])) == i + 1);
  }
  REQUIRE(p.settle().isOk());
  CHECK(p.a.sendsDone() == sizes.size());
  CHECK(p.b.recvsDone() == sizes.size());
  CHECK(p.a.recvsDone() == sizes.size());
  CHECK(p.b.sendsDone() == sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    CHECK(inB[i] == outA[i]);
    CHECK(inA[i] == outB[i]);
  }
  size_t total = 0;
  for (size_t s : sizes) total += s;
  CHECK(p.a.bytesSent() == total);
  CHECK(p.b.bytesReceived() == total);
  CHECK(p.fabric.rnr == 0);
  CHECK_FALSE(p.fabric.a.overranSq);
  CHECK_FALSE(p.fabric.a.overranRq);
  // Staged sends use the staging lkey.
  for (uint32_t k : p.fabric.a.lkeysUsed) CHECK(k == 77);
}

TEST_CASE("fifo channel: a zero-byte message on an idle channel completes at once") {
  Pair p(2, 64);
  CHECK(p.a.postSend(nullptr, 0) == 1);
  CHECK(p.a.sendsDone() == 1);
  RecvSpec s;
  CHECK(p.b.postRecv(s) == 1);
  CHECK(p.b.recvsDone() == 1);
  REQUIRE(p.settle().isOk());
  CHECK(p.fabric.a.lkeysUsed.empty());
}

TEST_CASE("fifo channel: the sender stops at `slots` uncredited chunks") {
  const uint32_t slots = 2, slotBytes = 64;
  Pair p(slots, slotBytes);
  const auto msg = pattern(slotBytes * 7, 9);
  p.a.postSend(msg.data(), msg.size());
  // The receiver posts nothing yet: at most `slots` chunks may be written.
  for (int i = 0; i < 20; ++i) {
    REQUIRE(p.progressBoth().isOk());
    p.fabric.drain();
  }
  CHECK(p.a.chunksUncredited() == slots);
  CHECK(p.fabric.rnr == 0);
  CHECK(p.a.sendsDone() == 0);
  std::vector<std::byte> in(msg.size());
  p.b.postRecv(plainRecv(in));
  REQUIRE(p.settle().isOk());
  CHECK(in == msg);
  CHECK(p.a.sendsDone() == 1);
  CHECK(p.b.recvsDone() == 1);
  CHECK(p.a.chunksUncredited() == 0);
  CHECK(p.fabric.rnr == 0);
}

TEST_CASE("fifo channel: a staging slot is reused only after its write completed") {
  const uint32_t slots = 2, slotBytes = 64;
  Pair p(slots, slotBytes);
  const auto msg = pattern(slotBytes * 6, 4);
  std::vector<std::byte> in(msg.size());
  p.a.postSend(msg.data(), msg.size());
  p.b.postRecv(plainRecv(in));
  // Place writes and return credits, but never release A's send completions.
  for (int i = 0; i < 50; ++i) {
    REQUIRE(p.progressBoth().isOk());
    while (p.fabric.place(p.fabric.a, p.fabric.b) || p.fabric.place(p.fabric.b, p.fabric.a)) {
    }
    while (p.fabric.ack(p.fabric.b)) {
    }
  }
  CHECK(p.a.chunksUncredited() == 0);  // credits came back...
  CHECK(p.b.recvsDone() == 0);         // ...but only two chunks could be staged
  CHECK(p.b.bytesReceived() == 2 * slotBytes);
  REQUIRE(p.settle().isOk());
  CHECK(in == msg);
}

TEST_CASE("fifo channel: reducing receives reduce straight from the FIFO slot") {
  Pair p(2, 64);
  const size_t count = 100;  // 400 bytes: 6 full slots and one of 16 bytes
  std::vector<int32_t> mine(count), theirs(count), out(count, -1);
  for (size_t i = 0; i < count; ++i) {
    mine[i] = static_cast<int32_t>(i * 3);
    theirs[i] = static_cast<int32_t>(1000 - i);
  }
  p.a.postSend(theirs.data(), count * 4);
  RecvSpec s;
  s.dst = out.data();
  s.src = mine.data();
  s.bytes = count * 4;
  s.reduce = kernels::reduce2Fn(DataType::kInt32, RedOp::kSum);
  s.elemBytes = 4;
  REQUIRE(s.reduce != nullptr);
  p.b.postRecv(s);
  REQUIRE(p.settle().isOk());
  for (size_t i = 0; i < count; ++i) CHECK(out[i] == static_cast<int32_t>(i * 3 + 1000 - i));
}

TEST_CASE("fifo channel: a reducing receive of a partial element fails") {
  Pair p(2, 64);
  std::vector<int32_t> buf(4);
  RecvSpec s;
  s.dst = buf.data();
  s.src = buf.data();
  s.bytes = 6;
  s.reduce = kernels::reduce2Fn(DataType::kInt32, RedOp::kSum);
  s.elemBytes = 4;
  p.b.postRecv(s);
  Status st = p.b.progress();
  REQUIRE_FALSE(st.isOk());
  CHECK_THAT(st.message(), Catch::Contains("not a multiple of the element size 4"));
}

TEST_CASE("fifo channel: a message-size mismatch is a protocol error naming both sizes") {
  Pair p(2, 64);
  const auto msg = pattern(100, 1);
  std::vector<std::byte> in(90);
  p.a.postSend(msg.data(), msg.size());
  p.b.postRecv(plainRecv(in));
  // First chunk (64 bytes) matches; the second (36) does not fit the 26 left.
  Status s = p.settle();
  REQUIRE_FALSE(s.isOk());
  CHECK(s.code() == Code::kRemoteError);
  CHECK_THAT(s.message(), Catch::Contains("36 bytes") && Catch::Contains("expects 26") &&
                              Catch::Contains("rank 0"));
  CHECK_FALSE(p.b.progress().isOk());  // sticky
}

TEST_CASE("fifo channel: completion errors are mapped to their cause and are sticky") {
  Pair p(2, 64);
  const auto msg = pattern(64, 1);
  p.a.postSend(msg.data(), msg.size());
  REQUIRE(p.a.progress().isOk());
  REQUIRE(p.fabric.a.outbound.size() == 1);
  const Write w = p.fabric.a.outbound.front();
  p.fabric.a.outbound.clear();
  p.fabric.a.cq.push_back(WireCompletion{w.wrId, false, 12, 0, 0x81});
  Status s = p.a.progress();
  REQUIRE_FALSE(s.isOk());
  CHECK(s.code() == Code::kRemoteError);
  CHECK_THAT(s.message(),
             Catch::Contains("IBV_WC_RETRY_EXC_ERR") && Catch::Contains("NCCL_IB_TIMEOUT=20") &&
                 Catch::Contains("rank 1 (host hostB)") && Catch::Contains("RDMA write to"));
  Status again = p.a.progress();
  CHECK(again.message() == s.message());

  // A flushed receive names the receive side.
  Pair q(2, 64);
  q.fabric.b.cq.push_back(WireCompletion{q.fabric.b.recvIds.front(), false, 5, 0, 0});
  Status r = q.b.progress();
  REQUIRE_FALSE(r.isOk());
  CHECK_THAT(r.message(),
             Catch::Contains("receive from rank 0") && Catch::Contains("IBV_WC_WR_FLUSH_ERR"));
}

TEST_CASE("fifo channel: a peer that violates the protocol is detected") {
  SECTION("more credit than chunks outstanding") {
    Pair p(2, 64);
    p.fabric.a.cq.push_back(
        WireCompletion{p.fabric.a.recvIds.front(), true, 0, kCreditFlag | 1, 0});
    p.fabric.a.recvIds.pop_front();
    Status s = p.a.progress();
    REQUIRE_FALSE(s.isOk());
    CHECK_THAT(s.message(), Catch::Contains("credit for 1 slots with only 0 chunks"));
  }
  SECTION("a chunk larger than a slot") {
    Pair p(2, 64);
    p.fabric.b.cq.push_back(WireCompletion{p.fabric.b.recvIds.front(), true, 0, 65, 0});
    p.fabric.b.recvIds.pop_front();
    CHECK_THAT(p.b.progress().message(), Catch::Contains("chunk of 65 bytes for 64-byte slots"));
  }
  SECTION("more chunks than slots without credit") {
    Pair p(2, 64);
    for (int i = 0; i < 3; ++i) {
      p.fabric.b.cq.push_back(WireCompletion{p.fabric.b.recvIds.front(), true, 0, 8, 0});
      p.fabric.b.recvIds.pop_front();
    }
    CHECK_THAT(p.b.progress().message(), Catch::Contains("more than 2 chunks"));
  }
}

TEST_CASE("fifo channel: a failing post surfaces from progress") {
  Pair p(2, 64);
  const auto msg = pattern(10, 1);
  p.a.postSend(msg.data(), msg.size());
  p.fabric.a.failPosts = true;
  Status s = p.a.progress();
  REQUIRE_FALSE(s.isOk());
  CHECK_THAT(s.message(), Catch::Contains("ibv_post_send"));
}

TEST_CASE("fifo channel: zero-copy sends take lkeys from the registration cache") {
  int regs = 0, deregs = 0;
  RegistrationCache cache(
      RegistrationCache::Backend{
          [&](uintptr_t, size_t, MemKind) -> Result<MemRegistration> {
            ++regs;
            return MemRegistration{static_cast<uint32_t>(500 + regs), 0, nullptr};
          },
          [&](const MemRegistration&) { ++deregs; }},
      RegistrationCache::Limits{});
  {
    Pair p(2, 64, &cache);
    const auto msg = pattern(64 * 5 + 3, 7);
    std::vector<std::byte> in1(msg.size()), in2(msg.size());
    p.a.postSend(msg.data(), msg.size());
    p.a.postSend(msg.data(), msg.size());  // same buffer: a cache hit
    p.b.postRecv(plainRecv(in1));
    p.b.postRecv(plainRecv(in2));
    REQUIRE(p.settle().isOk());
    CHECK(in1 == msg);
    CHECK(in2 == msg);
    CHECK(regs == 1);
    CHECK(cache.stats().hits == 1);
    for (uint32_t k : p.fabric.a.lkeysUsed) CHECK(k == 501);
  }
  CHECK(deregs == 0);  // still cached; leases were released when the sends completed
  CHECK(cache.stats().entries == 1);
}

TEST_CASE("fifo channel: random interleavings keep data intact and never hit RNR") {
  const auto seed = GENERATE(1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u);
  const uint32_t slots = GENERATE(1u, 2u, 5u);
  std::mt19937 rng(seed * 31 + slots);
  const uint32_t slotBytes = 64;
  Pair p(slots, slotBytes);
  // Both directions: 40 messages each of random sizes (some zero, some many slots), some of
  // them reducing.
  struct Msg {
    std::vector<std::byte> out, in, base;
    bool reduce;
  };
  std::vector<Msg> ab(40), ba(40);
  auto fill = [&](std::vector<Msg>& v, uint32_t salt) {
    for (size_t i = 0; i < v.size(); ++i) {
      const size_t bytes = (rng() % 4 == 0) ? 0 : (rng() % (slotBytes * 6)) / 8 * 8;
      v[i].reduce = rng() % 3 == 0;
      v[i].out = pattern(bytes, salt + static_cast<uint32_t>(i));
      v[i].base = pattern(bytes, salt + 1000 + static_cast<uint32_t>(i));
      v[i].in.assign(bytes, std::byte{0xEE});
    }
  };
  fill(ab, 1);
  fill(ba, 5000);
  const auto sum64 = kernels::reduce2Fn(DataType::kUint64, RedOp::kSum);
  size_t postedSendA = 0, postedSendB = 0, postedRecvA = 0, postedRecvB = 0;
  auto recvSpec = [&](Msg& m) {
    RecvSpec s;
    s.dst = m.in.data();
    s.bytes = m.in.size();
    if (m.reduce) {
      s.src = m.base.data();
      s.reduce = sum64;
      s.elemBytes = 8;
    }
    return s;
  };
  bool done = false;
  for (int step = 0; step < 200000 && !done; ++step) {
    switch (rng() % 10) {
      case 0:
        if (postedSendA < ab.size())
          p.a.postSend(ab[postedSendA].out.data(), ab[postedSendA].out.size()), ++postedSendA;
        break;
      case 1:
        if (postedSendB < ba.size())
          p.b.postSend(ba[postedSendB].out.data(), ba[postedSendB].out.size()), ++postedSendB;
        break;
      case 2:
        if (postedRecvB < ab.size()) p.b.postRecv(recvSpec(ab[postedRecvB])), ++postedRecvB;
        break;
      case 3:
        if (postedRecvA < ba.size()) p.a.postRecv(recvSpec(ba[postedRecvA])), ++postedRecvA;
        break;
      case 4:
        REQUIRE(p.a.progress().isOk());
        break;
      case 5:
        REQUIRE(p.b.progress().isOk());
        break;
      case 6:
        p.fabric.place(p.fabric.a, p.fabric.b);
        break;
      case 7:
        p.fabric.place(p.fabric.b, p.fabric.a);
        break;
      case 8:
        p.fabric.ack(p.fabric.a);
        break;
      case 9:
        p.fabric.ack(p.fabric.b);
        break;
    }
    CHECK(p.a.chunksUncredited() <= slots);
    CHECK(p.b.chunksUncredited() <= slots);
    done = p.a.sendsDone() == ab.size() && p.b.recvsDone() == ab.size() &&
           p.b.sendsDone() == ba.size() && p.a.recvsDone() == ba.size();
  }
  REQUIRE(done);
  CHECK(p.fabric.rnr == 0);
  CHECK(p.fabric.outOfBounds == 0);
  CHECK_FALSE(p.fabric.a.overranSq);
  CHECK_FALSE(p.fabric.b.overranSq);
  CHECK_FALSE(p.fabric.a.overranRq);
  CHECK_FALSE(p.fabric.b.overranRq);
  auto expect = [&](const Msg& m) {
    if (!m.reduce) return m.out;
    std::vector<std::byte> e(m.out.size());
    sum64(e.data(), m.base.data(), m.out.data(), m.out.size() / 8);
    return e;
  };
  for (size_t i = 0; i < ab.size(); ++i) {
    INFO("a->b message " << i);
    CHECK(ab[i].in == expect(ab[i]));
  }
  for (size_t i = 0; i < ba.size(); ++i) {
    INFO("b->a message " << i);
    CHECK(ba[i].in == expect(ba[i]));
  }
}

}  // namespace tutti::transport::ib

namespace tutti::transport::ib {

TEST_CASE("fifo channel: checkPeer probes a silent peer once at a time") {
  Pair p(2, 64);
  std::vector<std::byte> in(64);
  p.b.postRecv(plainRecv(in));  // waiting for data that does not come
  REQUIRE(p.b.checkPeer().isOk());
  REQUIRE(p.b.checkPeer().isOk());  // one probe outstanding: no second one
  CHECK(p.fabric.b.probes == 1);
  CHECK(p.fabric.a.recvIds.size() == 2 * 2 + 2);  // a probe consumes no receive
  p.fabric.drain();
  REQUIRE(p.b.progress().isOk());
  REQUIRE(p.b.checkPeer().isOk());  // the first completed: a new one
  CHECK(p.fabric.b.probes == 2);
  CHECK(p.b.recvsDone() == 0);
  // Data still flows normally afterwards.
  const auto msg = pattern(64, 3);
  p.a.postSend(msg.data(), msg.size());
  REQUIRE(p.settle().isOk());
  CHECK(in == msg);
}

TEST_CASE("fifo channel: a dead peer surfaces through the probe as retry-exceeded") {
  Pair p(2, 64);
  std::vector<std::byte> in(64);
  p.b.postRecv(plainRecv(in));
  p.fabric.a.peerDead = true;
  REQUIRE(p.b.checkPeer().isOk());
  p.fabric.drain();
  Status s = p.b.progress();
  REQUIRE_FALSE(s.isOk());
  CHECK_THAT(s.message(), Catch::Contains("IBV_WC_RETRY_EXC_ERR") &&
                              Catch::Contains("rank 0 (host hostA)") && Catch::Contains("died"));
  CHECK(p.b.checkPeer().message() == s.message());
}

}  // namespace tutti::transport::ib
