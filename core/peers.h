// File: core/peers.h
// PeerSet: how this rank reaches every other rank of a communicator. Creating one joins the
// rendezvous (the bootstrap ring), learns each rank's process and host, sets up every allowed
// transport (TUTTI_TRANSPORTS or Options::transports, in priority order: a transport that cannot
// run here is skipped, except when a resource the user must fix is missing) and connects to
// every peer with the first transport both sides offer. Owned by the communicator; its
// connections are used by the thread that executes the communicator's calls, its bootstrap by
// whoever needs the ring (selection, calibration, failure notices, ncclCommShrink).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/bootstrap.h"
#include "transports/transport.h"
#include <tutti/tutti.hpp>

namespace tutti::detail {

class PeerSet {
 public:
  /// Collective over the `nranks` ranks of `id`. Errors: Timeout naming the ranks that did not
  /// arrive; InvalidArgument for an unknown transport name; InvalidUsage when no allowed
  /// transport reaches some rank (naming it and its host); SystemError (a transport's resource,
  /// e.g. /dev/shm full, or sockets).
  static Result<std::unique_ptr<PeerSet>> connect(const bootstrap::IdData& id, int rank,
                                                  int nranks, const Options& options,
                                                  std::chrono::milliseconds bootTimeout);

  bootstrap::Bootstrap& boot() { return *boot_; }
  /// Each rank's process and host, by rank.
  const std::vector<transport::PeerInfo>& peers() const { return peers_; }
  /// The connection to `peer` (self included), by rank.
  const std::vector<std::unique_ptr<transport::Connection>>& conns() const { return conns_; }
  /// The transport that reaches `peer` ("self", "shm", "tcp", ...).
  const std::string& transportName(int peer) const { return connTransport_[peer]; }
  /// The transport whose doorbell a waiting rank may sleep on, or nullptr.
  transport::Transport* doorbellOwner() const;

 private:
  PeerSet() = default;
  std::unique_ptr<bootstrap::Bootstrap> boot_;
  std::vector<transport::PeerInfo> peers_;
  std::vector<std::unique_ptr<transport::Transport>> transports_;
  std::vector<std::unique_ptr<transport::Connection>> conns_;  // by peer
  std::vector<std::string> connTransport_;                     // by peer
};

}  // namespace tutti::detail
