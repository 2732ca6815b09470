// File: algorithms/allreduce_hierarchical_leader.cc
// Latency-oriented hierarchical allreduce for H hosts of L ranks each (MPICH's SMP-aware
// allreduce, NCCL's tree across nodes with a chain inside): (1) binomial reduce inside each host
// to its leader, the host's lowest rank (ceil(log2 L) rounds); (2) recursive-doubling allreduce
// among the H leaders, with MPICH's fold when H is not a power of two (log2 p + 2 rounds,
// p = largest power of two <= H); (3) binomial broadcast inside each host from the leader
// (ceil(log2 L) rounds). Whole vectors move in every round, so it suits small messages: only
// log2 H network latencies instead of the flat algorithms' log2 n or 2(n-1).
// Rounds: 2 ceil(log2 L) + log2 p + 2. Cost: 2 ceil(log2 L)(alpha_l + S beta_l) +
// (log2 p + 2)(alpha_n + S beta_n) + reductions. Needs CollShape::hostOf with H >= 2 groups of
// equal size (declines otherwise); any count >= 0.
#include "algorithms/algorithm.h"
#include "algorithms/hierarchy.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  TUTTI_TRY_ASSIGN(const patterns::Hierarchy hier, patterns::requireHierarchy(s, "hierarchical_leader"));
  ScheduleBuilder b(s);
  const size_t c = s.count;
  const int L = hier.perGroup, H = hier.groups, li = hier.local, g = hier.group;
  const auto& host = hier.members[g];
  const int logL = patterns::ceilLog2(L);

  // (1) binomial reduce to local index 0; the partial lives in the input until the first
  // receive, then in the output.
  Buf partial = Buf::kInput;
  bool sent = false;
  for (int j = 0; j < logL; ++j) {
    const int mask = 1 << j;
    if (!sent && (li & mask)) {
      b.send(host[li - mask], partial, 0, c);
      sent = true;
    } else if (!sent && li + mask < L) {
      b.recvReduce(host[li + mask], partial, 0, Buf::kOutput, 0, c);
      partial = Buf::kOutput;
    }
    b.nextRound();
  }

  // (2) recursive doubling among the leaders (local index 0 of every host), in leader numbers.
  const bool leader = li == 0;
  const patterns::PowerOfTwoFold fold(g, H);
  const int steps = fold.steps;
  auto leaderOf = [&](int group) { return hier.members[group][0]; };
  // Before exchange j the partial is in where(j); where(steps) is the output.
  auto where = [&](int j) { return (steps - j) % 2 == 0 ? Buf::kOutput : Buf::kScratch; };
  const size_t tmp = leader && steps >= 1 ? b.scratch(c) : 0;
  auto off = [&](Buf buf) { return buf == Buf::kScratch ? tmp : size_t{0}; };
  // Fold round: senders hand their partial over; the others move theirs to where(0).
  if (leader) {
    if (fold.sender) {
      b.send(leaderOf(g + 1), partial, 0, c);
    } else if (fold.receiver) {
      b.recvReduce(leaderOf(g - 1), partial, off(partial), where(0), off(where(0)), c);
    } else if (partial != where(0)) {
      b.copy(partial, 0, where(0), off(where(0)), c);
    }
  }
  b.nextRound();
  for (int j = 0; j < steps; ++j) {
    if (leader && !fold.sender) {
      const int peer = leaderOf(fold.realRank(fold.newRank ^ (1 << j)));
      b.send(peer, where(j), off(where(j)), c);
      b.recvReduce(peer, where(j), off(where(j)), where(j + 1), off(where(j + 1)), c);
    }
    b.nextRound();
  }
  if (leader && fold.sender) b.recv(leaderOf(g + 1), Buf::kOutput, 0, c);
  else if (leader && fold.receiver) b.send(leaderOf(g - 1), Buf::kOutput, 0, c);
  b.nextRound();

  // (3) binomial broadcast from local index 0 (the reduce's tree, reversed).
  for (int j = logL - 1; j >= 0; --j) {
    const int mask = 1 << j;
    if (li % (2 * mask) == 0 && li + mask < L) b.send(host[li + mask], Buf::kOutput, 0, c);
    else if (li % (2 * mask) == mask) b.recv(host[li - mask], Buf::kOutput, 0, c);
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "hierarchical_leader",
                          .coll = Coll::kAllReduce,
                          .summary = "intra-host binomial reduce, recursive doubling among host "
                                     "leaders, intra-host binomial broadcast; small messages on "
                                     "several hosts (hostOf)",
                          .supports = patterns::hasRegularHierarchy,
                          .build = build,
                          .priority = 1});

}  // namespace tutti::algo
