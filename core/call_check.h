// File: core/call_check.h
// Call-mismatch detection. Every collective call carries a 32-byte signature (collective,
// count, dtype, op, root, collective sequence number). In round 0 of the call each rank sends a
// 64-byte call message to ring neighbour rank+1 and receives the one of rank-1, as the first
// message of the call on those connections, so that it is matched before any data: the signature,
// and, when this rank's first message of the call to rank+1 is a send of at most kInlineBytes
// posted in round 0, that message's data ("inline"), which then is not sent separately. Small
// calls (an 8-byte allreduce) therefore send no extra message at all. A rank whose neighbour
// called something else fails with InvalidUsage naming both ranks and the values that differ; the
// communicator's failure notices (core/bootstrap.h) tell the other ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"
#include <tutti/types.hpp>

namespace tutti {

/// The wire form of one call (little-endian host layout; every rank runs the same build).
struct CallSignature {
  uint32_t magic = 0;
  uint32_t seq = 0;  ///< collective sequence number (low 32 bits)
  uint8_t coll = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  /// Bytes of CallMessage::data that carry the sender's first message (0..kInlineBytes). Not part
  /// of the call: ranks of one call legitimately differ in it.
  uint8_t inlineBytes = 0;
  int32_t root = 0;
  uint64_t count = 0;
  uint64_t reserved2 = 0;
};
static_assert(sizeof(CallSignature) == 32);

/// Most bytes of a first data message that travel inside the call message.
inline constexpr size_t kInlineBytes = 32;

/// What goes on the wire first: one cache line.
struct CallMessage {
  CallSignature sig;
  alignas(8) std::byte data[kInlineBytes];
};
static_assert(sizeof(CallMessage) == 64);

/// The per-communicator state of the check: this rank's call message for the running call, the
/// buffers the neighbour's land in, and the neighbours. Owned by the communicator; set for every
/// call while the check is on (`sign` says whether the call itself is signed).
///
/// A signed call that receives nothing from `prev` (the root of a broadcast, ...) does not wait
/// for prev's call message: it may return while that receive is still pending ("carried"), so
/// that such a rank can run ahead of its neighbour as it does without the check, by up to
/// kMaxCarried calls. A carried message is compared when it arrives, during a later call that
/// talks to `prev` (a call's own message arrives after every carried one, so a call that waits for
/// its own settles them all).
struct CallCheck {
  static constexpr int kMaxCarried = 8;
  /// A call message still to come from prev: its receive's sequence number on prev's connection,
  /// our signature of that call, its engine sequence number (for messages) and its slot.
  struct Carried {
    uint64_t recv = 0;
    CallSignature mine;
    uint64_t seq = 0;
    int slot = 0;
  };

  alignas(64) CallMessage mine;
  /// Receive buffers, used in rotation by signed calls: the carried ones are the most recent
  /// signed calls before the running one, so kMaxCarried + 1 suffice.
  alignas(64) CallMessage theirs[kMaxCarried + 1];
  int next = -1;  ///< rank + 1 (mod n): receives our call message
  int prev = -1;  ///< rank - 1 (mod n): sends us theirs
  bool sign = false;             ///< the running call exchanges call messages
  int slot = 0;                  ///< theirs[slot] takes the running call's message
  uint64_t seq = 0;              ///< engine's sequence number of the running call, for messages
  Carried carried[kMaxCarried];  ///< FIFO: carried[(carriedHead + i) % kMaxCarried]
  int carriedHead = 0;
  int carriedCount = 0;
};

/// Fills `check.mine.sig` for a call (inlineBytes 0) and sets check.sign. Fields that the
/// collective does not use (op of a broadcast, root of an allreduce) are zeroed so that they
/// never cause a false mismatch.
void makeSignature(CallCheck& check, Coll coll, size_t count, DataType dtype, RedOp op, int root,
                   uint64_t collSeq);

/// Parses a received signature (fuzzed). InvalidUsage when the bytes are not a signature at all
/// (the neighbour's stream is out of step: an earlier call already disagreed).
Result<CallSignature> parseSignature(std::span<const std::byte> bytes);

/// Whether two signatures describe the same call (every field but inlineBytes). Cheap: run on
/// every checked call.
inline bool sameCall(const CallSignature& a, const CallSignature& b) {
  return a.magic == b.magic && a.seq == b.seq && a.coll == b.coll && a.dtype == b.dtype &&
         a.op == b.op && a.root == b.root && a.count == b.count && a.reserved2 == b.reserved2;
}

/// Compares the neighbour's signature `theirs` (from rank `prev`) with ours, `mine`, of the call
/// with engine sequence number `seq`; also rejects an inlineBytes above `maxInline`.
/// InvalidUsage, e.g. "allreduce #12: ranks called different operations at collective call 12:
/// rank 3 called allreduce(count=100, dtype=float, op=sum) but rank 2 called
/// allreduce(count=200, dtype=float, op=sum) (values that differ: count)".
Status verifyCall(const CallSignature& mine, const CallSignature& theirs, uint64_t seq, int rank,
                  int prev, size_t maxInline = kInlineBytes);

/// "allreduce(count=100, dtype=float, op=sum)"; fields that do not apply are left out.
std::string describe(const CallSignature& s);

}  // namespace tutti
