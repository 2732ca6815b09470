// File: algorithms/broadcast_binomial.cc
// Binomial-tree broadcast (MPICH bcast_intra_binomial; Thakur, Rabenseifner, Gropp, IJHPCA 2005,
// section 4.2). Ranks are numbered relative to the root (v = r - root mod n) and L =
// ceil(log2 n). In round j the distance is d = 2^(L-1-j): every rank v that already holds the
// data (v a multiple of 2d) sends it to v + d, if that exists. So v receives once, from v minus
// its lowest set bit, in the round of that bit, and then sends to v + d for every smaller power
// of two d. The root sends from its input and copies it to its output (skipped in place); the
// others receive into their output and forward from it.
// Rounds: ceil(log2 n). Cost: ceil(log2 n)(alpha + S beta): latency-optimal, for small S.
// Any nranks >= 1, any count >= 0, any root.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank, v = patterns::mod(r - s.root, n);
  const size_t c = s.count;
  auto real = [&](int rel) { return patterns::mod(rel + s.root, n); };
  const int levels = patterns::ceilLog2(n);
  if (v == 0) b.copy(Buf::kInput, 0, Buf::kOutput, 0, c);
  for (int j = 0; j < levels; ++j) {
    const int d = 1 << (levels - 1 - j);
    if (v % (2 * d) == 0 && v + d < n) {
      b.send(real(v + d), v == 0 ? Buf::kInput : Buf::kOutput, 0, c);
    } else if (v % (2 * d) == d) {
      b.recv(real(v - d), Buf::kOutput, 0, c);
    }
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "binomial",
                          .coll = Coll::kBroadcast,
                          .summary = "binomial tree from the root; ceil(log2 n) rounds, small "
                                     "messages",
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
