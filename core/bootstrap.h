// File: core/bootstrap.h
// Bootstrap per DESIGN section 5: a UniqueId carries the root's socket address and a random
// 64-bit secret. Every rank dials the root, presents the secret and its own ring-listener address,
// and receives the address table; the ranks then form a socket ring over which the bootstrap
// allgather and barrier run. Every wait has a deadline and fails naming the ranks that did not
// arrive.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/socket.h"
#include "core/bootstrap_wire.h"
#include <tutti/tutti.hpp>

namespace tutti::bootstrap {

/// The decoded content of a UniqueId.
struct IdData {
  uint64_t secret = 0;
  net::SockAddr root;
};
UniqueId encodeId(const IdData& d);
/// InvalidArgument when the bytes are not a tutti UniqueId (wrong magic).
Result<IdData> decodeId(const UniqueId& id);

/// A fresh random secret (getrandom).
uint64_t randomSecret();

/// Binds `addr` and serves one rendezvous in a detached background thread until all ranks have
/// joined or `timeout` passed (then the joined ranks get an error naming the missing ones).
/// Returns the bound address (with the real port when addr's port was 0).
Result<net::SockAddr> startRoot(const net::SockAddr& addr, uint64_t secret,
                                std::chrono::milliseconds timeout);

/// This rank's end of the bootstrap ring. Not thread-safe; used by one thread at a time.
class Bootstrap {
 public:
  /// Joins the rendezvous; blocks until every rank has joined and the ring is connected.
  static Result<std::unique_ptr<Bootstrap>> join(const IdData& id, int rank, int nranks,
                                                 std::chrono::milliseconds timeout);

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  /// The local address this rank used to reach the root (its "outward" interface).
  const net::SockAddr& localAddr() const { return localAddr_; }
  /// Every rank's `mine`, indexed by rank. Collective.
  Result<std::vector<std::string>> allGather(const std::string& mine);
  /// Returns when every rank has entered. Collective.
  Status barrier();

  /// Point-to-point messages that need no other rank: each goes over a fresh connection to the
  /// receiver's bootstrap listener (kept open for the communicator's life; the address came from
  /// the root's table), authenticated by the id's secret. They work after another rank died or a
  /// collective failed, which is what ncclCommShrink needs. `tag` tells messages apart; a message
  /// that arrives before its recvFrom is kept (at most 64). Thread-safe (one mutex), independent
  /// of allGather/barrier/notices. The body is at most wire::kMaxP2pBytes (InvalidArgument).
  /// sendTo: connects (retrying until `timeout`), sends, closes; it does not wait for the
  /// receiver to call recvFrom. Timeout/RemoteError naming the peer.
  Status sendTo(int peer, uint64_t tag, const std::string& body, std::chrono::milliseconds timeout);
  /// recvFrom: the body of the message (from `peer`, `tag`); Timeout after `timeout` naming them.
  Result<std::string> recvFrom(int peer, uint64_t tag, std::chrono::milliseconds timeout);

  /// After init: tells both ring neighbours, once and without blocking more than 200 ms, that this
  /// communicator failed (they forward it), so that ranks that do not talk to the failed one learn
  /// why. Safe from any thread; must not run concurrently with allGather/barrier.
  void sendNotice(const wire::Notice& n);
  /// A notice from a ring neighbour, waiting up to `wait` (0: only look). A neighbour that closed
  /// or sent garbage is no longer watched (logged). A message from the previous rank that is not
  /// a notice is the first step of an allGather or barrier that rank has already entered (it left
  /// the last collective sooner): it is kept for that allGather, never dropped. Called by the
  /// thread executing collectives.
  std::optional<wire::Notice> pollNotice(std::chrono::milliseconds wait);

 private:
  int rank_ = 0, nranks_ = 1;
  std::chrono::milliseconds timeout_{0};
  net::SockAddr localAddr_;
  net::Fd next_, prev_;
  net::Fd listen_;                   // the ring listener, kept for point-to-point messages
  std::vector<net::SockAddr> table_;  // every rank's listener
  uint64_t secret_ = 0;
  std::mutex p2pMu_;
  std::map<std::pair<int, uint64_t>, std::string> stash_;  // (from, tag) -> body
  std::mutex noticeMu_;
  bool noticeSent_ = false;
  bool ringOpen_[2] = {true, true};  // next_, prev_ still watched for notices
  // allGather messages from prev_ that pollNotice read while this rank was still in a collective,
  // in arrival order; allGather takes them before reading prev_ again.
  std::mutex ringMu_;
  std::deque<std::string> ringEarly_;
};

}  // namespace tutti::bootstrap
