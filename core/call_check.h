// File: core/call_check.h
// Call-mismatch detection. Every collective call carries a 32-byte signature (collective,
// count, dtype, op, root, collective sequence number). In round 0 of the call each rank sends its
// signature to ring neighbour rank+1 and receives the one of rank-1, as the first message of the
// call on those connections, so that it is matched before any data. A rank whose neighbour called
// something else fails with InvalidUsage naming both ranks and the values that differ; the
// communicator's failure notices (core/bootstrap.h) tell the other ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"
#include <tutti/types.hpp>

namespace tutti {

/// The wire form of one call (little-endian host layout; every rank runs the same build).
struct CallSignature {
  uint32_t magic = 0;
  uint32_t seq = 0;  ///< collective sequence number (low 32 bits)
  uint8_t coll = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t reserved = 0;
  int32_t root = 0;
  uint64_t count = 0;
  uint64_t reserved2 = 0;
};
static_assert(sizeof(CallSignature) == 32);

/// The per-communicator state of the check: this rank's signature for the running call, the
/// buffer the neighbour's lands in, and the neighbours. Owned by the communicator.
struct CallCheck {
  alignas(64) CallSignature mine;
  alignas(64) CallSignature theirs;
  int next = -1;  ///< rank + 1 (mod n): receives our signature
  int prev = -1;  ///< rank - 1 (mod n): sends us theirs
  uint64_t seq = 0;  ///< engine's sequence number of the call, for messages
};

/// Fills `check.mine` for a call. Fields that the collective does not use (op of a broadcast,
/// root of an allreduce) are zeroed so that they never cause a false mismatch.
void makeSignature(CallCheck& check, Coll coll, size_t count, DataType dtype, RedOp op, int root,
                   uint64_t collSeq);

/// Parses a received signature (fuzzed). InvalidUsage when the bytes are not a signature at all
/// (the neighbour's stream is out of step: an earlier call already disagreed).
Result<CallSignature> parseSignature(std::span<const std::byte> bytes);

/// Compares the neighbour's signature with ours. InvalidUsage, e.g. "allreduce #12: ranks called
/// different operations at collective call 12: rank 3 called allreduce(count=100, dtype=float,
/// op=sum) but rank 2 called allreduce(count=200, dtype=float, op=sum) (values that differ:
/// count)".
Status verifyCall(const CallCheck& check, int rank);

/// "allreduce(count=100, dtype=float, op=sum)"; fields that do not apply are left out.
std::string describe(const CallSignature& s);

}  // namespace tutti
