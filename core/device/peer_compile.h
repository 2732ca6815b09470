// File: core/device/peer_compile.h
// The peer compiler: one rank's Schedule (algorithms/schedule.h) -> the flat per-rank program
// the peer interpreter runs (kernels/peer_program.h), for layouts where every rank runs its own
// kernel and reaches its peers' arenas (one rank per GPU). The call is cut into pieces (one or
// more per channel, small enough for the arena's scratch), each piece runs the algorithm's
// schedule for its element count through views of the user's buffers, and every send is paired
// statically with its receive: each op carries the FIFO slot its message starts at, which every
// rank computes alike because every rank cuts the same pieces.
//
// Results: per piece, the host engine's arithmetic on that piece's schedule (the same reduction
// trees, kernels/program_eval.h's arithmetic), bit for bit; a call of one piece is the host
// engine's call bit for bit. Several pieces may reduce an element in another order than one
// schedule over the whole call (ring chunks fall elsewhere), as NCCL's results depend on its
// channel count; every rank still gets the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "base/status.h"
#include "kernels/peer_program.h"

namespace tutti::device {

/// How a call is cut and carried.
struct PeerCompileConfig {
  int channels = 1;  ///< at most this many (a call of fewer elements uses fewer)
  kernels::peer::Protocol protocol = kernels::peer::Protocol::kSimple;
  uint32_t payloadBytes = 1 << 17;  ///< data bytes per FIFO slot: the arena's for `protocol`
  uint64_t scratchBytes = 0;        ///< the arena's scratch per channel
  /// Elements per piece at most (0: count / channels, rounded up): a smaller piece bounds the
  /// scratch a piece needs and the work between a channel's first and last message.
  uint64_t maxPieceCount = 0;
  /// Grouped sends and receives (compilePeerMessages): a message takes one channel per this many
  /// bytes, up to `channels`.
  uint64_t messageBytesPerChannel = 512 << 10;
  /// Direct messages (kernels/peer_program.h): a receiver reads a send of the sender's input or
  /// output in place where that is safe, instead of through the FIFO's slots. Only for ranks that
  /// reach each other's buffers (threads of one process on one device, or buffers in windows
  /// mapped across processes); the simple protocol only (ignored for low latency). Every rank of
  /// a call must compile with the same value (a receiver that finds otherwise fails the call).
  bool direct = false;
};

/// One message of a batch of grouped sends and receives.
struct PeerMessage {
  bool send = true;
  int peer = 0;
  uint64_t bytes = 0;
  int buffer = 0;  ///< its buffer: kernels::peer::Launch::buffers[buffer]
};

/// One rank's compiled program (kernels::peer::ProgramHeader and what follows it).
class PeerProgram {
 public:
  const kernels::peer::ProgramHeader* header() const {
    return reinterpret_cast<const kernels::peer::ProgramHeader*>(words_.data());
  }
  size_t bytes() const { return words_.size() * sizeof(uint64_t); }
  const std::string& algorithm() const { return algorithm_; }

 private:
  friend class PeerBuilder;
  std::vector<uint64_t> words_;  // 8-byte aligned storage
  std::string algorithm_;
};

/// Compiles rank shape.rank's program of `algo` for `shape`.
///
/// Every rank's schedule of every piece size is built and checked (to size the scratch every rank
/// needs alike, and so that every rank accepts or declines a shape alike); empty rounds and
/// zero-count steps are dropped. avg compiles to sum plus a divide by
/// nranks on the ranks that hold the result (nranks > 1), as the engine; premulsum
/// (`preMulScalar` non-null: one element of shape.dtype, op kSum) scales every element read
/// from the input, the engine's staging made implicit.
///
/// Errors (InvalidUsage unless noted, naming the argument and its value): sendrecv and barrier;
/// nranks outside [1, kMaxRanks]; channels outside [1, kMaxChannels]; payloadBytes not a
/// positive multiple of 16; an algorithm for another collective or one that declines the shape;
/// premulsum in place (the engine stages the input; no staging here) or with an op other than
/// sum; a schedule whose local copy or reduce partly overlaps itself (a parallel copy cannot);
/// a round of more than kMaxRoundOps steps; a piece of one element whose scratch exceeds
/// scratchBytes; the schedule's own build errors. Pure (no I/O); the cost is that of building
/// nranks schedules per distinct piece size (at most two).
Result<PeerProgram> compilePeer(const algo::CollShape& shape, const algo::AlgorithmInfo& algo,
                                const PeerCompileConfig& config, const std::byte* preMulScalar);

/// Compiles rank `rank`'s batch of grouped sends and receives (NCCL's ncclSend/ncclRecv in a
/// group) as one round: every message moves at once, as bytes. The i-th send of a rank to peer p
/// pairs with p's i-th receive from that rank (sizes must match, as NCCL requires); a send to
/// this rank pairs with a receive from it and becomes a copy. A message of B bytes takes
/// k = clamp(B / messageBytesPerChannel, 1, channels) channels, channel c carrying bytes
/// [B c / k, B (c + 1) / k): both sides derive it from B alone. Zero-byte messages move nothing.
/// Errors (InvalidUsage, naming the value): nranks or rank out of range, a peer out of range, a
/// buffer index outside [0, kMaxBuffers), sends and receives to this rank that do not pair up in
/// number and size, more than kMaxRoundOps parts on one channel.
Result<PeerProgram> compilePeerMessages(int rank, int nranks, std::span<const PeerMessage> msgs,
                                        const PeerCompileConfig& config);

/// Checks that the programs of all ranks of one call (programs[r] of rank r) pair up: on every
/// channel and every FIFO (sender, receiver), the receiver's receives take the sender's messages
/// in order, with the same sizes, starting at the same slots, in the same piece and schedule
/// round, a direct send by a direct receive of the same buffer and offset; the slots follow each
/// other without gaps. InternalError naming the FIFO and the first
/// difference otherwise. For tests and debug builds: O(total ops).
Status checkPairing(std::span<const PeerProgram* const> programs);

}  // namespace tutti::device
