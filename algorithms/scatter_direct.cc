// File: algorithms/scatter_direct.cc
// Direct scatter: the root sends input block p to every rank p concurrently and copies its own
// block; the others receive into their output. One round.
// Cost: alpha + (n-1)/n S beta at the root's link (S = n*count elements). Any n, any count.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const size_t c = s.count;
  if (s.rank != s.root) {
    b.recv(s.root, Buf::kOutput, 0, c);
    return b.finish();
  }
  for (int p = 0; p < s.nranks; ++p) {
    if (p == s.rank) b.copy(Buf::kInput, static_cast<size_t>(p) * c, Buf::kOutput, 0, c);
    else b.send(p, Buf::kInput, static_cast<size_t>(p) * c, c);
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "direct",
                          .coll = Coll::kScatter,
                          .summary = "the root sends straight to every rank; one round",
                          .build = build,
                          .priority = 10});

}  // namespace tutti::algo
