// File: algorithms/allreduce_hierarchical_pipelined.cc
// The hierarchical allreduce (allreduce_hierarchical.cc: intra-host ring reduce-scatter,
// inter-host ring allreduce, intra-host ring allgather) as a software pipeline: the vector is cut
// into P pieces of at least 2 MiB (at most 8) and piece p runs stage t of the T = 2(L-1) +
// 2(H-1) stages in round p + t, so that the host phases of some pieces overlap the network phase
// of others, as NCCL pipelines chunks through its intra- and inter-node rings. It pays where the
// two phases use different resources (a network link beside shared memory) and not where one
// CPU per rank does both (NUMA groups of one host); the simulator decides per call. Within a
// round the pieces' steps go to a peer in piece order on both sides, so sends and receives pair
// up. Across 2 emulated hosts of 2 ranks at 10 Gbit/s (docs/PERFORMANCE.md, best of 6 launches
// each) it took 0.80-0.95x of the unpipelined time from 4 to 64 MiB; pieces of 256 KiB or 1 MiB
// were no faster than one piece at 512 KiB-8 MiB there, and often slower (4 ranks and the
// kernel's network work on 2 cores: the more the phases overlap, the more often a rank waits for
// a CPU).
// Rounds: T + P - 1, each as slow as the slowest stage it holds. Cost: about (T + P - 1) alpha +
// max(2(H-1)/(HL) S beta_n, 2(L-1)/L S beta_l) + (T - 1) S/P beta (the fill and drain) +
// reductions. Needs CollShape::hostOf with H >= 2 groups of L >= 2 ranks each and at least two
// pieces' worth of data (4 MiB); declines otherwise. Any count.
#include <algorithm>

#include "algorithms/algorithm.h"
#include "algorithms/allreduce_hierarchical.h"
#include "algorithms/hierarchy.h"

namespace tutti::algo {
namespace {

constexpr size_t kPieceBytes = size_t(2) << 20;
constexpr size_t kMaxPieces = 8;

size_t pieces(const CollShape& s) {
  return std::min(s.count * dataTypeBytes(s.dtype) / kPieceBytes, kMaxPieces);
}

bool supports(const CollShape& s) {
  const auto hier = patterns::regularHierarchy(s);
  return hier && hier->perGroup >= 2 && pieces(s) >= 2;
}

Result<Schedule> build(const CollShape& s) {
  if (!supports(s))
    return invalidArgument("hierarchical_pipelined: needs hostOf with equal groups of 2+ ranks "
                           "and at least {} bytes (nranks={}, count={})",
                           2 * kPieceBytes, s.nranks, s.count);
  return buildHierarchicalAllReduce(s, pieces(s));
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "hierarchical_pipelined",
                          .coll = Coll::kAllReduce,
                          .summary = "hierarchical, cut into pieces of 2 MiB+ whose host and "
                                     "network phases overlap; from 4 MiB, several hosts (hostOf)",
                          .supports = supports,
                          .build = build,
                          .priority = 1});

}  // namespace tutti::algo
