// File: topology/topology.cc
// The process-wide local topology (TUTTI_TOPO_FILE or the hwloc probe, computed once) and the
// human-readable tree that tutti-topo prints.
#include <mutex>

#include "base/env.h"
#include "topology/topology.h"

namespace tutti::topo {

namespace {

TUTTI_PARAM_STRING(kTopoFile, "TUTTI_TOPO_FILE", nullptr, "TOPO", "",
                   "JSON topology to use instead of probing this machine (docs/TOPOLOGY.md)");

std::string bytesText(uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return fmt::format("{} GiB", b >> 30);
  if (b >= (1ull << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(b) / (1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{} MiB", b >> 20);
  if (b >= (1ull << 10)) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

// "0-3,8,10-11".
std::string cpuList(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    out += (out.empty() ? "" : ",") +
           (j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]));
    i = j + 1;
  }
  return out.empty() ? "-" : out;
}

std::string numaText(int n) { return n < 0 ? "numa ?" : fmt::format("numa {}", n); }

}  // namespace

Result<Topology> local() {
  static std::once_flag once;
  static Result<Topology> cached = internalError("topology not computed");
  std::call_once(once, [] {
    const std::string file = kTopoFile.get();
    cached = file.empty() ? probe() : loadFile(file);
  });
  return cached;
}

std::string toTree(const Topology& t) {
  std::string out;
  for (size_t hi = 0; hi < t.hosts.size(); ++hi) {
    const Host& h = t.hosts[hi];
    out += fmt::format("Host {} \"{}\": {} packages, {} NUMA nodes, {} cores, {} PUs\n", hi, h.name,
                       h.packages.size(), h.numaNodes.size(), h.cores, h.pus);
    for (const Package& p : h.packages) {
      out += fmt::format("  Package {}: {} cores, {} PUs\n", p.osIndex, p.cores, p.pus);
      for (const NumaNode& n : h.numaNodes) {
        if (n.package != p.osIndex) continue;
        out += fmt::format("    NUMANode {}: {}, CPUs {}\n", n.osIndex, bytesText(n.memoryBytes),
                           cpuList(n.cpus));
      }
    }
    for (const NumaNode& n : h.numaNodes) {
      bool placed = false;
      for (const Package& p : h.packages) placed = placed || n.package == p.osIndex;
      if (!placed)
        out += fmt::format("  NUMANode {} (several packages): {}, CPUs {}\n", n.osIndex,
                           bytesText(n.memoryBytes), cpuList(n.cpus));
    }
    for (const Cache& c : h.caches)
      out += fmt::format("  Cache L{} {}: {} x {}\n", c.level, c.type, c.count,
                         bytesText(c.sizeBytes));
    for (size_t g = 0; g < h.gpus.size(); ++g) {
      const Gpu& gpu = h.gpus[g];
      out += fmt::format("  GPU {} {} \"{}\" ({}, cuda {}, PCIe {} GB/s)\n", g, gpu.busId, gpu.name,
                         numaText(gpu.numaNode),
                         gpu.cudaDevice < 0 ? std::string("-") : std::to_string(gpu.cudaDevice),
                         gpu.pcieGBps);
      for (const GpuLink& l : gpu.links)
        out += fmt::format("    {} x{} -> {}\n", l.kind, l.count, l.peerBusId);
    }
    for (const Nic& n : h.nics)
      out += fmt::format("  NIC {} {} {} ({}, {} Gbit/s)\n", n.name, n.type,
                         n.busId.empty() ? "-" : n.busId, numaText(n.numaNode), n.speedGbps);
    for (const PciDevice& d : h.pci)
      out += fmt::format("  PCI {} {} [{:04x}:{:04x}] ({})\n", d.busId, d.className, d.vendorId,
                         d.deviceId, numaText(d.numaNode));
  }
  if (!t.ranks.empty()) {
    out += fmt::format("Ranks ({}):\n", t.ranks.size());
    for (size_t r = 0; r < t.ranks.size(); ++r) {
      const RankPlace& p = t.ranks[r];
      out += fmt::format("  rank {}: host {}, {}, gpu {}, nic {}\n", r, p.host,
                         numaText(p.numaNode), p.gpu, p.nic);
    }
  }
  for (const auto& [name, spec] : t.links)
    out += fmt::format("Link {}: {} us, {} GB/s{}\n", name, spec.latencyUs, spec.bandwidthGBps,
                       spec.overheadUs >= 0 ? fmt::format(", overhead {} us", spec.overheadUs) : "");
  if (t.reduceGBps) out += fmt::format("Reduce: {} GB/s\n", *t.reduceGBps);
  if (t.copyGBps) out += fmt::format("Copy: {} GB/s\n", *t.copyGBps);
  return out;
}

}  // namespace tutti::topo
