// File: algorithms/reduce_reducescatter_gather.cc
// Reduce = reduce-scatter + gather (Rabenseifner's reduce; Thakur, Rabenseifner, Gropp, IJHPCA
// 2005, section 4.5), here with a ring reduce-scatter and a direct gather. The vector is split
// into n chunks (evenChunk). Ring reduce-scatter, round k (k = 0..n-2): rank r sends its partial
// of chunk r-k to r+1 and receives the partial of chunk r-k-1 from r-1, reducing it with its own
// input chunk into its accumulator (dst = input op incoming). After n-1 rounds rank r holds the
// reduced chunk r+1. Last round: every rank sends that chunk to the root, which receives them
// straight into its output. The root accumulates in its output; the others in scratch (a
// non-root rank has no output buffer). In place at the root, each input chunk is read only by
// the step that overwrites that same range.
// Rounds: n. Cost: n alpha + 2 (n-1)/n S beta (the last (n-1)/n S all into the root's link) +
// (n-1)/n S gamma: bandwidth-optimal reduce for large S.
// Any nranks >= 1, any count >= 0 (empty chunks when count < n), any root.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank;
  const int next = patterns::ringNext(r, n), prev = patterns::ringPrev(r, n);
  auto chunk = [&](long i) { return patterns::evenChunk(s.count, n, patterns::mod(i, n)); };
  if (n == 1) {
    b.copy(Buf::kInput, 0, Buf::kOutput, 0, s.count);
    return b.finish();
  }
  const bool root = r == s.root;
  const Buf accBuf = root ? Buf::kOutput : Buf::kScratch;
  const size_t acc = root ? 0 : b.scratch(s.count);  // acc + element offset
  for (int k = 0; k < n - 1; ++k) {
    const auto out = chunk(r - k), in = chunk(r - k - 1);
    if (k == 0) b.send(next, Buf::kInput, out.offset, out.count);
    else b.send(next, accBuf, acc + out.offset, out.count);
    b.recvReduce(prev, Buf::kInput, in.offset, accBuf, acc + in.offset, in.count);
    b.nextRound();
  }
  const auto mine = chunk(r + 1);
  if (!root) {
    b.send(s.root, Buf::kScratch, acc + mine.offset, mine.count);
  } else {
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      const auto theirs = chunk(p + 1);
      b.recv(p, Buf::kOutput, theirs.offset, theirs.count);
    }
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "reducescatter_gather",
                          .coll = Coll::kReduce,
                          .summary = "ring reduce-scatter + direct gather to the root; "
                                     "bandwidth-optimal for large messages",
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
