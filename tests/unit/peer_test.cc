// File: tests/unit/peer_test.cc
// The peer compiler (core/device/peer_compile.h) and the peer interpreter in its host emulator
// (kernels/peer_host.h): ranks as threads, channels as threads, arenas in host memory, tiny FIFOs
// (two slots of 32 bytes; low-latency slots of two lines) and random yields, so that every
// message wraps its FIFO many times and the protocols' waits interleave in many orders. Every
// registered algorithm of the eight data collectives, nranks 1..8, both protocols, in and out of
// place, is checked against the host engine's arithmetic byte for byte: the schedules run on a
// mailbox with the engine's kernels, piece by piece (a call of one piece: the whole call). Also:
// the static pairing of every send with its receive, counters and flags across 2^32, 1,000
// calls on one set of arenas, abort and timeout naming the peer, and the compiler's errors.
// Direct messages (the receiver reads the sender's buffer in place) run in half the simple cases
// of the sweeps; their ranks scribble over their buffers the moment their run returns, so a
// receiver still reading one would get wrong bits.
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "core/device/peer_compile.h"
#include "kernels/peer_host.h"
#include "kernels/peer_interp.h"
#include "tests/unit/engine_reference.h"

namespace tutti::device {
namespace {

namespace peer = kernels::peer;
using namespace tutti::test;  // NOLINT: the reference helpers
using peer::Protocol;

using Clock = std::chrono::steady_clock;

// FIFOs small enough that every message of a few hundred bytes wraps them.
peer::ArenaConfig tinyArena(int nranks, int channels) {
  peer::ArenaConfig c;
  c.nranks = nranks;
  c.channels = channels;
  c.slots = 2;
  c.slotBytes = 32;
  c.llSlots = 2;
  c.llLines = 2;
  c.scratchBytes = 64 << 10;
  return c;
}

PeerCompileConfig compileConfig(const peer::ArenaConfig& a, Protocol p, int channels) {
  PeerCompileConfig c;
  c.channels = channels;
  c.protocol = p;
  c.payloadBytes = peer::payloadBytes(a, p);
  c.scratchBytes = a.scratchBytes;
  return c;
}

// A job: every rank's program, arena and launch; run() runs every rank as a thread.
struct Job {
  peer::ArenaLayout layout;
  std::vector<PeerProgram> programs;
  std::vector<std::unique_ptr<peer::HostArena>> arenas;
  peer::HostOptions host{50, 1};
  uint64_t timeoutNs = 30'000'000'000ull;
  /// Each rank overwrites its buffers once its run returns, then puts them back: a peer that
  /// still reads them (a direct receive after the sender's call ended) reads garbage.
  bool scribble = false;
  std::atomic<uint32_t> abort{0};

  explicit Job(const peer::ArenaConfig& config) : layout(peer::arenaLayout(config)) {
    for (int r = 0; r < config.nranks; ++r)
      arenas.push_back(std::make_unique<peer::HostArena>(layout));
  }

  peer::Launch launch(int r, const void* in, void* out) {
    peer::Launch l;
    l.program = programs[r].header();
    l.input = in;
    l.output = out;
    for (size_t q = 0; q < arenas.size(); ++q) l.arenas[q] = arenas[q]->data();
    l.layout = layout;
    l.error = arenas[r]->error();
    l.abortFlag = reinterpret_cast<const uint32_t*>(&abort);
    l.timeoutNs = timeoutNs;
    return l;
  }

  // Runs every rank concurrently, rank r's launch buffers being buffers[r].
  std::vector<Status> runWithBuffers(std::vector<std::vector<std::vector<std::byte>>>& buffers) {
    std::vector<Status> out(programs.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < programs.size(); ++r) {
      threads.emplace_back([&, r] {
        peer::Launch l = launch(static_cast<int>(r), nullptr, nullptr);
        for (size_t b = 0; b < buffers[r].size(); ++b) l.buffers[b] = buffers[r][b].data();
        out[r] = peer::runOnHost(l, host);
      });
    }
    for (auto& t : threads) t.join();
    return out;
  }

  // Runs the ranks in `which` (all when empty) concurrently on the users' buffers.
  std::vector<Status> run(std::vector<UserRank>& users, std::vector<int> which = {}) {
    if (which.empty())
      for (size_t r = 0; r < programs.size(); ++r) which.push_back(static_cast<int>(r));
    std::vector<Status> out(programs.size());
    std::vector<std::thread> threads;
    for (int r : which) {
      threads.emplace_back([&, r] {
        out[r] = peer::runOnHost(launch(r, users[r].send(), users[r].recv()), host);
        if (!scribble) return;
        std::vector<std::byte>& mem = users[r].mem;
        const std::vector<std::byte> keep = mem;
        std::fill(mem.begin(), mem.end(), std::byte{0xA5});
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        std::copy(keep.begin(), keep.end(), mem.begin());
      });
    }
    for (auto& t : threads) t.join();
    return out;
  }
};

// Compiles every rank's program into job.programs; "" or the first error.
std::string compileAll(Job& job, const AlgorithmInfo& info, const CollShape& shape,
                       const PeerCompileConfig& cfg, const std::byte* scalar) {
  job.programs.clear();
  for (int r = 0; r < shape.nranks; ++r) {
    CollShape s = shape;
    s.rank = r;
    auto p = compilePeer(s, info, cfg, scalar);
    if (!p.isOk()) return p.status().message();
    job.programs.push_back(std::move(p).value());
  }
  std::vector<const PeerProgram*> ptrs;
  for (const auto& p : job.programs) ptrs.push_back(&p);
  if (Status s = checkPairing(ptrs); !s.isOk()) return "pairing: " + s.message();
  return "";
}

// The engine's results, piece by piece: each piece's elements are copied out of the users'
// buffers into a call of its own (NCCL's layout for the piece's count), run on the mailbox with
// the engine's kernels, and copied back.
std::string runEnginePieces(const CollShape& shape, const AlgorithmInfo& info, const Arith& a,
                            const PeerProgram& program, std::vector<UserRank>& users) {
  const peer::ProgramHeader* h = program.header();
  const size_t elem = dataTypeBytes(a.dtype);
  for (uint32_t k = 0; k < h->npieces; ++k) {
    const peer::Piece pc = peer::pieces(h)[k];
    CollShape sub = shape;
    sub.count = pc.count;
    std::vector<UserRank> subUsers = layOut(sub, a.dtype);
    auto index = [&](bool blocked, uint64_t i) {
      peer::detail::View v;
      v.c0 = pc.c0;
      v.n = pc.count;
      v.count = shape.count;
      v.blocked = blocked;
      return peer::detail::viewIndex(v, i);
    };
    for (int pass = 0; pass < 2; ++pass) {  // 0: into the piece's call, 1: back
      for (int r = 0; r < shape.nranks; ++r) {
        CollShape s = sub;
        s.rank = r;
        for (bool input : {true, false}) {
          const uint64_t n = algo::bufferCount(s, input ? Buf::kInput : Buf::kOutput);
          const bool blocked = input ? h->inputBlocked : h->outputBlocked;
          std::byte* piece = input ? subUsers[r].send() : subUsers[r].recv();
          std::byte* full = input ? users[r].send() : users[r].recv();
          for (uint64_t i = 0; i < n; ++i) {
            std::byte* f = full + index(blocked, i) * elem;
            if (pass == 0)
              std::memcpy(piece + i * elem, f, elem);
            else
              std::memcpy(f, piece + i * elem, elem);
          }
        }
      }
      if (pass == 0) {
        if (std::string err = runEngine(sub, info, a, subUsers); !err.empty()) return err;
      }
    }
  }
  return "";
}

struct Outcome {
  std::string error;  // "" when the run matched the engine
  bool declined = false;
  uint32_t pieces = 0;
};

// The whole check for one algorithm, shape, arithmetic, protocol and channel count.
Outcome checkPeer(const AlgorithmInfo& info, CollShape shape, const Arith& a, Protocol protocol,
                  int channels, uint64_t maxPiece = 0, uint64_t seed = 1, bool tiny = true,
                  bool direct = false) {
  shape.dtype = a.dtype;
  shape.op = a.op;
  peer::ArenaConfig arena = tinyArena(shape.nranks, channels);
  if (!tiny) {  // FIFOs of a few slots per message: for tests of the arithmetic
    arena.slots = 4;
    arena.slotBytes = 512;
    arena.llSlots = 4;
    arena.llLines = 16;
  }
  Job job(arena);
  job.host.seed = seed;
  job.scribble = direct;
  PeerCompileConfig cfg = compileConfig(arena, protocol, channels);
  cfg.maxPieceCount = maxPiece;
  cfg.direct = direct;
  const std::vector<std::byte> scalar = scalarOf(a.dtype);
  Outcome out;
  if (std::string err = compileAll(job, info, shape, cfg, a.preMul ? scalar.data() : nullptr);
      !err.empty()) {
    // The documented declines: a step that reads and writes partly overlapping elements.
    out.declined = err.find("partly overlap") != std::string::npos;
    out.error = out.declined ? "" : "compile: " + err;
    return out;
  }
  out.pieces = job.programs[0].header()->npieces;
  std::vector<UserRank> engine = layOut(shape, a.dtype), interp = engine;
  if (std::string err = runEnginePieces(shape, info, a, job.programs[0], engine); !err.empty()) {
    out.error = "engine: " + err;
    return out;
  }
  const std::vector<Status> st = job.run(interp);
  for (size_t r = 0; r < st.size(); ++r)
    if (!st[r].isOk()) {
      out.error = fmt::format("rank {}: {}", r, st[r].message());
      return out;
    }
  out.error = compareMemory(interp, engine, a.dtype);
  return out;
}

// TUTTI_PEER_TEST_STRIDE=k runs every k-th case of the sweeps below (the sanitizer runs take a
// sample); default 1: every case. Odd k takes both protocols (each shape runs simple, then low
// latency).
size_t stride() {
  const char* v = std::getenv("TUTTI_PEER_TEST_STRIDE");
  const long k = v != nullptr ? std::atol(v) : 1;
  return k >= 1 ? static_cast<size_t>(k) : 1;
}

std::string caseName(const AlgorithmInfo& info, const CollShape& s, const Arith& a, Protocol p,
                     int channels, bool direct = false) {
  return fmt::format("{} {}{} channels={}", label(info, s, a),
                     p == Protocol::kSimple ? "simple" : "low-latency", direct ? " direct" : "",
                     channels);
}

}  // namespace

TEST_CASE("peer programs match the host engine on every algorithm and shape", "[peer]") {
  const std::vector<Arith> ariths = mainAriths();
  size_t cases = 0, which = 0, declined = 0, multiPiece = 0;
  const size_t every = stride();
  std::set<std::string> declinedBy;
  forEachShape({1, 2, 3, 4, 5, 6, 7, 8}, true, 257,
               [&](const AlgorithmInfo& info, const CollShape& shape) {
                 for (Protocol p : {Protocol::kSimple, Protocol::kLowLatency}) {
                   const size_t n = which++;  // this case's number in the sweep
                   if ((n + 1) % every != 0) continue;
                   Arith a = reducing(info.coll) ? ariths[n % ariths.size()] : Arith{};
                   if (a.preMul && shape.inPlace) a.preMul = false;  // no in-place premulsum
                   const int channels = 1 + static_cast<int>(n % 3);
                   const bool direct = p == Protocol::kSimple && (n / 2) % 2 == 1;
                   INFO(caseName(info, shape, a, p, channels, direct));
                   const Outcome o = checkPeer(info, shape, a, p, channels, 0, n, true, direct);
                   REQUIRE(o.error == "");
                   if (o.declined) {
                     ++declined;
                     declinedBy.insert(fmt::format("{} {}", collName(info.coll), info.name));
                   }
                   if (o.pieces > 1) ++multiPiece;
                   ++cases;
                 }
               });
  WARN(fmt::format("{} cases, {} with several pieces; declined {} (partly overlapping steps): {}",
                   cases, multiPiece, declined, fmt::join(declinedBy, ", ")));
  CHECK(cases * every > 3000);
  CHECK(multiPiece > cases / 3);
  CHECK(declined < cases / 20);
}

TEST_CASE("peer programs: every dtype and op, premulsum included", "[peer]") {
  // Every (dtype, op) pair, premulsum as a 6th op, over the reducing algorithms' shapes on 2, 5
  // and 8 ranks: each shape takes the next 8 pairs, so every pair meets every collective. FIFOs
  // of a few slots per message: the arithmetic is under test here.
  std::vector<Arith> pairs;
  for (int t = 0; t < kNumDataTypes; ++t)
    for (int op = 0; op <= kNumRedOps; ++op)  // kNumRedOps: premulsum
      pairs.push_back({static_cast<DataType>(t),
                       op == kNumRedOps ? RedOp::kSum : static_cast<RedOp>(op), op == kNumRedOps});
  std::set<std::string> seen;
  size_t cases = 0, next = 0;
  const size_t every = stride();
  forEachShape({2, 5, 8}, false, 257, [&](const AlgorithmInfo& info, const CollShape& shape) {
    if (!reducing(info.coll)) return;
    for (int k = 0; k < 8; ++k) {
      const Arith a = pairs[next++ % pairs.size()];
      if (a.preMul && shape.inPlace) continue;
      if (next % every != 0) continue;
      const Protocol p = next % 2 ? Protocol::kSimple : Protocol::kLowLatency;
      const bool direct = p == Protocol::kSimple && (next / 2) % 2 == 1;
      INFO(caseName(info, shape, a, p, 2, direct));
      REQUIRE(checkPeer(info, shape, a, p, 2, 0, next, false, direct).error == "");
      seen.insert(fmt::format("{} {}", collName(info.coll), a.name()));
      ++cases;
    }
  });
  if (every == 1) {
    CHECK(seen.size() == 3 * pairs.size());  // every pair on allreduce, reduce-scatter, reduce
    CHECK(cases > 1000);
  }
}

TEST_CASE("one piece is the host engine's whole call, bit for bit", "[peer]") {
  // A single channel and no piece limit: the program runs the algorithm's schedule for the
  // whole count, so the reference (piece by piece) is the engine's call itself.
  for (const char* name : {"ring", "double_binary_tree", "rabenseifner", "one_shot"}) {
    const AlgorithmInfo* info = algo::find(Coll::kAllReduce, name);
    REQUIRE(info != nullptr);
    const CollShape shape{Coll::kAllReduce, 0, 6, 1001, DataType::kFloat32, RedOp::kSum, 0, false};
    const Arith a{DataType::kFloat32, RedOp::kSum, false};
    Job job(tinyArena(6, 1));
    REQUIRE(compileAll(job, *info, shape, compileConfig(tinyArena(6, 1), Protocol::kSimple, 1),
                       nullptr) == "");
    REQUIRE(job.programs[0].header()->npieces == 1);
    std::vector<UserRank> engine = layOut(shape, a.dtype), interp = engine;
    REQUIRE(runEngine(shape, *info, a, engine) == "");
    for (const Status& s : job.run(interp)) REQUIRE(s.isOk());
    CHECK(compareMemory(interp, engine, a.dtype) == "");
  }
}

TEST_CASE("small scratch cuts a call into many pieces", "[peer]") {
  // reduce-scatter's ring keeps a block in scratch; 256 bytes of it per channel force pieces of
  // at most 64 floats: a 1000-element call becomes 16+ pieces over 2 channels.
  for (const char* name : {"ring", "recursive_halving", "pairwise"}) {
    const AlgorithmInfo* info = algo::find(Coll::kReduceScatter, name);
    if (info == nullptr) continue;
    for (Protocol p : {Protocol::kSimple, Protocol::kLowLatency}) {
      CollShape shape{Coll::kReduceScatter, 0, 4, 1000, DataType::kFloat32, RedOp::kSum, 0, false};
      peer::ArenaConfig arena = tinyArena(4, 2);
      arena.scratchBytes = 256;
      Job job(arena);
      INFO(name);
      const std::string err = compileAll(job, *info, shape, compileConfig(arena, p, 2), nullptr);
      REQUIRE(err == "");
      const peer::ProgramHeader* h = job.programs[0].header();
      CHECK(h->scratchBytes <= 256);
      if (h->scratchBytes > 0) CHECK(h->npieces >= 16);
      const Arith a{DataType::kFloat32, RedOp::kSum, false};
      std::vector<UserRank> engine = layOut(shape, a.dtype), interp = engine;
      REQUIRE(runEnginePieces(shape, *info, a, job.programs[0], engine) == "");
      for (const Status& s : job.run(interp)) REQUIRE(s.isOk());
      CHECK(compareMemory(interp, engine, a.dtype) == "");
    }
  }
}

TEST_CASE("counters and low-latency flags cross 2^32", "[peer]") {
  // Every FIFO starts as if 2^32 - 3 slots had passed through it: the calls below take every
  // counter past 2^32 and every low-latency flag through its wrap (llFlag repeats after 2^32 - 1
  // uses and is never 0).
  const AlgorithmInfo* ring = algo::find(Coll::kAllReduce, "ring");
  REQUIRE(ring != nullptr);
  for (Protocol p : {Protocol::kSimple, Protocol::kLowLatency}) {
    const int n = 4;
    const peer::ArenaConfig arena = tinyArena(n, 2);
    Job job(arena);
    for (auto& a : job.arenas) a->startCountersAt((uint64_t{1} << 32) - 3);
    const CollShape shape{Coll::kAllReduce, 0, n, 200, DataType::kInt32, RedOp::kSum, 0, false};
    REQUIRE(compileAll(job, *ring, shape, compileConfig(arena, p, 2), nullptr) == "");
    const Arith a{DataType::kInt32, RedOp::kSum, false};
    std::vector<UserRank> engine = layOut(shape, a.dtype);
    std::vector<UserRank> start = engine;
    REQUIRE(runEnginePieces(shape, *ring, a, job.programs[0], engine) == "");
    for (int call = 0; call < 3; ++call) {
      std::vector<UserRank> interp = start;
      for (const Status& s : job.run(interp)) REQUIRE(s.isOk());
      REQUIRE(compareMemory(interp, engine, a.dtype) == "");
    }
    const auto* st =
        reinterpret_cast<const peer::FifoState*>(job.arenas[0]->data() + job.layout.statesAt);
    const uint64_t sent = p == Protocol::kSimple ? st[1 * 2].sent : st[1 * 2].llSent;
    CHECK(sent > (uint64_t{1} << 32));  // rank 0 -> rank 1, channel 0, past 2^32
  }
}

TEST_CASE("1,000 calls of alternating shapes on one set of arenas", "[peer]") {
  // The counters persist from call to call (as in device memory across launches and graph
  // replays): each call starts where the last one left every FIFO, whatever its size, protocol
  // or algorithm.
  const int n = 3;
  peer::ArenaConfig arena = tinyArena(n, 2);
  Job job(arena);
  job.host.yieldPerMille = 5;
  job.scribble = true;
  struct Variant {
    std::vector<PeerProgram> programs;
    CollShape shape;
    Arith arith;
    std::vector<UserRank> start, want;
  };
  std::vector<Variant> variants;
  const struct {
    Coll coll;
    const char* algo;
    size_t count;
    Protocol p;
    RedOp op;
    bool direct = false;
  } kinds[] = {{Coll::kAllReduce, "ring", 7, Protocol::kLowLatency, RedOp::kSum},
               {Coll::kAllReduce, "ring", 301, Protocol::kSimple, RedOp::kMax},
               {Coll::kAllReduce, "one_shot", 129, Protocol::kSimple, RedOp::kSum, true},
               {Coll::kAllGather, "ring", 33, Protocol::kSimple, RedOp::kSum},
               {Coll::kReduceScatter, "ring", 5, Protocol::kLowLatency, RedOp::kAvg},
               {Coll::kBroadcast, "binomial", 77, Protocol::kSimple, RedOp::kSum, true}};
  for (const auto& k : kinds) {
    const AlgorithmInfo* info = algo::find(k.coll, k.algo);
    REQUIRE(info != nullptr);
    Variant v;
    v.shape = CollShape{k.coll, 0, n, k.count, DataType::kFloat32, k.op, 0, false};
    v.arith = Arith{DataType::kFloat32, k.op, false};
    PeerCompileConfig cfg = compileConfig(arena, k.p, 2);
    cfg.direct = k.direct;
    REQUIRE(compileAll(job, *info, v.shape, cfg, nullptr) == "");
    v.programs = std::move(job.programs);
    v.start = layOut(v.shape, DataType::kFloat32);
    v.want = v.start;
    REQUIRE(runEnginePieces(v.shape, *info, v.arith, v.programs[0], v.want) == "");
    variants.push_back(std::move(v));
  }
  for (int call = 0; call < 1000; ++call) {
    Variant& v = variants[call % variants.size()];
    job.programs.clear();
    for (const auto& p : v.programs) job.programs.push_back(p);
    std::vector<UserRank> users = v.start;
    for (const Status& s : job.run(users)) REQUIRE(s.isOk());
    INFO("call " << call);
    REQUIRE(compareMemory(users, v.want, DataType::kFloat32) == "");
  }
}

TEST_CASE("direct messages: sends read in place only where nothing rewrites them", "[peer]") {
  // Counts rank `rank`'s sends, forwards and receives, and those marked direct, of one call.
  struct Marks {
    int sends = 0, directSends = 0, forwards = 0, directForwards = 0, recvs = 0, directRecvs = 0;
  };
  auto marks = [](const CollShape& shape, const char* name, Protocol p, int rank = 0) {
    const AlgorithmInfo* info = algo::find(shape.coll, name);
    REQUIRE(info != nullptr);
    peer::ArenaConfig arena = tinyArena(shape.nranks, 1);
    Job job(arena);
    PeerCompileConfig cfg = compileConfig(arena, p, 1);
    cfg.direct = true;
    REQUIRE(compileAll(job, *info, shape, cfg, nullptr) == "");  // pairs, direct marks included
    Marks m;
    const peer::ProgramHeader* h = job.programs[rank].header();
    for (uint32_t k = 0; k < h->nops; ++k) {
      const peer::Op& op = peer::ops(h)[k];
      if (op.kind == peer::OpKind::kSend) {
        ++m.sends;
        m.directSends += (op.flags & peer::kDirectSend) != 0;
      }
      if (op.kind == peer::OpKind::kRecvCopySend || op.kind == peer::OpKind::kRecvReduceSend) {
        ++m.forwards;
        m.directForwards += (op.flags & peer::kDirectSend) != 0;
      }
      if (op.kind != peer::OpKind::kSend && op.kind != peer::OpKind::kCopy &&
          op.kind != peer::OpKind::kReduce && op.kind != peer::OpKind::kDivide) {
        ++m.recvs;
        m.directRecvs += (op.flags & peer::kDirectRecv) != 0;
      }
    }
    CHECK((h->direct != 0) == (m.directSends + m.directRecvs > 0));
    return m;
  };
  // one_shot, out of place: every rank sends its input to every peer, which nothing rewrites.
  const CollShape oneShot{Coll::kAllReduce, 0, 4, 64, DataType::kFloat32, RedOp::kSum, 0, false};
  Marks m = marks(oneShot, "one_shot", Protocol::kSimple);
  CHECK(m.sends == 3);
  CHECK(m.directSends == 3);
  CHECK(m.directRecvs == 3);
  // The low-latency protocol has no direct form.
  m = marks(oneShot, "one_shot", Protocol::kLowLatency);
  CHECK(m.directSends + m.directRecvs == 0);
  // ring in place on 3 ranks (tutti-sched dump): rank 0 sends blocks 0 and 2 in the
  // reduce-scatter, and receives into both later in the allgather (not direct); its allgather
  // sends blocks 1 and 0, final by then (direct). Rank 2 sends to it alike.
  const CollShape ring{Coll::kAllReduce, 0, 3, 96, DataType::kFloat32, RedOp::kSum, 0, true};
  m = marks(ring, "ring", Protocol::kSimple);
  CHECK(m.sends == 4);
  CHECK(m.directSends == 2);
  CHECK(m.directRecvs == 2);
  // broadcast chain: rank 1 receives rank 0's input in place and forwards its output, final.
  const CollShape chain{Coll::kBroadcast, 0, 4, 64, DataType::kFloat32, RedOp::kSum, 0, false};
  m = marks(chain, "chain", Protocol::kSimple, 1);
  CHECK(m.forwards == 1);
  CHECK(m.directForwards == 1);
  CHECK(m.directRecvs == 1);
  // reduce chain into scratch (not a user buffer): its forwards go through the slots.
  const CollShape rchain{Coll::kReduce, 0, 4, 64, DataType::kFloat32, RedOp::kSum, 3, false};
  m = marks(rchain, "chain", Protocol::kSimple, 1);
  CHECK(m.forwards == 1);
  CHECK(m.directForwards == 0);
  // avg in place: the final divide rewrites the whole output, so no send of it is direct.
  CollShape avg = ring;
  avg.op = RedOp::kAvg;
  m = marks(avg, "ring", Protocol::kSimple);
  CHECK(m.directSends == 0);
}

TEST_CASE("a rank that never calls: abort releases the waiting ranks and names the peer",
          "[peer]") {
  const AlgorithmInfo* ring = algo::find(Coll::kAllReduce, "ring");
  for (Protocol p : {Protocol::kSimple, Protocol::kLowLatency}) {
    const peer::ArenaConfig arena = tinyArena(3, 2);
    Job job(arena);
    const CollShape shape{Coll::kAllReduce, 0, 3, 100, DataType::kFloat32, RedOp::kSum, 0, false};
    REQUIRE(compileAll(job, *ring, shape, compileConfig(arena, p, 2), nullptr) == "");
    std::vector<UserRank> users = layOut(shape, DataType::kFloat32);
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      job.abort.store(1);
    });
    const auto t0 = Clock::now();
    const std::vector<Status> st = job.run(users, {0, 1});  // rank 2 never runs
    const auto took = Clock::now() - t0;
    aborter.join();
    CHECK(took < std::chrono::seconds(1) + std::chrono::milliseconds(100));
    for (int r : {0, 1}) {
      INFO(st[r].message());
      CHECK(st[r].code() == Code::kInvalidUsage);
      CHECK_THAT(st[r].message(), Catch::Contains("aborted while waiting for"));
    }
    // Rank 0 receives from rank 2 in the ring's first step: its record names rank 2.
    CHECK_THAT(st[0].message(), Catch::Contains("data from peer 2"));
  }
}

TEST_CASE("a rank that never calls: the others time out naming it", "[peer]") {
  const AlgorithmInfo* ring = algo::find(Coll::kAllGather, "ring");
  for (Protocol p : {Protocol::kSimple, Protocol::kLowLatency}) {
    const peer::ArenaConfig arena = tinyArena(4, 1);
    Job job(arena);
    job.timeoutNs = 200'000'000;
    const CollShape shape{Coll::kAllGather, 0, 4, 50, DataType::kFloat32, RedOp::kSum, 0, false};
    REQUIRE(compileAll(job, *ring, shape, compileConfig(arena, p, 1), nullptr) == "");
    std::vector<UserRank> users = layOut(shape, DataType::kFloat32);
    const auto t0 = Clock::now();
    const std::vector<Status> st = job.run(users, {0, 1, 2});  // rank 3 never runs
    CHECK(Clock::now() - t0 < std::chrono::seconds(3));
    // Rank 0 waits for data from rank 3 (its ring predecessor); rank 2 for room at rank 3 or
    // for rank 1's data, which waits behind rank 0.
    INFO(st[0].message());
    CHECK(st[0].code() == Code::kTimeout);
    CHECK_THAT(st[0].message(), Catch::Contains("data from peer 3") && Catch::Contains("rank 0"));
    for (int r : {1, 2}) CHECK(st[r].code() == Code::kTimeout);
  }
}

TEST_CASE("a program that does not fit its arena is refused before it moves data", "[peer]") {
  const AlgorithmInfo* ring = algo::find(Coll::kAllReduce, "ring");
  const peer::ArenaConfig arena = tinyArena(2, 1);
  Job job(arena);
  const CollShape shape{Coll::kAllReduce, 0, 2, 64, DataType::kFloat32, RedOp::kSum, 0, false};
  PeerCompileConfig cfg = compileConfig(arena, Protocol::kSimple, 1);
  cfg.payloadBytes = 64;  // the arena's slots carry 32
  REQUIRE(compileAll(job, *ring, shape, cfg, nullptr) == "");
  std::vector<UserRank> users = layOut(shape, DataType::kFloat32), before = users;
  const std::vector<Status> st = job.run(users);
  for (const Status& s : st) {
    CHECK(s.code() == Code::kInternalError);
    CHECK_THAT(s.message(), Catch::Contains("does not fit"));
  }
  CHECK(compareMemory(users, before, DataType::kFloat32) == "");
}

TEST_CASE("grouped sends and receives: random patterns, self included", "[peer]") {
  // Every ordered pair of ranks (a rank and itself included) exchanges 0-3 messages of 0-3000
  // bytes; each rank lists its sends and receives in a random interleaving that keeps each
  // pair's order (NCCL's pairing rule). 100-byte channels: large messages span all of them.
  std::mt19937 rng(5);
  size_t cases = 0;
  for (int n = 1; n <= 6; ++n)
    for (int trial = 0; trial < 6; ++trial)
      for (Protocol p : {Protocol::kSimple, Protocol::kLowLatency}) {
        struct Msg {
          int from, to;
          uint64_t bytes;
        };
        std::vector<Msg> msgs;
        for (int a = 0; a < n; ++a)
          for (int b = 0; b < n; ++b)
            for (int k = static_cast<int>(rng() % 4); k > 0; --k)
              msgs.push_back({a, b, rng() % 5 == 0 ? 0 : 1 + rng() % 3000});
        // Each rank's list: its sends and receives, shuffled, then each pair's order restored.
        std::vector<std::vector<PeerMessage>> lists(n);
        std::vector<std::vector<std::vector<std::byte>>> buffers(n);
        std::vector<std::vector<int>> sendBuf(msgs.size(), std::vector<int>(1, -1)),
            recvBuf(msgs.size(), std::vector<int>(1, -1));
        for (int r = 0; r < n; ++r) {
          std::vector<std::pair<size_t, bool>> mine;  // (message, send?)
          for (size_t i = 0; i < msgs.size(); ++i) {
            if (msgs[i].from == r) mine.push_back({i, true});
            if (msgs[i].to == r) mine.push_back({i, false});
          }
          std::shuffle(mine.begin(), mine.end(), rng);
          // Per (kind, peer), the messages in their original order, into the shuffled slots.
          std::map<std::pair<bool, int>, std::vector<size_t>> byKey;
          for (auto [i, send] : mine) byKey[{send, send ? msgs[i].to : msgs[i].from}].push_back(i);
          for (auto& [key, v] : byKey) std::sort(v.begin(), v.end());
          std::map<std::pair<bool, int>, size_t> next;
          for (auto& [i, send] : mine) {
            const std::pair<bool, int> key{send, send ? msgs[i].to : msgs[i].from};
            i = byKey[key][next[key]++];
            const int buffer = static_cast<int>(buffers[r].size());
            std::vector<std::byte> data(msgs[i].bytes);
            if (send)
              for (size_t b = 0; b < data.size(); ++b)
                data[b] = static_cast<std::byte>((i * 131 + b * 7 + 3) & 0xFF);
            buffers[r].push_back(std::move(data));
            (send ? sendBuf : recvBuf)[i][0] = buffer;
            lists[r].push_back({send, key.second, msgs[i].bytes, buffer});
          }
        }
        const peer::ArenaConfig arena = tinyArena(n, 3);
        Job job(arena);
        PeerCompileConfig cfg = compileConfig(arena, p, 3);
        cfg.messageBytesPerChannel = 100;
        for (int r = 0; r < n; ++r) {
          auto prog = compilePeerMessages(r, n, lists[r], cfg);
          REQUIRE(prog.isOk());
          job.programs.push_back(std::move(prog).value());
        }
        std::vector<const PeerProgram*> ptrs;
        for (const auto& pr : job.programs) ptrs.push_back(&pr);
        REQUIRE(checkPairing(ptrs).isOk());
        for (const Status& st : job.runWithBuffers(buffers)) REQUIRE(st.isOk());
        for (size_t i = 0; i < msgs.size(); ++i) {
          INFO(fmt::format("n={} trial={} message {}: {} -> {}, {} bytes", n, trial, i,
                           msgs[i].from, msgs[i].to, msgs[i].bytes));
          REQUIRE(buffers[msgs[i].to][recvBuf[i][0]] == buffers[msgs[i].from][sendBuf[i][0]]);
        }
        ++cases;
      }
  CHECK(cases == 6 * 6 * 2);
}

TEST_CASE("grouped sends and receives: errors", "[peer]") {
  const PeerCompileConfig cfg = compileConfig(tinyArena(3, 1), Protocol::kSimple, 1);
  auto fails = [&](std::vector<PeerMessage> m, const char* text) {
    auto r = compilePeerMessages(0, 3, m, cfg);
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.status().message(), Catch::Contains(text));
  };
  fails({{true, 3, 8, 0}}, "peer 3");
  fails({{true, 1, 8, peer::kMaxBuffers}}, "buffer 64");
  fails({{true, 0, 8, 0}}, "sends 1 messages to itself and receives 0");
  fails({{true, 0, 8, 0}, {false, 0, 16, 1}}, "has 8 bytes");
}

TEST_CASE("checkPairing finds a send without its receive", "[peer]") {
  const AlgorithmInfo* ring = algo::find(Coll::kAllReduce, "ring");
  const peer::ArenaConfig arena = tinyArena(3, 1);
  Job job(arena);
  const CollShape shape{Coll::kAllReduce, 0, 3, 30, DataType::kFloat32, RedOp::kSum, 0, false};
  REQUIRE(compileAll(job, *ring, shape, compileConfig(arena, Protocol::kSimple, 1), nullptr) == "");
  // Rank 1's programs for a call of another count: sizes differ on every FIFO it shares.
  CollShape other = shape;
  other.rank = 1;
  other.count = 33;
  auto wrong = compilePeer(other, *ring, compileConfig(arena, Protocol::kSimple, 1), nullptr);
  REQUIRE(wrong.isOk());
  std::vector<const PeerProgram*> ptrs{&job.programs[0], &wrong.value(), &job.programs[2]};
  const Status s = checkPairing(ptrs);
  CHECK(s.code() == Code::kInternalError);
  CHECK_THAT(s.message(), Catch::Contains("FIFO"));
}

TEST_CASE("compilePeer's errors name the argument", "[peer]") {
  const AlgorithmInfo* ring = algo::find(Coll::kAllReduce, "ring");
  const PeerCompileConfig cfg = compileConfig(tinyArena(4, 1), Protocol::kSimple, 1);
  CollShape s{Coll::kAllReduce, 0, 4, 10, DataType::kFloat32, RedOp::kSum, 0, false};
  auto check = [](const Result<PeerProgram>& r, const char* text) {
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.status().message(), Catch::Contains(text));
  };
  CollShape big = s;
  big.nranks = 17;
  check(compilePeer(big, *ring, cfg, nullptr), "nranks=17");
  PeerCompileConfig badCh = cfg;
  badCh.channels = 0;
  check(compilePeer(s, *ring, badCh, nullptr), "channels=0");
  PeerCompileConfig badPayload = cfg;
  badPayload.payloadBytes = 24;
  check(compilePeer(s, *ring, badPayload, nullptr), "payloadBytes=24");
  CollShape inPlace = s;
  inPlace.inPlace = true;
  const std::vector<std::byte> scalar = scalarOf(DataType::kFloat32);
  check(compilePeer(inPlace, *ring, cfg, scalar.data()), "premulsum");
  CollShape ag = s;
  ag.coll = Coll::kAllGather;
  check(compilePeer(ag, *ring, cfg, nullptr), "is for allreduce");
  CollShape sr = s;
  sr.coll = Coll::kSendRecv;
  check(compilePeer(sr, *ring, cfg, nullptr), "coll=sendrecv");
}

}  // namespace tutti::device
