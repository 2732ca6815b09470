// File: algorithms/allgather_bruck.cc
// Bruck allgather (Bruck, Ho, Kipnis, Upfal, Weathersby, "Efficient algorithms for all-to-all
// communications in multiport message-passing systems", IEEE TPDS 1997): rank r keeps the blocks
// in rotated order in scratch, position i holding the block of rank r+i. Round j (distance
// d = 2^j < n) sends positions [0, m) with m = min(d, n-d) to rank r-d and receives positions
// [d, d+m) from rank r+d (its positions [0, m) are the blocks of ranks r+d, ...): one contiguous
// message per round for any n. Round 0 sends straight from the input while copying it to
// position 0. A last local round rotates: positions [0, n-r) go to output blocks [r, n) and
// positions [n-r, n) to output blocks [0, r). In place the input (output block r) is read in
// round 0 only, so the rotation may overwrite it.
// Rounds: ceil(log2 n) + 1 (local). Cost: ceil(log2 n) alpha + (n-1)/n S beta + S copy, S =
// n*count elements; latency-optimal for any n (small messages). Scratch: S.
// Any nranks >= 1, any count >= 0.
#include <algorithm>

#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank;
  const size_t c = s.count;
  if (n == 1) {
    b.copy(Buf::kInput, 0, Buf::kOutput, 0, c);
    return b.finish();
  }
  const size_t rot = b.scratch(static_cast<size_t>(n) * c);
  auto pos = [&](int i) { return rot + static_cast<size_t>(i) * c; };
  b.copy(Buf::kInput, 0, Buf::kScratch, pos(0), c);
  for (int d = 1; d < n; d *= 2) {
    const int m = std::min(d, n - d);
    if (d == 1) b.send(patterns::mod(r - d, n), Buf::kInput, 0, c);
    else b.send(patterns::mod(r - d, n), Buf::kScratch, pos(0), static_cast<size_t>(m) * c);
    b.recv(patterns::mod(r + d, n), Buf::kScratch, pos(d), static_cast<size_t>(m) * c);
    b.nextRound();
  }
  const size_t head = static_cast<size_t>(n - r) * c, tail = static_cast<size_t>(r) * c;
  b.copy(Buf::kScratch, pos(0), Buf::kOutput, tail, head);
  b.copy(Buf::kScratch, pos(n - r), Buf::kOutput, 0, tail);
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "bruck",
                          .coll = Coll::kAllGather,
                          .summary = "Bruck; ceil(log2 n) rounds for any n, then a local "
                                     "rotation; small messages",
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
