// File: tests/unit/staging_ranges_test.cc
// nccl/staging_ranges.h: the bytes each NCCL operation reads and writes on each rank (what the
// staged device path copies to and from the host), and the merging of ranges into staging spans
// (overlaps merge, back-to-back buffers do not). Runs without a GPU.
#include <catch2/catch.hpp>

#include "nccl/staging_ranges.h"

namespace tutti::nccl {
namespace {

PendingOp coll(Coll c, size_t count, DataType dtype = DataType::kFloat32, int root = 0) {
  PendingOp op;
  op.kind = PendingOp::Kind::kColl;
  op.coll = c;
  op.count = count;
  op.dtype = dtype;
  op.root = root;
  return op;
}

std::pair<size_t, size_t> io(const PendingOp& op, int rank, int nranks) {
  size_t in = 0, out = 0;
  ioBytes(op, rank, nranks, &in, &out);
  return {in, out};
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
  PendingOp send;
  send.kind = PendingOp::Kind::kSend;
  send.count = 5;
  send.dtype = DataType::kInt64;
  CHECK(io(send, 0, 2) == std::pair<size_t, size_t>{40, 0});
  PendingOp recv = send;
  recv.kind = PendingOp::Kind::kRecv;
  CHECK(io(recv, 0, 2) == std::pair<size_t, size_t>{0, 40});
  PendingOp task;
  task.kind = PendingOp::Kind::kTask;
  task.count = 7;
  CHECK(io(task, 0, 2) == std::pair<size_t, size_t>{0, 0});
}

TEST_CASE("mergeSpans: overlapping spans merge, touching ones stay apart, order is by start") {
  using V = std::vector<Span>;
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
}  // namespace tutti::nccl
