// File: base/arg_check.cc
// Argument checks of one call (see arg_check.h).
#include "base/arg_check.h"

#include <cstdint>
#include <utility>

#include "base/collectives.h"
#include "base/strings.h"

namespace tutti::detail {

namespace {

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

// Whether send and recv stand where the collective's in-place form puts them.
bool isInPlaceForm(const CallArgs& a, int rank) {
  const auto* sp = static_cast<const std::byte*>(a.send);
  const auto* rp = static_cast<const std::byte*>(a.recv);
  const size_t rankOffset = static_cast<size_t>(rank) * a.count * dataTypeBytes(a.dtype);
  switch (collInfo(a.coll).inPlace) {
    case InPlaceForm::kSame:
      return sp == rp;
    case InPlaceForm::kSendInRecv:
      return sp == rp + rankOffset;
    case InPlaceForm::kRecvInSend:
      return rp == sp + rankOffset;
    case InPlaceForm::kNone:
      break;
  }
  return false;
}

}  // namespace

std::pair<size_t, size_t> bufferBytes(const CallArgs& a, int rank, int nranks) {
  const size_t elem = dataTypeBytes(a.dtype);
  size_t in = inputCount(a.coll, a.count, nranks, rank, a.root) * elem;
  size_t out = outputCount(a.coll, a.count, nranks, rank, a.root) * elem;
  if (a.coll == Coll::kSendRecv) {
    if (a.sendPeer < 0) in = 0;
    if (a.recvPeer < 0) out = 0;
  }
  return {in, out};
}

bool inPlaceOf(const CallArgs& a, int rank, int nranks) {
  if (a.count == 0 || a.coll == Coll::kBarrier || !isValid(a.dtype)) return false;
  const auto [inBytes, outBytes] = bufferBytes(a, rank, nranks);
  return bytesOverlap(a.send, inBytes, a.recv, outBytes) && isInPlaceForm(a, rank);
}

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
  const auto [inBytes, outBytes] = bufferBytes(a, rank, nranks);
  if (inBytes > 0 && !a.send)
    return invalidArgument("{}: sendbuff is NULL (sendbuff=NULL, count={}, rank={})", a.api,
                           a.count, rank);
  if (outBytes > 0 && !a.recv)
    return invalidArgument("{}: recvbuff is NULL (recvbuff=NULL, count={}, rank={})", a.api,
                           a.count, rank);
  if (!bytesOverlap(a.send, inBytes, a.recv, outBytes)) return Status::ok();
  *inPlace = isInPlaceForm(a, rank);
  if (!*inPlace)
    return invalidArgument(
        "{}: sendbuff and recvbuff overlap in a way {} does not allow "
        "(sendbuff={}, recvbuff={}, count={}, rank={}){}",
        a.api, a.api, a.send, a.recv, a.count, rank, inPlaceHint(info.inPlace));
  return Status::ok();
}

}  // namespace tutti::detail
