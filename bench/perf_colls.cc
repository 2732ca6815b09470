// File: bench/perf_colls.cc
// Table of collectives for tutti-perf, their buffer layouts, input patterns and checks.
//
// Reduction inputs are small integers chosen per (dtype, op, nranks) so that every partial result,
// in any reduction order, is exactly representable: sums stay <= the dtype's exact-integer limit
// (8 for fp8 e5m2, 16 for e4m3, 256 for bfloat16, 127 for int8 ...), products are +-2^k with
// k <= the dtype's limit, max/min inputs lie in the exact range. sum/prod/max/min are therefore
// compared exactly in every dtype; avg (one rounding of sum/n) within relativeTolerance(dtype).
// Data-movement collectives (allgather, broadcast, alltoall, gather, scatter, sendrecv) carry
// hashed bytes that identify (source rank, element index) and are compared bytewise. No pattern
// byte equals the 0xA5 sentinel written into outputs, so an element never written is caught.
#include "bench/perf_colls.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "bench/bench_types.h"

namespace tutti::bench {
namespace {

constexpr unsigned char kSentinelByte = 0xA5;

std::byte* at(void* base, size_t elements, DataType t) {
  return static_cast<std::byte*>(base) + elements * dataTypeBytes(t);
}
void fillSentinel(void* p, size_t count, DataType t) {
  if (count > 0) std::memset(p, kSentinelByte, count * dataTypeBytes(t));
}

// ---- reduction patterns --------------------------------------------------------------------

size_t patternIndex(const CaseShape& s, size_t i) { return i + size_t(s.seed) * 977; }

// Input of rank r at element i.
double reductionInput(const CaseShape& s, int r, size_t i) {
  const size_t x = patternIndex(s, i);
  const int64_t n = s.nranks;
  const int64_t limit = exactIntegerLimit(s.dtype);
  switch (s.op) {
    case RedOp::kSum:
    case RedOp::kAvg: {
      const int64_t perRank = limit / n;
      if (perRank >= 1) {  // every rank contributes 0..perRank: the total stays <= limit
        const size_t mod = size_t(std::min<int64_t>(perRank, 255)) + 1;
        return double((x * 7 + size_t(r) * 13) % mod);
      }
      // More ranks than exact integers (fp8 beyond 8/16 ranks): at most `limit` ones per element.
      const size_t m = size_t((n + limit - 1) / limit);
      return (x + size_t(r)) % m == 0 ? 1.0 : 0.0;
    }
    case RedOp::kProd: {
      // At most k twos per element (k = exact power-of-two limit); negative signs for signed
      // types so the sign of the product is checked too.
      const int64_t k = exactPowerOfTwoLimit(s.dtype);
      const size_t m = size_t(std::max<int64_t>(2, (n + k - 1) / k));
      const double mag = (x + size_t(r)) % m == 0 ? 2.0 : 1.0;
      return isSigned(s.dtype) && (x + 2 * size_t(r)) % 3 == 0 ? -mag : mag;
    }
    case RedOp::kMax:
    case RedOp::kMin: {
      const int64_t p = std::min<int64_t>(100, limit + 1);
      const int64_t v = int64_t((x * 7 + size_t(r) * 13) % size_t(p));
      return double(isSigned(s.dtype) ? v - p / 2 : v);
    }
  }
  return 0;
}

// Result at element i: the reduction over all ranks, computed in double (exact by construction).
double reductionExpected(const CaseShape& s, size_t i) {
  double acc = reductionInput(s, 0, i);
  for (int r = 1; r < s.nranks; ++r) {
    const double v = reductionInput(s, r, i);
    switch (s.op) {
      case RedOp::kSum:
      case RedOp::kAvg:
        acc += v;
        break;
      case RedOp::kProd:
        acc *= v;
        break;
      case RedOp::kMax:
        acc = std::max(acc, v);
        break;
      case RedOp::kMin:
        acc = std::min(acc, v);
        break;
    }
  }
  if (s.op == RedOp::kAvg) {
    acc /= s.nranks;
    if (!isFloating(s.dtype)) acc = std::trunc(acc);  // integer avg truncates toward zero
  }
  return acc;
}

// Writes rank r's inputs for global elements [first, first + count) into dst.
void fillReduction(const CaseShape& s, void* dst, int r, size_t first, size_t count) {
  visitDataType(s.dtype, [&](auto codec) {
    using C = decltype(codec);
    auto* out = static_cast<typename C::Storage*>(dst);
    for (size_t k = 0; k < count; ++k) out[k] = C::store(reductionInput(s, r, first + k));
  });
}

// Wrong elements among got[0, count), which should hold the results for [first, first + count).
size_t checkReduction(const CaseShape& s, const void* got, size_t first, size_t count) {
  const bool approx = s.op == RedOp::kAvg && isFloating(s.dtype);
  const double tol = relativeTolerance(s.dtype);
  size_t wrong = 0;
  visitDataType(s.dtype, [&](auto codec) {
    using C = decltype(codec);
    const auto* in = static_cast<const typename C::Storage*>(got);
    for (size_t k = 0; k < count; ++k) {
      const double v = C::load(in[k]), e = reductionExpected(s, first + k);
      const bool ok = approx ? std::fabs(v - e) <= tol * std::max(1.0, std::fabs(e)) : v == e;
      wrong += ok ? 0 : 1;  // NaN compares unequal: counted
    }
  });
  return wrong;
}

// ---- data-movement patterns ----------------------------------------------------------------

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Bytes of source rank `src`'s element `index`: a hash with no byte equal to the sentinel.
uint64_t movementElement(int src, size_t index, uint32_t seed) {
  uint64_t h = mix64((uint64_t(src) << 48) ^ (uint64_t(seed) << 40) ^ uint64_t(index));
  for (int j = 0; j < 8; ++j) {
    if (((h >> (8 * j)) & 0xFF) == kSentinelByte) h ^= uint64_t(0xFF) << (8 * j);  // A5 -> 5A
  }
  return h;
}

void fillMovement(const CaseShape& s, void* dst, int src, size_t first, size_t count) {
  const size_t elt = dataTypeBytes(s.dtype);
  auto* out = static_cast<unsigned char*>(dst);
  for (size_t k = 0; k < count; ++k) {
    const uint64_t h = movementElement(src, first + k, s.seed);
    std::memcpy(out + k * elt, &h, elt);  // low bytes (little-endian hosts)
  }
}

size_t checkMovement(const CaseShape& s, const void* got, int src, size_t first, size_t count) {
  const size_t elt = dataTypeBytes(s.dtype);
  const auto* in = static_cast<const unsigned char*>(got);
  size_t wrong = 0;
  for (size_t k = 0; k < count; ++k) {
    const uint64_t h = movementElement(src, first + k, s.seed);
    wrong += std::memcmp(in + k * elt, &h, elt) != 0 ? 1 : 0;
  }
  return wrong;
}

// ---- byte counts (nccl-tests getCollByteCount) ---------------------------------------------

ByteCounts sameCounts(size_t bytes, size_t elt, int) {
  const size_t c = bytes / elt;
  return {c, c, c};
}
ByteCounts gatherCounts(size_t bytes, size_t elt, int n) {  // send per rank, recv n blocks
  const size_t c = bytes / elt / size_t(n);
  return {c, c, c * size_t(n)};
}
ByteCounts scatterCounts(size_t bytes, size_t elt, int n) {  // send n blocks, recv per rank
  const size_t c = bytes / elt / size_t(n);
  return {c, c * size_t(n), c};
}
ByteCounts allToAllCounts(size_t bytes, size_t elt, int n) {
  const size_t c = bytes / elt / size_t(n);
  return {c, c * size_t(n), c * size_t(n)};
}

// recv == send in place (allreduce, broadcast, reduce).
CallBuffers sameBuffers(const CaseShape& s, void* sendBase, void* recvBase) {
  return {sendBase, s.inPlace ? sendBase : recvBase};
}
CallBuffers separateBuffers(const CaseShape&, void* sendBase, void* recvBase) {
  return {sendBase, recvBase};
}

// ---- allreduce ----
void allReduceInit(const CaseShape& s, const CallBuffers& b) {
  if (!s.inPlace) fillSentinel(b.recv, s.count, s.dtype);
  fillReduction(s, b.send, s.rank, 0, s.count);
}
size_t allReduceCheck(const CaseShape& s, const CallBuffers& b) {
  return checkReduction(s, b.recv, 0, s.count);
}
Status allReduceRun(Communicator& c, const CaseShape& s, const CallBuffers& b) {
  return c.allReduce(b.send, b.recv, s.count, s.dtype, s.op);
}

// ---- allgather: in place, rank r's input is block r of recv ----
CallBuffers allGatherBuffers(const CaseShape& s, void* sendBase, void* recvBase) {
  return {s.inPlace ? at(recvBase, s.count * size_t(s.rank), s.dtype) : sendBase, recvBase};
}
void allGatherInit(const CaseShape& s, const CallBuffers& b) {
  fillSentinel(b.recv, s.count * size_t(s.nranks), s.dtype);
  fillMovement(s, b.send, s.rank, 0, s.count);
}
size_t allGatherCheck(const CaseShape& s, const CallBuffers& b) {
  size_t wrong = 0;
  for (int src = 0; src < s.nranks; ++src) {
    wrong += checkMovement(s, at(b.recv, s.count * size_t(src), s.dtype), src, 0, s.count);
  }
  return wrong;
}
Status allGatherRun(Communicator& c, const CaseShape& s, const CallBuffers& b) {
  return c.allGather(b.send, b.recv, s.count, s.dtype);
}

// ---- reducescatter: in place, rank r's output is block r of send ----
CallBuffers reduceScatterBuffers(const CaseShape& s, void* sendBase, void* recvBase) {
  return {sendBase, s.inPlace ? at(sendBase, s.count * size_t(s.rank), s.dtype) : recvBase};
}
void reduceScatterInit(const CaseShape& s, const CallBuffers& b) {
  if (!s.inPlace) fillSentinel(b.recv, s.count, s.dtype);
  fillReduction(s, b.send, s.rank, 0, s.count * size_t(s.nranks));
}
size_t reduceScatterCheck(const CaseShape& s, const CallBuffers& b) {
  return checkReduction(s, b.recv, s.count * size_t(s.rank), s.count);
}
Status reduceScatterRun(Communicator& c, const CaseShape& s, const CallBuffers& b) {
  return c.reduceScatter(b.send, b.recv, s.count, s.dtype, s.op);
}

// ---- broadcast ----
void broadcastInit(const CaseShape& s, const CallBuffers& b) {
  fillSentinel(b.recv, s.count, s.dtype);  // in place on the root: overwritten just below
  if (s.rank == s.root) fillMovement(s, b.send, s.root, 0, s.count);
}
size_t broadcastCheck(const CaseShape& s, const CallBuffers& b) {
  return checkMovement(s, b.recv, s.root, 0, s.count);
}
Status broadcastRun(Communicator& c, const CaseShape& s, const CallBuffers& b) {
  return c.broadcast(b.send, b.recv, s.count, s.dtype, s.root);
}

// ---- reduce: only the root's output is defined ----
size_t reduceCheck(const CaseShape& s, const CallBuffers& b) {
  return s.rank == s.root ? checkReduction(s, b.recv, 0, s.count) : 0;
}
Status reduceRun(Communicator& c, const CaseShape& s, const CallBuffers& b) {
  return c.reduce(b.send, b.recv, s.count, s.dtype, s.op, s.root);
}

// ---- alltoall: block j of rank r's send goes to rank j ----
void allToAllInit(const CaseShape& s, const CallBuffers& b) {
  fillSentinel(b.recv, s.count * size_t(s.nranks), s.dtype);
  fillMovement(s, b.send, s.rank, 0, s.count * size_t(s.nranks));
}
size_t allToAllCheck(const CaseShape& s, const CallBuffers& b) {
  size_t wrong = 0;
  for (int src = 0; src < s.nranks; ++src) {
    wrong += checkMovement(s, at(b.recv, s.count * size_t(src), s.dtype), src,
                           s.count * size_t(s.rank), s.count);
  }
  return wrong;
}
Status allToAllRun(Communicator& c, const CaseShape& s, const CallBuffers& b) {
  return c.allToAll(b.send, b.recv, s.count, s.dtype);
}

// ---- gather ----
size_t gatherCheck(const CaseShape& s, const CallBuffers& b) {
  return s.rank == s.root ? allGatherCheck(s, b) : 0;
}
Status gatherRun(Communicator& c, const CaseShape& s, const CallBuffers& b) {
  return c.gather(b.send, b.recv, s.count, s.dtype, s.root);
}

// ---- scatter: block r of the root's send goes to rank r ----
void scatterInit(const CaseShape& s, const CallBuffers& b) {
  fillSentinel(b.recv, s.count, s.dtype);
  if (s.rank == s.root) fillMovement(s, b.send, s.root, 0, s.count * size_t(s.nranks));
}
size_t scatterCheck(const CaseShape& s, const CallBuffers& b) {
  return checkMovement(s, b.recv, s.root, s.count * size_t(s.rank), s.count);
}
Status scatterRun(Communicator& c, const CaseShape& s, const CallBuffers& b) {
  return c.scatter(b.send, b.recv, s.count, s.dtype, s.root);
}

// ---- sendrecv: a ring shift, rank r sends to r+1 and receives from r-1 ----
int ringNext(const CaseShape& s) { return (s.rank + 1) % s.nranks; }
int ringPrev(const CaseShape& s) { return (s.rank - 1 + s.nranks) % s.nranks; }
void sendRecvInit(const CaseShape& s, const CallBuffers& b) {
  fillSentinel(b.recv, s.count, s.dtype);
  fillMovement(s, b.send, s.rank, 0, s.count);
}
size_t sendRecvCheck(const CaseShape& s, const CallBuffers& b) {
  return checkMovement(s, b.recv, ringPrev(s), 0, s.count);
}
Status sendRecvRun(Communicator& c, const CaseShape& s, const CallBuffers& b) {
  return c.sendRecv(b.send, ringNext(s), b.recv, ringPrev(s), s.count, s.dtype);
}

// Collectives without a separate init pattern reuse the closest one: reduce fills like
// allreduce, gather like allgather (out of place).
constexpr PerfColl kColls[] = {
    {.name = "allreduce",
     .ncclName = "all_reduce",
     .coll = Coll::kAllReduce,
     .inPlace = true,
     .byteCounts = sameCounts,
     .buffers = sameBuffers,
     .initData = allReduceInit,
     .check = allReduceCheck,
     .run = allReduceRun},
    {.name = "allgather",
     .ncclName = "all_gather",
     .coll = Coll::kAllGather,
     .inPlace = true,
     .byteCounts = gatherCounts,
     .buffers = allGatherBuffers,
     .initData = allGatherInit,
     .check = allGatherCheck,
     .run = allGatherRun},
    {.name = "reducescatter",
     .ncclName = "reduce_scatter",
     .coll = Coll::kReduceScatter,
     .inPlace = true,
     .byteCounts = scatterCounts,
     .buffers = reduceScatterBuffers,
     .initData = reduceScatterInit,
     .check = reduceScatterCheck,
     .run = reduceScatterRun},
    {.name = "broadcast",
     .ncclName = "broadcast",
     .coll = Coll::kBroadcast,
     .inPlace = true,
     .byteCounts = sameCounts,
     .buffers = sameBuffers,
     .initData = broadcastInit,
     .check = broadcastCheck,
     .run = broadcastRun},
    {.name = "reduce",
     .ncclName = "reduce",
     .coll = Coll::kReduce,
     .inPlace = true,
     .byteCounts = sameCounts,
     .buffers = sameBuffers,
     .initData = allReduceInit,
     .check = reduceCheck,
     .run = reduceRun},
    {.name = "alltoall",
     .ncclName = "alltoall",
     .coll = Coll::kAllToAll,
     .inPlace = false,
     .byteCounts = allToAllCounts,
     .buffers = separateBuffers,
     .initData = allToAllInit,
     .check = allToAllCheck,
     .run = allToAllRun},
    {.name = "gather",
     .ncclName = "gather",
     .coll = Coll::kGather,
     .inPlace = false,
     .byteCounts = gatherCounts,
     .buffers = separateBuffers,
     .initData = allGatherInit,
     .check = gatherCheck,
     .run = gatherRun},
    {.name = "scatter",
     .ncclName = "scatter",
     .coll = Coll::kScatter,
     .inPlace = false,
     .byteCounts = scatterCounts,
     .buffers = separateBuffers,
     .initData = scatterInit,
     .check = scatterCheck,
     .run = scatterRun},
    {.name = "sendrecv",
     .ncclName = "sendrecv",
     .coll = Coll::kSendRecv,
     .inPlace = false,
     .byteCounts = sameCounts,
     .buffers = separateBuffers,
     .initData = sendRecvInit,
     .check = sendRecvCheck,
     .run = sendRecvRun},
};

}  // namespace

std::span<const PerfColl> perfColls() { return kColls; }

const PerfColl* findPerfColl(std::string_view name) {
  std::string_view base = name;
  if (base.ends_with("_perf")) base.remove_suffix(5);
  for (const PerfColl& c : kColls) {
    if (base == c.name || base == c.ncclName) return &c;
  }
  return nullptr;
}

}  // namespace tutti::bench
