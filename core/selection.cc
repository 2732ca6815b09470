// File: core/selection.cc
// How a communicator chooses algorithms (core/selection.h).
#include "core/selection.h"

#include <algorithm>

#include "algorithms/link_model.h"
#include "base/env.h"
#include "base/host_id.h"
#include "base/log.h"
#include "topology/topology.h"

namespace tutti::detail {

namespace {

TUTTI_PARAM_STRING(kAlgo, "TUTTI_ALGO", nullptr, "ALGO", "",
                   "algorithm override, NCCL_ALGO syntax with our names: 'ring' for every "
                   "collective that has it, 'allreduce:ring,one_shot;allgather:^bruck'");
TUTTI_PARAM_STRING(kNcclAlgo, "NCCL_ALGO", nullptr, "ALGO", "",
                   "NCCL's algorithm override (Ring, Tree, PAT, ...; docs/TOPOLOGY.md); "
                   "TUTTI_ALGO wins for a collective both name");
TUTTI_PARAM_STRING(kLinkFile, "TUTTI_LINK_FILE", nullptr, "TOPO", "",
                   "JSON link-model overrides {\"links\": {\"shm\": {\"latency_us\": ..}}}");
TUTTI_PARAM_INT(kStreamBytes, "TUTTI_STREAM_BYTES", nullptr, "CORE", -1,
                "output bytes per rank from which local copies (every collective) and an "
                "allreduce's shm receives that are the last write of their range use "
                "non-temporal stores (-1: the host's last-level cache divided by the ranks on it; "
                "0: never)");

}  // namespace

Status Selection::init(PeerSet& net, int rank, int nranks,
                       const std::function<Status(const std::vector<int>&)>& calibrate) {
  // Local topology: TUTTI_TOPO_FILE or the probe. A file the user named must load; a probe
  // failure only costs the model its hardware details.
  topo::Topology local;
  auto loaded = topo::local();
  if (loaded.isOk()) {
    local = loaded.value();
  } else if (!env::get({"TUTTI_TOPO_FILE"}).value_or("").empty()) {
    return loaded.status();
  } else {
    TUTTI_LOG_WARN(Subsys::kTopo, "init: topology probe failed, using a bare host: {}",
                   loaded.status().message());
    local.hosts.push_back(topo::Host{.name = hostName()});
  }
  std::vector<int> hostOfRank(nranks);  // each rank's host, named by its first rank
  for (int r = 0; r < nranks; ++r)
    for (int q = 0; q <= r; ++q)
      if (net.peers()[q].hostId == net.peers()[r].hostId) {
        hostOfRank[r] = q;
        break;
      }
  const int firstOnHost = hostOfRank[rank];
  {
    // The streaming size: once the outputs of this host's ranks fill its last-level cache, a
    // write whose range nothing reads back only costs a read-for-ownership by being cached.
    const long set = kStreamBytes.get();
    // This rank's host: the probe's only host, or where TUTTI_TOPO_FILE places this rank.
    size_t host = 0;
    if (local.ranks.size() == static_cast<size_t>(nranks))
      host = static_cast<size_t>(std::max(local.ranks[rank].host, 0));
    size_t llc = 0;
    int level = 0;
    if (host < local.hosts.size())
      for (const topo::Cache& c : local.hosts[host].caches)
        if (c.type != "instruction" && c.level > level) {
          level = c.level;
          llc = c.sizeBytes * static_cast<size_t>(std::max(c.count, 1));
        }
    const auto onHost = std::count(hostOfRank.begin(), hostOfRank.end(), firstOnHost);
    streamBytes_ = set >= 0 ? static_cast<size_t>(set) : llc / static_cast<size_t>(onHost);
  }
  // Always exchange, so that every rank makes the same bootstrap calls whatever its files say.
  TUTTI_TRY_ASSIGN(auto summaries,
                   net.boot().allGather(topo::rankSummary(local, net.peers()[rank].hostId,
                                                      firstOnHost == rank,
                                                      topo::currentNumaNode(local), -1)));
  topo::Topology world;
  if (local.ranks.size() == static_cast<size_t>(nranks)) {
    world = local;  // the file places this job's ranks: emulate that machine
    TUTTI_LOG_INFO(Subsys::kTopo, "init: using TUTTI_TOPO_FILE's placement of {} ranks on {} hosts",
                   nranks, world.hosts.size());
  } else {
    if (!local.ranks.empty())
      TUTTI_LOG_WARN(Subsys::kTopo, "init: TUTTI_TOPO_FILE places {} ranks, this job has {}: "
                     "using the job's own placement", local.ranks.size(), nranks);
    TUTTI_TRY_ASSIGN(world, topo::assemble(summaries));
    world.links = local.links;
    world.reduceGBps = local.reduceGBps;
    world.copyGBps = local.copyGBps;
  }
  model_ = algo::linkModelFor(world);
  // Ranks of one host normally meet over shm; when a transport list (TUTTI_TRANSPORTS=tcp) makes
  // them meet over the network, the model must cost those pairs as that network. Every rank must
  // see the same model, so each says how its own host-mates are connected and all combine it.
  {
    std::string mine;
    for (int p = 0; p < nranks; ++p) {
      if (p == rank || hostOfRank[p] != hostOfRank[rank]) continue;
      if (mine.empty()) mine = net.transportName(p);
      else if (mine != net.transportName(p)) mine = "mixed";
    }
    TUTTI_TRY_ASSIGN(auto all, net.boot().allGather(mine));
    std::string onHost;
    for (const auto& t : all) {
      if (t.empty()) continue;
      onHost = onHost.empty() || onHost == t ? t : "mixed";
    }
    onHostTransport_ = onHost;
    if (auto cls = algo::parseLinkClass(onHost); cls && *cls != algo::LinkClass::kShm) {
      algo::useNetworkOnHost(model_, *cls, world.hosts.size() == 1);
      TUTTI_LOG_INFO(Subsys::kTuning, "init: ranks on one host are joined by {}: the model costs "
                     "them as {}", onHost, algo::linkClassName(*cls));
    }
  }
  TUTTI_TRY(calibrate(hostOfRank));  // refines model_ (CommImpl::calibrate)
  if (const std::string path = kLinkFile.get(); !path.empty())
    TUTTI_TRY(algo::applyLinkFile(path, model_));
  hostOf_ = algo::hierarchyGroups(world);

  TUTTI_TRY_ASSIGN(envAlgo_, algo::parseAlgoOverrides(kAlgo.get(), "TUTTI_ALGO", true));
  std::vector<std::string> ignored;
  TUTTI_TRY_ASSIGN(auto nccl, algo::parseAlgoOverrides(kNcclAlgo.get(), "NCCL_ALGO", false,
                                                       &ignored));
  for (auto& [coll, rule] : nccl) envAlgo_.emplace(coll, std::move(rule));  // TUTTI_ALGO first
  if (!ignored.empty() && rank == 0)
    TUTTI_LOG_WARN(Subsys::kTuning, "NCCL_ALGO: no tutti counterpart for {} (ignored)",
                   fmt::join(ignored, ", "));

  if (log::enabled(LogLevel::kInfo, Subsys::kTuning)) {
    std::string links;
    for (int c = 0; c < algo::kNumLinkClasses; ++c)
      links += fmt::format(" {}={}us/{}GB/s", algo::linkClassName(static_cast<algo::LinkClass>(c)),
                           model_.links[c].latencyUs, model_.links[c].bandwidthGBps);
    TUTTI_LOG_INFO(Subsys::kTuning, "init: {} hosts, hierarchy {}; link model{} reduce={}GB/s "
                   "copy={}GB/s", world.hosts.size(), hostOf_.empty() ? "none" : "yes", links,
                   model_.reduceGBps, model_.copyGBps);
  }
  return Status::ok();
}

Result<algo::Decision> Selection::decide(const algo::CollShape& callShape, const char* api) {
  // Every rank must pick the same algorithm, so the choice may depend only on what all ranks
  // pass alike. Ranks may differ in being in place (NCCL allows it, and a non-root rank of a
  // rooted call has no meaningful in-place flag), so the choice is made for rank 0 out of place.
  algo::CollShape shape = callShape;
  shape.rank = 0;
  shape.inPlace = false;
  std::lock_guard<std::mutex> lock(mu_);
  const auto forced = forced_.find(shape.coll);
  DecisionKey key{static_cast<int>(shape.coll), shape.count, static_cast<int>(shape.dtype),
                  static_cast<int>(shape.op), shape.root,
                  forced == forced_.end() ? std::string() : forced->second};
  if (auto it = decisions_.find(key); it != decisions_.end()) return it->second;
  algo::SelectOptions opts;
  if (forced != forced_.end()) {
    opts.forced = forced->second;
    opts.forcedSource = "setAlgorithm / schedule file";
  }
  opts.costAll = log::enabled(LogLevel::kInfo, Subsys::kTuning);
  auto d = algo::select(shape, model_, envAlgo_, opts);
  if (!d.isOk())
    return Status(d.status().code(), fmt::format("{}: {}", api, d.status().message()));
  TUTTI_LOG_INFO(Subsys::kTuning, "{}: {}", api, algo::describe(shape, d.value()));
  if (decisions_.size() >= 512) decisions_.clear();  // bounded, like the plan cache
  decisions_.emplace(std::move(key), d.value());
  return d;
}

void Selection::setOverride(Coll coll, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (name.empty()) forced_.erase(coll);
  else forced_[coll] = name;
}

void Selection::forgetDecisions() {
  std::lock_guard<std::mutex> lock(mu_);
  decisions_.clear();
}

}  // namespace tutti::detail
