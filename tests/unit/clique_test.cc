// File: tests/unit/clique_test.cc
// The device cliques' protocols (core/device/clique.h for ranks that are threads,
// core/device/process_clique.h for ranks that are processes) on emulated streams: a stream is a
// CPU thread that runs its queue in order, with random delays; an event remembers which record a
// wait refers to; a stream memory operation is a store or a poll of host memory; a launch runs
// the program with the CPU evaluator (kernels/program_host.h); CUDA IPC hands the pointer over.
// So the whole path from the ranks' calls to their results runs here without a GPU, and a
// missing dependency shows as a wrong result: every rank's input is written by a task on its own
// stream just before the call, and its output is read by a task on its stream just after.
// Thread clique: ranks calling one by one, one thread driving every rank (a group), grouped
// send/recv, 1000 back-to-back calls of alternating sizes, calls that differ between ranks, a
// capture that holds only some ranks' streams, an abort while a rank waits for its peers.
// Process clique (processes emulated by threads that share only the clique's shared memory):
// every collective and grouped send/recv, 1000 back-to-back calls, calls that differ, and aborts
// that release the leader waiting for a post and a rank's stream waiting for the leader.
#include "core/device/clique.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "core/device/process_clique.h"
#include "kernels/program_host.h"
#include "tests/unit/emu_stream.h"

namespace tutti::device {
namespace {

// ---- emulated streams ----

using test::EmuStream;

struct EmuEvent {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0, completed = 0;
};

class EmuOps final : public StreamOps {
 public:
  Status setDevice(int) override { return Status::ok(); }
  Result<Event> createEvent() override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::make_unique<EmuEvent>());
    return static_cast<Event>(events_.back().get());
  }
  void destroyEvent(Event) override {}
  Status record(Event e, Stream s) override {
    auto* ev = static_cast<EmuEvent*>(e);
    uint64_t gen;
    {
      std::lock_guard<std::mutex> lock(ev->mu);
      gen = ++ev->recorded;
    }
    stream(s)->enqueue([ev, gen] {
      std::lock_guard<std::mutex> lock(ev->mu);
      ev->completed = std::max(ev->completed, gen);
      ev->cv.notify_all();
    });
    return Status::ok();
  }
  Status wait(Stream s, Event e) override {
    auto* ev = static_cast<EmuEvent*>(e);
    uint64_t gen;
    {
      std::lock_guard<std::mutex> lock(ev->mu);
      gen = ev->recorded;
    }
    stream(s)->enqueue([ev, gen] {
      std::unique_lock<std::mutex> lock(ev->mu);
      ev->cv.wait(lock, [&] { return ev->completed >= gen; });
    });
    return Status::ok();
  }
  Status launch(const kernels::program::Program& p, const kernels::program::Buffers& b,
                Stream s) override {
    TUTTI_TRY(kernels::program::validate(p));
    ++launches;
    stream(s)->enqueue([this, p, b] {
      Status st = kernels::program::runOnHost(p, b);
      if (!st.isOk()) ++launchFailures;
    });
    return Status::ok();
  }
  bool finished(Event e) override {
    auto* ev = static_cast<EmuEvent*>(e);
    std::lock_guard<std::mutex> lock(ev->mu);
    return ev->completed >= ev->recorded;
  }
  // A 32-bit write as a compare-and-swap of its aligned 64-bit word, so that the waits (64-bit
  // loads of that word) and the host's abort (a 64-bit fetch_or) synchronise with it in the
  // memory model ThreadSanitizer checks.
  Status writeValue(Stream s, uint32_t* addr, uint32_t value) override {
    stream(s)->enqueue([addr, value] {
      const auto a = reinterpret_cast<uintptr_t>(addr);
      std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(a & ~uintptr_t{7}));
      const int shift = (a & 4) ? 32 : 0;
      const uint64_t mask = uint64_t{0xffffffff} << shift;
      uint64_t old = word.load(std::memory_order_relaxed);
      while (!word.compare_exchange_weak(old, (old & ~mask) | (uint64_t{value} << shift),
                                         std::memory_order_acq_rel, std::memory_order_relaxed)) {
      }
    });
    return Status::ok();
  }
  Status waitAny(Stream s, uint64_t* addr, uint64_t mask) override {
    stream(s)->enqueue([addr, mask] {
      while ((std::atomic_ref<uint64_t>(*addr).load(std::memory_order_acquire) & mask) == 0)
        std::this_thread::sleep_for(std::chrono::microseconds(5));
    });
    return Status::ok();
  }
  Result<void*> registerHost(void* p, size_t) override { return p; }
  void unregisterHost(void*) override {}
  Result<Export> exportBuffer(const void* p) override {
    Export e;
    std::memcpy(e.handle.data(), &p, sizeof p);
    e.allocation = reinterpret_cast<uintptr_t>(p);
    return e;
  }
  Result<void*> openBuffer(const std::array<std::byte, 64>& handle) override {
    void* p = nullptr;
    std::memcpy(&p, handle.data(), sizeof p);
    return p;
  }
  void closeBuffer(void*) override {}
  Result<uint64_t> captureId(Stream s) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = captures_.find(s);
    return it == captures_.end() ? uint64_t{0} : it->second;
  }
  void setCapture(Stream s, uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    captures_[s] = id;
  }
  std::atomic<int> launches{0}, launchFailures{0};

 private:
  EmuStream* stream(Stream s) { return static_cast<EmuStream*>(s); }
  std::mutex mu_;
  std::vector<std::unique_ptr<EmuEvent>> events_;
  std::map<Stream, uint64_t> captures_;
};

uint64_t gKey = 0x7e57000000000000ull;

struct Rank {
  std::unique_ptr<EmuStream> stream;
  std::vector<int32_t> in, out;
};

// A rank's input value at element i of call k (small integers: sums, products and maxima are
// exact in int32 and in float32, so every algorithm gives the same answer).
int32_t value(int rank, size_t i, int k) {
  return static_cast<int32_t>((rank + 1) * 3 + i % 7 + k % 5);
}

// The expected output of collective `coll` (int32 sum) on `rank` for inputs `value(., ., k)`.
std::vector<int32_t> expected(Coll coll, int rank, int n, size_t count, int root, int k) {
  std::vector<int32_t> out;
  switch (coll) {
    case Coll::kAllReduce:
      for (size_t i = 0; i < count; ++i) {
        int32_t s = 0;
        for (int q = 0; q < n; ++q) s += value(q, i, k);
        out.push_back(s);
      }
      break;
    case Coll::kReduceScatter:
      for (size_t i = 0; i < count; ++i) {
        int32_t s = 0;
        for (int q = 0; q < n; ++q) s += value(q, rank * count + i, k);
        out.push_back(s);
      }
      break;
    case Coll::kAllGather:
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i) out.push_back(value(q, i, k));
      break;
    case Coll::kBroadcast:
      for (size_t i = 0; i < count; ++i) out.push_back(value(root, i, k));
      break;
    case Coll::kAllToAll:
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < count; ++i) out.push_back(value(q, rank * count + i, k));
      break;
    default:
      break;
  }
  return out;
}

size_t inCount(Coll coll, size_t count, int n) {
  return coll == Coll::kReduceScatter || coll == Coll::kAllToAll ? count * n : count;
}
size_t outCount(Coll coll, size_t count, int n) {
  return coll == Coll::kAllGather || coll == Coll::kAllToAll ? count * n : count;
}

// Fills the rank's input on its stream, submits the call, then copies the output out on its
// stream; returns the submit status and (after the stream ran) the output.
struct Outcome {
  Status st;
  std::vector<int32_t> got;
};

Call makeCall(Coll coll, Rank& rk, size_t count, int root) {
  Call c;
  c.coll = coll;
  c.count = count;
  c.dtype = DataType::kInt32;
  c.op = RedOp::kSum;
  c.root = root;
  c.send = rk.in.data();
  c.recv = rk.out.data();
  c.stream = rk.stream.get();
  c.sendReachable = c.recvReachable = true;
  c.api = "test";
  return c;
}

// Buffers are sized once (tasks of earlier calls may still use them): for counts below kMaxCount.
constexpr size_t kMaxCount = 4200;
void setUp(std::vector<Rank>& ranks, uint32_t seed) {
  const size_t n = ranks.size();
  for (size_t r = 0; r < n; ++r) {
    ranks[r].stream = std::make_unique<EmuStream>(seed + static_cast<uint32_t>(r));
    ranks[r].in.assign(kMaxCount * n, 0);
    ranks[r].out.assign(kMaxCount * n, 0);
  }
}

void produce(Rank& rk, Coll coll, int rank, int n, size_t count, int k) {
  const size_t ic = inCount(coll, count, n), oc = outCount(coll, count, n);
  rk.stream->enqueue([&rk, rank, ic, oc, k] {
    for (size_t i = 0; i < ic; ++i) rk.in[i] = value(rank, i, k);
    std::fill(rk.out.begin(), rk.out.begin() + oc, -1);
  });
}

void consume(Rank& rk, size_t oc, std::vector<int32_t>* got) {
  rk.stream->enqueue([&rk, oc, got] { got->assign(rk.out.begin(), rk.out.begin() + oc); });
}

constexpr Coll kColls[] = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter,
                           Coll::kBroadcast, Coll::kAllToAll};

// n thread ranks on emulated streams, their clique and their buffers.
struct ThreadRanks {
  ThreadRanks(int n, uint32_t seed) : ranks(n) {
    auto c = Clique::join(++gKey, n, 0, 0, &ops);
    REQUIRE(c.isOk());
    clique = c.value();
    setUp(ranks, seed);
  }
  // Rank r submits one call (from the calling thread), with an optional abort flag.
  Status submit(int r, const Call& c, const std::atomic<bool>* aborted = nullptr) {
    std::vector<Call> calls{c};
    Clique::RankBatch b{r, &calls, aborted};
    return clique->submit(std::span(&b, 1));
  }
  // Every rank's batch in one submission from the calling thread.
  Status submitAll(const std::vector<std::vector<Call>>& calls) {
    std::vector<Clique::RankBatch> batches;
    for (size_t r = 0; r < calls.size(); ++r)
      batches.push_back({static_cast<int>(r), &calls[r], nullptr});
    return clique->submit(batches);
  }
  // Runs body(r) on one thread per rank, then waits for every rank's stream.
  void onThreads(const std::function<void(int)>& body) {
    std::vector<std::thread> threads;
    for (int r = 0; r < static_cast<int>(ranks.size()); ++r)
      threads.emplace_back([&, r] {
        body(r);
        ranks[r].stream->synchronize();
      });
    for (auto& t : threads) t.join();
  }
  EmuOps ops;
  std::shared_ptr<Clique> clique;
  std::vector<Rank> ranks;  // declared last: its streams stop first
};

TEST_CASE("clique: ranks as threads, one call each at a time", "[clique]") {
  for (int n : {2, 3, 5, 8}) {
    ThreadRanks t(n, 100);
    constexpr int kCalls = 24;
    std::vector<std::vector<Outcome>> outcomes(n, std::vector<Outcome>(kCalls));
    t.onThreads([&](int r) {
      std::mt19937 rng(r);
      for (int k = 0; k < kCalls; ++k) {
        const Coll coll = kColls[k % 5];
        const size_t count = (k * 37) % 300;  // 0 included
        Rank& rk = t.ranks[r];
        produce(rk, coll, r, n, count, k);
        if (rng() % 3 == 0) std::this_thread::yield();
        outcomes[r][k].st = t.submit(r, makeCall(coll, rk, count, k % n));
        consume(rk, outCount(coll, count, n), &outcomes[r][k].got);
      }
    });
    for (int r = 0; r < n; ++r) {
      for (int k = 0; k < kCalls; ++k) {
        const Coll coll = kColls[k % 5];
        const size_t count = (k * 37) % 300;
        INFO("n=" << n << " rank " << r << " call " << k << " " << collName(coll) << " count "
                  << count);
        REQUIRE(outcomes[r][k].st.isOk());
        CHECK(outcomes[r][k].got == expected(coll, r, n, count, k % n, k));
      }
    }
    CHECK(t.ops.launchFailures.load() == 0);
  }
}

TEST_CASE("clique: one thread drives every rank in one submission", "[clique]") {
  constexpr int n = 4;
  ThreadRanks t(n, 200);
  for (int k = 0; k < 10; ++k) {
    const Coll coll = kColls[k % 5];
    const size_t count = 1 + k * 101;
    std::vector<std::vector<Call>> calls(n);
    for (int r = 0; r < n; ++r) {
      produce(t.ranks[r], coll, r, n, count, k);
      calls[r].push_back(makeCall(coll, t.ranks[r], count, k % n));
    }
    REQUIRE(t.submitAll(calls).isOk());
    std::vector<std::vector<int32_t>> got(n);
    for (int r = 0; r < n; ++r) consume(t.ranks[r], outCount(coll, count, n), &got[r]);
    for (int r = 0; r < n; ++r) t.ranks[r].stream->synchronize();
    for (int r = 0; r < n; ++r) {
      INFO("call " << k << " " << collName(coll) << " rank " << r);
      CHECK(got[r] == expected(coll, r, n, count, k % n, k));
    }
  }
}

// Rank r's batch of a send/recv ring: `c` elements from input[0, c) to rank r + 1, into
// output[0, c) from rank r - 1, plus (when `self`) input[c, 2c) to its own output[c, 2c).
std::vector<Call> ringBatch(Rank& rk, int r, int n, size_t c, bool self) {
  Call to = makeCall(Coll::kAllReduce, rk, c, 0);
  to.kind = Call::Kind::kSend;
  to.peer = (r + 1) % n;
  Call from = to;
  from.kind = Call::Kind::kRecv;
  from.peer = (r + n - 1) % n;
  if (!self) return {to, from};
  Call selfSend = to;
  selfSend.peer = r;
  selfSend.send = rk.in.data() + c;
  Call selfRecv = from;
  selfRecv.peer = r;
  selfRecv.recv = rk.out.data() + c;
  return {to, selfSend, from, selfRecv};
}

// What ringBatch leaves in rank r's output[0, c) (and [c, 2c) with `self`) for inputs of call 0.
std::vector<int32_t> ringResult(int r, int n, size_t c, bool self) {
  std::vector<int32_t> want;
  for (size_t i = 0; i < c; ++i) want.push_back(value((r + n - 1) % n, i, 0));
  for (size_t i = c; self && i < 2 * c; ++i) want.push_back(value(r, i, 0));
  return want;
}

TEST_CASE("clique: a premulsum by -1 does not reuse the plain sum's program", "[clique]") {
  // int64 scalar -1 has every bit set, as the cache once marked "no premulsum".
  constexpr int n = 3;
  constexpr size_t count = 8;
  ThreadRanks t(n, 300);
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<std::vector<Call>> calls(n);
    for (int r = 0; r < n; ++r) {
      auto* in = reinterpret_cast<int64_t*>(t.ranks[r].in.data());
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<int64_t>(r * 100 + i);
      Call c = makeCall(Coll::kAllReduce, t.ranks[r], count, 0);
      c.dtype = DataType::kInt64;
      if (pass == 1) {
        c.preMul = true;
        const int64_t minusOne = -1;
        std::memcpy(c.scalar.data(), &minusOne, sizeof minusOne);
      }
      calls[r].push_back(c);
    }
    REQUIRE(t.submitAll(calls).isOk());
    for (int r = 0; r < n; ++r) {
      t.ranks[r].stream->synchronize();
      const auto* out = reinterpret_cast<const int64_t*>(t.ranks[r].out.data());
      for (size_t i = 0; i < count; ++i) {
        int64_t want = 0;
        for (int q = 0; q < n; ++q) want += q * 100 + static_cast<int64_t>(i);
        INFO("pass " << pass << " rank " << r << " element " << i);
        CHECK(out[i] == (pass == 1 ? -want : want));
      }
    }
  }
}

TEST_CASE("clique: grouped send/recv pairs in issue order, self included", "[clique]") {
  constexpr int n = 5;
  constexpr size_t c = 333;
  ThreadRanks t(n, 300);
  std::vector<std::vector<Call>> calls(n);
  for (int r = 0; r < n; ++r) {
    produce(t.ranks[r], Coll::kAllGather, r, n, 2 * c, 0);  // fills in[0, 2c), clears out
    calls[r] = ringBatch(t.ranks[r], r, n, c, true);
  }
  REQUIRE(t.submitAll(calls).isOk());
  std::vector<std::vector<int32_t>> got(n);
  for (int r = 0; r < n; ++r) consume(t.ranks[r], 2 * c, &got[r]);
  for (int r = 0; r < n; ++r) t.ranks[r].stream->synchronize();
  for (int r = 0; r < n; ++r) CHECK(got[r] == ringResult(r, n, c, true));
}

// 1000 allreduces of alternating sizes (1 and 4099 elements) on rank r, each result checked on
// the rank's stream right after its call; counts failed submissions and wrong results.
void backToBack(Rank& rk, int r, int n, const std::function<Status(const Call&)>& submit,
                std::atomic<int>& failed, std::atomic<int>& wrong) {
  for (int k = 0; k < 1000; ++k) {
    const size_t count = k % 2 ? 4099 : 1;
    produce(rk, Coll::kAllReduce, r, n, count, k);
    if (!submit(makeCall(Coll::kAllReduce, rk, count, 0)).isOk()) ++failed;
    rk.stream->enqueue([&rk, &wrong, r, count, k, n] {
      if (std::vector<int32_t>(rk.out.begin(), rk.out.begin() + count) !=
          expected(Coll::kAllReduce, r, n, count, 0, k))
        ++wrong;
    });
  }
}

TEST_CASE("clique: 1000 back-to-back calls of alternating sizes", "[clique]") {
  constexpr int n = 4;
  ThreadRanks t(n, 400);
  std::atomic<int> wrong{0}, failed{0};
  t.onThreads([&](int r) {
    backToBack(
        t.ranks[r], r, n, [&](const Call& c) { return t.submit(r, c); }, failed, wrong);
  });
  CHECK(failed.load() == 0);
  CHECK(wrong.load() == 0);
  CHECK(t.ops.launchFailures.load() == 0);
}

TEST_CASE("clique: ranks that call different things all get the error, nothing runs", "[clique]") {
  constexpr int n = 3;
  ThreadRanks t(n, 500);
  std::vector<Status> st(n);
  t.onThreads([&](int r) {
    st[r] = t.submit(r, makeCall(Coll::kAllReduce, t.ranks[r], r == 2 ? 17 : 16, 0));
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << st[r].toString());
    CHECK(st[r].code() == Code::kInvalidUsage);
    CHECK_THAT(st[r].message(), Catch::Contains("rank 2"));
  }
  CHECK(t.ops.launches.load() == 0);
  // The clique stays failed: a later call reports the same cause at once.
  CHECK_THAT(t.submit(0, makeCall(Coll::kAllReduce, t.ranks[0], 16, 0)).message(),
             Catch::Contains("differ"));
}

TEST_CASE("clique: a capture that holds only some ranks' streams is refused", "[clique]") {
  constexpr int n = 2;
  ThreadRanks t(n, 600);
  t.ops.setCapture(t.ranks[1].stream.get(), 42);
  std::vector<std::vector<Call>> calls(n);
  for (int r = 0; r < n; ++r) calls[r].push_back(makeCall(Coll::kAllReduce, t.ranks[r], 8, 0));
  Status st = t.submitAll(calls);
  CHECK(st.code() == Code::kInvalidUsage);
  CHECK_THAT(st.message(), Catch::Contains("one graph"));
  CHECK(t.ops.launches.load() == 0);
}

TEST_CASE("clique: an abort releases a rank that waits for a peer that never calls", "[clique]") {
  ThreadRanks t(2, 700);
  std::atomic<bool> aborted{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    aborted.store(true);
  });
  const auto t0 = std::chrono::steady_clock::now();
  Status st = t.submit(0, makeCall(Coll::kAllReduce, t.ranks[0], 8, 0), &aborted);
  const auto waited = std::chrono::steady_clock::now() - t0;
  aborter.join();
  CHECK(st.code() == Code::kInvalidUsage);
  CHECK_THAT(st.message(), Catch::Contains("rank 0 was aborted"));
  CHECK(waited < std::chrono::seconds(1));
  // The peer's call now fails at once instead of waiting for rank 0.
  CHECK_THAT(t.submit(1, makeCall(Coll::kAllReduce, t.ranks[1], 8, 0)).message(),
             Catch::Contains("aborted"));
  CHECK(t.ops.launches.load() == 0);
}

TEST_CASE("clique: joining checks the size and the device", "[clique]") {
  EmuOps ops;
  const uint64_t key = ++gKey;
  auto a = Clique::join(key, 3, 0, 0, &ops);
  REQUIRE(a.isOk());
  auto b = Clique::join(key, 3, 1, 0, &ops);
  REQUIRE(b.isOk());
  CHECK(a.value() == b.value());
  CHECK(Clique::join(key, 4, 2, 0, &ops).status().code() == Code::kInvalidUsage);
  CHECK(Clique::join(key, 3, 2, 1, &ops).status().code() == Code::kInvalidUsage);
  CHECK(Clique::join(++gKey, 17, 0, 0, &ops).status().code() == Code::kInvalidUsage);
}

// ---- ranks as processes (emulated: threads that share only the clique's shared memory) ----

// The communicator's allgather, over threads.
class ThreadAllgather {
 public:
  explicit ThreadAllgather(int n) : n_(n) {}
  Status operator()(int rank, const void* in, void* out, size_t bytes) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !draining_; });  // the previous round has been read by all
    if (buf_.size() < n_ * bytes) buf_.resize(n_ * bytes);
    // bytes == 0 is a barrier: buf_ may still be empty, and memcpy must not see its null data().
    if (bytes > 0) std::memcpy(buf_.data() + rank * bytes, in, bytes);
    if (++arrived_ == n_) {
      draining_ = true;
      cv_.notify_all();
    }
    cv_.wait(lock, [&] { return draining_; });
    if (bytes > 0) std::memcpy(out, buf_.data(), n_ * bytes);
    if (--arrived_ == 0) {
      draining_ = false;
      cv_.notify_all();
    }
    return Status::ok();
  }

 private:
  const size_t n_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::byte> buf_;
  size_t arrived_ = 0;
  bool draining_ = false;
};

std::unique_ptr<ProcessClique> makeProcessRank(uint64_t key, int n, int r, EmuOps& ops,
                                               ThreadAllgather& ag) {
  auto c = ProcessClique::create(
      key, n, r, 0, std::vector<int64_t>(n, getpid()), &ops,
      [&ag, r](const void* in, void* out, size_t bytes) { return ag(r, in, out, bytes); });
  if (!c.isOk()) {
    FAIL_CHECK("rank " << r << ": " << c.status().toString());
    return nullptr;
  }
  return std::move(c).value();
}

// Runs body(r, clique) for n process ranks, each on its own thread with its own ProcessClique
// (they share only the clique's shared memory), then waits for the rank's stream and destroys
// its clique.
void processRanks(EmuOps& ops, std::vector<Rank>& ranks,
                  const std::function<void(int, ProcessClique&)>& body) {
  const int n = static_cast<int>(ranks.size());
  ThreadAllgather ag(n);
  const uint64_t key = ++gKey;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto clique = makeProcessRank(key, n, r, ops, ag);
      if (!clique) return;
      body(r, *clique);
      ranks[r].stream->synchronize();
      clique.reset();
    });
  }
  for (auto& t : threads) t.join();
}

TEST_CASE("process clique: ranks as processes, every collective and grouped send/recv",
          "[clique][process]") {
  EmuOps ops;
  for (int n : {2, 3, 5}) {
    std::vector<Rank> ranks(n);
    setUp(ranks, 800);
    constexpr int kCalls = 20;
    std::vector<std::vector<Outcome>> outcomes(n, std::vector<Outcome>(kCalls + 1));
    processRanks(ops, ranks, [&](int r, ProcessClique& clique) {
      Rank& rk = ranks[r];
      for (int k = 0; k < kCalls; ++k) {
        const Coll coll = kColls[k % 5];
        const size_t count = (k * 53) % 400;
        produce(rk, coll, r, n, count, k);
        outcomes[r][k].st = clique.submit({makeCall(coll, rk, count, k % n)}, nullptr);
        consume(rk, outCount(coll, count, n), &outcomes[r][k].got);
      }
      produce(rk, Coll::kAllGather, r, n, 64, 0);
      outcomes[r][kCalls].st = clique.submit(ringBatch(rk, r, n, 64, false), nullptr);
      consume(rk, 64, &outcomes[r][kCalls].got);
    });
    for (int r = 0; r < n; ++r) {
      for (int k = 0; k < kCalls; ++k) {
        const Coll coll = kColls[k % 5];
        const size_t count = (k * 53) % 400;
        INFO("n=" << n << " rank " << r << " call " << k << " " << collName(coll) << " count "
                  << count << ": " << outcomes[r][k].st.toString());
        REQUIRE(outcomes[r][k].st.isOk());
        CHECK(outcomes[r][k].got == expected(coll, r, n, count, k % n, k));
      }
      REQUIRE(outcomes[r][kCalls].st.isOk());
      CHECK(outcomes[r][kCalls].got == ringResult(r, n, 64, false));
    }
  }
  CHECK(ops.launchFailures.load() == 0);
}

TEST_CASE("process clique: 1000 back-to-back calls of alternating sizes", "[clique][process]") {
  EmuOps ops;
  constexpr int n = 3;
  std::vector<Rank> ranks(n);
  setUp(ranks, 900);
  std::atomic<int> wrong{0}, failed{0};
  processRanks(ops, ranks, [&](int r, ProcessClique& clique) {
    backToBack(
        ranks[r], r, n, [&](const Call& c) { return clique.submit({c}, nullptr); }, failed, wrong);
  });
  CHECK(failed.load() == 0);
  CHECK(wrong.load() == 0);
}

TEST_CASE("process clique: calls that differ fail on the leader, then on every rank",
          "[clique][process]") {
  EmuOps ops;
  constexpr int n = 3;
  std::vector<Rank> ranks(n);
  setUp(ranks, 1000);
  std::vector<Status> first(n), second(n);
  ThreadAllgather barrier(n);
  processRanks(ops, ranks, [&](int r, ProcessClique& clique) {
    first[r] = clique.submit({makeCall(Coll::kAllReduce, ranks[r], r == 1 ? 9 : 8, 0)}, nullptr);
    ranks[r].stream->synchronize();       // every stream is released although the call failed
    (void)barrier(r, &r, &second[0], 0);  // the leader has failed the clique by now
    second[r] = clique.submit({makeCall(Coll::kAllReduce, ranks[r], 8, 0)}, nullptr);
  });
  CHECK(first[0].code() == Code::kInvalidUsage);
  CHECK_THAT(first[0].message(), Catch::Contains("rank 1"));
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << second[r].toString());
    CHECK(second[r].code() == Code::kInvalidUsage);
    CHECK_THAT(second[r].message(), Catch::Contains("differ"));
  }
  CHECK(ops.launches.load() == 0);
}

// Two process ranks' cliques made on two threads (creation is collective).
std::pair<std::unique_ptr<ProcessClique>, std::unique_ptr<ProcessClique>> processPair(EmuOps& ops) {
  ThreadAllgather ag(2);
  const uint64_t key = ++gKey;
  std::unique_ptr<ProcessClique> peer;
  std::thread t([&] { peer = makeProcessRank(key, 2, 1, ops, ag); });
  auto leader = makeProcessRank(key, 2, 0, ops, ag);
  t.join();
  return {std::move(leader), std::move(peer)};
}

TEST_CASE("process clique: aborts release the waiting leader and a rank's waiting stream",
          "[clique][process]") {
  EmuOps ops;
  std::vector<Rank> ranks(2);
  setUp(ranks, 1100);
  SECTION("the leader waits for a rank that never calls") {
    auto [leader, peer] = processPair(ops);
    REQUIRE(leader);
    REQUIRE(peer);
    std::atomic<bool> aborted{false};
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      aborted.store(true);
    });
    const auto t0 = std::chrono::steady_clock::now();
    Status st = leader->submit({makeCall(Coll::kAllReduce, ranks[0], 8, 0)}, &aborted);
    aborter.join();
    CHECK(!st.isOk());
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
    CHECK_THAT(peer->submit({makeCall(Coll::kAllReduce, ranks[1], 8, 0)}, nullptr).message(),
               Catch::Contains("aborted"));
  }
  SECTION("a rank's stream waits for a leader that never calls") {
    auto [leader, peer] = processPair(ops);
    REQUIRE(leader);
    REQUIRE(peer);
    std::vector<int32_t> got;
    REQUIRE(peer->submit({makeCall(Coll::kAllReduce, ranks[1], 8, 0)}, nullptr).isOk());
    consume(ranks[1], 8, &got);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto t0 = std::chrono::steady_clock::now();
    peer->abort();
    ranks[1].stream->synchronize();  // returns only once the stream's wait is released
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
    CHECK(got.size() == 8);
  }
}

}  // namespace
}  // namespace tutti::device
