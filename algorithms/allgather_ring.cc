// File: algorithms/allgather_ring.cc
// Ring allgather: in round k (k = 0..n-2) rank r sends block r-k to r+1 and receives block r-k-1
// from r-1, so after n-1 rounds every rank holds all n blocks. Round 0 sends straight from the
// input while copying it into the output (no extra round). In place (input == output + r*count)
// the copy is skipped by the engine because source and destination coincide.
// Cost: (n-1) alpha + (n-1)/n S beta, S = n*count elements. Any nranks >= 1, any count >= 0.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank;
  const int next = patterns::ringNext(r, n), prev = patterns::ringPrev(r, n);
  const size_t c = s.count;
  b.copy(Buf::kInput, 0, Buf::kOutput, static_cast<size_t>(r) * c, c);
  for (int k = 0; k < n - 1; ++k) {
    const size_t sendBlock = patterns::mod(r - k, n), recvBlock = patterns::mod(r - k - 1, n);
    if (k == 0) b.send(next, Buf::kInput, 0, c);
    else b.send(next, Buf::kOutput, sendBlock * c, c);
    b.recv(prev, Buf::kOutput, recvBlock * c, c);
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "ring",
                          .coll = Coll::kAllGather,
                          .summary = "ring allgather; bandwidth-optimal, n-1 rounds",
                          .build = build,
                          .priority = 10});

}  // namespace tutti::algo
