// File: algorithms/link_model.h
// From a topology to the simulator's LinkModel: which link class joins two ranks (self, shm,
// nvlink, pcie, tcp, ib), the latency and bandwidth of each class (defaults, adjusted by what the
// probe knows: NIC speeds, NVLink counts, PCIe speeds, ranks per core), then overrides from the
// topology file's "links" object and from a link-model file (TUTTI_LINK_FILE). Also the rank
// groups that hierarchical algorithms use (CollShape::hostOf).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "algorithms/simulator.h"
#include "topology/topology.h"

namespace tutti::algo {

/// Link class between ranks a and b of `world` (world.ranks gives their places):
/// self for a == b; on one host nvlink when both ranks have GPUs joined by NVLink (directly or
/// through a shared NVSwitch), pcie when both have GPUs otherwise, shm for host memory; across
/// hosts ib when both ranks' NICs (any NIC of the host when a rank names none) are InfiniBand,
/// tcp otherwise. Ranks outside world.ranks count as one host (shm).
LinkClass linkClassBetween(const topo::Topology& world, int a, int b);

/// The model for `world`: LinkModel::defaults() per class, then
///  - per-message send overheads (LogP's o): shm 0.1 us, tcp 2 us, nvlink 0.3 us, pcie and
///    ib 0.5 us;
///  - shm, one rank per PU: latency 0.08 us; bandwidth by message size (simulator.h "Curve")
///    7.5 GB/s at 4 KiB, 11 at 32 KiB, 15.5 at 256 KiB, 18 from 1 MiB; reductions while
///    receiving (LinkParams::reduceOnReceive); host reductions 28 GB/s, copies 45 GB/s;
///  - with L ranks on a host of P PUs and L > P (oversubscribed) the shm latency becomes
///    0.3 + 0.3 L / P us and the overhead 0.3 L / P us (each message costs a context switch);
///  - shm cache term (simulator.h "Cache"): the bytes of one message beyond cacheBytes (2 MiB)
///    move at 0.6 times the bandwidth; when oversubscribed beyond the size of one L2 cache (1 MiB
///    when the probe found none) at 0.2 times it (ranks that share a core evict each other's
///    blocks);
///  - memory term (simulator.h "Memory"): beyond a footprint of half a rank's share of the
///    last-level cache (8 MiB when the probe found none), stream factor 0.5.
///    All of these fitted on the 2-core development VM (link_model.cc); TUTTI_CALIBRATE measures
///    them on another machine;
///  - tcp / ib bandwidth from the slowest NIC speed known (Gbit/s / 8, times 0.9 for tcp);
///  - nvlink bandwidth 20 GB/s per link of the least-connected GPU pair; pcie from the GPUs'
///    PCIe link speed;
///  - cpuLoad: ranks / PUs of the most loaded host, or of a machine that holds several hosts
///    (Host::machine; 1 when not oversubscribed);
///  - then world.links / reduceGBps / copyGBps, which replace what they name.
/// classOf is linkClassBetween over world. Pure.
LinkModel linkModelFor(const topo::Topology& world);

/// For a job whose ranks on one host talk through a network transport instead of shared memory
/// (TUTTI_TRANSPORTS=tcp, or ib): classOf returns `cls` wherever it returned kShm. When every
/// rank is on one host (`loopbackOnly`), the class's traffic is loopback, which no NIC speed
/// describes: kTcp then takes this machine's TCP loopback figures (o 1.6 us, latency 2.9 us,
/// 6 GB/s per direction at 128 KiB and 4.5 from 256 KiB, the memory term on (memoryBound), no
/// cache term; with more ranks than PUs, o = 4 us x load and the bandwidths / load: fitted with
/// tutti-perf --validate and bench/tcp_ceiling.cc on the 2-core development VM, link_model.cc),
/// and ranks no longer share a port (no NIC is in the way: each rank's stream is its own CPU
/// copying).
/// Apply before calibration and link files, which override it. Pure apart from `m`.
void useNetworkOnHost(LinkModel& m, LinkClass cls, bool loopbackOnly);

/// Applies a link-model file: JSON {"links": {"shm": {"latency_us": .., "bandwidth_gbps": ..},
/// ..., "reduce_gbps": .., "copy_gbps": .., "cpu_load": .., "slice_bytes": .., "cache_bytes": ..,
/// "footprint_cache_bytes": .., "footprint_stream_factor": ..}}, where a class may also give
/// "stream_factor" (LinkParams::streamFactor), "bandwidth_curve" ([[bytes, GB/s], ...]),
/// "reduce_on_receive" and "memory_bound" (true/false); a class given "bandwidth_gbps" without
/// a curve drops the curve it had. The topology file's "links" object. Unnamed classes keep
/// their value. InvalidArgument naming the file and the JSON path of a problem.
Status applyLinkFile(const std::string& path, LinkModel& model);

/// applyLinkFile on the text of such a file; `where` names it in errors.
Status applyLinkText(const std::string& text, const std::string& where, LinkModel& model);

/// Class name -> LinkClass ("shm" -> kShm); nullopt for unknown names.
std::optional<LinkClass> parseLinkClass(std::string_view name);

/// The groups a hierarchical algorithm should treat as "hosts" (CollShape::hostOf): the hosts
/// of world.ranks when there are several, else the NUMA nodes when the ranks span several, else
/// empty (one group: hierarchical algorithms decline).
std::vector<int> hierarchyGroups(const topo::Topology& world);

}  // namespace tutti::algo
