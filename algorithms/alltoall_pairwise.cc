// File: algorithms/alltoall_pairwise.cc
// Pairwise-exchange all-to-all: in round k (k = 1..n-1) rank r sends its input block r+k to rank
// r+k and receives block r from rank r-k into output block r-k; round 0 copies the own block.
// Every round is a permutation, so each link carries one block per round (Thakur et al. 2005).
// Cost: (n-1) alpha + (n-1)/n S beta, S = n*count elements. Any n, any count; out of place.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank;
  const size_t c = s.count;
  b.copy(Buf::kInput, static_cast<size_t>(r) * c, Buf::kOutput, static_cast<size_t>(r) * c, c);
  b.nextRound();
  for (int k = 1; k < n; ++k) {
    const int to = patterns::mod(r + k, n), from = patterns::mod(r - k, n);
    b.send(to, Buf::kInput, static_cast<size_t>(to) * c, c);
    b.recv(from, Buf::kOutput, static_cast<size_t>(from) * c, c);
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "pairwise",
                          .coll = Coll::kAllToAll,
                          .summary = "pairwise exchange; n-1 rounds, one block per link per round",
                          .build = build,
                          .priority = 10});

}  // namespace tutti::algo
