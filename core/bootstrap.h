// File: core/bootstrap.h
// Bootstrap per DESIGN section 5: a UniqueId carries the root's socket address and a random
// 64-bit secret. Every rank dials the root, presents the secret and its own ring-listener address,
// and receives the address table; the ranks then form a socket ring over which the bootstrap
// allgather and barrier run. Every wait has a deadline and fails naming the ranks that did not
// arrive.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/bootstrap_wire.h"
#include "core/socket.h"
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

  /// After init: tells both ring neighbours, once and without blocking more than 200 ms, that this
  /// communicator failed (they forward it), so that ranks that do not talk to the failed one learn
  /// why. Safe from any thread; must not run concurrently with allGather/barrier.
  void sendNotice(const wire::Notice& n);
  /// A notice from a ring neighbour, waiting up to `wait` (0: only look). A neighbour that closed
  /// or sent garbage is no longer watched (logged). Called by the thread executing collectives.
  std::optional<wire::Notice> pollNotice(std::chrono::milliseconds wait);

 private:
  int rank_ = 0, nranks_ = 1;
  std::chrono::milliseconds timeout_{0};
  net::SockAddr localAddr_;
  net::Fd next_, prev_;
  std::mutex noticeMu_;
  bool noticeSent_ = false;
  bool ringOpen_[2] = {true, true};  // next_, prev_ still watched for notices
};

}  // namespace tutti::bootstrap
