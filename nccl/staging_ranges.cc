// File: nccl/staging_ranges.cc
// The byte ranges a staged batch reads and writes (nccl/staging_ranges.h).
#include "nccl/staging_ranges.h"

#include <algorithm>

#include "base/collectives.h"

namespace tutti::nccl {

void ioBytes(const PendingOp& op, int rank, int nranks, size_t* inBytes, size_t* outBytes) {
  size_t in = 0, out = 0;
  switch (op.kind) {
    case PendingOp::Kind::kSend:
      in = op.count;
      break;
    case PendingOp::Kind::kRecv:
      out = op.count;
      break;
    case PendingOp::Kind::kTask:
      break;
    case PendingOp::Kind::kColl:
      in = inputCount(op.coll, op.count, nranks, rank, op.root);
      out = outputCount(op.coll, op.count, nranks, rank, op.root);
      break;
  }
  const size_t elem = dataTypeBytes(op.dtype);
  *inBytes = in * elem;
  *outBytes = out * elem;
}

}  // namespace tutti::nccl
