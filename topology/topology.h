// File: topology/topology.h
// The machine (or cluster) as plain data: hosts with their packages, NUMA nodes, cores, caches and
// PCI devices (GPUs by bus id, NICs with their NUMA locality), where each rank of a job sits, and
// optional link-parameter overrides. Filled by the hwloc probe (topology/probe.cc) or loaded from
// JSON (TUTTI_TOPO_FILE), so the selector can study machines we do not have. No hwloc type here.
// JSON format: docs/TOPOLOGY.md; examples: topology/examples/*.json.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace tutti::topo {

/// Version of the JSON format written by toJson (the "version" key).
inline constexpr int kFormatVersion = 1;

struct Package {
  int osIndex = 0;  ///< physical package id
  int cores = 0;    ///< cores inside this package
  int pus = 0;      ///< hardware threads (processing units) inside this package
};

struct NumaNode {
  int osIndex = 0;           ///< as numactl numbers it
  int package = -1;          ///< osIndex of the package that holds it (-1: none or several)
  uint64_t memoryBytes = 0;  ///< local memory
  std::vector<int> cpus;     ///< OS indices of its PUs, ascending
};

/// Identical caches are counted together: {level 2, "unified", 1 MiB, count 2}.
struct Cache {
  int level = 1;
  std::string type = "unified";  ///< "unified", "data" or "instruction"
  uint64_t sizeBytes = 0;
  int count = 0;  ///< how many caches of this kind the host has
};

/// A GPU's link to another PCI device (a GPU or an NVSwitch), or its PCIe peer path.
struct GpuLink {
  std::string peerBusId;  ///< "0000:3b:00.0"
  std::string kind = "nvlink";  ///< "nvlink" (count = links) or "pcie" (CUDA peer access)
  int count = 1;
};

struct Gpu {
  std::string busId;  ///< PCI bus id, lower case: "0000:3b:00.0"
  std::string name;   ///< vendor/model as the probe saw it
  int numaNode = -1;  ///< osIndex of the closest NUMA node (-1: unknown)
  int cudaDevice = -1;  ///< CUDA ordinal matched by bus id (-1: no CUDA or not matched)
  double pcieGBps = 0;  ///< PCIe link speed, GB/s (0: unknown)
  std::vector<GpuLink> links;
};

struct Nic {
  std::string name;              ///< "eth0", "mlx5_0"
  std::string type = "ethernet";  ///< "ethernet" or "infiniband"
  std::string busId;             ///< PCI bus id ("" for virtual devices)
  int numaNode = -1;
  double speedGbps = 0;  ///< link speed, Gbit/s (0: unknown)
};

/// Any other PCI device (storage, bridges' endpoints), for completeness of the tree.
struct PciDevice {
  std::string busId;
  std::string className;  ///< "Ethernet", "3D", "InfiniBand", "Storage", ...
  uint16_t vendorId = 0, deviceId = 0;
  int numaNode = -1;
};

struct Host {
  std::string name;  ///< hostname
  /// The kernel the host runs under (its boot id); empty when unknown. Hosts with the same one
  /// are network namespaces of one machine (emulated hosts, tools/hosts.sh): they share its CPUs,
  /// and tcp between them never leaves it.
  std::string machine;
  int cores = 0, pus = 0;
  std::vector<Package> packages;
  std::vector<NumaNode> numaNodes;
  std::vector<Cache> caches;
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;
  std::vector<PciDevice> pci;  ///< every PCI device found, GPUs and NICs included
};

/// Where one rank sits: indices into Topology::hosts and that host's vectors (-1: none/unknown).
struct RankPlace {
  int host = 0;
  int numaNode = -1;  ///< osIndex of the rank's NUMA node
  int gpu = -1;       ///< index into Host::gpus
  int nic = -1;       ///< index into Host::nics
};

/// Latency and bandwidth of one link class ("shm", "tcp", "nvlink", "pcie", "ib", "self").
struct LinkSpec {
  double latencyUs = 0;
  double bandwidthGBps = 0;
  double overheadUs = -1;  ///< per-message send overhead (LogP's o); -1: keep the model's
};

struct Topology {
  std::vector<Host> hosts;
  /// Rank placement; empty for a probed single host (the communicator fills it at init).
  std::vector<RankPlace> ranks;
  /// Link-class overrides by class name (applied over the link model's defaults).
  std::map<std::string, LinkSpec> links;
  std::optional<double> reduceGBps, copyGBps;  ///< overrides of the model's compute rates
};

/// Probes this host with hwloc (plus CUDA and NVML when libcuda.so.1 / libnvidia-ml.so.1 load):
/// one host, no ranks. SystemError when hwloc fails. Not cached: call once and keep the result.
Result<Topology> probe();

/// The local topology as the library sees it: the JSON file named by TUTTI_TOPO_FILE when set
/// (InvalidArgument naming the file and the problem when it cannot be loaded), else probe().
/// Computed once per process; thread-safe.
Result<Topology> local();

/// OS index of the NUMA node of the CPU the calling thread runs on now (sched_getcpu), looked up
/// in local.hosts[0]; -1 when unknown.
int currentNumaNode(const Topology& local);

/// JSON text of `t` (2-space indent, keys in a fixed order, trailing newline): dump -> load ->
/// dump gives the same bytes.
std::string toJson(const Topology& t);
/// Parses JSON text. InvalidArgument naming the JSON path of the first problem (missing key,
/// wrong type, rank placed on a host that does not exist, ...).
Result<Topology> fromJson(const std::string& text);
/// Reads and parses a file. InvalidArgument naming the path when unreadable or malformed.
Result<Topology> loadFile(const std::string& path);

/// A human-readable tree (what `tutti-topo` prints).
std::string toTree(const Topology& t);

/// Summary of the topology at the ranks: which ranks share a host and a NUMA node.
struct RankGroups {
  std::vector<int> hostOf;  ///< host index per rank, renumbered 0..nhosts-1 by first rank
  std::vector<int> numaOf;  ///< NUMA group per rank (host, numa) renumbered 0..; -1 unknown
  int nhosts = 0, nnuma = 0;
};
/// Groups of `t.ranks` (empty when t.ranks is empty).
RankGroups rankGroups(const Topology& t);

/// What one rank tells the others at communicator init (bootstrap allgather): its host identity,
/// NUMA node, CUDA device, and (when `withHost`: the lowest rank of its host) the description of
/// local.hosts[0]. Text (JSON).
std::string rankSummary(const Topology& local, const std::string& hostId, bool withHost,
                        int numaNode, int cudaDevice);
/// The job's topology from every rank's summary (summaries[r] from rank r): hosts in order of
/// their lowest rank, each rank placed on its host, NUMA node and GPU (matched by CUDA device),
/// no NIC named (-1: any NIC of the host). InvalidArgument naming the rank whose summary is
/// malformed or whose host was described by nobody.
Result<Topology> assemble(const std::vector<std::string>& summaries);

}  // namespace tutti::topo
