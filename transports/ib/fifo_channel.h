// File: transports/ib/fifo_channel.h
// The ib transport's protocol for one peer, separated from verbs so that it is tested with a fake
// wire. Each rank owns a receive FIFO of `slots` slots of `slotBytes` bytes per peer, registered
// for remote write. A message is cut into chunks of at most one slot (a chunk never spans two
// messages); the sender RDMA-writes chunk k into the peer's slot k % slots WITH IMMEDIATE data
// carrying the chunk's byte count, which consumes one posted receive at the peer and tells it
// that the slot is full. The receiver copies (or reduces) the slot into the user's buffer and
// returns credits: a zero-byte RDMA write with immediate whose top bit is set and whose low 31
// bits count the slots freed since the last credit. The sender writes only while
// chunksPosted - creditsReturned < slots.
//
// Why no receiver-not-ready error can happen: between two polls of our completion queue at most
// `slots` data chunks (credit limit) and `slots` credit messages (one per chunk of ours the peer
// consumed; we post no new chunk while not polling) can arrive, and 2 * slots + 2 receives are
// kept posted (each completion re-posts one before anything else happens).
//
// Send sources: by default a chunk is first copied into a local staging slot (registered once),
// so user buffers are never registered; with a RegistrationCache the chunk is written straight
// from the user buffer under the cached registration's lkey (zero copy on the send side).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>

#include "base/status.h"
#include "transports/ib/reg_cache.h"
#include "transports/transport.h"

namespace tutti::transport::ib {

/// One completion as the channel sees it (a digest of struct ibv_wc).
struct WireCompletion {
  uint64_t wrId = 0;
  bool isRecv = false;
  int status = 0;  ///< enum ibv_wc_status; 0 = success
  uint32_t imm = 0;
  uint32_t vendorErr = 0;
};

/// What the channel needs from one connected RC queue pair. Every call is non-blocking.
class Wire {
 public:
  virtual ~Wire() = default;
  /// Posts a signaled RDMA WRITE WITH IMMEDIATE of `bytes` bytes (0 allowed: `src` unused) from
  /// local memory registered under `lkey` to the peer's FIFO at byte offset `remoteOffset`.
  virtual Status postWrite(uint64_t wrId, const void* src, uint32_t bytes, uint32_t lkey,
                           uint64_t remoteOffset, uint32_t imm) = 0;
  /// Posts a signaled zero-byte RDMA WRITE without immediate (consumes no receive at the peer):
  /// a liveness probe that fails with a retry-exceeded completion when the peer's queue pair is
  /// gone.
  virtual Status postProbe(uint64_t wrId) = 0;
  /// Posts one receive without scatter entries (it only collects an immediate).
  virtual Status postRecv(uint64_t wrId) = 0;
  /// Takes up to out.size() completions; the number taken.
  virtual Result<size_t> poll(std::span<WireCompletion> out) = 0;
};

struct ChannelConfig {
  uint32_t slots = 8;
  uint32_t slotBytes = 128 * 1024;
  std::byte* fifo = nullptr;     ///< local receive FIFO: slots * slotBytes, written by the peer
  std::byte* staging = nullptr;  ///< local send staging: slots * slotBytes (when cache is null)
  uint32_t stagingLkey = 0;
  RegistrationCache* cache = nullptr;  ///< non-null: zero-copy sends from registered user memory
  // For messages.
  int rank = -1;
  int peer = -1;
  std::string peerHost = "?";
  std::string device = "?";
  int timeout = 0;
  int retryCnt = 0;

  uint32_t recvDepth() const { return 2 * slots + 2; }
  uint32_t sendDepth() const { return 2 * slots + 2; }
};

inline constexpr uint32_t kCreditFlag = 0x80000000u;

/// The protocol state of one connection. Not thread-safe (one thread calls every method).
class FifoChannel {
 public:
  FifoChannel(Wire& wire, ChannelConfig cfg);
  ~FifoChannel();
  FifoChannel(const FifoChannel&) = delete;
  FifoChannel& operator=(const FifoChannel&) = delete;

  /// Posts the initial receives. Call once, before the peer may write.
  Status start();
  /// As Connection::postSend / postRecv (sequence numbers 1, 2, ...). A reducing receive whose
  /// byte count is not a multiple of its element size fails the next progress().
  uint64_t postSend(const void* src, size_t bytes);
  uint64_t postRecv(const RecvSpec& spec);
  /// Polls completions, delivers arrived chunks, returns credits and posts chunks. The first
  /// error (a failed completion mapped to its cause, or a protocol violation by the peer) is
  /// returned by this and every later call.
  Status progress();
  /// For waits without traffic: posts a liveness probe when none is outstanding, so that a dead
  /// peer surfaces as a completion error (after NCCL_IB_TIMEOUT x NCCL_IB_RETRY_CNT) from a later
  /// progress(). Returns the sticky error, if any.
  Status checkPeer();

  uint64_t sendsDone() const { return sendsDone_; }
  uint64_t recvsDone() const { return recvsDone_; }
  uint64_t bytesSent() const { return bytesSent_; }
  uint64_t bytesReceived() const { return bytesReceived_; }
  bool hasPendingSends() const { return !sends_.empty(); }
  bool hasPendingRecvs() const { return !recvs_.empty(); }
  /// Chunks written but not yet credited by the peer (at most slots).
  uint64_t chunksUncredited() const { return chunksPosted_ - peerConsumed_; }
  uint64_t creditMessagesSent() const { return creditMessages_; }
  uint64_t probesSent() const { return probes_; }

 private:
  struct SendOp {
    const std::byte* src;
    size_t bytes;
    size_t postedBytes = 0;
    size_t completedBytes = 0;
    Lease lease;
  };
  struct RecvOp {
    RecvSpec spec;
    size_t doneBytes = 0;
  };
  struct InFlight {
    uint64_t msgSeq;
    uint32_t bytes;
  };

  Status poll();
  Status handle(const WireCompletion& wc);
  Status deliver();
  Status returnCredits();
  Status pushSends();
  void retireSends();
  Status protocolError(std::string what) const;

  Wire& wire_;
  ChannelConfig cfg_;
  std::deque<SendOp> sends_;  // front has sequence sendsDone_ + 1
  std::deque<RecvOp> recvs_;  // front has sequence recvsDone_ + 1
  std::deque<InFlight> inFlight_;
  std::deque<uint32_t> arrivals_;  // byte counts of arrived, unconsumed chunks, in slot order
  uint64_t sendsDone_ = 0, recvsDone_ = 0;
  uint64_t sendsPosted_ = 0, recvsPosted_ = 0;
  uint64_t chunksPosted_ = 0, chunksCompleted_ = 0;  // our data writes
  uint64_t peerConsumed_ = 0;                        // credits the peer returned
  uint64_t chunksArrived_ = 0, chunksConsumed_ = 0;  // the peer's data writes
  uint64_t creditsSent_ = 0, creditMessages_ = 0;
  uint64_t recvWrs_ = 0;
  uint32_t sqOutstanding_ = 0;
  bool probeOutstanding_ = false;
  uint64_t probes_ = 0;
  uint64_t bytesSent_ = 0, bytesReceived_ = 0;
  Status error_;
};

}  // namespace tutti::transport::ib
