// File: algorithms/allreduce_one_shot.cc
// One-shot allreduce (the "all-pairs" allreduce of MSCCL / MSCCL++ for small messages): in round
// 0 every rank sends its whole input to every other rank. Out of place the input of rank r-1
// is reduced straight into the output (output = input op incoming); the other inputs land in
// distinct scratch blocks (several recvReduce into one range in one round would race). In
// place the output is the input being sent, so nothing is written to it in round 0 and all n-1
// inputs go to scratch. The partials (item 0 = the output, item j >= 1 = scratch block j-1)
// are then summed locally by a binary tree: in local round k item i (i a multiple of 2^(k+1))
// accumulates item i + 2^k, so the reductions of a round touch disjoint ranges and may run
// concurrently.
// Rounds: 1 communication round + ceil(log2 m) local rounds (m = n-1 items, n in place).
// Cost: alpha + (n-1) S beta (each rank injects n-1 copies of S) + (n-1) S gamma; latency-
// optimal, for small S only. Scratch: (n-2) S, (n-1) S in place. Any nranks >= 1, any count.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank;
  const size_t c = s.count;
  if (n == 1) {
    b.copy(Buf::kInput, 0, Buf::kOutput, 0, c);
    return b.finish();
  }
  // Items: the output, then one scratch block per peer not reduced straight into the output.
  const bool direct = !s.inPlace;
  const int items = direct ? n - 1 : n;
  const size_t base = b.scratch(static_cast<size_t>(items - 1) * c);
  auto item = [&](int j) { return base + static_cast<size_t>(j - 1) * c; };  // j >= 1
  for (int i = 1; i < n; ++i) b.send(patterns::mod(r + i, n), Buf::kInput, 0, c);
  if (direct) b.recvReduce(patterns::mod(r - 1, n), Buf::kInput, 0, Buf::kOutput, 0, c);
  for (int j = 1; j < items; ++j) {
    const int from = patterns::mod(direct ? r - 1 - j : r - j, n);
    b.recv(from, Buf::kScratch, item(j), c);
  }
  b.nextRound();
  for (int stride = 1; stride < items; stride *= 2) {
    for (int i = 0; i + stride < items; i += 2 * stride) {
      if (i == 0) b.reduce(Buf::kScratch, item(stride), Buf::kOutput, 0, c);
      else b.reduce(Buf::kScratch, item(i + stride), Buf::kScratch, item(i), c);
    }
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "one_shot",
                          .coll = Coll::kAllReduce,
                          .summary = "every rank sends its input to all; one round, local "
                                     "reduction; latency-optimal for small messages",
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
