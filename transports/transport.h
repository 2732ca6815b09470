// File: transports/transport.h
// The transport interface: a Transport makes Connections to peers; a Connection moves ordered
// byte messages to and from one peer. Messages are matched purely by order per direction: the
// k-th postSend on rank A towards B is received by the k-th postRecv on B from A, and both sides
// give the same byte count (the schedule verifier guarantees it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kernels/reduce.h"

namespace tutti::transport {

/// What a rank tells its peers about itself through the bootstrap allgather.
struct PeerInfo {
  int rank = -1;
  int pid = 0;
  std::string hostId;    ///< hostname + boot id + network namespace (or TUTTI_HOSTID)
  std::string hostname;  ///< for messages
};

/// Facts a transport may need when it is set up. Same values on every rank except `rank`.
struct Context {
  int rank = -1;
  int nranks = 0;
  uint64_t secret = 0;                  ///< from the UniqueId; presented on every new socket
  std::span<const PeerInfo> peers;      ///< indexed by rank, all ranks
  int64_t connectTimeoutMs = 120000;
  bool loopbackOnly = false;            ///< every rank on one host: bind and dial 127.0.0.1
};

/// How a receive treats the incoming bytes.
struct RecvSpec {
  void* dst = nullptr;            ///< where the result goes (`bytes` bytes)
  size_t bytes = 0;
  /// nullptr: dst = incoming. Otherwise dst = src op incoming, element-wise, where src may be the
  /// same pointer as dst (accumulate) and `reduce` is the (dtype, op) kernel.
  const void* src = nullptr;
  kernels::Reduce2Fn reduce = nullptr;
  size_t elemBytes = 1;           ///< reduce granularity; bytes is a multiple of it
  /// A hint for a copy (reduce == nullptr): the call is larger than the host's last-level cache
  /// and nothing reads dst back during it (algo::lastTouchWrites), so the transport may write
  /// dst with non-temporal stores, skipping the read-for-ownership of every destination line and
  /// keeping the transport's own buffers in cache. Ignoring it is always correct.
  bool streaming = false;
};

/// One direction-pair channel to one peer. Not thread-safe: one thread (the one executing the
/// communicator's plans) calls every method. No method blocks: postX only queues; progress()
/// moves as much data as it can right now and returns.
class Connection {
 public:
  virtual ~Connection() = default;

  /// Queues a message of `bytes` bytes read from `src`; returns its sequence number (1, 2, ...).
  /// `src` must stay valid and unchanged until sendsDone() >= that number. Never fails: errors
  /// surface from progress().
  virtual uint64_t postSend(const void* src, size_t bytes) = 0;
  /// Queues a receive; returns its sequence number (1, 2, ...). Buffers must stay valid until
  /// recvsDone() >= that number.
  virtual uint64_t postRecv(const RecvSpec& spec) = 0;

  /// Moves data without blocking. RemoteError (naming the peer rank and host) when the peer
  /// closed or failed; the connection is then unusable.
  virtual Status progress() = 0;

  /// Number of messages completely handed over / received so far (monotonic).
  virtual uint64_t sendsDone() const = 0;
  virtual uint64_t recvsDone() const = 0;
  bool idle() const { return sendsDone() == sendsPosted_ && recvsDone() == recvsPosted_; }

  /// For the engine's idle phase: a file descriptor to poll (and the events), or -1 when the
  /// connection signals through the transport's futex doorbell instead.
  virtual int pollFd() const { return -1; }
  virtual short pollEvents() const { return 0; }
  /// Cheap liveness check used while idle (e.g. the peer process still exists). RemoteError when
  /// the peer is gone.
  virtual Status checkPeer() { return Status::ok(); }
  /// A probe for receives from any source: whether bytes of a message that this side has not
  /// posted a receive for have arrived from the peer. Nothing is consumed: the next postRecv
  /// receives them. Meaningful only while every posted receive is done; a zero-byte message moves
  /// nothing and is never seen. InvalidUsage where the transport cannot tell (the default);
  /// RemoteError when the peer closed.
  virtual Result<bool> incomingPending() {
    return invalidUsage("this transport cannot probe for incoming messages (a receive from any "
                        "source needs shm or tcp)");
  }

  /// Bytes moved so far in each direction (for hang reports and stats).
  uint64_t bytesSent = 0;
  uint64_t bytesReceived = 0;

 protected:
  uint64_t sendsPosted_ = 0;
  uint64_t recvsPosted_ = 0;
};

/// A way to reach peers. Set up once per communicator (setup), then connect() per peer.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;

  /// Why this transport cannot run in this process (its library or device is missing, or the
  /// environment disables it); empty when it can. Called once before setup(): a non-empty answer
  /// skips the transport with an INFO log, and peers see it as unavailable on this rank.
  virtual std::string unavailableReason(const Context&) { return {}; }

  /// Prepares this rank's side (listening socket, shared-memory segment). Returns the opaque
  /// address blob the peers need; it is exchanged through the bootstrap allgather.
  virtual Result<std::vector<std::byte>> setup(const Context& ctx) = 0;

  /// Whether this transport can reach `peer` from this rank (same host for shm, etc.).
  virtual bool canConnect(const Context& ctx, int peer) const = 0;

  /// Connects to `peer` given its blob. Called by the communicator for every selected peer in
  /// increasing rank order, on every rank, after setup() returned on all ranks (there is a
  /// bootstrap barrier between). May block up to ctx.connectTimeoutMs; Timeout names the peer.
  virtual Result<std::unique_ptr<Connection>> connect(const Context& ctx, int peer,
                                                      std::span<const std::byte> peerBlob) = 0;

  /// After all connects: releases what only setup needed (listening socket, shm names).
  virtual void finishSetup() {}

  /// Idle-phase support: a transport with a futex doorbell returns it; the engine sleeps on it
  /// when every busy connection uses it. nullptr when unused.
  virtual uint32_t* doorbell() { return nullptr; }
  /// Announces that this rank is about to sleep on / has woken from its doorbell, so that peers
  /// know whether to issue a futex wake.
  virtual void setSleeping(bool) {}
};

/// Registry: transports self-register with TUTTI_REGISTER_TRANSPORT(name, priority, factory).
struct TransportEntry {
  std::string_view name;
  int priority;  ///< higher first: self 100, shm 80, ib 50, tcp 10
  std::function<std::unique_ptr<Transport>()> make;
};
std::vector<TransportEntry>& transportRegistry();
struct TransportRegistrar {
  explicit TransportRegistrar(TransportEntry e) { transportRegistry().push_back(std::move(e)); }
};

}  // namespace tutti::transport

#define TUTTI_TRANSPORT_CONCAT_(a, b) a##b
#define TUTTI_TRANSPORT_CONCAT(a, b) TUTTI_TRANSPORT_CONCAT_(a, b)
#define TUTTI_REGISTER_TRANSPORT(...)                                                     \
  static ::tutti::transport::TransportRegistrar TUTTI_TRANSPORT_CONCAT(tutti_transport_, \
                                                                      __LINE__)(              \
      ::tutti::transport::TransportEntry __VA_ARGS__)
