// File: algorithms/reducescatter_pairwise.cc
// Pairwise-exchange reduce-scatter (Thakur, Rabenseifner, Gropp, IJHPCA 2005, section 4.3, the
// long-message algorithm for non-commutative ops and MPICH reduce_scatter_intra_pairwise): in
// round k (k = 1..n-1) rank r sends its input block r+k to rank r+k and receives block r from
// rank r-k, reducing it into the output (first round: output = input block r op incoming, then
// output op= incoming). Every round is a permutation, so each link carries one block per round.
// In place the output is input block r, which is never sent.
// Rounds: n-1. Cost: (n-1) alpha + (n-1)/n S beta + (n-1)/n S gamma, S = n*count elements.
// Any nranks >= 1, any count >= 0.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank;
  const size_t c = s.count, own = static_cast<size_t>(r) * c;
  if (n == 1) {
    b.copy(Buf::kInput, 0, Buf::kOutput, 0, c);
    return b.finish();
  }
  for (int k = 1; k < n; ++k) {
    const int to = patterns::mod(r + k, n), from = patterns::mod(r - k, n);
    b.send(to, Buf::kInput, static_cast<size_t>(to) * c, c);
    if (k == 1) b.recvReduce(from, Buf::kInput, own, Buf::kOutput, 0, c);
    else b.recvReduce(from, Buf::kOutput, 0, Buf::kOutput, 0, c);
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "pairwise",
                          .coll = Coll::kReduceScatter,
                          .summary = "pairwise exchange; n-1 rounds, one block per link per round",
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
