// File: algorithms/allreduce_one_shot.cc
// One-shot allreduce (the "all-pairs" allreduce of MSCCL / MSCCL++ for small messages): in round
// 0 every rank sends its whole input to every other rank; then every rank sums the n inputs
// locally. With 2 ranks the peer's input is reduced straight into the output as it arrives
// (output = input op incoming; a op b == b op a, so both ranks get the same bits). With n >= 3
// every rank sums in one canonical binary tree over rank numbers, the same on every rank: in
// local round k node i (i a multiple of 2^(k+1)) accumulates node i + 2^k. Floating-point sums
// depend on their grouping, and a tree that started from each rank's own input would leave the
// ranks with results a few ulps apart (data-parallel replicas would drift). Out of place, rank
// 0's input is received straight into the output (rank 0 copies its own), where node 0
// accumulates; the other inputs land in scratch blocks, and a node whose data is the read-only
// input accumulates in its partner's block instead. In place the output is the input being
// sent, so nothing is written to it in round 0; node 0's result is copied into it at the end
// where it did not accumulate there.
// Rounds: 1 communication round (n = 2), or 1 + ceil(log2 n) local rounds + 1 (n >= 3; the
// last only in place). Cost: alpha + (n-1) S beta (each rank injects n-1 copies of S) + (n-1) S
// gamma; latency-optimal, for small S only. Scratch: n S for n >= 3. Any nranks >= 1, any count.
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
  if (n == 2) {
    const int peer = 1 - r;
    b.send(peer, Buf::kInput, 0, c);
    if (!s.inPlace) {
      b.recvReduce(peer, Buf::kInput, 0, Buf::kOutput, 0, c);
      return b.finish();
    }
    const size_t tmp = b.scratch(c);
    b.recv(peer, Buf::kScratch, tmp, c);
    b.nextRound();
    b.reduce(Buf::kScratch, tmp, Buf::kOutput, 0, c);
    return b.finish();
  }
  // Where node p's partial lives; the input is read-only (in place it is the output).
  struct Loc {
    Buf buf;
    size_t offset;
    bool operator==(const Loc&) const = default;
  };
  const Loc output{Buf::kOutput, 0};
  const size_t base = b.scratch(static_cast<size_t>(n) * c);
  std::vector<Loc> loc(n);
  for (int p = 0; p < n; ++p) loc[p] = {Buf::kScratch, base + static_cast<size_t>(p) * c};
  loc[r] = s.inPlace ? output : Loc{Buf::kInput, 0};
  if (!s.inPlace) loc[0] = output;
  for (int i = 1; i < n; ++i) b.send(patterns::mod(r + i, n), Buf::kInput, 0, c);
  for (int q = 0; q < n; ++q)
    if (q != r) b.recv(q, loc[q].buf, loc[q].offset, c);
  if (!s.inPlace && r == 0) b.copy(Buf::kInput, 0, Buf::kOutput, 0, c);
  b.nextRound();
  for (int stride = 1; stride < n; stride *= 2) {
    for (int i = 0; i + stride < n; i += 2 * stride) {
      const int j = i + stride;
      if (loc[i].buf == Buf::kInput) {  // accumulate in j's block instead
        b.reduce(loc[i].buf, loc[i].offset, loc[j].buf, loc[j].offset, c);
        loc[i] = loc[j];
      } else {
        b.reduce(loc[j].buf, loc[j].offset, loc[i].buf, loc[i].offset, c);
      }
    }
    b.nextRound();
  }
  if (!(loc[0] == output)) b.copy(loc[0].buf, loc[0].offset, Buf::kOutput, 0, c);
  b.nextRound();
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
