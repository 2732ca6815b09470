// File: base/arg_check.h
// Argument checks of one collective or point-to-point call, shared by the C++ API (CommImpl) and
// the NCCL layer, so that both reject the same inputs with the same words: a null buffer the call
// would touch on this rank, an invalid dtype or op, a root or peer out of range, a count whose
// byte size overflows, an overlap of send and recv other than the in-place forms NCCL allows.
// Pure functions: no side effect, no communication.
#pragma once

#include <cstddef>
#include <utility>
#include <tutti/types.hpp>

#include "base/collectives.h"
#include "base/status.h"

namespace tutti::detail {

using tutti::CallArgs;  // base/collectives.h

/// InvalidArgument when `count` elements of `dtype`, times `nranks` (the largest buffer any
/// collective addresses), do not fit in half of size_t: "allReduce: count 4611686018427387904
/// is too large for dtype float and 3 ranks (count*4*3 bytes overflow)". A negative count passed
/// through an unsigned parameter lands here too. `dtype` must be valid.
Status checkCount(const char* api, size_t count, DataType dtype, int nranks);

/// Checks `a` for rank `rank` of `nranks`, in this order: dtype, op (only for reductions), root
/// (rooted collectives), peers (kSendRecv), count, null buffers, overlap. Sets *inPlace when send
/// and recv are one of the in-place forms (allReduce/broadcast/reduce: send == recv; allGather:
/// send == recv + rank*count; reduceScatter: recv == send + rank*count). Errors name the API, the
/// argument and its value; InvalidUsage for an unpaired send to self (kSendRecv).
Status checkCall(const CallArgs& a, int rank, int nranks, bool* inPlace);

/// Bytes of the send and receive buffers a call touches on `rank` (0 for a buffer it does not use
/// there, as NCCL allows it to be null).
std::pair<size_t, size_t> bufferBytes(const CallArgs& a, int rank, int nranks);

/// What checkCall sets *inPlace to for a call that passes it: whether send and recv overlap in the
/// collective's in-place form. Pure and cheap; for calls already checked.
bool inPlaceOf(const CallArgs& a, int rank, int nranks);

}  // namespace tutti::detail
