// File: base/batch_op.h
// One operation of a batch as the layers above the host engine record it and as every executor
// takes it: a collective, one message (a send or a receive), or a task of the caller's layer,
// with the CUDA stream it is ordered on and the memory kind of its buffers. The NCCL layer records
// its calls as BatchOps (group.cc), core's batch entry runs their CallArgs on the host
// (core/batch.h), and the device executors (core/device/executors.h) take them as they are.
// Header only.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <utility>

#include "base/collectives.h"
#include "base/status.h"

namespace tutti {

struct BatchOp {
  /// The order matters: the process clique writes it into shared memory as a byte.
  enum class Kind : uint8_t { kColl, kSend, kRecv, kTask };
  Kind kind = Kind::kColl;
  Coll coll = Coll::kAllReduce;  ///< kColl
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  ///< elements, as the API counts them
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;  ///< the reduction after any premultiplication
  bool preMul = false;     ///< premultiply the input by `scalar` (one element of dtype) first
  std::array<std::byte, 8> scalar{};
  int root = 0;
  int peer = -1;           ///< kSend / kRecv
  void* stream = nullptr;  ///< the cudaStream_t the operation is ordered on (nullptr: none)
  /// The send / receive buffer this rank uses is CUDA device memory (found once, at the call).
  bool sendDevice = false, recvDevice = false;
  /// The GPU can read / write that buffer at its address (device, managed or mapped pinned host
  /// memory): what the device cliques need.
  bool sendReachable = false, recvReachable = false;
  const char* api = "";  ///< the entry point, for messages
  /// kTask: work of the caller's layer run in order with the operations around it (the NCCL
  /// layer's communicator init, split and finalize).
  std::function<Status()> task;

  /// Runs on a device executor (a clique, or staged on its stream) rather than on the host path.
  bool device() const { return sendDevice || recvDevice; }

  /// The call as the host engine takes it (kColl, kSend or kRecv). Points into this operation
  /// (the premultiplication scalar): valid while it lives.
  CallArgs callArgs() const {
    CallArgs a;
    a.coll = kind == Kind::kColl ? coll : Coll::kSendRecv;
    a.send = send;
    a.recv = recv;
    a.count = count;
    a.dtype = dtype;
    a.op = op;
    a.root = root;
    if (kind == Kind::kSend) a.sendPeer = peer;
    if (kind == Kind::kRecv) a.recvPeer = peer;
    a.preMulScalar = preMul ? scalar.data() : nullptr;
    a.api = api;
    return a;
  }

  /// The operation of a call (a collective, or a message with exactly one of sendPeer and
  /// recvPeer set) ordered on `stream`; memory kinds unset. The inverse of callArgs().
  static BatchOp of(const CallArgs& a, void* stream) {
    BatchOp o;
    o.kind = a.coll != Coll::kSendRecv ? Kind::kColl : a.sendPeer >= 0 ? Kind::kSend : Kind::kRecv;
    o.coll = a.coll;
    o.send = a.send;
    o.recv = a.recv;
    o.count = a.count;
    o.dtype = a.dtype;
    o.op = a.op;
    o.root = a.root;
    o.peer = o.kind == Kind::kSend ? a.sendPeer : a.recvPeer;
    if (a.preMulScalar) {
      o.preMul = true;
      std::memcpy(o.scalar.data(), a.preMulScalar, dataTypeBytes(a.dtype));
    }
    o.stream = stream;
    o.api = a.api;
    return o;
  }

  /// Bytes the operation reads from its send buffer and writes to its receive buffer on `rank`
  /// of `nranks` (0 for a buffer it does not use there: the receive buffer of a non-root reduce
  /// or gather, the send buffer of a non-root broadcast or scatter; 0 and 0 for a task).
  std::pair<size_t, size_t> ioBytes(int rank, int nranks) const {
    const size_t elem = dataTypeBytes(dtype);
    switch (kind) {
      case Kind::kSend: return {count * elem, 0};
      case Kind::kRecv: return {0, count * elem};
      case Kind::kTask: return {0, 0};
      case Kind::kColl: break;
    }
    return {inputCount(coll, count, nranks, rank, root) * elem,
            outputCount(coll, count, nranks, rank, root) * elem};
  }
};

}  // namespace tutti
