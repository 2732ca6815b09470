// File: core/arg_check.cc
// Argument checks of one call (see arg_check.h).
#include "core/arg_check.h"

#include <cstdint>

#include "base/collectives.h"

namespace tutti::detail {

namespace {

bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  if (aBytes == 0 || bBytes == 0 || !a || !b) return false;
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bBytes && y < x + aBytes;
}

// What the in-place form of a collective is, for the overlap error.
const char* inPlaceHint(InPlaceForm f) {
  switch (f) {
    case InPlaceForm::kSame:
      return "; in place means sendbuff == recvbuff";
    case InPlaceForm::kSendInRecv:
      return "; in place means sendbuff == recvbuff + rank*count";
    case InPlaceForm::kRecvInSend:
      return "; in place means recvbuff == sendbuff + rank*count";
    case InPlaceForm::kNone:
      break;
  }
  return "; this collective has no in-place form";
}

}  // namespace

Status checkCount(const char* api, size_t count, DataType dtype, int nranks) {
  const size_t elem = dataTypeBytes(dtype);
  const size_t n = static_cast<size_t>(nranks > 0 ? nranks : 1);
  if (elem > 0 && count > (SIZE_MAX / 2) / elem / n)
    return invalidArgument(
        "{}: count {} is too large for dtype {} and {} ranks (count*{}*{} bytes "
        "overflow; a negative count?)",
        api, count, dataTypeName(dtype), nranks, elem, nranks);
  return Status::ok();
}

Status checkCall(const CallArgs& a, int rank, int nranks, bool* inPlace) {
  *inPlace = false;
  if (!isValid(a.dtype))
    return invalidArgument("{}: invalid dtype (dtype={})", a.api, static_cast<int>(a.dtype));
  // Collectives that do not reduce get a placeholder op (sum) from every API; checked all the
  // same, since the plan cache keys on it.
  if (!isValid(a.op))
    return invalidArgument("{}: invalid reduction op (op={})", a.api, static_cast<int>(a.op));
  const CollInfo& info = collInfo(a.coll);
  if (info.rooted && (a.root < 0 || a.root >= nranks))
    return invalidArgument("{}: root {} is outside [0, {}) (root={}, rank={})", a.api, a.root,
                           nranks, a.root, rank);
  if (a.coll == Coll::kSendRecv) {
    for (int peer : {a.sendPeer, a.recvPeer}) {
      if (peer != -1 && (peer < 0 || peer >= nranks))
        return invalidArgument("{}: peer {} is outside [0, {}) (peer={}, rank={})", a.api, peer,
                               nranks, peer, rank);
    }
    if ((a.sendPeer == rank) != (a.recvPeer == rank))
      return invalidUsage(
          "{}: a send to or receive from this rank itself must be paired in one "
          "sendRecv call (rank={})",
          a.api, rank);
  }
  if (a.count == 0 || a.coll == Coll::kBarrier) return Status::ok();
  TUTTI_TRY(checkCount(a.api, a.count, a.dtype, nranks));
  const size_t elem = dataTypeBytes(a.dtype);
  size_t inBytes = inputCount(a.coll, a.count, nranks, rank, a.root) * elem;
  size_t outBytes = outputCount(a.coll, a.count, nranks, rank, a.root) * elem;
  if (a.coll == Coll::kSendRecv) {
    if (a.sendPeer < 0) inBytes = 0;
    if (a.recvPeer < 0) outBytes = 0;
  }
  if (inBytes > 0 && !a.send)
    return invalidArgument("{}: sendbuff is NULL (sendbuff=NULL, count={}, rank={})", a.api,
                           a.count, rank);
  if (outBytes > 0 && !a.recv)
    return invalidArgument("{}: recvbuff is NULL (recvbuff=NULL, count={}, rank={})", a.api,
                           a.count, rank);
  if (!overlaps(a.send, inBytes, a.recv, outBytes)) return Status::ok();
  const auto* sp = static_cast<const std::byte*>(a.send);
  const auto* rp = static_cast<const std::byte*>(a.recv);
  const size_t rankOffset = static_cast<size_t>(rank) * a.count * elem;
  switch (info.inPlace) {
    case InPlaceForm::kSame:
      *inPlace = sp == rp;
      break;
    case InPlaceForm::kSendInRecv:
      *inPlace = sp == rp + rankOffset;
      break;
    case InPlaceForm::kRecvInSend:
      *inPlace = rp == sp + rankOffset;
      break;
    case InPlaceForm::kNone:
      break;
  }
  if (!*inPlace)
    return invalidArgument(
        "{}: sendbuff and recvbuff overlap in a way {} does not allow "
        "(sendbuff={}, recvbuff={}, count={}, rank={}){}",
        a.api, a.api, a.send, a.recv, a.count, rank, inPlaceHint(info.inPlace));
  return Status::ok();
}

}  // namespace tutti::detail
