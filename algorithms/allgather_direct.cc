// File: algorithms/allgather_direct.cc
// Direct allgather: in one round every rank sends its input to every other rank and receives
// each peer's block straight into its output, while copying its own input to output block r
// (skipped in place, where the input is output block r).
// Rounds: 1. Cost: alpha + (n-1)/n S beta per link, S = n*count elements; each rank injects
// (n-1) count elements over n-1 links at once, so it needs a full mesh (one host, NVLink).
// Any nranks >= 1, any count >= 0.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank;
  const size_t c = s.count;
  b.copy(Buf::kInput, 0, Buf::kOutput, static_cast<size_t>(r) * c, c);
  for (int i = 1; i < n; ++i) b.send(patterns::mod(r + i, n), Buf::kInput, 0, c);
  for (int i = 1; i < n; ++i) {
    const int from = patterns::mod(r - i, n);
    b.recv(from, Buf::kOutput, static_cast<size_t>(from) * c, c);
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "direct",
                          .coll = Coll::kAllGather,
                          .summary = "every rank sends to every rank; one round, full mesh",
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
