// File: algorithms/reducescatter_ring.cc
// Ring reduce-scatter: block i (count elements) ends on rank i. In round k (k = 0..n-2) rank r
// sends its partial sum of block r-k-1 to r+1 and receives the partial of block r-k-2 from r-1,
// reducing it with its own input block (dst = input op incoming). Partials alternate between two
// scratch blocks; the last round reduces straight into the output (block r). In place
// (output == input + r*count) the last round reads and writes the same range.
// Cost: (n-1) alpha + (n-1)/n S beta + (n-1)/n S gamma, S = n*count elements. Any n, any count.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank;
  const int next = patterns::ringNext(r, n), prev = patterns::ringPrev(r, n);
  const size_t c = s.count;
  if (n == 1) {
    b.copy(Buf::kInput, 0, Buf::kOutput, 0, c);
    return b.finish();
  }
  const size_t scratch = n > 2 ? b.scratch(2 * c) : 0;
  auto partial = [&](int k) { return scratch + static_cast<size_t>(k % 2) * c; };
  for (int k = 0; k < n - 1; ++k) {
    const size_t sendBlock = patterns::mod(r - k - 1, n), recvBlock = patterns::mod(r - k - 2, n);
    if (k == 0) b.send(next, Buf::kInput, sendBlock * c, c);
    else b.send(next, Buf::kScratch, partial(k - 1), c);
    if (k == n - 2) b.recvReduce(prev, Buf::kInput, recvBlock * c, Buf::kOutput, 0, c);
    else b.recvReduce(prev, Buf::kInput, recvBlock * c, Buf::kScratch, partial(k), c);
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "ring",
                          .coll = Coll::kReduceScatter,
                          .summary = "ring reduce-scatter; bandwidth-optimal, n-1 rounds",
                          .build = build,
                          .priority = 10});

}  // namespace tutti::algo
