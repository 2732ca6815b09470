// File: topology/world.cc
// The job's topology from the ranks' summaries: each rank sends its host identity, NUMA node and
// CUDA device, and the lowest rank of each host sends that host's description, so that a job of
// many ranks per host does not move the same host description many times.
#include <map>
#include <nlohmann/json.hpp>

#include "topology/topology.h"

namespace tutti::topo {

std::string rankSummary(const Topology& local, const std::string& hostId, bool withHost,
                        int numaNode, int cudaDevice) {
  nlohmann::ordered_json j;
  j["host_id"] = hostId;
  j["numa_node"] = numaNode;
  j["cuda_device"] = cudaDevice;
  if (withHost && !local.hosts.empty()) {
    Topology one;
    one.hosts.push_back(local.hosts[0]);
    j["host"] = nlohmann::ordered_json::parse(toJson(one))["hosts"][0];
  }
  return j.dump();
}

Result<Topology> assemble(const std::vector<std::string>& summaries) {
  Topology world;
  std::map<std::string, int> hostIndex;
  std::vector<int> cudaOf;
  for (size_t r = 0; r < summaries.size(); ++r) {
    auto j = nlohmann::json::parse(summaries[r], nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("host_id") ||
        !j["host_id"].is_string() || !j.value("numa_node", nlohmann::json()).is_number_integer() ||
        !j.value("cuda_device", nlohmann::json()).is_number_integer())
      return invalidArgument("topology: malformed summary from rank {}", r);
    const std::string id = j["host_id"].get<std::string>();
    auto [it, added] = hostIndex.emplace(id, static_cast<int>(world.hosts.size()));
    if (added) {
      if (!j.contains("host"))
        return invalidArgument("topology: rank {} is the first rank of its host but sent no host "
                               "description", r);
      nlohmann::ordered_json one;
      one["version"] = kFormatVersion;
      one["hosts"] = nlohmann::ordered_json::array({j["host"]});
      auto parsed = fromJson(one.dump());
      if (!parsed.isOk())
        return invalidArgument("topology: rank {}: {}", r, parsed.status().message());
      world.hosts.push_back(std::move(parsed.value().hosts[0]));
    }
    RankPlace p;
    p.host = it->second;
    p.numaNode = j["numa_node"].get<int>();
    const int cuda = j["cuda_device"].get<int>();
    const auto& gpus = world.hosts[p.host].gpus;
    for (size_t g = 0; g < gpus.size(); ++g)
      if (cuda >= 0 && gpus[g].cudaDevice == cuda) p.gpu = static_cast<int>(g);
    world.ranks.push_back(p);
  }
  return world;
}

}  // namespace tutti::topo
