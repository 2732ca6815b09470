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

// shm, fitted to the quiet 8 B..32 KiB allreduce timings of docs/PERFORMANCE.md on the 2-core
// development VM: about 0.4 us per round with 2 ranks (alpha 0.3 + o 0.1). With 4 ranks on 2
// cores (`tutti-perf --algo all`, 8-128 B): one_shot 3.85 us (1 round, 3 messages per
// rank), recursive doubling 4.15 (2, 2), Rabenseifner 7.1 (4, 4), two_shot 4.9-7.3 (2, 6), ring
// 6.5-11.8 (6, 6): about 0.9 us per round and 0.6 per message. A round waits for a peer that
// must first be scheduled, and a message costs its sender a wake-up. So both alpha and o grow
// with the load (ranks / PUs): alpha 0.3 + 0.3 load, o 0.3 load.
constexpr double kShmLatencyUs = 0.3;
constexpr double kOversubscribedRoundUs = 0.3;     // alpha += this * ranks / PUs when ranks > PUs
constexpr double kOversubscribedOverheadUs = 0.3;  // o = this * ranks / PUs when ranks > PUs
// Cache term for shm (LinkParams::streamFactor, LinkModel::cacheBytes): the bytes of one message
// beyond the cache move at a fraction of the bandwidth. Fitted to tutti-perf --algo all on the
// 2-core development VM (1 MiB of L2 per core) with the double binary tree's pieces capped at
// 512 KiB:
//  - one rank per PU (2 ranks): ring and Rabenseifner (one block of S/2 per step) ran 1.07-1.24x
//    the pipelined tree's time from 8 to 256 MiB and 0.85-0.9x at 2-4 MiB, where the model had
//    them equal: 0.75 beyond the default 2 MiB;
//  - more ranks than PUs (4 ranks): measured / predicted time of ring steps grew from 1.6x at
//    256 KiB blocks to 4.0x at 2 MiB and 4.6x at 4 MiB (ranks sharing a core evict each other's
//    blocks at every switch) while the tree stayed at 0.8-1.8x: 0.2 beyond one L2.
constexpr double kStreamFactor = 0.75;
constexpr double kOversubscribedStreamFactor = 0.2;
constexpr uint64_t kDefaultL2Bytes = 1 << 20;  // when the probe found no L2

// Per-message send overhead by class (self, shm, tcp, nvlink, pcie, ib): what a rank spends
// issuing one message, serialised over its messages. shm fitted on the development VM; tcp is a
// send syscall; the device classes a kernel-side flag write or a work-request post.
constexpr double kOverheadUs[kNumLinkClasses] = {0.0, 0.1, 2.0, 0.3, 0.5, 0.5};

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
    if (it->contains("stream_factor")) {
      const auto& v = (*it)["stream_factor"];
      if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() <= 1))
        return invalidArgument("{}.stream_factor: expected a number in (0, 1]", path);
      p.streamFactor = v.get<double>();
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
  LinkParams& shm = m.links[static_cast<int>(LinkClass::kShm)];
  shm.latencyUs = kShmLatencyUs;
  m.cpuLoad = load;
  shm.streamFactor = kStreamFactor;
  if (load > 1.0) {
    shm.latencyUs += kOversubscribedRoundUs * load;
    shm.overheadUs = kOversubscribedOverheadUs * load;
    uint64_t l2 = 0;  // the smallest L2 of any host
    for (const auto& h : w.hosts)
      for (const auto& c : h.caches)
        if (c.level == 2 && c.type != "instruction" && c.sizeBytes > 0)
          l2 = l2 == 0 ? c.sizeBytes : std::min(l2, c.sizeBytes);
    shm.streamFactor = kOversubscribedStreamFactor;
    m.cacheBytes = l2 ? l2 : kDefaultL2Bytes;
  }

  // NIC speeds: the slowest NIC of each kind that is known.
  double eth = std::numeric_limits<double>::infinity(), ib = eth;
  for (const auto& h : w.hosts)
    for (const auto& n : h.nics)
      if (n.speedGbps > 0) (n.type == "infiniband" ? ib : eth) = std::min(n.type == "infiniband" ? ib : eth, n.speedGbps);
  if (std::isfinite(eth)) m.links[static_cast<int>(LinkClass::kTcp)].bandwidthGBps = 0.9 * eth / 8;
  if (std::isfinite(ib)) m.links[static_cast<int>(LinkClass::kIb)].bandwidthGBps = ib / 8;

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
    m.links[static_cast<int>(LinkClass::kTcp)] = {.latencyUs = 3.5, .bandwidthGBps = 3.5,
                                                  .overheadUs = 2.0, .streamFactor = 0.75};
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
