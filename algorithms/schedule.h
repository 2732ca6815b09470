// File: algorithms/schedule.h
// The schedule IR: what one rank does in one collective, as data. A Schedule is an ordered list of
// rounds; the steps of a round are independent of each other. Ranges are in ELEMENTS of the call's
// dtype, never bytes. The same object is executed by the engine (and later verified/simulated).
//
// Matching rule (what makes bounded transport buffers deadlock-free): a send in round k of rank A
// to rank B is matched by a receive from A in round k of rank B, and messages between a pair are
// matched in order. Algorithms therefore keep the same round numbering on every rank (a rank with
// nothing to do in a round leaves it empty).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <tutti/types.hpp>

namespace tutti::algo {

/// Step operations (at most 8; a new fused op needs a benchmark that shows its gain).
enum class Op : uint8_t {
  kSend,            ///< send src[srcOffset, +count) to peer
  kRecv,            ///< dst[dstOffset, +count) = incoming from peer
  kRecvReduce,      ///< dst = src op incoming (src may be the same range as dst: accumulate)
  kRecvReduceSend,  ///< dst = src op incoming, then dst is forwarded to sendPeer (pipelined)
  kRecvCopySend,    ///< dst = incoming, then dst is forwarded to sendPeer (pipelined)
  kCopy,            ///< dst = src (local)
  kReduce,          ///< dst = dst op src (local)
};
const char* opName(Op op);

/// The buffers a step may name. input/output are the user's send/recv buffers; scratch is owned
/// by the plan (Schedule::scratchCount elements).
enum class Buf : uint8_t { kInput, kOutput, kScratch };
const char* bufName(Buf b);

struct Step {
  Op op = Op::kCopy;
  int peer = -1;      ///< send: destination; recv*: source
  int sendPeer = -1;  ///< recvReduceSend / recvCopySend: where dst is forwarded
  Buf src = Buf::kInput;
  size_t srcOffset = 0;
  Buf dst = Buf::kOutput;
  size_t dstOffset = 0;
  size_t count = 0;  ///< elements
};

struct Schedule {
  std::vector<std::vector<Step>> rounds;
  size_t scratchCount = 0;  ///< elements of the call's dtype
};

/// What a schedule is built for: one rank's view of one call.
struct CollShape {
  Coll coll = Coll::kAllReduce;
  int rank = 0;
  int nranks = 1;
  size_t count = 0;  ///< the API count (per rank for allgather, reducescatter, alltoall, ...)
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = 0;  ///< rooted collectives; 0 otherwise
  bool inPlace = false;
  /// Hierarchy for hierarchical algorithms: hostOf[r] is the group (host, or NUMA node on one
  /// host) of rank r, groups numbered from 0; size nranks, or empty when unknown or when all ranks
  /// form one group. Hierarchical algorithms decline without it; the others ignore it.
  std::vector<int> hostOf;
};

/// Whether a step of this op reads src[srcOffset, +count) (send, copy, reduce and the reducing
/// receives) and whether it writes dst[dstOffset, +count) (all but send).
inline bool readsSrc(Op op) {
  return op == Op::kSend || op == Op::kCopy || op == Op::kReduce || op == Op::kRecvReduce ||
         op == Op::kRecvReduceSend;
}
inline bool writesDst(Op op) { return op != Op::kSend; }
/// Whether a step of this op receives from its peer (the plain, reducing and forwarding receives).
inline bool receives(Op op) {
  return op == Op::kRecv || op == Op::kRecvReduce || op == Op::kRecvCopySend ||
         op == Op::kRecvReduceSend;
}
/// Whether a step of this op forwards what it receives to sendPeer (recvReduceSend, recvCopySend).
inline bool forwards(Op op) { return op == Op::kRecvReduceSend || op == Op::kRecvCopySend; }

/// Elements of `buf` that a call of this shape may touch on this rank (0 where NCCL allows the
/// buffer to be null, e.g. recvbuff of a non-root reduce). Scratch is not covered here.
size_t bufferCount(const CollShape& s, Buf buf);

/// Which plain receives (Op::kRecv, when `receives`) and local copies (Op::kCopy) write their
/// range for the last time in the call: no later round's step of this rank reads or writes any
/// element of it. The result has one entry per step, rounds[r][i] -> out[r][i] (1: last touch).
/// Such a step's data is not read back by the schedule, so it may be written with non-temporal
/// stores (RecvSpec::streaming, kernels::copyStreaming) when the call is larger than the cache.
/// Steps of one round never overlap (verifier), so only later rounds count. In place, input and
/// output are one user buffer at a displacement the schedule does not know: a later step touching
/// either counts as touching every element of both.
/// Cost: O(S log S) for S steps; the engine computes it once per cached plan.
std::vector<std::vector<uint8_t>> lastTouchWrites(const Schedule& s, bool inPlace, bool receives);

/// One line per step, for logs and tests ("r0: send peer=1 input[0,+4)").
std::string toString(const Schedule& s);

}  // namespace tutti::algo
