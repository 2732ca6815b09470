// File: core/peers.cc
// A communicator's peers: rendezvous, identities, transports, connections (core/peers.h).
#include "core/peers.h"

#include <unistd.h>

#include <algorithm>
#include <set>

#include "base/env.h"
#include "base/host_id.h"
#include "base/log.h"
#include "base/socket.h"
#include "base/strings.h"

namespace tutti::detail {

namespace {
TUTTI_PARAM_STRING(kTransports, "TUTTI_TRANSPORTS", nullptr, "CORE", "",
                   "comma-separated transports allowed (shm,tcp); empty = all");
}  // namespace

Result<std::unique_ptr<PeerSet>> PeerSet::connect(const bootstrap::IdData& id, int rank,
                                                  int nranks, const Options& options,
                                                  std::chrono::milliseconds bootTimeout) {
  auto set = std::unique_ptr<PeerSet>(new PeerSet());
  TUTTI_TRY_ASSIGN(set->boot_, bootstrap::Bootstrap::join(id, rank, nranks, bootTimeout));

  // Who is where.
  TUTTI_TRY_ASSIGN(auto infos, set->boot_->allGather(bootstrap::wire::encodePeerInfo(
                                    getpid(), hostId(), hostName())));
  set->peers_.resize(nranks);
  for (int r = 0; r < nranks; ++r) {
    TUTTI_TRY_ASSIGN(set->peers_[r], bootstrap::wire::parsePeerInfo(infos[r], r));
  }
  bool allLocal = true;
  for (const auto& p : set->peers_)
    allLocal = allLocal && p.hostId == set->peers_[rank].hostId;

  // Which transports are allowed, in priority order.
  std::string allowedText = options.transports.empty() ? kTransports.get() : options.transports;
  std::set<std::string> allowed;
  auto& reg = transport::transportRegistry();
  if (!trim(allowedText).empty()) {
    for (auto& name : split(allowedText, ',')) {
      std::string n = trim(name);
      if (n.empty()) continue;
      bool known = std::any_of(reg.begin(), reg.end(), [&](auto& e) { return e.name == n; });
      if (!known) {
        std::string names;
        for (auto& e : reg) names += (names.empty() ? "" : ", ") + std::string(e.name);
        return invalidArgument("TUTTI_TRANSPORTS: unknown transport '{}' (known: {})", n, names);
      }
      allowed.insert(n);
    }
  }
  std::vector<const transport::TransportEntry*> entries;
  for (auto& e : reg)
    if (allowed.empty() || allowed.count(std::string(e.name)) || e.name == "self")
      entries.push_back(&e);
  std::sort(entries.begin(), entries.end(),
            [](auto* a, auto* b) { return a->priority > b->priority; });

  transport::Context ctx;
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.secret = id.secret;
  ctx.peers = set->peers_;
  ctx.connectTimeoutMs = bootTimeout.count();
  ctx.loopbackOnly = allLocal && net::socketIfnameSpec().empty();

  // Set up every allowed transport; one that fails here is skipped (peers see an empty blob),
  // except on a SystemError: a resource the user must fix (/dev/shm full) fails init.
  std::vector<std::string> myBlobs;
  for (auto* e : entries) {
    set->transports_.push_back(e->make());
    std::string b;
    if (std::string why = set->transports_.back()->unavailableReason(ctx); !why.empty()) {
      TUTTI_LOG_INFO(Subsys::kInit, "init: transport {} not offered on rank {}: {}", e->name,
                     rank, why);
    } else if (auto blob = set->transports_.back()->setup(ctx); blob.isOk()) {
      b.assign(reinterpret_cast<const char*>(blob->data()), blob->size());
      if (b.empty()) b = "-";  // available, nothing to say
    } else if (blob.status().code() == Code::kSystemError) {
      return Status(blob.status().code(), fmt::format("init: transport {} failed on rank {}: {}",
                                                      e->name, rank, blob.status().message()));
    } else {
      TUTTI_LOG_WARN(Subsys::kInit, "init: transport {} unavailable on rank {}: {}", e->name,
                     rank, blob.status().message());
    }
    myBlobs.push_back(std::move(b));
  }
  TUTTI_TRY_ASSIGN(auto allBlobs, set->boot_->allGather(bootstrap::wire::encodeBlobs(myBlobs)));
  std::vector<std::vector<std::string>> blobs(nranks);
  for (int r = 0; r < nranks; ++r) {
    auto parsed = bootstrap::wire::parseBlobs(allBlobs[r]);
    if (!parsed.isOk())
      return Status(parsed.status().code(),
                    fmt::format("{} (from rank {})", parsed.status().message(), r));
    blobs[r] = std::move(parsed).value();
  }
  auto blobOf = [&](int r, size_t t) -> std::string {
    return t < blobs[r].size() ? blobs[r][t] : std::string();
  };

  set->conns_.resize(nranks);
  set->connTransport_.resize(nranks);
  for (int p = 0; p < nranks; ++p) {
    for (size_t t = 0; t < set->transports_.size(); ++t) {
      std::string mine = blobOf(rank, t), theirs = blobOf(p, t);
      if (mine.empty() || theirs.empty() || !set->transports_[t]->canConnect(ctx, p)) continue;
      if (theirs == "-") theirs.clear();
      auto conn = set->transports_[t]->connect(
          ctx, p, std::span<const std::byte>(reinterpret_cast<const std::byte*>(theirs.data()),
                                             theirs.size()));
      if (!conn.isOk()) return conn.status();
      set->conns_[p] = std::move(conn).value();
      set->connTransport_[p] = std::string(set->transports_[t]->name());
      break;
    }
    if (!set->conns_[p])
      return invalidUsage("init: no allowed transport reaches rank {} (host {}) from rank {} "
                          "(TUTTI_TRANSPORTS='{}')",
                          p, set->peers_[p].hostname, rank, allowedText);
  }
  TUTTI_TRY(set->boot_->barrier());
  for (auto& t : set->transports_) t->finishSetup();
  return set;
}

transport::Transport* PeerSet::doorbellOwner() const {
  transport::Transport* owner = nullptr;
  for (const auto& t : transports_)
    if (t->doorbell()) owner = t.get();
  return owner;
}

}  // namespace tutti::detail
