// File: algorithms/barrier_dissemination.cc
// Dissemination barrier (Hensgen, Finkel, Manber 1988): in round k (k = 0..ceil(log2 n)-1) rank r
// sends a one-byte token to r+2^k and waits for the token from r-2^k. After the last round every
// rank has heard, directly or transitively, from every other rank. Tokens live in scratch.
// Cost: ceil(log2 n) alpha. Any nranks >= 1.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank;
  if (n == 1) return b.finish();
  const size_t token = b.scratch(2);  // [0]: sent, [1]: received (never read)
  for (int dist = 1; dist < n; dist *= 2) {
    b.send(patterns::mod(r + dist, n), Buf::kScratch, token, 1);
    b.recv(patterns::mod(r - dist, n), Buf::kScratch, token + 1, 1);
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "dissemination",
                          .coll = Coll::kBarrier,
                          .summary = "dissemination barrier; ceil(log2 n) rounds of 1-byte tokens",
                          .build = build,
                          .priority = 10});

}  // namespace tutti::algo
