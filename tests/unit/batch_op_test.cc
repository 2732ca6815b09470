// File: tests/unit/batch_op_test.cc
// base/batch_op.h: the bytes each batched operation reads and writes on each rank (what the
// staged device executor copies to and from the host) and its CallArgs; core/device/staged.h: the
// merging of ranges into staging spans (overlaps merge, back-to-back buffers do not). Runs
// without a GPU.
#include <catch2/catch.hpp>

#include <cstring>

#include "base/batch_op.h"
#include "core/device/staged.h"

namespace tutti {
namespace {

BatchOp coll(Coll c, size_t count, DataType dtype = DataType::kFloat32, int root = 0) {
  BatchOp op;
  op.kind = BatchOp::Kind::kColl;
  op.coll = c;
  op.count = count;
  op.dtype = dtype;
  op.root = root;
  return op;
}

std::pair<size_t, size_t> io(const BatchOp& op, int rank, int nranks) {
  return op.ioBytes(rank, nranks);
}

TEST_CASE("ioBytes: every collective's send and receive bytes on root and non-root ranks") {
  using P = std::pair<size_t, size_t>;
  const size_t n = 10, e = 4;  // float32
  const int ranks = 3, root = 1;
  CHECK(io(coll(Coll::kAllReduce, n), 0, ranks) == P{n * e, n * e});
  CHECK(io(coll(Coll::kReduceScatter, n), 2, ranks) == P{ranks * n * e, n * e});
  CHECK(io(coll(Coll::kAllGather, n), 2, ranks) == P{n * e, ranks * n * e});
  CHECK(io(coll(Coll::kAllToAll, n), 0, ranks) == P{ranks * n * e, ranks * n * e});
  // Rooted: the root's unused buffer is 0 bytes on the other ranks.
  CHECK(io(coll(Coll::kReduce, n, DataType::kFloat32, root), root, ranks) == P{n * e, n * e});
  CHECK(io(coll(Coll::kReduce, n, DataType::kFloat32, root), 0, ranks) == P{n * e, 0});
  CHECK(io(coll(Coll::kBroadcast, n, DataType::kFloat32, root), root, ranks) == P{n * e, n * e});
  CHECK(io(coll(Coll::kBroadcast, n, DataType::kFloat32, root), 2, ranks) == P{0, n * e});
  CHECK(io(coll(Coll::kGather, n, DataType::kFloat32, root), root, ranks) ==
        P{n * e, ranks * n * e});
  CHECK(io(coll(Coll::kGather, n, DataType::kFloat32, root), 0, ranks) == P{n * e, 0});
  CHECK(io(coll(Coll::kScatter, n, DataType::kFloat32, root), root, ranks) ==
        P{ranks * n * e, n * e});
  CHECK(io(coll(Coll::kScatter, n, DataType::kFloat32, root), 0, ranks) == P{0, n * e});
  // Element size of the dtype; count 0 moves nothing.
  CHECK(io(coll(Coll::kAllReduce, n, DataType::kFloat64), 0, ranks) == P{8 * n, 8 * n});
  CHECK(io(coll(Coll::kAllGather, n, DataType::kFp8E4M3), 0, ranks) == P{n, ranks * n});
  CHECK(io(coll(Coll::kAllReduce, 0), 0, ranks) == P{0, 0});
}

TEST_CASE("ioBytes: send, receive and communicator tasks") {
  BatchOp send;
  send.kind = BatchOp::Kind::kSend;
  send.count = 5;
  send.dtype = DataType::kInt64;
  CHECK(io(send, 0, 2) == std::pair<size_t, size_t>{40, 0});
  BatchOp recv = send;
  recv.kind = BatchOp::Kind::kRecv;
  CHECK(io(recv, 0, 2) == std::pair<size_t, size_t>{0, 40});
  BatchOp task;
  task.kind = BatchOp::Kind::kTask;
  task.count = 7;
  CHECK(io(task, 0, 2) == std::pair<size_t, size_t>{0, 0});
}

TEST_CASE("callArgs: messages name their peer, a premultiplied sum points at its scalar") {
  BatchOp send;
  send.kind = BatchOp::Kind::kSend;
  send.peer = 3;
  const CallArgs s = send.callArgs();
  CHECK(s.coll == Coll::kSendRecv);
  CHECK(s.sendPeer == 3);
  CHECK(s.recvPeer == -1);
  BatchOp recv = send;
  recv.kind = BatchOp::Kind::kRecv;
  CHECK(recv.callArgs().recvPeer == 3);
  CHECK(recv.callArgs().sendPeer == -1);
  BatchOp pre = coll(Coll::kReduceScatter, 4);
  CHECK(pre.callArgs().preMulScalar == nullptr);
  pre.preMul = true;
  CHECK(pre.callArgs().preMulScalar == pre.scalar.data());
  CHECK(pre.callArgs().coll == Coll::kReduceScatter);
}

TEST_CASE("BatchOp::of is the inverse of callArgs, for collectives and messages") {
  float in = 0, out = 0;
  CallArgs a;
  a.coll = Coll::kReduce;
  a.send = &in;
  a.recv = &out;
  a.count = 1;
  a.dtype = DataType::kFloat64;
  a.op = RedOp::kMax;
  a.root = 2;
  a.api = "reduce";
  int stream = 0;
  const BatchOp op = BatchOp::of(a, &stream);
  CHECK(op.kind == BatchOp::Kind::kColl);
  CHECK(op.stream == &stream);
  const CallArgs back = op.callArgs();
  CHECK(back.coll == a.coll);
  CHECK(back.send == a.send);
  CHECK(back.recv == a.recv);
  CHECK(back.dtype == a.dtype);
  CHECK(back.op == a.op);
  CHECK(back.root == a.root);
  CHECK(back.preMulScalar == nullptr);
  CallArgs m;
  m.coll = Coll::kSendRecv;
  m.recvPeer = 1;
  const BatchOp recv = BatchOp::of(m, nullptr);
  CHECK(recv.kind == BatchOp::Kind::kRecv);
  CHECK(recv.peer == 1);
  CHECK(recv.callArgs().recvPeer == 1);
  CHECK(recv.callArgs().sendPeer == -1);
  const double scalar = 0.5;
  a.preMulScalar = &scalar;
  const BatchOp pre = BatchOp::of(a, nullptr);
  REQUIRE(pre.preMul);
  double copied = 0;
  std::memcpy(&copied, pre.scalar.data(), sizeof copied);
  CHECK(copied == 0.5);
}

TEST_CASE("mergeSpans: overlapping spans merge, touching ones stay apart, order is by start") {
  using device::mergeSpans;
  using V = std::vector<device::Span>;
  auto eq = [](const V& a, const V& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].begin != b[i].begin || a[i].end != b[i].end) return false;
    return true;
  };
  CHECK(mergeSpans({}).empty());
  // In place: the same range as input and output is one span.
  CHECK(eq(mergeSpans({{100, 200}, {100, 200}}), V{{100, 200}}));
  // In-place allgather: the send block lies inside the receive buffer.
  CHECK(eq(mergeSpans({{130, 140}, {100, 160}}), V{{100, 160}}));
  // Partial overlap, unsorted input, and a span contained in the merged one.
  CHECK(eq(mergeSpans({{300, 400}, {150, 250}, {100, 200}, {160, 170}}),
           V{{100, 250}, {300, 400}}));
  // Back to back (two cudaMalloc buffers can be): two spans, two copies.
  CHECK(eq(mergeSpans({{200, 300}, {100, 200}}), V{{100, 200}, {200, 300}}));
}

}  // namespace
}  // namespace tutti
