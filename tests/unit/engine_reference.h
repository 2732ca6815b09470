// File: tests/unit/engine_reference.h
// The host engine's results as the device tests' reference: NCCL's buffer layouts for a call
// (in place: one buffer inside the other), deterministic inputs, every rank's schedule run on an
// in-memory mailbox with the engine's kernels (reduce2Fn for the reducing receives and reduce,
// scaleFn on the inputs for premulsum, divideFn on the result holders for avg), byte-for-byte
// comparison (NaN equals NaN), and the shapes every algorithm is tested over. Used by the clique
// compiler's test (device_compile_test.cc) and the peer interpreter's (peer_test.cc).
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "kernels/convert.h"
#include "kernels/reduce.h"
#include "tests/unit/host_layouts.h"

namespace tutti::test {

using algo::AlgorithmInfo;
using algo::Buf;
using algo::CollShape;
using algo::Op;
using algo::Schedule;
using algo::Step;

constexpr Coll kColls[] = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter,
                           Coll::kBroadcast, Coll::kReduce,    Coll::kAllToAll,
                           Coll::kGather,    Coll::kScatter};

inline bool reducing(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce;
}
inline bool inPlaceDefined(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kAllGather || c == Coll::kReduceScatter ||
         c == Coll::kBroadcast || c == Coll::kReduce;
}
inline bool rooted(Coll c) {
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
inline void fillInput(DataType dtype, std::byte* p, size_t count, int rank) {
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

inline std::vector<UserRank> layOut(const CollShape& shape, DataType dtype) {
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
inline std::string runMailbox(std::vector<RefRank>& ranks, size_t elem, kernels::Reduce2Fn reduce) {
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

inline std::vector<std::byte> scalarOf(DataType dtype) {
  std::vector<std::byte> s(8);
  kernels::storeFromDouble(dtype, s.data(), 0, isFloating(dtype) ? 0.75 : 3.0);
  return s;
}

// What the engine leaves in the users' buffers: premulsum scales into staging and runs the
// out-of-place schedule from there (nccl/group.cc runColl); avg divides the result at the end.
inline std::string runEngine(const CollShape& shape, const AlgorithmInfo& info, const Arith& a,
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
inline std::string compareMemory(const std::vector<UserRank>& got,
                                 const std::vector<UserRank>& want, DataType dtype) {
  const size_t elem = dataTypeBytes(dtype);
  for (size_t r = 0; r < got.size(); ++r) {
    const auto &g = got[r].mem, &w = want[r].mem;
    for (size_t i = 0; i < g.size(); i += elem) {
      if (std::memcmp(g.data() + i, w.data() + i, elem) == 0) continue;
      const double x = kernels::loadAsDouble(dtype, g.data(), i / elem);
      const double y = kernels::loadAsDouble(dtype, w.data(), i / elem);
      if (isFloating(dtype) && x != x && y != y) continue;
      return fmt::format("rank {} element {} of its memory: got {} engine {}", r, i / elem, x, y);
    }
  }
  return "";
}

// Calls fn(info, shape) for every algorithm of the eight collectives and every shape of the
// given nranks and counts (n + 1 and `large`; with allCounts also 0, 1 and n - 1), both
// placements where defined, roots 0 and n-1 for rooted ones, host layouts for algorithms that
// need one.
template <typename Fn>
inline void forEachShape(std::initializer_list<int> nranks, bool allCounts, size_t large, Fn&& fn) {
  for (const AlgorithmInfo& info : algo::registry()) {
    if (info.loaded ||
        std::find(std::begin(kColls), std::end(kColls), info.coll) == std::end(kColls))
      continue;
    for (int n : nranks) {
      std::vector<size_t> counts{static_cast<size_t>(n + 1), large};
      if (allCounts) counts = {0, 1, static_cast<size_t>(n - 1), static_cast<size_t>(n + 1), large};
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

inline std::string label(const AlgorithmInfo& info, const CollShape& s, const Arith& a) {
  return fmt::format("{} {} nranks={} count={} root={} {} {} hostOf=[{}]", collName(info.coll),
                     info.name, s.nranks, s.count, s.root, s.inPlace ? "in place" : "out of place",
                     a.name(), fmt::join(s.hostOf, ","));
}

inline std::vector<Arith> mainAriths() {
  std::vector<Arith> out;
  for (DataType t : {DataType::kFloat32, DataType::kBfloat16, DataType::kFloat16, DataType::kInt32})
    for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg})
      out.push_back({t, op, false});
  for (DataType t : {DataType::kFloat32, DataType::kBfloat16, DataType::kFloat16})
    out.push_back({t, RedOp::kSum, true});
  return out;
}

}  // namespace tutti::test
