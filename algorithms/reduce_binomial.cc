// File: algorithms/reduce_binomial.cc
// Binomial-tree reduce (MPICH reduce_intra_binomial; Thakur, Rabenseifner, Gropp, IJHPCA 2005,
// section 4.5). Ranks are numbered relative to the root (v = r - root mod n). In round j
// (distance d = 2^j) every rank v whose lowest set bit is d sends its partial to v - d and is
// done; every rank v that is a multiple of 2d receives the partial of v + d (if it exists) and
// reduces it into its accumulator (first receive: acc = input op incoming, later acc op=
// incoming). The root accumulates into its output; the others into scratch (a non-root rank has
// no output buffer). A rank that received nothing (a leaf) sends its input.
// Rounds: ceil(log2 n). Cost: ceil(log2 n)(alpha + S beta + S gamma): latency-optimal, for
// small S. Any nranks >= 1, any count >= 0, any root.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank, v = patterns::mod(r - s.root, n);
  const size_t c = s.count;
  auto real = [&](int rel) { return patterns::mod(rel + s.root, n); };
  if (n == 1) {
    b.copy(Buf::kInput, 0, Buf::kOutput, 0, c);
    return b.finish();
  }
  // v receives from v + d for every d below its lowest set bit (all d for the root).
  const bool receives = v == 0 || (v % 2 == 0 && v + 1 < n);
  const Buf accBuf = v == 0 ? Buf::kOutput : Buf::kScratch;
  const size_t acc = v != 0 && receives ? b.scratch(c) : 0;
  bool reduced = false;
  for (int d = 1; d < n; d *= 2) {
    if (v % (2 * d) == d) {
      b.send(real(v - d), reduced ? accBuf : Buf::kInput, reduced ? acc : 0, c);
    } else if (v % (2 * d) == 0 && v + d < n) {
      b.recvReduce(real(v + d), reduced ? accBuf : Buf::kInput, reduced ? acc : 0, accBuf, acc,
                   c);
      reduced = true;
    }
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "binomial",
                          .coll = Coll::kReduce,
                          .summary = "binomial tree to the root; ceil(log2 n) rounds, small "
                                     "messages",
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
