// File: algorithms/simulator.h
// The alpha-beta-gamma simulator: replays every rank's schedule, event by event, and predicts
// the time of the collective. It is the selector's cost function and `tutti-sched predict`.
//
// Model (all times in microseconds, bandwidths in GB/s = 1e9 bytes/s):
//  - Links: a message of b bytes from src to dst over the link class classOf(src, dst) takes
//    latencyUs + b / bandwidth from its start to its arrival (Hockney). Every directed pair
//    (src, dst) is a link of its own that carries one message at a time: consecutive messages
//    between two ranks each pay alpha (the pipelined chain's (n-2+k)(alpha + s beta)).
//  - Ports: the data of a message (its last b / bandwidth) also needs the sender's outgoing and
//    the receiver's incoming port of that class, one message's data at a time per port (full
//    duplex). So a rank's messages to (or from) different peers SHARE its bandwidth but overlap
//    their latencies: a direct gather costs alpha + (n-1)/n S beta at the root, a one-shot
//    allreduce alpha + (n-1) S beta. Ports of different classes (nvlink next to ib) are
//    independent. With one peer per round per direction (ring, recursive doubling, Bruck,
//    binomial trees, pairwise exchange) this is the classic full-duplex single-port model of
//    Thakur, Rabenseifner and Gropp (IJHPCA 2005), and their closed forms come out exactly.
//  - Start: a message starts once its data is ready, the receiver has reached the message's round
//    (posted the receive: transport buffers are bounded and the shm receiver copies out of its
//    ring itself, so a large message cannot be pushed into a rank still busy with an earlier
//    round), its pair link is free, and its ports are free when its latency has passed. Waiting
//    messages are served first-come first-served (ready time, then schedule order), without
//    holding back a message that can go.
//  - Overhead: with LinkParams::overheadUs = o > 0, a rank issues its messages one at a time, o
//    each (LogP's o), so a rank sending to n-1 peers at once pays (n-1) o before the last one
//    starts; latencies and data transfers still overlap.
//  - Shared ports: LinkModel::portOf can put several ranks on one port of a class (a host's NIC).
//  - Shared CPUs: with LinkModel::cpuLoad = L > 1 (more ranks than processing units on a host),
//    an shm message (or one of a memoryBound class) streams at bandwidth / min(k, L), where k is
//    the larger of the number of distinct peers its sender sends to and its receiver receives
//    from in that round. Host memory copies need both ranks on a CPU; a rank that talks to k
//    peers at once waits for whichever of them is not scheduled. (Fitted on the 2-core
//    development VM: with 4 ranks, one-shot, two-shot and tree rounds ran about 1.8x slower per
//    byte than ring, recursive doubling and Rabenseifner rounds; docs/PERFORMANCE.md.)
//  - Cache: a message of b > LinkModel::cacheBytes bytes moves its first cacheBytes at the link's
//    bandwidth and the rest at bandwidth * streamFactor (per class, 1 = off), so that one large
//    block (ring, Rabenseifner) costs more per byte than the same bytes in pipelined pieces
//    (double binary tree). linkModelFor turns it on for shm (0.75; 0.2 beyond one L2 when ranks
//    outnumber PUs, fitted with tutti-perf --algo all); see algorithms/link_model.h.
//  - Curve: LinkParams::bandwidthCurve gives a class measured bandwidths by message size,
//    interpolated in log2(bytes), in place of one bandwidth: on the 2-core development VM a
//    4 KiB shm exchange moved at 7 GB/s per direction and a 1 MiB one at 19 GB/s
//    (algorithms/link_model.cc).
//  - Memory: the cache term above follows one message; the memory term follows the call. When a
//    rank's input and output together exceed LinkModel::footprintCacheBytes, every copy of the
//    call (shm and self messages, those of a class marked memoryBound, local copies and
//    reductions) reads or writes memory instead of cache, pipelined or not: the rates are scaled
//    by the harmonic blend of the footprint's first footprintCacheBytes at full speed and the
//    rest at footprintStreamFactor times it.
//  - Compute: every rank has one compute unit, first-come first-served. A reduction of b bytes
//    (recvReduce, recvReduceSend, reduce) costs b / reduceGBps, a copy b / copyGBps; a copy whose
//    source and destination are the same memory (in-place aliasing) is free, as in the engine.
//    Compute and ports overlap. A link class with reduceOnReceive (shm) reduces as its receiver
//    copies out of the transport, so a reducing receive adds only the reduction's excess over a
//    copy, b / reduceGBps - b / copyGBps, after the data has arrived.
//  - Rounds: a rank starts round k+1 when all its round-k steps are done. A send is done when its
//    message has arrived; a receive when the data has arrived and (recvReduce) been reduced; a
//    forwarding step when everything it forwards has arrived. Zero-count steps cost nothing.
//  - Slicing: send, recv and recvReduce move one message (alpha once; the receiver reduces after
//    the whole message has arrived, the textbook (n-1)/n S gamma of ring algorithms). Forwarding
//    steps (recvCopySend, recvReduceSend) work as the engine does: the incoming data is cut into
//    sliceBytes slices; a slice is available once its last byte has arrived (bytes stream in at
//    the link bandwidth), is reduced (recvReduceSend), and is then sent on as a message of its own
//    (alpha per slice). A chain of n >= 3 ranks broadcasting S = k s bytes thus costs exactly
//    (n-2+k)(alpha + s beta).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/algorithm.h"

namespace tutti::algo {

enum class LinkClass : int { kSelf = 0, kShm, kTcp, kNvlink, kPcie, kIb };
inline constexpr int kNumLinkClasses = 6;
/// "self", "shm", "tcp", "nvlink", "pcie", "ib".
const char* linkClassName(LinkClass c);

struct LinkParams {
  double latencyUs = 1.0;      ///< alpha: per-message latency, microseconds
  double bandwidthGBps = 5.0;  ///< 1/beta: GB/s (1e9 bytes per second)
  /// o (LogP's send overhead): time the sending rank spends issuing one message (or forwarded
  /// slice), serialised over all its messages of every class; latencies overlap, overheads do
  /// not. 0 keeps the plain alpha-beta model.
  double overheadUs = 0.0;
  /// Bandwidth multiplier for the bytes of one message beyond LinkModel::cacheBytes (0 < f <= 1):
  /// a message that no longer fits the cache streams from memory, while a pipelined algorithm's
  /// pieces stay in it. 1 (the default) turns the term off. See "Cache" above.
  double streamFactor = 1.0;
  /// Measured bandwidth by message size: (bytes, GB/s) points, bytes increasing. When not empty
  /// it replaces bandwidthGBps: a message of b bytes moves at the bandwidth interpolated linearly
  /// in log2(b) between the two points around b (the first point's below the first, the last
  /// point's above the last). Small messages move at a fraction of a large one's rate (the
  /// receiver polls line by line, the hardware prefetchers have not ramped up); calibration
  /// measures the points with both directions busy, as in a collective ("Curve" above).
  std::vector<std::pair<double, double>> bandwidthCurve;
  /// The receiver reduces incoming data while it copies it out of the transport (shm: out of the
  /// ring, straight into the destination). A reducing receive of b bytes then costs b /
  /// reduceGBps - b / copyGBps of compute after its data has arrived (the copy it replaces is
  /// part of the link's bandwidth), not b / reduceGBps. false (the default): the textbook gamma.
  bool reduceOnReceive = false;
  /// The class's bytes are copied by the CPUs of one host (linkModelFor sets it for a host's
  /// shm, useNetworkOnHost for TCP over loopback): the memory term ("Memory" above) scales its
  /// bandwidth, as it does shm's and self's, which it always applies to; with more ranks than
  /// PUs, a round with several peers divides it as it does shm's ("Shared CPUs"); and its
  /// messages and the compute of the two ranks they join never overlap (a message waits for both
  /// ranks' compute, a rank's compute for the messages it sends or receives). false (the
  /// default): a wire, which the footprint does not slow and the CPUs' work overlaps.
  bool memoryBound = false;
  /// The message's bandwidth (curve or bandwidthGBps) for a message of `bytes` bytes, before the
  /// cache and memory terms.
  double bandwidthFor(size_t bytes) const;
};

struct LinkModel {
  LinkParams links[kNumLinkClasses];
  double reduceGBps = 10.0;       ///< 1/gamma: bytes of one operand reduced per second (1e9)
  double copyGBps = 10.0;         ///< local copies
  size_t sliceBytes = 128 << 10;  ///< the engine's pipelining slice (0: forward whole messages)
  /// Ranks per processing unit on the most loaded host; above 1 the shm bandwidth of rounds
  /// with several peers is divided (see "Shared CPUs" above). 1: no sharing.
  double cpuLoad = 1.0;
  /// Bytes of one message that stream at full bandwidth; the rest at streamFactor times it.
  size_t cacheBytes = 2 << 20;
  /// Memory term ("Memory" above): a call whose per-rank footprint F (input plus output bytes,
  /// once when in place) exceeds footprintCacheBytes = c streams from memory. shm and self
  /// bandwidths and the reduce and copy rates are then multiplied by F / (c + (F - c) / f),
  /// f = footprintStreamFactor in (0, 1]. 0 bytes (the default) turns the term off.
  size_t footprintCacheBytes = 0;
  double footprintStreamFactor = 1.0;
  /// Class of the link between two ranks; default (also when empty): kShm between different
  /// ranks, kSelf on one.
  std::function<LinkClass(int src, int dst)> classOf;
  /// Port of a rank for a link class: ranks that return the same id for a class share one port
  /// (its bandwidth, one message's data at a time per direction), as the ranks of a host share a
  /// NIC. Empty: every rank has its own ports.
  std::function<int(int rank, LinkClass cls)> portOf;
  LinkClass linkClass(int src, int dst) const;
  const LinkParams& link(int src, int dst) const;
  /// Defaults for a single host: self 0.05 us / 20 GB/s, shm 0.5 us / 5 GB/s, tcp 10 us /
  /// 2.5 GB/s, nvlink 2 us / 150 GB/s, pcie 3 us / 20 GB/s, ib 2 us / 20 GB/s; reduce and copy
  /// 10 GB/s; slices of 128 KiB; every pair of different ranks is shm.
  static LinkModel defaults();
};

/// Predicted time in microseconds of the collective whose per-rank schedules are `perRank`
/// (perRank.size() == shape.nranks; shape.rank is ignored): the time at which the last rank
/// finishes, all ranks starting at 0. Bytes are count * dataTypeBytes(shape.dtype) (1 byte per
/// element for barrier, as the engine). InternalError, naming ranks and round, for schedules that
/// do not match (a receive without its send in the same round, different sizes, a peer out of
/// range) or that deadlock (a cycle of forwarding steps); InvalidArgument for a bad model.
/// Pure and thread-compatible.
Result<double> simulate(const CollShape& shape, const std::vector<Schedule>& perRank,
                        const LinkModel& model);

/// Builds all ranks' schedules with `algo` and simulates them. InvalidArgument when the
/// algorithm declines the shape on any rank (supports() false); the build's error otherwise.
Result<double> predict(const AlgorithmInfo& algo, const CollShape& shape, const LinkModel& model);

}  // namespace tutti::algo
