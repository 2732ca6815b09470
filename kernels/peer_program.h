// File: kernels/peer_program.h
// The per-rank device program and the memory it runs over: what the peer interpreter
// (kernels/peer_interp.h) executes for one rank of one collective when every rank runs its own
// kernel and ranks exchange data through FIFOs in each other's arenas (one rank per GPU, or any
// layout where peers' memory is mapped). It is the output of the peer compiler
// (core/device/peer_compile.h), which turns a rank's Schedule (algorithms/schedule.h) into flat
// op lists, one per channel (a CTA on the GPU, a thread in the host emulator).
//
// A call's elements are cut into pieces; piece k covers elements [c0, c0 + n) of every rank's
// block (the whole buffer when it has no blocks) and runs the algorithm's schedule built for a
// call of n elements, through a view that maps the sub-call's element i to the full call's:
// c0 + i for a buffer of `count` elements, (i / n) * count + c0 + i % n for a buffer of
// nranks * count (allgather's output, reduce-scatter's input, ...). Pieces go to channels in
// turn; a channel runs its pieces one after the other, so channels never touch each other's
// elements and need no barrier. A rank's ops on one FIFO (one peer, one channel) run in the
// order the schedule lists them, which is the order the peer's ops consume them (every rank
// builds the same pieces), so messages need no header: each op carries the FIFO slot at which
// its message starts, counted from the call's start (the static pairing of sends and receives).
//
// Direct messages (kDirectSend / kDirectRecv, the simple protocol only): where the data a message
// carries lies in a user buffer (a plain send's source, a forward's destination once received)
// that the sender's later ops never write during the call, and the ranks share an address space,
// the sender copies nothing: it publishes each slice's FIFO counter as usual (after its slots'
// room, so the counters stay one sequence), and the receiver reads the slice from the sender's
// buffer itself, found through the sender's CallRecord of the channel (its buffers' addresses,
// written at the channel's start, before any publish). Ranks in other processes (Launch::remote)
// address a sender's buffer through the windows this rank's process mapped (Launch::windows:
// ncclCommWindowRegister's buffers, exchanged with CUDA IPC). The receiver checks that the
// record is the sender's for this call (same shape, same FIFO position) and, across processes,
// that a mapped window holds the sender's whole buffer; otherwise it fails (Failure::kNotDirect)
// rather than read the wrong memory. A channel that made direct sends waits at
// its end until every receiver has taken them (their head counters), so the user may reuse the
// buffers once the call is done. The compiler marks both ends alike (the receiver's op carries
// the sender's buffer and offset).
//
// Layout in memory: a ProgramHeader, then Piece[npieces], Round[nrounds], Op[nops]; offsets and
// counts in the header. No pointers: one program serves every call of its shape.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tutti/types.hpp>

#include "kernels/host_device.h"

namespace tutti::kernels::peer {

inline constexpr int kMaxRanks = 16;
inline constexpr int kMaxChannels = 32;
/// Ops of one round of one piece (alltoall's direct exchange has 2(n-1) + 1).
inline constexpr int kMaxRoundOps = 64;
inline constexpr uint32_t kMagic = 0x50454552;  // "PEER"

enum class OpKind : uint8_t {
  kSend,            // src -> FIFO to peer
  kRecv,            // FIFO from peer -> dst
  kRecvReduce,      // dst = src op FIFO from peer
  kRecvReduceSend,  // dst = src op FIFO from peer, and the same values -> FIFO to sendPeer
  kRecvCopySend,    // dst = FIFO from peer, and the same values -> FIFO to sendPeer
  kCopy,            // dst = src
  kReduce,          // dst = dst op src
  kDivide,          // dst = dst / divisor (avg)
};

/// Buffers an op names: algo::Buf's values, then the launch's own buffers
/// (Launch::buffers[b - kFirstBuffer]: the messages of grouped sends and receives).
enum class BufKind : uint8_t { kInput = 0, kOutput = 1, kScratch = 2 };
inline constexpr uint8_t kFirstBuffer = 3;
inline constexpr int kMaxBuffers = 64;

/// Protocols (both sides of every FIFO use the call's protocol).
///  kSimple: slots of slotBytes; the sender writes a slot, then releases the FIFO's tail counter
///           in the receiver's arena; the receiver acquires the tail, reads, then releases the
///           head counter in the sender's arena, which the sender acquires before it reuses a
///           slot. For bulk data.
///  kLowLatency: lines of 16 bytes, each two 8-byte words {4 data bytes, 4 flag bytes}, written
///           with one store per word (one 16-byte store on the GPU); the flag is llFlag(use) of the
///           slot's use number, so the receiver needs no counter and buffers never need clearing.
///           Half the bytes are flags: for small messages.
enum class Protocol : uint8_t { kSimple = 0, kLowLatency = 1 };

/// The flag of the use number `use` of a low-latency slot: never 0 (fresh memory is 0), distinct
/// for 2^32 - 1 consecutive uses of a line. A line last written 2^32 - 1 uses of its slot earlier
/// would read as current; NCCL's LL carries the same bound.
TUTTI_HD constexpr uint32_t llFlag(uint64_t use) {
  return static_cast<uint32_t>(use % 0xFFFFFFFFull) + 1;
}

/// Op::flags bit: the op's src is the input buffer and premulsum scales every element read from
/// it by ProgramHeader::scalar first (the engine scales the input into staging and runs the
/// out-of-place schedule from there: the same bits).
inline constexpr uint8_t kPreMulSrc = 1;
/// Op::flags bits of direct messages (above): a send whose receiver reads its src in place (a
/// forward: its dst, once received there), and a receive that reads the sender's buffer
/// Op::peerBuf at the sender's view offset Op::peerOffset instead of the FIFO's slots.
inline constexpr uint8_t kDirectSend = 2;
inline constexpr uint8_t kDirectRecv = 4;

struct Op {
  uint64_t srcOffset = 0;  // elements of the piece's view of src
  uint64_t dstOffset = 0;  // elements of the piece's view of dst
  uint64_t count = 0;      // elements (> 0: the compiler drops empty steps)
  uint32_t recvSlot = 0;   // receiving ops: slot of the FIFO from `peer` where the message starts
  uint32_t sendSlot = 0;   // sending ops: slot of the FIFO to `sendPeer` (kSend: to `peer`)
  uint16_t peer = 0;       // kSend: destination; receiving ops: source
  uint16_t sendPeer = 0;   // forwarding ops: destination of the forward; kSend: = peer
  OpKind kind = OpKind::kCopy;
  BufKind src = BufKind::kInput;
  BufKind dst = BufKind::kOutput;
  uint8_t flags = 0;  // kPreMulSrc, kDirectSend, kDirectRecv
  BufKind peerBuf = BufKind::kInput;  // kDirectRecv: the sender's buffer (input or output)
  uint8_t pad[7] = {};
  uint64_t peerOffset = 0;  // kDirectRecv: elements of the piece's view of the sender's buffer
};
static_assert(sizeof(Op) == 56);

/// A piece: the sub-call of `count` elements at `c0` of every block.
struct Piece {
  uint64_t c0 = 0;
  uint64_t count = 0;
};

/// A round of a piece: ops [firstOp, firstOp + nops) run concurrently (they touch disjoint
/// elements); the next round starts when all of them are done.
struct Round {
  uint32_t firstOp = 0;
  uint32_t nops = 0;
  uint32_t piece = 0;
  uint32_t scheduleRound = 0;  // the schedule's round number (empty rounds are dropped)
};

struct ProgramHeader {
  uint32_t magic = kMagic;
  uint32_t bytes = 0;  // the whole program
  int32_t rank = 0;
  int32_t nranks = 1;
  uint64_t count = 0;  // the call's count (per rank where the collective says so)
  Coll coll = Coll::kAllReduce;
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;  // kSum, kProd, kMax or kMin (avg: kSum and a kDivide op)
  Protocol protocol = Protocol::kSimple;
  uint8_t inputBlocked = 0;   // the input holds nranks blocks of count (view rule above)
  uint8_t outputBlocked = 0;  // the output holds nranks blocks of count
  uint8_t preMul = 0;         // premulsum: `scalar` holds one element of dtype
  uint8_t elemBytes = 4;      // dataTypeBytes(dtype)
  uint8_t direct = 0;         // some op sends or receives directly: the channels keep CallRecords
  uint8_t scalar[8] = {};
  uint64_t shape = 0;         // the call's identity, the same on every rank (direct programs)
  int32_t divisor = 1;        // kDivide ops divide by this
  uint32_t nchannels = 1;     // channels that have rounds; a launch may run more (they idle)
  uint32_t payloadBytes = 0;  // data bytes one FIFO slot carries (the arena's, for protocol)
  uint32_t npieces = 0, nrounds = 0, nops = 0;
  uint32_t piecesAt = 0, roundsAt = 0, opsAt = 0;  // byte offsets from the header
  uint64_t scratchBytes = 0;                       // scratch one channel needs (its largest piece)
  /// Rounds of channel c: [channelRounds[c], channelRounds[c + 1]).
  uint32_t channelRounds[kMaxChannels + 1] = {};
};

TUTTI_HD inline const Piece* pieces(const ProgramHeader* h) {
  return reinterpret_cast<const Piece*>(reinterpret_cast<const unsigned char*>(h) + h->piecesAt);
}
TUTTI_HD inline const Round* rounds(const ProgramHeader* h) {
  return reinterpret_cast<const Round*>(reinterpret_cast<const unsigned char*>(h) + h->roundsAt);
}
TUTTI_HD inline const Op* ops(const ProgramHeader* h) {
  return reinterpret_cast<const Op*>(reinterpret_cast<const unsigned char*>(h) + h->opsAt);
}

/// Slots a message of `bytes` takes (every message starts on a fresh slot).
TUTTI_HD constexpr uint64_t slotsFor(uint64_t bytes, uint32_t payloadBytes) {
  return (bytes + payloadBytes - 1) / payloadBytes;
}

// ---- the arena: one per rank, mapped by every peer ----

/// What an arena holds; the same on every rank of a communicator. Sizes are per FIFO (one per
/// peer and channel) and per channel.
struct ArenaConfig {
  int32_t nranks = 1;
  int32_t channels = 1;
  uint32_t slots = 8;            // kSimple slots per FIFO
  uint32_t slotBytes = 1 << 17;  // kSimple payload per slot (multiple of 16)
  uint32_t llSlots = 8;          // kLowLatency slots per FIFO
  uint32_t llLines = 64;         // 16-byte lines per kLowLatency slot (8 data bytes each)
  uint64_t scratchBytes = 0;     // per channel (multiple of 16)
};

/// Data bytes one slot of `protocol` carries.
TUTTI_HD constexpr uint32_t payloadBytes(const ArenaConfig& c, Protocol p) {
  return p == Protocol::kSimple ? c.slotBytes : c.llLines * 8;
}

/// Counters of one FIFO end, each on its own 128-byte line (a peer writes it).
struct alignas(128) Counter {
  uint64_t value;
  uint64_t pad[15];
};

/// This rank's private state of one FIFO pair with a peer on a channel: slots it has sent to the
/// peer and received from it, per protocol, since the arena was made. Persistent across calls
/// (and graph replays): each call continues from them.
struct alignas(64) FifoState {
  uint64_t sent = 0, recvd = 0;      // kSimple
  uint64_t llSent = 0, llRecvd = 0;  // kLowLatency
  uint64_t pad[4];
};

/// A channel's buffers for its peers' direct receives: the user's send and receive buffers of the
/// call it is running, as its own process addresses them, the call's ProgramHeader::shape and,
/// per peer, the FIFO use the call starts at (kSimple), by which a receiver knows the record is
/// of the call it runs itself (written by the channel at its start).
struct alignas(128) CallRecord {
  uint64_t input;
  uint64_t output;
  uint64_t shape;
  uint64_t start[kMaxRanks];
};

/// Windows a process mapped of the ranks in other processes, kMaxWindows per rank
/// (Launch::windows[rank * kMaxWindows + i]): [base, base + bytes) in the owner's address space
/// is at `local` in this one. bytes == 0: a free entry.
inline constexpr int kMaxWindows = 32;
struct WindowMap {
  uint64_t base = 0;
  uint64_t bytes = 0;
  uint64_t local = 0;
  uint64_t pad = 0;
};

/// Why a rank's run failed: written once (the first failing channel's) to Launch::error, which
/// the host can read while the kernel runs (mapped host memory on the GPU).
/// kNotDirect: a direct receive found no buffer to read (ErrorRecord::seen 1: the sender's
/// CallRecord is not of this call, the sender did not run it with direct messages; 2: the
/// sender's buffer, at ErrorRecord::expected in its process, lies in no window mapped here).
enum class Failure : uint32_t {
  kNone = 0,
  kTimeout = 1,
  kAborted = 2,
  kBadProgram = 3,
  kNotDirect = 4
};

struct ErrorRecord {
  uint32_t failure = 0;  // Failure; written last (release), read first (acquire)
  int32_t rank = -1;
  int32_t channel = -1;
  int32_t round = -1;     // index among the channel's rounds
  int32_t op = -1;        // index in the program
  int32_t peer = -1;      // the peer waited for
  uint64_t expected = 0;  // the counter value (or low-latency flag) waited for
  uint64_t seen = 0;      // the value last seen
  uint32_t waitKind = 0;  // 1 data from peer (receive), 2 room at peer (send)
  uint32_t claimed = 0;   // 0 -> 1 by the first channel that fails
};

/// Byte offsets of an arena's parts. Inbox: counters the peers write as senders (kSimple tail)
/// and as receivers (head, llHead) of this rank's FIFOs; data: the slots of the FIFOs this rank
/// receives from each peer.
struct ArenaLayout {
  ArenaConfig config;
  uint64_t tailsAt = 0;    // Counter[nranks][channels]: [sender][c], written by the sender
  uint64_t headsAt = 0;    // Counter[nranks][channels]: [receiver][c], written by the receiver
  uint64_t llHeadsAt = 0;  // Counter[nranks][channels]
  uint64_t statesAt = 0;   // FifoState[nranks][channels], private
  uint64_t slotsAt = 0;    // [sender][c][slots][slotBytes]
  uint64_t llAt = 0;       // [sender][c][llSlots][llLines][16 bytes]
  uint64_t scratchAt = 0;  // [c][scratchBytes]
  uint64_t callsAt = 0;    // CallRecord[channels]
  uint64_t claimAt = 0;    // Counter: 0 -> 1 by the first channel that fails (device atomics)
  uint64_t bytes = 0;
};

TUTTI_HD constexpr uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

TUTTI_HD constexpr ArenaLayout arenaLayout(const ArenaConfig& c) {
  ArenaLayout l;
  l.config = c;
  const uint64_t fifos = static_cast<uint64_t>(c.nranks) * static_cast<uint64_t>(c.channels);
  uint64_t at = 0;
  l.tailsAt = at;
  at += fifos * sizeof(Counter);
  l.headsAt = at;
  at += fifos * sizeof(Counter);
  l.llHeadsAt = at;
  at += fifos * sizeof(Counter);
  l.statesAt = at;
  at += fifos * sizeof(FifoState);
  l.slotsAt = alignUp(at, 256);
  at = l.slotsAt + fifos * c.slots * static_cast<uint64_t>(c.slotBytes);
  l.llAt = alignUp(at, 256);
  at = l.llAt + fifos * c.llSlots * static_cast<uint64_t>(c.llLines) * 16;
  l.scratchAt = alignUp(at, 256);
  at = l.scratchAt + static_cast<uint64_t>(c.channels) * c.scratchBytes;
  l.callsAt = alignUp(at, 128);
  at = l.callsAt + static_cast<uint64_t>(c.channels) * sizeof(CallRecord);
  l.claimAt = alignUp(at, 128);
  at = l.claimAt + sizeof(Counter);
  l.bytes = alignUp(at, 256);
  return l;
}

/// One rank's run of a program: the kernel's parameters (and the host emulator's).
struct Launch {
  const ProgramHeader* program = nullptr;  // device-accessible (host memory in the emulator)
  const void* input = nullptr;             // the user's send buffer
  void* output = nullptr;                  // the user's recv buffer
  /// Every rank's arena as this rank addresses it (its own included).
  unsigned char* arenas[kMaxRanks] = {};
  /// Buffers ops name as BufKind(kFirstBuffer + i), addressed from their element 0 (grouped
  /// sends and receives: each message's own buffer).
  void* buffers[kMaxBuffers] = {};
  ArenaLayout layout;
  /// This rank's failure record (zeroed before the first launch; a failed run leaves it set and
  /// the arena unusable).
  ErrorRecord* error = nullptr;
  /// Nonzero: stop waiting and fail with kAborted (polled while waiting).
  const uint32_t* abortFlag = nullptr;
  /// A wait that sees no progress for this long fails with kTimeout; 0: never.
  uint64_t timeoutNs = 0;
  /// Bit q: rank q is in another process; its direct messages are read through `windows`.
  uint32_t remote = 0;
  /// WindowMap[kMaxRanks * kMaxWindows], device-readable; null when `remote` is 0.
  const WindowMap* windows = nullptr;
};

}  // namespace tutti::kernels::peer
