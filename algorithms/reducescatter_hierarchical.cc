// File: algorithms/reducescatter_hierarchical.cc
// Hierarchical reduce-scatter for H hosts of L ranks each, the mirror of allgather:hierarchical
// (shared memory first, then the network): (1) ring reduce-scatter inside each host over sets of
// H blocks: the set of local index j holds the blocks of the H ranks with local index j (one per
// host). In round k (k = 0..L-2) local rank i sends its partial of set i-k-1 to i+1 and receives
// the partial of set i-k-2 from i-1, reducing it with its own input blocks of that set, one
// message per block; after L-1 rounds it holds its host's sum of set i. (2) ring reduce-scatter
// across hosts among the H ranks with local index i, over those H blocks (reducescatter:ring's
// rounds with hosts for ranks); the last round reduces into the output. Each rank sends H-1
// blocks over the network, in H-1 rounds that every local index runs at once, where the flat
// ring takes n-1 rounds, each limited by its network hop, and carries n-1 blocks through every
// host boundary.
// Rounds: (L-1) + (H-1). Cost: (L-1)(alpha_l + H S/n (beta_l + gamma)) + (H-1)(alpha_n + S/n
// (beta_n + gamma)), S = n*count, the L ranks of a host sharing its network port. Scratch: two
// sets (2 H count) and two blocks (2 count). Needs CollShape::hostOf with H >= 2 groups of
// equal size (declines otherwise); any count >= 0. In place (output == input + rank*count) the
// output is written once, by the last step.
#include "algorithms/algorithm.h"
#include "algorithms/hierarchy.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  TUTTI_TRY_ASSIGN(const patterns::Hierarchy hier, patterns::requireHierarchy(s, "reducescatter hierarchical"));
  ScheduleBuilder b(s);
  const size_t c = s.count;
  const int H = hier.groups, L = hier.perGroup, g = hier.group, li = hier.local;
  const auto& members = hier.members;
  auto at = [&](int rank) { return static_cast<size_t>(rank) * c; };  // a rank's input block

  // (1) inside the host. Partials of a set alternate between two scratch sets.
  const auto& host = members[g];
  const int next = host[patterns::ringNext(li, L)], prev = host[patterns::ringPrev(li, L)];
  const size_t sets = L > 1 ? b.scratch(2 * static_cast<size_t>(H) * c) : 0;
  auto set = [&](int k, int h) { return sets + (static_cast<size_t>(k % 2) * H + h) * c; };
  for (int k = 0; k < L - 1; ++k) {
    const int out = patterns::mod(li - k - 1, L), in = patterns::mod(li - k - 2, L);
    for (int h = 0; h < H; ++h) {
      if (k == 0) b.send(next, Buf::kInput, at(members[h][out]), c);
      else b.send(next, Buf::kScratch, set(k - 1, h), c);
      b.recvReduce(prev, Buf::kInput, at(members[h][in]), Buf::kScratch, set(k, h), c);
    }
    b.nextRound();
  }
  // This host's sum of the block of rank (h, li): the last set, or the input when L == 1.
  auto hostSum = [&](int h) {
    return L > 1 ? std::pair{Buf::kScratch, set(L - 2, h)}
                 : std::pair{Buf::kInput, at(members[h][li])};
  };

  // (2) across hosts, among local index li: reducescatter:ring over the H blocks.
  const int gnext = members[patterns::ringNext(g, H)][li];
  const int gprev = members[patterns::ringPrev(g, H)][li];
  const size_t blocks = H > 2 ? b.scratch(2 * c) : 0;
  auto partial = [&](int k) { return blocks + static_cast<size_t>(k % 2) * c; };
  for (int k = 0; k < H - 1; ++k) {
    const int out = patterns::mod(g - k - 1, H), in = patterns::mod(g - k - 2, H);
    if (k == 0) {
      const auto [buf, off] = hostSum(out);
      b.send(gnext, buf, off, c);
    } else {
      b.send(gnext, Buf::kScratch, partial(k - 1), c);
    }
    const auto [src, srcOff] = hostSum(in);
    if (k == H - 2) b.recvReduce(gprev, src, srcOff, Buf::kOutput, 0, c);
    else b.recvReduce(gprev, src, srcOff, Buf::kScratch, partial(k), c);
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "hierarchical",
                          .coll = Coll::kReduceScatter,
                          .summary = "ring reduce-scatter inside each host over sets of one "
                                     "block per host, then ring reduce-scatter across hosts "
                                     "among ranks of one local index; several hosts (hostOf)",
                          .supports = patterns::hasRegularHierarchy,
                          .build = build,
                          .priority = 1});

}  // namespace tutti::algo
