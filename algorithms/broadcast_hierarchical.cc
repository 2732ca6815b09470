// File: algorithms/broadcast_hierarchical.cc
// Hierarchical broadcast for H hosts of L ranks each (MPICH's SMP-aware bcast: a binomial tree
// among one rank per node, then one inside every node): (1) binomial broadcast among the H host
// leaders, numbered relative to the root's host; (2) binomial broadcast inside each host from
// its leader. A host's leader is its rank with the root's local index, so the root leads its
// own host. The flat binomial tree crosses the network in every round whose distance spans a
// host boundary; with a root that is not the first rank of its host, or hosts whose ranks are
// not contiguous, that is most rounds. This one crosses it in ceil(log2 H) rounds only.
// Rounds: ceil(log2 H) + ceil(log2 L). Cost: ceil(log2 H)(alpha_n + S beta_n) +
// ceil(log2 L)(alpha_l + S beta_l). Needs CollShape::hostOf with H >= 2 groups of equal size
// (declines otherwise); any count >= 0, any root.
#include "algorithms/algorithm.h"
#include "algorithms/hierarchy.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  TUTTI_TRY_ASSIGN(const patterns::Hierarchy hier, patterns::requireHierarchy(s, "broadcast hierarchical"));
  ScheduleBuilder b(s);
  const size_t c = s.count;
  const int H = hier.groups, L = hier.perGroup, g = hier.group, li = hier.local;
  const auto [rootGroup, rootLocal] = patterns::placeOf(hier, s, s.root);
  const bool isRoot = s.rank == s.root;
  // Where this rank's copy of the data is once it has it.
  const Buf have = isRoot ? Buf::kInput : Buf::kOutput;
  if (isRoot) b.copy(Buf::kInput, 0, Buf::kOutput, 0, c);

  // A binomial broadcast over `count` members numbered v relative to the one that has the data
  // (broadcast:binomial's rounds); member(rel) is the rank of relative number rel.
  auto binomial = [&](bool takesPart, int v, int count, auto member) {
    const int levels = patterns::ceilLog2(count);
    for (int j = 0; j < levels; ++j) {
      const int d = 1 << (levels - 1 - j);
      if (takesPart && v % (2 * d) == 0 && v + d < count) b.send(member(v + d), have, 0, c);
      else if (takesPart && v % (2 * d) == d) b.recv(member(v - d), Buf::kOutput, 0, c);
      b.nextRound();
    }
  };
  // (1) among the leaders (local index rootLocal), groups relative to the root's.
  binomial(li == rootLocal, patterns::mod(g - rootGroup, H), H, [&](int rel) {
    return hier.members[patterns::mod(rel + rootGroup, H)][rootLocal];
  });
  // (2) inside the host from its leader, local indices relative to it.
  const auto& host = hier.members[g];
  binomial(true, patterns::mod(li - rootLocal, L), L,
           [&](int rel) { return host[patterns::mod(rel + rootLocal, L)]; });
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "hierarchical",
                          .coll = Coll::kBroadcast,
                          .summary = "binomial tree among host leaders, then binomial inside "
                                     "each host; small messages on several hosts (hostOf)",
                          .supports = patterns::hasRegularHierarchy,
                          .build = build,
                          .priority = 1});

}  // namespace tutti::algo
