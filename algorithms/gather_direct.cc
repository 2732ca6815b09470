// File: algorithms/gather_direct.cc
// Direct gather: every non-root rank sends its input to the root, which receives all n-1 blocks
// concurrently into output block p and copies its own block. One round.
// Cost: alpha + (n-1)/n S beta at the root's link (S = n*count elements). Any n, any count.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const size_t c = s.count;
  if (s.rank != s.root) {
    b.send(s.root, Buf::kInput, 0, c);
    return b.finish();
  }
  for (int p = 0; p < s.nranks; ++p) {
    if (p == s.rank) b.copy(Buf::kInput, 0, Buf::kOutput, static_cast<size_t>(p) * c, c);
    else b.recv(p, Buf::kOutput, static_cast<size_t>(p) * c, c);
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "direct",
                          .coll = Coll::kGather,
                          .summary = "every rank sends straight to the root; one round",
                          .build = build,
                          .priority = 10});

}  // namespace tutti::algo
