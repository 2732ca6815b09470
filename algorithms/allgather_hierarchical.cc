// File: algorithms/allgather_hierarchical.cc
// Hierarchical allgather for H hosts of L ranks each (the 2D allgather of multi-node libraries:
// network first, then shared memory): (1) ring allgather across hosts among the H ranks with
// the same local index: in round k (k = 0..H-2) rank (g, i) sends the block of rank (g-k, i) to
// (g+1, i) and receives the block of (g-k-1, i) from (g-1, i), so it ends with the block of every
// rank with local index i; (2) ring allgather inside each host of those H-block sets: in round
// k (k = 0..L-2) local rank i sends the H blocks of local index i-k to i+1 and receives those of
// i-k-1 from i-1, one message per block, into their places in the output. Each block crosses
// the network once per host (H-1 times in all, in H-1 rounds of every local index at once),
// where the flat ring takes n-1 rounds each limited by a network hop and carries n-1 blocks
// through every host boundary.
// Rounds: (H-1) + (L-1). Cost: (H-1)(alpha_n + S/n beta_n), with the L ranks of a host sharing
// its network port, + (L-1)(alpha_l + H S/n beta_l), S = n*count. Needs CollShape::hostOf with
// H >= 2 groups of equal size (declines otherwise); any count >= 0. In place (input == output +
// rank*count) the first copy is skipped by the engine.
#include "algorithms/algorithm.h"
#include "algorithms/hierarchy.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  TUTTI_TRY_ASSIGN(const patterns::Hierarchy hier, patterns::requireHierarchy(s, "allgather hierarchical"));
  ScheduleBuilder b(s);
  const size_t c = s.count;
  const int H = hier.groups, L = hier.perGroup, g = hier.group, li = hier.local;
  const auto& members = hier.members;
  auto at = [&](int rank) { return static_cast<size_t>(rank) * c; };  // a rank's block

  // (1) across hosts, among local index li. Round 0 sends from the input while it is copied.
  b.copy(Buf::kInput, 0, Buf::kOutput, at(s.rank), c);
  const int gnext = members[patterns::ringNext(g, H)][li];
  const int gprev = members[patterns::ringPrev(g, H)][li];
  for (int k = 0; k < H - 1; ++k) {
    const int out = members[patterns::mod(g - k, H)][li];
    const int in = members[patterns::mod(g - k - 1, H)][li];
    if (k == 0) b.send(gnext, Buf::kInput, 0, c);
    else b.send(gnext, Buf::kOutput, at(out), c);
    b.recv(gprev, Buf::kOutput, at(in), c);
    b.nextRound();
  }

  // (2) inside the host: the H blocks of one local index per message set, in host order.
  const auto& host = members[g];
  const int next = host[patterns::ringNext(li, L)], prev = host[patterns::ringPrev(li, L)];
  for (int k = 0; k < L - 1; ++k) {
    const int out = patterns::mod(li - k, L), in = patterns::mod(li - k - 1, L);
    for (int h = 0; h < H; ++h) {
      b.send(next, Buf::kOutput, at(members[h][out]), c);
      b.recv(prev, Buf::kOutput, at(members[h][in]), c);
    }
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "hierarchical",
                          .coll = Coll::kAllGather,
                          .summary = "ring allgather across hosts among ranks of one local "
                                     "index, then ring allgather inside each host; several "
                                     "hosts (hostOf)",
                          .supports = patterns::hasRegularHierarchy,
                          .build = build,
                          .priority = 1});

}  // namespace tutti::algo
