// File: topology/probe.cc
// The hwloc probe: packages, NUMA nodes (with their CPUs and memory), cores, caches and PCI
// devices (GPUs, Ethernet and InfiniBand NICs with their NUMA locality; virtual interfaces such as
// a veth when no PCI NIC knows its speed) of this host, turned into the plain Topology struct.
// GPU details that hwloc does not know (CUDA ordinals, NVLinks) come from topology/gpu_probe.cc.
// hwloc types never leave this file.
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <tuple>

#include "base/host_id.h"
#include "topology/gpu_probe.h"
#include "topology/topology.h"

namespace tutti::topo {

namespace {

std::string pciClassName(unsigned classId) {
  switch (classId) {
    case 0x0200:
      return "Ethernet";
    case 0x0207:
      return "InfiniBand";
    case 0x0300:
      return "VGA";
    case 0x0302:
      return "3D";
    case 0x1200:
      return "Accelerator";
    case 0x0108:
      return "NVMExp";
    case 0x0106:
      return "SATA";
  }
  switch (classId >> 8) {
    case 0x01:
      return "Storage";
    case 0x02:
      return "Network";
    case 0x03:
      return "Display";
    case 0x06:
      return "Bridge";
    case 0x0c:
      return "SerialBus";
  }
  return fmt::format("class {:04x}", classId);
}

// The OS index of the single NUMA node an I/O object is attached to, or -1.
int numaOf(hwloc_topology_t topo, hwloc_obj_t io) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, io);
  if (!anc || !anc->nodeset) return -1;
  if (hwloc_bitmap_weight(anc->nodeset) == 1) return hwloc_bitmap_first(anc->nodeset);
  return -1;
}

std::string readFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

// Link speed in Gbit/s from sysfs (0 when unknown): /sys/class/net/X/speed is Mbit/s,
// /sys/class/infiniband/X/ports/1/rate reads "200 Gb/sec (4X HDR)".
double nicSpeedGbps(const std::string& name, bool ib) {
  const std::string text = ib ? readFirstLine("/sys/class/infiniband/" + name + "/ports/1/rate")
                              : readFirstLine("/sys/class/net/" + name + "/speed");
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(v > 0)) return 0;
  return ib ? v : v / 1000.0;
}

// When no PCI Ethernet NIC has a known speed (a container's or an emulated host's network
// namespace, whose link is a veth; a VM whose virtio NIC reports none), the network interfaces
// that are not PCI devices and are up with a speed: that is the link tcp crosses to other hosts
// (NCCL reads the same /sys/class/net/X/speed for its socket devices).
void probeVirtualNics(Host& h) {
  for (const Nic& n : h.nics)
    if (n.type == "ethernet" && n.speedGbps > 0) return;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/class/net", ec)) {
    const std::string name = e.path().filename().string();
    std::error_code ec2;
    const auto dev = std::filesystem::canonical(e.path(), ec2).string();
    if (name == "lo" || ec2 || dev.find("/devices/virtual/") == std::string::npos) continue;
    if (readFirstLine(e.path().string() + "/operstate") != "up") continue;
    Nic n;
    n.name = name;
    n.speedGbps = nicSpeedGbps(name, /*ib=*/false);
    if (n.speedGbps > 0) h.nics.push_back(n);
  }
}

void probeCaches(hwloc_topology_t topo, Host& h) {
  std::map<std::tuple<int, std::string, uint64_t>, int> counts;
  for (hwloc_obj_type_t type :
       {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L4CACHE,
        HWLOC_OBJ_L5CACHE, HWLOC_OBJ_L1ICACHE, HWLOC_OBJ_L2ICACHE, HWLOC_OBJ_L3ICACHE}) {
    const int n = hwloc_get_nbobjs_by_type(topo, type);
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t o = hwloc_get_obj_by_type(topo, type, i);
      const auto& a = o->attr->cache;
      const std::string kind = a.type == HWLOC_OBJ_CACHE_DATA          ? "data"
                               : a.type == HWLOC_OBJ_CACHE_INSTRUCTION ? "instruction"
                                                                       : "unified";
      ++counts[{static_cast<int>(a.depth), kind, a.size}];
    }
  }
  for (const auto& [key, count] : counts)
    h.caches.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), count});
}

void probePci(hwloc_topology_t topo, Host& h) {
  for (hwloc_obj_t o = hwloc_get_next_pcidev(topo, nullptr); o;
       o = hwloc_get_next_pcidev(topo, o)) {
    const auto& a = o->attr->pcidev;
    PciDevice d;
    d.busId = fmt::format("{:04x}:{:02x}:{:02x}.{:x}", a.domain, a.bus, a.dev, a.func);
    d.className = pciClassName(a.class_id);
    d.vendorId = a.vendor_id;
    d.deviceId = a.device_id;
    d.numaNode = numaOf(topo, o);
    h.pci.push_back(d);

    const unsigned cls = a.class_id >> 8;
    const bool gpuVendor = a.vendor_id == 0x10de || a.vendor_id == 0x1002;  // NVIDIA, AMD
    if (gpuVendor && (cls == 0x03 || cls == 0x12)) {
      Gpu g;
      g.busId = d.busId;
      g.name = o->name ? o->name : d.className;
      g.numaNode = d.numaNode;
      g.pcieGBps = a.linkspeed;  // hwloc: GB/s of the PCIe link, 0 when unknown
      h.gpus.push_back(g);
    }
    if (cls == 0x02) {
      Nic n;
      n.busId = d.busId;
      n.numaNode = d.numaNode;
      n.type = a.class_id == 0x0207 ? "infiniband" : "ethernet";
      std::string netName, fabricName;
      for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
        if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name) continue;
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && netName.empty()) netName = c->name;
        if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && fabricName.empty())
          fabricName = c->name;
      }
      // An RDMA device (openfabrics: mlx5_0, including RoCE) is what an ib transport would use.
      if (!fabricName.empty()) n.type = "infiniband";
      n.name = !fabricName.empty() ? fabricName : !netName.empty() ? netName : d.busId;
      n.speedGbps = nicSpeedGbps(n.name, n.type == "infiniband");
      h.nics.push_back(n);
    }
  }
}

}  // namespace

Result<Topology> probe() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0)
    return systemError("hwloc_topology_init failed: {}", errnoString(errno));
  std::unique_ptr<hwloc_topology, void (*)(hwloc_topology_t)> topo(raw, hwloc_topology_destroy);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  hwloc_topology_set_icache_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (hwloc_topology_load(raw) != 0)
    return systemError("hwloc_topology_load failed: {}", errnoString(errno));

  Host h;
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  h.name = name;
  h.machine = bootId();
  h.cores = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_CORE);
  h.pus = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PU);
  const int npkg = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PACKAGE);
  for (int i = 0; i < npkg; ++i) {
    hwloc_obj_t p = hwloc_get_obj_by_type(raw, HWLOC_OBJ_PACKAGE, i);
    h.packages.push_back(
        {static_cast<int>(p->os_index),
         hwloc_get_nbobjs_inside_cpuset_by_type(raw, p->cpuset, HWLOC_OBJ_CORE),
         hwloc_get_nbobjs_inside_cpuset_by_type(raw, p->cpuset, HWLOC_OBJ_PU)});
  }
  const int nnuma = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nnuma; ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(raw, HWLOC_OBJ_NUMANODE, i);
    NumaNode n;
    n.osIndex = static_cast<int>(o->os_index);
    hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(raw, HWLOC_OBJ_PACKAGE, o);
    n.package = pkg ? static_cast<int>(pkg->os_index) : (npkg == 1 ? h.packages[0].osIndex : -1);
    n.memoryBytes = o->attr->numanode.local_memory;
    if (o->cpuset) {
      for (int cpu = hwloc_bitmap_first(o->cpuset); cpu >= 0;
           cpu = hwloc_bitmap_next(o->cpuset, cpu))
        n.cpus.push_back(cpu);
    }
    h.numaNodes.push_back(n);
  }
  probeCaches(raw, h);
  probePci(raw, h);
  probeVirtualNics(h);
  // A single NUMA node is where every device is, even when hwloc attaches it above the node.
  if (h.numaNodes.size() == 1) {
    const int only = h.numaNodes[0].osIndex;
    for (auto& d : h.pci) d.numaNode = d.numaNode < 0 ? only : d.numaNode;
    for (auto& g : h.gpus) g.numaNode = g.numaNode < 0 ? only : g.numaNode;
    for (auto& n : h.nics) n.numaNode = n.numaNode < 0 ? only : n.numaNode;
  }
  detail::probeGpus(h);

  Topology t;
  t.hosts.push_back(std::move(h));
  return t;
}

int currentNumaNode(const Topology& local) {
  const int cpu = sched_getcpu();
  if (cpu < 0 || local.hosts.empty()) return -1;
  for (const NumaNode& n : local.hosts[0].numaNodes)
    if (std::binary_search(n.cpus.begin(), n.cpus.end(), cpu)) return n.osIndex;
  return -1;
}

}  // namespace tutti::topo
