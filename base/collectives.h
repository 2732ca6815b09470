// File: base/collectives.h
// The table of collectives: what each collective's call means, in one place. Per collective: its
// name, whether it has a root and whether it reduces, how many elements its input and output
// hold on a rank (in units of the call's count), its in-place form, the size nccl-tests reports
// for a call, and the bus-bandwidth factor. The argument checks, the schedules' buffer sizes, the
// verifier, the device compiler, the statistics, the staged device path and the benchmarks read
// it. Header only (constexpr), so that the tools and benchmarks can use it without linking.
//
// Buffer conventions follow NCCL (include/tutti/tutti.hpp). Bus bandwidth follows nccl-tests'
// doc/PERFORMANCE.md: busbw = algbw * factor, with factor 2(n-1)/n for allreduce, (n-1)/n for
// allgather, reduce-scatter, all-to-all, gather and scatter, and 1 for broadcast, reduce and
// send/recv.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tutti/types.hpp>

namespace tutti {

/// How many elements one buffer of a collective holds on a rank, in units of the call's count.
enum class Extent : uint8_t {
  kNone,           ///< no buffer
  kCount,          ///< count, on every rank
  kRanksCount,     ///< nranks * count, on every rank
  kRootCount,      ///< count on the root, nothing elsewhere
  kRootRanksCount, ///< nranks * count on the root, nothing elsewhere
};

/// Where the send buffer sits in the receive buffer (or the other way round) when a call is in
/// place; any other overlap of the two is an error.
enum class InPlaceForm : uint8_t {
  kNone,        ///< no in-place form
  kSame,        ///< send == recv
  kSendInRecv,  ///< send == recv + rank*count: this rank's block of the output (allgather)
  kRecvInSend,  ///< recv == send + rank*count: this rank's block of the input (reduce-scatter)
};

/// nccl-tests' bus-bandwidth factor: busbw = algbw * factor(nranks).
enum class BusFactor : uint8_t { kZero, kOne, kNMinus1OverN, kTwoNMinus1OverN };

struct CollInfo {
  Coll coll;
  const char* name;  ///< "allreduce", as in messages
  bool rooted;       ///< takes a root rank
  bool reduces;      ///< takes a reduction op
  Extent input, output;
  InPlaceForm inPlace;
  /// The size nccl-tests reports for a call (and the statistics' bytes): count * element size,
  /// times nranks when true (the count is per rank).
  bool sizeTimesRanks;
  BusFactor busFactor;
};

inline constexpr CollInfo kCollTable[kNumColls] = {
    {Coll::kAllReduce, "allreduce", false, true, Extent::kCount, Extent::kCount,
     InPlaceForm::kSame, false, BusFactor::kTwoNMinus1OverN},
    {Coll::kAllGather, "allgather", false, false, Extent::kCount, Extent::kRanksCount,
     InPlaceForm::kSendInRecv, true, BusFactor::kNMinus1OverN},
    {Coll::kReduceScatter, "reducescatter", false, true, Extent::kRanksCount, Extent::kCount,
     InPlaceForm::kRecvInSend, true, BusFactor::kNMinus1OverN},
    {Coll::kBroadcast, "broadcast", true, false, Extent::kRootCount, Extent::kCount,
     InPlaceForm::kSame, false, BusFactor::kOne},
    {Coll::kReduce, "reduce", true, true, Extent::kCount, Extent::kRootCount, InPlaceForm::kSame,
     false, BusFactor::kOne},
    {Coll::kAllToAll, "alltoall", false, false, Extent::kRanksCount, Extent::kRanksCount,
     InPlaceForm::kNone, true, BusFactor::kNMinus1OverN},
    {Coll::kGather, "gather", true, false, Extent::kCount, Extent::kRootRanksCount,
     InPlaceForm::kNone, true, BusFactor::kNMinus1OverN},
    {Coll::kScatter, "scatter", true, false, Extent::kRootRanksCount, Extent::kCount,
     InPlaceForm::kNone, true, BusFactor::kNMinus1OverN},
    {Coll::kSendRecv, "sendrecv", false, false, Extent::kCount, Extent::kCount,
     InPlaceForm::kNone, false, BusFactor::kOne},
    {Coll::kBarrier, "barrier", false, false, Extent::kNone, Extent::kNone, InPlaceForm::kNone,
     false, BusFactor::kZero},
};

/// The table's row of `c`; `c` must be a valid Coll.
constexpr const CollInfo& collInfo(Coll c) { return kCollTable[static_cast<int>(c)]; }

static_assert([] {
  for (int i = 0; i < kNumColls; ++i)
    if (static_cast<int>(kCollTable[i].coll) != i) return false;
  return true;
}(), "kCollTable rows must be in Coll order");

/// Elements of a buffer of extent `e` on a rank (`isRoot`: this rank is the call's root).
constexpr size_t extentCount(Extent e, size_t count, int nranks, bool isRoot) {
  const size_t n = static_cast<size_t>(nranks);
  switch (e) {
    case Extent::kNone: return 0;
    case Extent::kCount: return count;
    case Extent::kRanksCount: return n * count;
    case Extent::kRootCount: return isRoot ? count : 0;
    case Extent::kRootRanksCount: return isRoot ? n * count : 0;
  }
  return 0;
}

/// Elements of the send / receive buffer of a call of `count` on `rank` (send/recv: one message).
constexpr size_t inputCount(Coll c, size_t count, int nranks, int rank, int root) {
  return extentCount(collInfo(c).input, count, nranks, rank == root);
}
constexpr size_t outputCount(Coll c, size_t count, int nranks, int rank, int root) {
  return extentCount(collInfo(c).output, count, nranks, rank == root);
}

/// The size nccl-tests reports for a call, in bytes (the statistics' bytes per call).
constexpr uint64_t messageBytes(Coll c, size_t count, DataType dtype, int nranks) {
  if (c == Coll::kBarrier) return 0;
  const uint64_t b = static_cast<uint64_t>(count) * dataTypeBytes(dtype);
  return collInfo(c).sizeTimesRanks ? b * static_cast<uint64_t>(nranks) : b;
}

/// One call's arguments, as an API received them: what flows from the C++ API, the NCCL layer's
/// batches (core/batch.h) and the asynchronous queue to the plan.
struct CallArgs {
  Coll coll = Coll::kAllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  ///< elements, per rank where the collective says so
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = 0;
  int sendPeer = -1;  ///< point to point (kSendRecv): -1 when this call does not send
  int recvPeer = -1;  ///< point to point (kSendRecv): -1 when this call does not receive
  /// A reduction whose input is first multiplied by this scalar of `dtype` (NCCL's premultiplied
  /// sum; batches only); the caller's buffer is left unchanged. nullptr: none.
  const void* preMulScalar = nullptr;
  const char* api = "";  ///< the entry point ("allReduce"), for messages
};

/// nccl-tests' bus-bandwidth factor of `c` on `nranks` ranks (busbw = algbw * factor).
constexpr double busBwFactor(Coll c, int nranks) {
  const double n = nranks;
  switch (collInfo(c).busFactor) {
    case BusFactor::kZero: return 0;
    case BusFactor::kOne: return 1;
    case BusFactor::kNMinus1OverN: return (n - 1) / n;
    case BusFactor::kTwoNMinus1OverN: return 2 * (n - 1) / n;
  }
  return 0;
}

}  // namespace tutti
