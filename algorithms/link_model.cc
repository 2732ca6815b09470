// File: algorithms/link_model.cc
// Topology -> LinkModel (classes per rank pair, parameters per class) and link-model files.
#include "algorithms/link_model.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

namespace tutti::algo {

namespace {

// shm between ranks with a PU each, fitted on the 2-core development VM (AMD EPYC, 2 MiB of L2
// per core, 32 MiB of L3) with TUTTI_CALIBRATE=2 (core/calibrate.cc: exchanges of 8 B-8 MiB
// with both directions busy, 256 KiB reductions and copies), six runs:
//  - alpha 0.07-0.11 us beyond o = 0.1 us: a 2-rank 8 B allreduce takes about 0.18 us, one
//    round; two-round algorithms 0.36-0.40 us;
//  - bandwidth by message size (per direction, both busy): 4 KiB 6.0-9.7 GB/s, 32 KiB 9.6-11.9,
//    256 KiB 14.7-16.2, 1 MiB 17.0-18.7;
//  - reductions 26-31 GB/s of one operand, copies 41-51 GB/s (cache-resident);
//  - large calls: the memory term (simulator.h "Memory") with c = the rank's half share of the
//    last-level cache (8 MiB: 32 MiB of L3, 2 ranks) and f = 0.5, with the message cache term
//    below, put 50 of 54 measured rows of 2-rank allreduce (6 algorithms, 1-256 MiB, best of 6
//    `tutti-perf --algo all` rounds) within 20% of the prediction (worst 0.74x, at 1 MiB); a grid
//    over f 0.3-0.75, c 2-16 MiB and the message term's 0.5-0.9 had no better point.
// These are the defaults; another machine should calibrate (docs/TOPOLOGY.md).
constexpr double kShmLatencyUs = 0.08;
const std::vector<std::pair<double, double>> kShmCurve = {
    {4096, 7.5}, {32768, 11.0}, {262144, 15.5}, {1 << 20, 18.0}};
constexpr double kHostReduceGBps = 28.0;
constexpr double kHostCopyGBps = 45.0;
constexpr size_t kDefaultFootprintCacheBytes = 8 << 20;  // when the probe found no L3
constexpr double kFootprintStreamFactor = 0.5;
// With more ranks than PUs (4 ranks on 2 cores): a round waits for a peer that must first be
// scheduled, and a message costs its sender a wake-up, so both alpha and o grow with the load
// (ranks / PUs); ranks that share a core evict each other's blocks at every switch, so the
// message cache term starts at a fraction of the L2. Fitted to 48 rows of 4-rank allreduce (6
// algorithms, 8 B-16 MiB, `tutti-perf --algo all`, the median over two runs of each row's
// fastest of 5 rounds) by a grid
// over alpha 0.5-2.5 us, o 0.3-1.5 us, the bandwidth curve's scale 0.25-1.5, the cache term's
// factor 0.1-0.4 from 256 KiB to 2 MiB and the memory term on or off, counting the sizes where
// the predicted fastest ran within 15% of the measured fastest, then the rows within 20%: 8 of 8
// sizes and 27 rows (against 6 and 13 with the constants fitted before the bandwidth curve),
// worst 2.1x, at alpha 1.5 = 0.3 + 0.6 load, o 1.0 = 0.5 load, the curve as is, 0.2 beyond
// L2 / (2 load) = 512 KiB, and no memory term (the cache term has taken the eviction already).
// (256 KiB put 30 rows within 20% but sits on the 2 MiB crossover between ring and the tree,
// which a 1 MiB L2 already tips the wrong way.) Per-algorithm costs still
// differ: ring's six rounds took 8-9 us at 8 B (1.4 us a round) where recursive doubling's two
// took 5 (2.5 us a round).
constexpr double kOversubscribedLatencyUs = 0.3;
constexpr double kOversubscribedRoundUs = 0.6;     // alpha += this * ranks / PUs when ranks > PUs
constexpr double kOversubscribedOverheadUs = 0.5;  // o = this * ranks / PUs when ranks > PUs
// Cache term for shm (LinkParams::streamFactor, LinkModel::cacheBytes): the bytes of one message
// beyond the cache move at a fraction of the bandwidth (a block that no longer fits is read back
// from memory by the next round, where a pipelined algorithm's pieces are still in cache).
// Fitted to tutti-perf --algo all on the 2-core development VM:
//  - one rank per PU (2 ranks): ring, Rabenseifner and two-shot (one block of S/2 per step) ran
//    1.2-1.5x the pipelined tree's time from 8 to 256 MiB: 0.6 beyond the default 2 MiB, with the
//    memory term above (the same grid);
//  - more ranks than PUs (4 ranks): measured / predicted time of ring steps grew from 1.6x at
//    256 KiB blocks to 4.0x at 2 MiB and 4.6x at 4 MiB (ranks sharing a core evict each other's
//    blocks at every switch) while the tree stayed at 0.8-1.8x: 0.2 beyond L2 / (2 load) (the
//    grid above).
constexpr double kStreamFactor = 0.6;
// TCP between ranks of one host (useNetworkOnHost), fitted to `tutti-perf --validate --transport
// tcp` (2 and 4 ranks, allreduce, 8 B-256 MiB) and tutti-tcp-ceiling on the 2-core development
// VM, sndbuf 128 KiB: an 8-byte round took 3.0-5.4 us (2 ranks; the VM's placement moves it);
// a lone 128 KiB message each way moved at about 6 GB/s per direction, 1 MiB and more at 4.5 (the
// bare exchange: 4.5-5.3), and so did a pipeline's 171 KiB pieces, so the curve falls to 4.5 by
// 256 KiB; a rank's reductions wait for its copies and the other way round (memoryBound). With
// more ranks than PUs (4 on 2) every message waits for its peer to be scheduled, about 4 us per
// rank per PU: recursive doubling's 8-byte round took 7-11 us, one-shot's three messages 26-37
// us; each rank's copies get its share of a PU (bandwidth / load).
constexpr double kLoopbackLatencyUs = 2.9;
constexpr double kLoopbackOverheadUs = 1.6;
constexpr double kLoopbackOversubscribedOverheadUs = 4.0;  // o = this * ranks / PUs
const std::vector<std::pair<double, double>> kLoopbackCurve = {{128 << 10, 6.0}, {256 << 10, 4.5}};
constexpr double kOversubscribedStreamFactor = 0.2;
constexpr uint64_t kDefaultL2Bytes = 1 << 20;  // when the probe found no L2

// Hosts that are network namespaces of one machine (Host::machine: tools/hosts.sh's emulated
// hosts) send tcp through that kernel, as ranks of one host do over loopback: no wire latency
// (kLoopbackLatencyUs, o = kLoopbackOverheadUs), and when their ranks together outnumber the
// machine's PUs, each message waits for its receiver to be scheduled (o =
// kLoopbackOversubscribedOverheadUs * ranks / PUs), though each host alone is not oversubscribed.
// Checked on two emulated hosts of the 2-core development VM (2 ranks each, 10 Gbit/s, every
// allreduce forced, `tutti-perf --algo all`): 8-byte allreduce measured 13 us by recursive
// doubling (one shm round, one tcp round), 17 by the leader-based hierarchical one and 26-28 by
// one-shot (two tcp messages per rank at once); with a NIC's costs (alpha 10 us, o 2 us) the
// model put one-shot at 14.1 us and chose it, with these at 21, 13-15 and 17-19.

// Per-message send overhead by class (self, shm, tcp, nvlink, pcie, ib): what a rank spends
// issuing one message, serialised over its messages. shm fitted on the development VM; tcp is a
// send syscall; the device classes a kernel-side flag write or a work-request post.
constexpr double kOverheadUs[kNumLinkClasses] = {0.0, 0.1, 2.0, 0.3, 0.5, 0.5};

// Ranks per PU of the most loaded machine that holds several hosts of the job (Host::machine),
// or 0 when no two hosts share one. perHost: ranks per host index.
double sharedMachineLoad(const topo::Topology& w, const std::map<int, int>& perHost) {
  struct Machine {
    int hosts = 0, ranks = 0, pus = 0;
  };
  std::map<std::string, Machine> machines;
  for (const auto& [host, ranks] : perHost) {
    if (host < 0 || host >= static_cast<int>(w.hosts.size())) continue;
    const topo::Host& h = w.hosts[host];
    if (h.machine.empty()) continue;
    Machine& m = machines[h.machine];
    ++m.hosts;
    m.ranks += ranks;
    m.pus = std::max(m.pus, h.pus);  // every namespace sees the machine's PUs
  }
  double load = 0;
  for (const auto& [id, m] : machines)
    if (m.hosts > 1)
      load = std::max(load, m.pus > 0 ? static_cast<double>(m.ranks) / m.pus : 1.0);
  return load;
}

const topo::RankPlace* place(const topo::Topology& w, int r) {
  return r >= 0 && r < static_cast<int>(w.ranks.size()) ? &w.ranks[r] : nullptr;
}

// Whether GPU i and GPU j of host h are joined by NVLink (directly, or both to one NVSwitch:
// a link whose peer is not a GPU of the host).
bool nvlinked(const topo::Host& h, int i, int j) {
  const topo::Gpu& a = h.gpus[i];
  const topo::Gpu& b = h.gpus[j];
  std::set<std::string> gpuIds;
  for (const auto& g : h.gpus) gpuIds.insert(g.busId);
  std::set<std::string> switchesA;
  for (const auto& l : a.links) {
    if (l.kind != "nvlink") continue;
    if (l.peerBusId == b.busId) return true;
    if (!gpuIds.count(l.peerBusId)) switchesA.insert(l.peerBusId);
  }
  for (const auto& l : b.links)
    if (l.kind == "nvlink" && switchesA.count(l.peerBusId)) return true;
  return false;
}

int nvlinkCount(const topo::Host& h, int i, int j) {
  int direct = 0, toSwitch = 0;
  std::set<std::string> gpuIds;
  for (const auto& g : h.gpus) gpuIds.insert(g.busId);
  for (const auto& l : h.gpus[i].links) {
    if (l.kind != "nvlink") continue;
    if (l.peerBusId == h.gpus[j].busId) direct += l.count;
    if (!gpuIds.count(l.peerBusId)) toSwitch += l.count;
  }
  return direct > 0 ? direct : toSwitch;
}

bool infiniband(const topo::Host& h, int nic) {
  if (nic >= 0 && nic < static_cast<int>(h.nics.size())) return h.nics[nic].type == "infiniband";
  return std::any_of(h.nics.begin(), h.nics.end(),
                     [](const topo::Nic& n) { return n.type == "infiniband"; });
}

// The memory term's cache: half of a rank's share of the last-level cache on the host with the
// least of it (the largest data cache level the probe found), or kDefaultFootprintCacheBytes.
// perHost: ranks per host index.
size_t footprintCacheBytes(const topo::Topology& w, const std::map<int, int>& perHost) {
  size_t least = 0;
  for (const auto& [host, ranks] : perHost) {
    if (host < 0 || host >= static_cast<int>(w.hosts.size()) || ranks <= 0) continue;
    const topo::Host& h = w.hosts[host];
    int level = 0;
    uint64_t total = 0;  // bytes of the last level, all instances
    for (const auto& c : h.caches) {
      if (c.type == "instruction" || c.sizeBytes == 0) continue;
      const uint64_t bytes = c.sizeBytes * static_cast<uint64_t>(std::max(1, c.count));
      if (c.level > level) {
        level = c.level;
        total = bytes;
      } else if (c.level == level) {
        total += bytes;
      }
    }
    if (total == 0) continue;
    const size_t share = static_cast<size_t>(total / ranks / 2);
    least = least == 0 ? share : std::min(least, share);
  }
  return least ? least : kDefaultFootprintCacheBytes;
}

Status applyLinksJson(const nlohmann::json& links, const std::string& where, LinkModel& m) {
  if (!links.is_object()) return invalidArgument("{}: \"links\" must be an object", where);
  for (auto it = links.begin(); it != links.end(); ++it) {
    const std::string path = where + ": links." + it.key();
    if (it.key() == "reduce_gbps" || it.key() == "copy_gbps") {
      if (!it->is_number() || !(it->get<double>() > 0))
        return invalidArgument("{}: expected a number > 0", path);
      (it.key() == "reduce_gbps" ? m.reduceGBps : m.copyGBps) = it->get<double>();
      continue;
    }
    if (it.key() == "cpu_load") {
      if (!it->is_number() || !(it->get<double>() >= 1))
        return invalidArgument("{}: expected ranks per processing unit >= 1", path);
      m.cpuLoad = it->get<double>();
      continue;
    }
    if (it.key() == "cache_bytes") {
      if (!it->is_number_unsigned()) return invalidArgument("{}: expected bytes >= 0", path);
      m.cacheBytes = it->get<size_t>();
      continue;
    }
    if (it.key() == "footprint_cache_bytes") {
      if (!it->is_number_unsigned()) return invalidArgument("{}: expected bytes >= 0", path);
      m.footprintCacheBytes = it->get<size_t>();
      continue;
    }
    if (it.key() == "footprint_stream_factor") {
      if (!it->is_number() || !(it->get<double>() > 0 && it->get<double>() <= 1))
        return invalidArgument("{}: expected a number in (0, 1]", path);
      m.footprintStreamFactor = it->get<double>();
      continue;
    }
    if (it.key() == "slice_bytes") {
      if (!it->is_number_unsigned()) return invalidArgument("{}: expected bytes >= 0", path);
      m.sliceBytes = it->get<size_t>();
      continue;
    }
    auto cls = parseLinkClass(it.key());
    if (!cls)
      return invalidArgument("{}: unknown link class (self, shm, tcp, nvlink, pcie, ib)", path);
    LinkParams& p = m.links[static_cast<int>(*cls)];
    if (!it->is_object()) return invalidArgument("{}: expected an object", path);
    for (auto [key, field, zeroOk] : {std::tuple{"latency_us", &p.latencyUs, true},
                                      std::tuple{"bandwidth_gbps", &p.bandwidthGBps, false},
                                      std::tuple{"overhead_us", &p.overheadUs, true}}) {
      if (!it->contains(key)) continue;
      const auto& v = (*it)[key];
      if (!v.is_number() || (zeroOk ? !(v.get<double>() >= 0) : !(v.get<double>() > 0)))
        return invalidArgument("{}.{}: expected a number {} 0", path, key, zeroOk ? ">=" : ">");
      *field = v.get<double>();
    }
    // A plain bandwidth replaces a curve the model had (a curve given next to it wins, below).
    if (it->contains("bandwidth_gbps")) p.bandwidthCurve.clear();
    if (it->contains("stream_factor")) {
      const auto& v = (*it)["stream_factor"];
      if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() <= 1))
        return invalidArgument("{}.stream_factor: expected a number in (0, 1]", path);
      p.streamFactor = v.get<double>();
    }
    if (it->contains("bandwidth_curve")) {
      const auto& v = (*it)["bandwidth_curve"];
      std::vector<std::pair<double, double>> curve;
      bool ok = v.is_array();
      for (size_t i = 0; ok && i < v.size(); ++i) {
        const auto& pt = v[i];
        ok = pt.is_array() && pt.size() == 2 && pt[0].is_number() && pt[1].is_number() &&
             pt[0].get<double>() >= 1 && pt[1].get<double>() > 0 &&
             (curve.empty() || pt[0].get<double>() > curve.back().first);
        if (ok) curve.emplace_back(pt[0].get<double>(), pt[1].get<double>());
      }
      if (!ok)
        return invalidArgument(
            "{}.bandwidth_curve: expected [[bytes, GB/s], ...] with bytes >= 1 increasing and "
            "GB/s > 0",
            path);
      p.bandwidthCurve = std::move(curve);
    }
    if (it->contains("reduce_on_receive")) {
      const auto& v = (*it)["reduce_on_receive"];
      if (!v.is_boolean()) return invalidArgument("{}.reduce_on_receive: expected true or false", path);
      p.reduceOnReceive = v.get<bool>();
    }
    if (it->contains("memory_bound")) {
      const auto& v = (*it)["memory_bound"];
      if (!v.is_boolean()) return invalidArgument("{}.memory_bound: expected true or false", path);
      p.memoryBound = v.get<bool>();
    }
  }
  return Status::ok();
}

}  // namespace

std::optional<LinkClass> parseLinkClass(std::string_view name) {
  for (int c = 0; c < kNumLinkClasses; ++c)
    if (name == linkClassName(static_cast<LinkClass>(c))) return static_cast<LinkClass>(c);
  return std::nullopt;
}

LinkClass linkClassBetween(const topo::Topology& w, int a, int b) {
  if (a == b) return LinkClass::kSelf;
  const topo::RankPlace* pa = place(w, a);
  const topo::RankPlace* pb = place(w, b);
  if (!pa || !pb) return LinkClass::kShm;
  if (pa->host != pb->host) {
    const bool ib = infiniband(w.hosts[pa->host], pa->nic) && infiniband(w.hosts[pb->host], pb->nic);
    return ib ? LinkClass::kIb : LinkClass::kTcp;
  }
  const topo::Host& h = w.hosts[pa->host];
  if (pa->gpu >= 0 && pb->gpu >= 0) {
    if (pa->gpu == pb->gpu) return LinkClass::kShm;  // two ranks on one GPU: device memory copy
    return nvlinked(h, pa->gpu, pb->gpu) ? LinkClass::kNvlink : LinkClass::kPcie;
  }
  return LinkClass::kShm;
}

LinkModel linkModelFor(const topo::Topology& w) {
  LinkModel m = LinkModel::defaults();
  for (int c = 0; c < kNumLinkClasses; ++c) m.links[c].overheadUs = kOverheadUs[c];
  // Oversubscription: the most loaded host decides (collectives wait for the slowest rank).
  std::map<int, int> perHost;
  for (const auto& r : w.ranks) ++perHost[r.host];
  double load = 1.0;
  for (const auto& [host, ranks] : perHost) {
    const int pus = w.hosts[host].pus;
    if (pus > 0 && ranks > pus) load = std::max(load, static_cast<double>(ranks) / pus);
  }
  // Hosts that share one machine (emulated hosts, containers) share its CPUs: 2 emulated hosts
  // of 2 ranks on a 2-core machine are 4 ranks on 2 cores, inside each host too.
  const double shared = sharedMachineLoad(w, perHost);
  load = std::max(load, shared);
  LinkParams& shm = m.links[static_cast<int>(LinkClass::kShm)];
  shm.latencyUs = kShmLatencyUs;
  shm.bandwidthGBps = kShmCurve.back().second;
  shm.bandwidthCurve = kShmCurve;
  m.reduceGBps = kHostReduceGBps;
  m.copyGBps = kHostCopyGBps;
  m.cpuLoad = load;
  shm.streamFactor = kStreamFactor;
  shm.reduceOnReceive = true;  // the receiver reduces out of the ring (transports/shm)
  // The CPU that copies a message through the shm ring is the one that reduces: a rank does one
  // or the other (simulator.h). Without this a 2-rank ring's slices were predicted to overlap
  // its copies and reductions and won at 1-4 MiB; measured, ring and Rabenseifner were level
  // there on the idle VM, and beside one busy process ring took 1.9-2.7x Rabenseifner's time
  // (docs/PERFORMANCE.md, "On a busy machine").
  shm.memoryBound = true;
  m.footprintCacheBytes = footprintCacheBytes(w, perHost);
  m.footprintStreamFactor = kFootprintStreamFactor;
  if (load > 1.0) {
    shm.latencyUs = kOversubscribedLatencyUs + kOversubscribedRoundUs * load;
    shm.overheadUs = kOversubscribedOverheadUs * load;
    uint64_t l2 = 0;  // the smallest L2 of any host
    for (const auto& h : w.hosts)
      for (const auto& c : h.caches)
        if (c.level == 2 && c.type != "instruction" && c.sizeBytes > 0)
          l2 = l2 == 0 ? c.sizeBytes : std::min(l2, c.sizeBytes);
    shm.streamFactor = kOversubscribedStreamFactor;
    m.cacheBytes = static_cast<size_t>((l2 ? l2 : kDefaultL2Bytes) / (2 * load));
    m.footprintStreamFactor = 1.0;
  }

  // NIC speeds: the slowest NIC of each kind that is known.
  double eth = std::numeric_limits<double>::infinity(), ib = eth;
  for (const auto& h : w.hosts)
    for (const auto& n : h.nics)
      if (n.speedGbps > 0) (n.type == "infiniband" ? ib : eth) = std::min(n.type == "infiniband" ? ib : eth, n.speedGbps);
  if (std::isfinite(eth)) m.links[static_cast<int>(LinkClass::kTcp)].bandwidthGBps = 0.9 * eth / 8;
  if (std::isfinite(ib)) m.links[static_cast<int>(LinkClass::kIb)].bandwidthGBps = ib / 8;
  if (shared > 0) {
    LinkParams& tcp = m.links[static_cast<int>(LinkClass::kTcp)];
    tcp.latencyUs = kLoopbackLatencyUs;
    tcp.overheadUs =
        shared > 1.0 ? kLoopbackOversubscribedOverheadUs * shared : kLoopbackOverheadUs;
  }

  // GPUs: the least-connected NVLink pair among ranks; the slowest PCIe link.
  int minLinks = std::numeric_limits<int>::max();
  double pcie = std::numeric_limits<double>::infinity();
  for (size_t a = 0; a < w.ranks.size(); ++a) {
    const auto& pa = w.ranks[a];
    if (pa.gpu < 0) continue;
    const auto& h = w.hosts[pa.host];
    if (h.gpus[pa.gpu].pcieGBps > 0) pcie = std::min(pcie, h.gpus[pa.gpu].pcieGBps);
    for (size_t b = 0; b < w.ranks.size(); ++b) {
      const auto& pb = w.ranks[b];
      if (a == b || pb.host != pa.host || pb.gpu < 0 || pb.gpu == pa.gpu) continue;
      if (nvlinked(h, pa.gpu, pb.gpu)) minLinks = std::min(minLinks, nvlinkCount(h, pa.gpu, pb.gpu));
    }
  }
  if (minLinks != std::numeric_limits<int>::max())
    m.links[static_cast<int>(LinkClass::kNvlink)].bandwidthGBps = 20.0 * minLinks;
  if (std::isfinite(pcie)) m.links[static_cast<int>(LinkClass::kPcie)].bandwidthGBps = 0.8 * pcie;

  for (const auto& [name, spec] : w.links) {
    auto cls = parseLinkClass(name);
    if (!cls) continue;  // fromJson accepts any name; unknown classes have no effect
    LinkParams& p = m.links[static_cast<int>(*cls)];
    p.latencyUs = spec.latencyUs;
    p.bandwidthGBps = spec.bandwidthGBps;
    p.bandwidthCurve.clear();
    if (spec.overheadUs >= 0) p.overheadUs = spec.overheadUs;
  }
  if (w.reduceGBps) m.reduceGBps = *w.reduceGBps;
  if (w.copyGBps) m.copyGBps = *w.copyGBps;

  auto world = std::make_shared<const topo::Topology>(w);
  m.classOf = [world](int s, int d) { return linkClassBetween(*world, s, d); };
  // Network ports are NICs: ranks that name the same NIC of a host, or none, share it.
  m.portOf = [world](int r, LinkClass c) {
    const topo::RankPlace* p = place(*world, r);
    if (!p || (c != LinkClass::kTcp && c != LinkClass::kIb)) return r;
    return -1 - (p->host * 4096 + (p->nic >= 0 ? p->nic : 4095));
  };
  return m;
}

void useNetworkOnHost(LinkModel& m, LinkClass cls, bool loopbackOnly) {
  if (cls == LinkClass::kShm || cls == LinkClass::kSelf) return;
  auto inner = m.classOf;
  m.classOf = [inner, cls](int s, int d) {
    const LinkClass c = inner ? inner(s, d) : (s == d ? LinkClass::kSelf : LinkClass::kShm);
    return c == LinkClass::kShm ? cls : c;
  };
  if (loopbackOnly && cls == LinkClass::kTcp) {
    // Both copies of a loopback byte are the CPUs' (sender into the socket, receiver out of it):
    // the memory term applies, and ranks that share a PU share those copies.
    const double load = std::max(1.0, m.cpuLoad);
    LinkParams tcp{.latencyUs = kLoopbackLatencyUs,
                   .overheadUs = load > 1.0 ? kLoopbackOversubscribedOverheadUs * load
                                            : kLoopbackOverheadUs,
                   .memoryBound = true};
    for (const auto& [bytes, gbps] : kLoopbackCurve)
      tcp.bandwidthCurve.emplace_back(bytes, gbps / load);
    tcp.bandwidthGBps = tcp.bandwidthCurve.back().second;
    m.links[static_cast<int>(LinkClass::kTcp)] = tcp;
    m.portOf = nullptr;  // loopback has no NIC to share: each rank streams on its own
  }
}

Status applyLinkFile(const std::string& path, LinkModel& model) {
  std::ifstream in(path);
  if (!in) return invalidArgument("link model file '{}': cannot open: {}", path, errnoString(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return applyLinkText(ss.str(), "link model file '" + path + "'", model);
}

Status applyLinkText(const std::string& text, const std::string& where, LinkModel& model) {
  auto j = nlohmann::json::parse(text, nullptr, false, true);
  if (j.is_discarded()) return invalidArgument("{}: not valid JSON", where);
  if (!j.is_object() || !j.contains("links"))
    return invalidArgument("{}: expected an object with \"links\"", where);
  LinkModel m = model;
  TUTTI_TRY(applyLinksJson(j["links"], where, m));
  model = std::move(m);
  return Status::ok();
}

std::vector<int> hierarchyGroups(const topo::Topology& w) {
  const topo::RankGroups g = topo::rankGroups(w);
  if (g.nhosts > 1) return g.hostOf;
  if (g.nnuma > 1 && std::none_of(g.numaOf.begin(), g.numaOf.end(), [](int x) { return x < 0; }))
    return g.numaOf;
  return {};
}

}  // namespace tutti::algo
