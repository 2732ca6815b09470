// File: nccl/staging_ranges.cc
// The byte ranges a staged batch reads and writes (nccl/staging_ranges.h).
#include "nccl/staging_ranges.h"

#include <algorithm>

namespace tutti::nccl {

void ioBytes(const PendingOp& op, int rank, int nranks, size_t* inBytes, size_t* outBytes) {
  const size_t n = op.count, p = static_cast<size_t>(nranks);
  const bool root = rank == op.root;
  size_t in = 0, out = 0;
  switch (op.kind) {
    case PendingOp::Kind::kSend:
      in = n;
      break;
    case PendingOp::Kind::kRecv:
      out = n;
      break;
    case PendingOp::Kind::kTask:
      break;
    case PendingOp::Kind::kColl:
      switch (op.coll) {
        case Coll::kAllReduce:
          in = out = n;
          break;
        case Coll::kReduce:
          in = n;
          out = root ? n : 0;
          break;
        case Coll::kReduceScatter:
          in = n * p;
          out = n;
          break;
        case Coll::kAllGather:
          in = n;
          out = n * p;
          break;
        case Coll::kBroadcast:
          in = root ? n : 0;
          out = n;
          break;
        case Coll::kAllToAll:
          in = out = n * p;
          break;
        case Coll::kGather:
          in = n;
          out = root ? n * p : 0;
          break;
        case Coll::kScatter:
          in = root ? n * p : 0;
          out = n;
          break;
        default:
          break;
      }
      break;
  }
  const size_t elem = dataTypeBytes(op.dtype);
  *inBytes = in * elem;
  *outBytes = out * elem;
}

std::vector<Span> mergeSpans(std::vector<Span> v) {
  std::sort(v.begin(), v.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  std::vector<Span> out;
  for (const Span& s : v) {
    if (!out.empty() && s.begin < out.back().end)
      out.back().end = std::max(out.back().end, s.end);
    else
      out.push_back(s);
  }
  return out;
}

}  // namespace tutti::nccl
