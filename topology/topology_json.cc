// File: topology/topology_json.cc
// Topology <-> JSON (nlohmann-json, keys in a fixed order so that dump -> load -> dump is
// byte-identical), the file loader, and the rank grouping the selector uses. Parsing never throws:
// every key is type-checked and the first problem is reported with its JSON path.
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "topology/topology.h"

namespace tutti::topo {

using Json = nlohmann::ordered_json;

namespace {

Json linkJson(const LinkSpec& l) {
  Json j;
  j["latency_us"] = l.latencyUs;
  j["bandwidth_gbps"] = l.bandwidthGBps;
  if (l.overheadUs >= 0) j["overhead_us"] = l.overheadUs;
  return j;
}

Json hostJson(const Host& h) {
  Json j;
  j["name"] = h.name;
  if (!h.machine.empty()) j["machine"] = h.machine;
  j["cores"] = h.cores;
  j["pus"] = h.pus;
  j["packages"] = Json::array();
  for (const Package& p : h.packages)
    j["packages"].push_back({{"os_index", p.osIndex}, {"cores", p.cores}, {"pus", p.pus}});
  j["numa_nodes"] = Json::array();
  for (const NumaNode& n : h.numaNodes)
    j["numa_nodes"].push_back({{"os_index", n.osIndex},
                               {"package", n.package},
                               {"memory_bytes", n.memoryBytes},
                               {"cpus", n.cpus}});
  j["caches"] = Json::array();
  for (const Cache& c : h.caches)
    j["caches"].push_back(
        {{"level", c.level}, {"type", c.type}, {"size_bytes", c.sizeBytes}, {"count", c.count}});
  j["gpus"] = Json::array();
  for (const Gpu& g : h.gpus) {
    Json links = Json::array();
    for (const GpuLink& l : g.links)
      links.push_back({{"peer_bus_id", l.peerBusId}, {"kind", l.kind}, {"count", l.count}});
    j["gpus"].push_back({{"bus_id", g.busId},
                         {"name", g.name},
                         {"numa_node", g.numaNode},
                         {"cuda_device", g.cudaDevice},
                         {"pcie_gbps", g.pcieGBps},
                         {"links", links}});
  }
  j["nics"] = Json::array();
  for (const Nic& n : h.nics)
    j["nics"].push_back({{"name", n.name},
                         {"type", n.type},
                         {"bus_id", n.busId},
                         {"numa_node", n.numaNode},
                         {"speed_gbps", n.speedGbps}});
  j["pci"] = Json::array();
  for (const PciDevice& p : h.pci)
    j["pci"].push_back({{"bus_id", p.busId},
                        {"class", p.className},
                        {"vendor_id", p.vendorId},
                        {"device_id", p.deviceId},
                        {"numa_node", p.numaNode}});
  return j;
}

// Type-checked reads; the first failure is kept with its JSON path and later reads do nothing.
class Reader {
 public:
  Status status() const { return error_; }
  bool ok() const { return error_.isOk(); }

  const Json* member(const Json& obj, const std::string& path, const char* key, bool required) {
    if (!ok()) return nullptr;
    if (!obj.is_object()) return fail(path, "expected an object");
    auto it = obj.find(key);
    if (it == obj.end()) return required ? fail(path + "." + key, "missing") : nullptr;
    return &*it;
  }
  template <typename T>
  void get(const Json& obj, const std::string& path, const char* key, T& out,
           bool required = true) {
    const Json* v = member(obj, path, key, required);
    if (!v) return;
    const std::string p = path + "." + key;
    if constexpr (std::is_same_v<T, std::string>) {
      if (!v->is_string()) return (void)fail(p, "expected a string");
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!v->is_number()) return (void)fail(p, "expected a number");
    } else if constexpr (std::is_unsigned_v<T>) {
      if (!v->is_number_unsigned()) return (void)fail(p, "expected a non-negative integer");
      if (v->get<uint64_t>() > std::numeric_limits<T>::max())
        return (void)fail(p, "out of range");
    } else {
      if (!v->is_number_integer()) return (void)fail(p, "expected an integer");
      const int64_t x = v->get<int64_t>();
      if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max())
        return (void)fail(p, "out of range");
    }
    out = v->get<T>();
  }
  // Calls fn(element, elementPath) for each element of the array obj[key].
  template <typename Fn>
  void each(const Json& obj, const std::string& path, const char* key, bool required, Fn&& fn) {
    const Json* v = member(obj, path, key, required);
    if (!v) return;
    const std::string p = path + "." + key;
    if (!v->is_array()) return (void)fail(p, "expected an array");
    for (size_t i = 0; i < v->size() && ok(); ++i) fn((*v)[i], fmt::format("{}[{}]", p, i));
  }
  const Json* fail(const std::string& path, const std::string& what) {
    if (ok()) error_ = invalidArgument("topology JSON: {}: {}", path, what);
    return nullptr;
  }

 private:
  Status error_;
};

Host readHost(Reader& rd, const Json& j, const std::string& path) {
  Host h;
  rd.get(j, path, "name", h.name);
  rd.get(j, path, "machine", h.machine, false);
  rd.get(j, path, "cores", h.cores);
  rd.get(j, path, "pus", h.pus);
  rd.each(j, path, "packages", true, [&](const Json& e, const std::string& p) {
    Package x;
    rd.get(e, p, "os_index", x.osIndex);
    rd.get(e, p, "cores", x.cores);
    rd.get(e, p, "pus", x.pus);
    h.packages.push_back(x);
  });
  rd.each(j, path, "numa_nodes", true, [&](const Json& e, const std::string& p) {
    NumaNode x;
    rd.get(e, p, "os_index", x.osIndex);
    rd.get(e, p, "package", x.package, false);
    rd.get(e, p, "memory_bytes", x.memoryBytes, false);
    rd.each(e, p, "cpus", false, [&](const Json& c, const std::string& cp) {
      if (!c.is_number_integer() || c.get<int64_t>() < 0)
        return (void)rd.fail(cp, "expected a CPU index >= 0");
      x.cpus.push_back(c.get<int>());
    });
    h.numaNodes.push_back(x);
  });
  rd.each(j, path, "caches", false, [&](const Json& e, const std::string& p) {
    Cache x;
    rd.get(e, p, "level", x.level);
    rd.get(e, p, "type", x.type);
    rd.get(e, p, "size_bytes", x.sizeBytes);
    rd.get(e, p, "count", x.count);
    h.caches.push_back(x);
  });
  rd.each(j, path, "gpus", false, [&](const Json& e, const std::string& p) {
    Gpu g;
    rd.get(e, p, "bus_id", g.busId);
    rd.get(e, p, "name", g.name, false);
    rd.get(e, p, "numa_node", g.numaNode, false);
    rd.get(e, p, "cuda_device", g.cudaDevice, false);
    rd.get(e, p, "pcie_gbps", g.pcieGBps, false);
    rd.each(e, p, "links", false, [&](const Json& l, const std::string& lp) {
      GpuLink x;
      rd.get(l, lp, "peer_bus_id", x.peerBusId);
      rd.get(l, lp, "kind", x.kind);
      rd.get(l, lp, "count", x.count);
      if (rd.ok() && x.kind != "nvlink" && x.kind != "pcie")
        rd.fail(lp + ".kind", fmt::format("expected \"nvlink\" or \"pcie\", got \"{}\"", x.kind));
      g.links.push_back(x);
    });
    h.gpus.push_back(g);
  });
  rd.each(j, path, "nics", false, [&](const Json& e, const std::string& p) {
    Nic n;
    rd.get(e, p, "name", n.name);
    rd.get(e, p, "type", n.type);
    rd.get(e, p, "bus_id", n.busId, false);
    rd.get(e, p, "numa_node", n.numaNode, false);
    rd.get(e, p, "speed_gbps", n.speedGbps, false);
    if (rd.ok() && n.type != "ethernet" && n.type != "infiniband")
      rd.fail(p + ".type", fmt::format("expected \"ethernet\" or \"infiniband\", got \"{}\"", n.type));
    h.nics.push_back(n);
  });
  rd.each(j, path, "pci", false, [&](const Json& e, const std::string& p) {
    PciDevice d;
    rd.get(e, p, "bus_id", d.busId);
    rd.get(e, p, "class", d.className, false);
    rd.get(e, p, "vendor_id", d.vendorId, false);
    rd.get(e, p, "device_id", d.deviceId, false);
    rd.get(e, p, "numa_node", d.numaNode, false);
    h.pci.push_back(d);
  });
  return h;
}

}  // namespace

std::string toJson(const Topology& t) {
  Json j;
  j["version"] = kFormatVersion;
  j["hosts"] = Json::array();
  for (const Host& h : t.hosts) j["hosts"].push_back(hostJson(h));
  j["ranks"] = Json::array();
  for (const RankPlace& r : t.ranks)
    j["ranks"].push_back(
        {{"host", r.host}, {"numa_node", r.numaNode}, {"gpu", r.gpu}, {"nic", r.nic}});
  if (!t.links.empty() || t.reduceGBps || t.copyGBps) {
    Json m;
    for (const auto& [name, spec] : t.links) m[name] = linkJson(spec);
    if (t.reduceGBps) m["reduce_gbps"] = *t.reduceGBps;
    if (t.copyGBps) m["copy_gbps"] = *t.copyGBps;
    j["links"] = m;
  }
  return j.dump(2) + "\n";
}

Result<Topology> fromJson(const std::string& text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (j.is_discarded()) return invalidArgument("topology JSON: not valid JSON");
  Reader rd;
  Topology t;
  int version = 0;
  rd.get(j, "$", "version", version);
  if (rd.ok() && version != kFormatVersion)
    return invalidArgument("topology JSON: $.version: {} is not supported (expected {})", version,
                           kFormatVersion);
  rd.each(j, "$", "hosts", true,
          [&](const Json& e, const std::string& p) { t.hosts.push_back(readHost(rd, e, p)); });
  if (rd.ok() && t.hosts.empty()) rd.fail("$.hosts", "at least one host is needed");
  rd.each(j, "$", "ranks", false, [&](const Json& e, const std::string& p) {
    RankPlace r;
    rd.get(e, p, "host", r.host);
    rd.get(e, p, "numa_node", r.numaNode, false);
    rd.get(e, p, "gpu", r.gpu, false);
    rd.get(e, p, "nic", r.nic, false);
    if (!rd.ok()) return;
    if (r.host < 0 || r.host >= static_cast<int>(t.hosts.size()))
      return (void)rd.fail(p + ".host", fmt::format("{} is not a host index (0..{})", r.host,
                                                    t.hosts.size() - 1));
    const Host& h = t.hosts[r.host];
    if (r.gpu < -1 || r.gpu >= static_cast<int>(h.gpus.size()))
      return (void)rd.fail(p + ".gpu", fmt::format("{}: host {} has {} GPUs", r.gpu, r.host,
                                                   h.gpus.size()));
    if (r.nic < -1 || r.nic >= static_cast<int>(h.nics.size()))
      return (void)rd.fail(p + ".nic", fmt::format("{}: host {} has {} NICs", r.nic, r.host,
                                                   h.nics.size()));
    t.ranks.push_back(r);
  });
  if (const Json* links = rd.member(j, "$", "links", false)) {
    if (!links->is_object()) return invalidArgument("topology JSON: $.links: expected an object");
    for (auto it = links->begin(); it != links->end() && rd.ok(); ++it) {
      const std::string p = "$.links." + it.key();
      if (it.key() == "reduce_gbps" || it.key() == "copy_gbps") {
        if (!it->is_number() || !(it->get<double>() > 0))
          return invalidArgument("topology JSON: {}: expected a number > 0", p);
        (it.key() == "reduce_gbps" ? t.reduceGBps : t.copyGBps) = it->get<double>();
        continue;
      }
      LinkSpec s;
      rd.get(*it, p, "latency_us", s.latencyUs);
      rd.get(*it, p, "bandwidth_gbps", s.bandwidthGBps);
      rd.get(*it, p, "overhead_us", s.overheadUs, false);
      if (rd.ok() && it->contains("overhead_us") && !(s.overheadUs >= 0))
        rd.fail(p + ".overhead_us", "expected a number >= 0");
      if (rd.ok() && (!(s.latencyUs >= 0) || !(s.bandwidthGBps > 0)))
        rd.fail(p, fmt::format("needs latency_us >= 0 and bandwidth_gbps > 0 (got {}, {})",
                               s.latencyUs, s.bandwidthGBps));
      t.links[it.key()] = s;
    }
  }
  if (!rd.ok()) return rd.status();
  return t;
}

Result<Topology> loadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return invalidArgument("topology file '{}': cannot open: {}", path, errnoString(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  auto t = fromJson(ss.str());
  if (!t.isOk()) return invalidArgument("topology file '{}': {}", path, t.status().message());
  return t;
}

RankGroups rankGroups(const Topology& t) {
  RankGroups g;
  std::map<int, int> hosts;
  std::map<std::pair<int, int>, int> numas;
  for (const RankPlace& r : t.ranks) {
    auto h = hosts.emplace(r.host, static_cast<int>(hosts.size())).first->second;
    g.hostOf.push_back(h);
    if (r.numaNode < 0) {
      g.numaOf.push_back(-1);
      continue;
    }
    g.numaOf.push_back(
        numas.emplace(std::make_pair(r.host, r.numaNode), static_cast<int>(numas.size()))
            .first->second);
  }
  g.nhosts = static_cast<int>(hosts.size());
  g.nnuma = static_cast<int>(numas.size());
  return g;
}

}  // namespace tutti::topo
