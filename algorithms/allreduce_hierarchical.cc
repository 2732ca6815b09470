// File: algorithms/allreduce_hierarchical.cc
// Hierarchical allreduce for H hosts of L ranks each (the 2D ring of NCCL's early multi-node
// allreduce and of Horovod's hierarchical allreduce): (1) ring reduce-scatter inside each host
// (L-1 rounds): the vector is split into L chunks and local rank i ends with chunk i+1 reduced
// over its host; (2) ring allreduce of that chunk among the H ranks with the same local index,
// one per host (2(H-1) rounds over the network, each rank moving 2(H-1)/H of S/L); (3) ring
// allgather inside each host (L-1 rounds). Every host's L ranks use the network at once, on
// disjoint chunks, and only S/L bytes per rank cross it instead of the flat ring's 2(n-1)/n S
// through the slowest link.
// buildHierarchicalAllReduce also cuts the vector into pieces and pipelines them through these
// phases (allreduce_hierarchical_pipelined.cc); this algorithm runs it in one piece.
// Rounds: 2(L-1) + 2(H-1). Cost: 2(L-1)(alpha_l + S/L beta_l) + 2(H-1)(alpha_n + S/(HL) beta_n)
// + reductions. Needs CollShape::hostOf with H >= 2 groups of equal size (declines otherwise);
// any count >= 0.
#include "algorithms/allreduce_hierarchical.h"

#include <algorithm>

#include "algorithms/algorithm.h"
#include "algorithms/hierarchy.h"

namespace tutti::algo {

Result<Schedule> buildHierarchicalAllReduce(const CollShape& s, size_t pieces) {
  TUTTI_TRY_ASSIGN(const patterns::Hierarchy hier, patterns::requireHierarchy(s, "hierarchical"));
  ScheduleBuilder b(s);
  const int L = hier.perGroup, H = hier.groups, li = hier.local, g = hier.group;
  const auto& host = hier.members[g];
  const int next = host[patterns::ringNext(li, L)], prev = host[patterns::ringPrev(li, L)];
  const int hn = hier.members[patterns::ringNext(g, H)][li];
  const int hp = hier.members[patterns::ringPrev(g, H)][li];
  const size_t P = L == 1 ? 1 : std::max<size_t>(pieces, 1);  // L = 1: the engine slices the ring
  const int T = 2 * (L - 1) + 2 * (H - 1);

  // Piece p's stage t: its steps, over the piece's elements only.
  auto stage = [&](size_t p, int t) {
    const auto piece = patterns::evenChunk(s.count, static_cast<int>(P), static_cast<int>(p));
    auto chunk = [&](long i) {
      auto c = patterns::evenChunk(piece.count, L, patterns::mod(i, L));
      c.offset += piece.offset;
      return c;
    };
    const auto own = chunk(li + 1);  // reduced over the host by (1), over all hosts by (2)
    auto sub = [&](long i) {
      auto c = patterns::evenChunk(own.count, H, patterns::mod(i, H));
      c.offset += own.offset;
      return c;
    };
    if (t < L - 1) {  // (1) reduce-scatter inside the host
      const int k = t;
      auto out = chunk(li - k), in = chunk(li - k - 1);
      b.send(next, k == 0 ? Buf::kInput : Buf::kOutput, out.offset, out.count);
      b.recvReduce(prev, Buf::kInput, in.offset, Buf::kOutput, in.offset, in.count);
    } else if (t < L - 1 + H - 1) {  // (2) across hosts: reduce-scatter of the owned chunk
      const int k = t - (L - 1);
      auto out = sub(g - k), in = sub(g - k - 1);
      b.send(hn, Buf::kOutput, out.offset, out.count);
      b.recvReduce(hp, Buf::kOutput, in.offset, Buf::kOutput, in.offset, in.count);
    } else if (t < L - 1 + 2 * (H - 1)) {  // ... and allgather
      const int k = t - (L - 1) - (H - 1);
      auto out = sub(g + 1 - k), in = sub(g - k);
      b.send(hn, Buf::kOutput, out.offset, out.count);
      b.recv(hp, Buf::kOutput, in.offset, in.count);
    } else {  // (3) allgather inside the host
      const int k = t - (L - 1) - 2 * (H - 1);
      auto out = chunk(li + 1 - k), in = chunk(li - k);
      b.send(next, Buf::kOutput, out.offset, out.count);
      b.recv(prev, Buf::kOutput, in.offset, in.count);
    }
  };

  if (L == 1) b.copy(Buf::kInput, 0, Buf::kOutput, 0, s.count).nextRound();
  const size_t rounds = static_cast<size_t>(T) + P - 1;
  for (size_t r = 0; r < rounds; ++r) {
    for (size_t p = 0; p < P; ++p)
      if (r >= p && r - p < static_cast<size_t>(T)) stage(p, static_cast<int>(r - p));
    b.nextRound();
  }
  return b.finish();
}

namespace {

Result<Schedule> build(const CollShape& s) { return buildHierarchicalAllReduce(s, 1); }

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "hierarchical",
                          .coll = Coll::kAllReduce,
                          .summary = "intra-host ring reduce-scatter, inter-host ring allreduce, "
                                     "intra-host ring allgather; needs several hosts (hostOf)",
                          .supports = patterns::hasRegularHierarchy,
                          .build = build,
                          .priority = 1});

}  // namespace tutti::algo
