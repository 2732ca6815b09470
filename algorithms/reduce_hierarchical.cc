// File: algorithms/reduce_hierarchical.cc
// Hierarchical reduce for H hosts of L ranks each (MPICH's SMP-aware reduce), the mirror of
// broadcast:hierarchical: (1) binomial reduce inside each host to its leader, the rank with the
// root's local index; (2) binomial reduce among the H leaders to the root, groups numbered
// relative to the root's host. Every reduction tree below is reduce:binomial's: in round j
// (distance d = 2^j) a rank whose lowest set bit (relative number) is d sends its partial to the
// rank d below and is done; a multiple of 2d receives the partial of the rank d above and
// reduces it. The root accumulates into its output, the others into scratch (a non-root rank
// has no output buffer); a rank that received nothing sends its input. The flat binomial tree
// crosses the network in every round whose distance spans a host boundary; this one in
// ceil(log2 H) rounds only.
// Rounds: ceil(log2 L) + ceil(log2 H). Cost: ceil(log2 L)(alpha_l + S beta_l + S gamma) +
// ceil(log2 H)(alpha_n + S beta_n + S gamma). Needs CollShape::hostOf with H >= 2 groups of
// equal size (declines otherwise); any count >= 0, any root.
#include "algorithms/algorithm.h"
#include "algorithms/hierarchy.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  TUTTI_TRY_ASSIGN(const patterns::Hierarchy hier, patterns::requireHierarchy(s, "reduce hierarchical"));
  ScheduleBuilder b(s);
  const size_t c = s.count;
  const int H = hier.groups, L = hier.perGroup, g = hier.group, li = hier.local;
  const auto [rootGroup, rootLocal] = patterns::placeOf(hier, s, s.root);
  const auto& host = hier.members[g];
  const int lv = patterns::mod(li - rootLocal, L);  // inside the host, relative to its leader
  const int gv = patterns::mod(g - rootGroup, H);   // among the leaders, relative to the root's
  auto local = [&](int rel) { return host[patterns::mod(rel + rootLocal, L)]; };
  auto leader = [&](int rel) { return hier.members[patterns::mod(rel + rootGroup, H)][rootLocal]; };

  const bool isRoot = s.rank == s.root;
  const bool receives =
      (lv % 2 == 0 && lv + 1 < L) || (lv == 0 && gv % 2 == 0 && gv + 1 < H);
  const Buf accBuf = isRoot ? Buf::kOutput : Buf::kScratch;
  const size_t acc = !isRoot && receives ? b.scratch(c) : 0;
  bool reduced = false;  // the partial is in accBuf (else still the input)
  bool done = false;     // this rank has sent its partial on
  // One level of a binomial reduce over `count` members numbered v relative to its target.
  auto level = [&](int v, int count, int d, auto member) {
    if (done) return;
    if (v % (2 * d) == d) {
      b.send(member(v - d), reduced ? accBuf : Buf::kInput, reduced ? acc : 0, c);
      done = true;
    } else if (v % (2 * d) == 0 && v + d < count) {
      b.recvReduce(member(v + d), reduced ? accBuf : Buf::kInput, reduced ? acc : 0, accBuf, acc,
                   c);
      reduced = true;
    }
  };
  // (1) inside the host, to its leader.
  for (int d = 1; d < L; d *= 2) {
    level(lv, L, d, local);
    b.nextRound();
  }
  // (2) among the leaders, to the root.
  for (int d = 1; d < H; d *= 2) {
    if (lv == 0) level(gv, H, d, leader);
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "hierarchical",
                          .coll = Coll::kReduce,
                          .summary = "binomial reduce inside each host to a leader, then among "
                                     "the leaders to the root; small messages on several hosts "
                                     "(hostOf)",
                          .supports = patterns::hasRegularHierarchy,
                          .build = build,
                          .priority = 1});

}  // namespace tutti::algo
