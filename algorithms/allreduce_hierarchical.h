// File: algorithms/allreduce_hierarchical.h
// The hierarchical allreduce's schedule (allreduce_hierarchical.cc), shared by the algorithm that
// runs it whole ("hierarchical") and the one that pipelines it ("hierarchical_pipelined").
#pragma once

#include <cstddef>

#include "algorithms/schedule.h"
#include "base/status.h"

namespace tutti::algo {

/// This rank's schedule of the hierarchical allreduce (intra-host ring reduce-scatter, inter-host
/// ring allreduce, intra-host ring allgather) with the vector cut into `pieces` pieces (evenChunk;
/// 0 or 1: one) that run the T = 2(L-1) + 2(H-1) stages as a software pipeline: piece p's stage t
/// in round p + t, T + pieces - 1 rounds. With one rank per host (L = 1) the vector is never cut
/// (the engine slices the network ring itself). InvalidArgument when s.hostOf is not a regular
/// hierarchy (patterns::requireHierarchy).
Result<Schedule> buildHierarchicalAllReduce(const CollShape& s, size_t pieces);

}  // namespace tutti::algo
