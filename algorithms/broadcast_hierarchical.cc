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

bool supports(const CollShape& s) { return patterns::regularHierarchy(s).has_value(); }

int ceilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

Result<Schedule> build(const CollShape& s) {
  auto hier = patterns::regularHierarchy(s);
  if (!hier)
    return invalidArgument("broadcast hierarchical: needs hostOf with equal groups (nranks={})",
                           s.nranks);
  ScheduleBuilder b(s);
  const size_t c = s.count;
  const int H = hier->groups, L = hier->perGroup, g = hier->group, li = hier->local;
  const auto [rootGroup, rootLocal] = patterns::placeOf(*hier, s, s.root);
  const bool isRoot = s.rank == s.root;
  // Where this rank's copy of the data is once it has it.
  const Buf have = isRoot ? Buf::kInput : Buf::kOutput;
  if (isRoot) b.copy(Buf::kInput, 0, Buf::kOutput, 0, c);

  // (1) binomial broadcast among the leaders (local index rootLocal), groups relative to the
  // root's.
  const int gv = patterns::mod(g - rootGroup, H);
  auto leader = [&](int rel) { return hier->members[patterns::mod(rel + rootGroup, H)][rootLocal]; };
  const int levelsH = ceilLog2(H);
  for (int j = 0; j < levelsH; ++j) {
    const int d = 1 << (levelsH - 1 - j);
    if (li == rootLocal) {
      if (gv % (2 * d) == 0 && gv + d < H) b.send(leader(gv + d), have, 0, c);
      else if (gv % (2 * d) == d) b.recv(leader(gv - d), Buf::kOutput, 0, c);
    }
    b.nextRound();
  }

  // (2) binomial broadcast inside the host from its leader, local indices relative to it.
  const auto& host = hier->members[g];
  const int lv = patterns::mod(li - rootLocal, L);
  auto local = [&](int rel) { return host[patterns::mod(rel + rootLocal, L)]; };
  const int levelsL = ceilLog2(L);
  for (int j = 0; j < levelsL; ++j) {
    const int d = 1 << (levelsL - 1 - j);
    if (lv % (2 * d) == 0 && lv + d < L) b.send(local(lv + d), have, 0, c);
    else if (lv % (2 * d) == d) b.recv(local(lv - d), Buf::kOutput, 0, c);
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "hierarchical",
                          .coll = Coll::kBroadcast,
                          .summary = "binomial tree among host leaders, then binomial inside "
                                     "each host; small messages on several hosts (hostOf)",
                          .supports = supports,
                          .build = build,
                          .priority = 1});

}  // namespace tutti::algo
