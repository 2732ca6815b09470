// File: core/batch.h
// The batch entry: the one core header the NCCL layer includes. A batch is one communicator's
// share of an NCCL group (or any list of calls issued together): collectives run in issue order,
// runs of small allreduces of one dtype and op fused into one plan made of exactly the steps of
// the separate calls (bit-identical results, one round latency for all), then every send and
// receive of the batch posted together as one round (ring exchanges and all-to-alls cannot
// deadlock). Steps count elements of the operations' dtype; point-to-point steps of several
// dtypes count bytes (a byte is then the element).
//
// Also here: the bootstrap's point-to-point messages, which work after the data connections
// failed (ncclCommShrink agrees on a new communicator through them).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <tutti/tutti.hpp>

#include "base/collectives.h"

namespace tutti {

/// Runs `ops` on `comm` (see the file comment). Each operation is a collective (any but kSendRecv
/// and kBarrier; `preMulScalar` allowed) or one message: coll kSendRecv with exactly one of
/// sendPeer (a send of `send`) and recvPeer (a receive into `recv`) set. Every operation runs
/// even after one failed; the first error is returned. `fusionBytes`: the largest fused allreduce
/// (bytes of the fused buffer); 0 disables fusion. Each collective must have passed
/// detail::checkCall (base/arg_check.h) already, as the NCCL layer's calls and allReduceFused do
/// before anything runs: the batch does not check them again. Messages are checked
/// (InvalidArgument for a peer out of range, InvalidUsage for a send to this rank without a
/// receive of the same size from it in the batch). Same thread-safety as the C++ API's calls.
Status runBatch(Communicator& comm, std::span<const CallArgs> ops, size_t fusionBytes);

/// The simulator's prediction of `ops` run as a batch, in microseconds: for each collective the
/// selector's choice on this communicator (Communicator::algorithmFor), for each message one
/// message over shared memory in the default link model; operations of count 0, and collectives
/// that cannot be predicted, add nothing. Local; no communication.
double predictBatchUs(const Communicator& comm, std::span<const CallArgs> ops);

/// TUTTI_FUSION_BYTES (default 64 KiB): the largest fused buffer, and so the largest allreduce
/// that is fused; 0 disables fusion.
size_t fusionBytes();

/// Sends `body` to `peer`'s bootstrap listener under `tag` (a fresh connection; works when the
/// data connections or other ranks are gone). Errors: Timeout, RemoteError naming the peer.
Status bootstrapSend(Communicator& comm, int peer, uint64_t tag, const std::string& body,
                     std::chrono::milliseconds timeout);
/// Receives the message `peer` sent under `tag` with bootstrapSend.
Result<std::string> bootstrapRecv(Communicator& comm, int peer, uint64_t tag,
                                  std::chrono::milliseconds timeout);

}  // namespace tutti
