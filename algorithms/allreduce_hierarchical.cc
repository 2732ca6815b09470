// File: algorithms/allreduce_hierarchical.cc
// Hierarchical allreduce for H hosts of L ranks each (the 2D ring of NCCL's early multi-node
// allreduce and of Horovod's hierarchical allreduce): (1) ring reduce-scatter inside each host
// (L-1 rounds): the vector is split into L chunks and local rank i ends with chunk i+1 reduced
// over its host; (2) ring allreduce of that chunk among the H ranks with the same local index,
// one per host (2(H-1) rounds over the network, each rank moving 2(H-1)/H of S/L); (3) ring
// allgather inside each host (L-1 rounds). Every host's L ranks use the network at once, on
// disjoint chunks, and only S/L bytes per rank cross it instead of the flat ring's 2(n-1)/n S
// through the slowest link.
// Rounds: 2(L-1) + 2(H-1). Cost: 2(L-1)(alpha_l + S/L beta_l) + 2(H-1)(alpha_n + S/(HL) beta_n)
// + reductions. Needs CollShape::hostOf with H >= 2 groups of equal size (declines otherwise);
// any count >= 0.
#include "algorithms/algorithm.h"
#include "algorithms/hierarchy.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  TUTTI_TRY_ASSIGN(const patterns::Hierarchy hier, patterns::requireHierarchy(s, "hierarchical"));
  ScheduleBuilder b(s);
  const int L = hier.perGroup, H = hier.groups, li = hier.local, g = hier.group;
  const auto& host = hier.members[g];
  const int next = host[patterns::ringNext(li, L)], prev = host[patterns::ringPrev(li, L)];
  auto chunk = [&](long i) { return patterns::evenChunk(s.count, L, patterns::mod(i, L)); };

  if (L == 1) b.copy(Buf::kInput, 0, Buf::kOutput, 0, s.count).nextRound();
  // (1) reduce-scatter inside the host.
  for (int k = 0; k < L - 1; ++k) {
    auto out = chunk(li - k), in = chunk(li - k - 1);
    b.send(next, k == 0 ? Buf::kInput : Buf::kOutput, out.offset, out.count);
    b.recvReduce(prev, Buf::kInput, in.offset, Buf::kOutput, in.offset, in.count);
    b.nextRound();
  }
  // (2) ring allreduce of the owned chunk across hosts, among ranks with local index li.
  const auto own = chunk(li + 1);
  const int hn = hier.members[patterns::ringNext(g, H)][li];
  const int hp = hier.members[patterns::ringPrev(g, H)][li];
  auto sub = [&](long i) {
    auto c = patterns::evenChunk(own.count, H, patterns::mod(i, H));
    c.offset += own.offset;
    return c;
  };
  for (int k = 0; k < H - 1; ++k) {
    auto out = sub(g - k), in = sub(g - k - 1);
    b.send(hn, Buf::kOutput, out.offset, out.count);
    b.recvReduce(hp, Buf::kOutput, in.offset, Buf::kOutput, in.offset, in.count);
    b.nextRound();
  }
  for (int k = 0; k < H - 1; ++k) {
    auto out = sub(g + 1 - k), in = sub(g - k);
    b.send(hn, Buf::kOutput, out.offset, out.count);
    b.recv(hp, Buf::kOutput, in.offset, in.count);
    b.nextRound();
  }
  // (3) allgather inside the host.
  for (int k = 0; k < L - 1; ++k) {
    auto out = chunk(li + 1 - k), in = chunk(li - k);
    b.send(next, Buf::kOutput, out.offset, out.count);
    b.recv(prev, Buf::kOutput, in.offset, in.count);
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "hierarchical",
                          .coll = Coll::kAllReduce,
                          .summary = "intra-host ring reduce-scatter, inter-host ring allreduce, "
                                     "intra-host ring allgather; needs several hosts (hostOf)",
                          .supports = patterns::hasRegularHierarchy,
                          .build = build,
                          .priority = 1});

}  // namespace tutti::algo
