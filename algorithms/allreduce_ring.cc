// File: algorithms/allreduce_ring.cc
// Ring allreduce = ring reduce-scatter (n-1 rounds) followed by ring allgather (n-1 rounds)
// (Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
// JPDC 2009). The vector is split into n chunks (sizes differ by at most one element). In
// reduce-scatter round k rank r sends chunk r-k to r+1 and receives chunk r-k-1 from r-1, which it
// reduces with its own input chunk into the output (dst = input op incoming: no extra pass).
// After n-1 rounds rank r owns the fully reduced chunk r+1; allgather round k then sends chunk
// r+1-k and receives chunk r-k. With 2 ranks out of place the two rounds are one: each rank
// sends its half, reduces the other half as it arrives and forwards it slice by slice
// (recvReduceSend), so the allgather's bytes follow the reduce-scatter's on the wire without a
// round's wait between them; in place that forward's receive would overwrite the half still
// being sent, so in-place calls keep the two rounds.
// Cost: 2(n-1) alpha + 2(n-1)/n S beta + (n-1)/n S gamma (2 ranks out of place: alpha + the
// pipeline's fill). Any nranks >= 1, any count >= 0.
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
  if (n == 2 && !s.inPlace) {
    // One round (see above): send my half, reduce the other and forward it, receive mine back.
    const auto mine = chunk(r), theirs = chunk(r + 1);
    b.send(next, Buf::kInput, mine.offset, mine.count);
    b.recvReduceSend(prev, next, Buf::kInput, theirs.offset, Buf::kOutput, theirs.offset,
                     theirs.count);
    b.recv(prev, Buf::kOutput, mine.offset, mine.count);
    b.nextRound();
    return b.finish();
  }
  for (int k = 0; k < n - 1; ++k) {
    auto out = chunk(r - k), in = chunk(r - k - 1);
    b.send(next, k == 0 ? Buf::kInput : Buf::kOutput, out.offset, out.count);
    b.recvReduce(prev, Buf::kInput, in.offset, Buf::kOutput, in.offset, in.count);
    b.nextRound();
  }
  for (int k = 0; k < n - 1; ++k) {
    auto out = chunk(r + 1 - k), in = chunk(r - k);
    b.send(next, Buf::kOutput, out.offset, out.count);
    b.recv(prev, Buf::kOutput, in.offset, in.count);
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "ring",
                          .coll = Coll::kAllReduce,
                          .summary = "reduce-scatter + allgather ring; bandwidth-optimal, 2(n-1) rounds",
                          .build = build,
                          .priority = 10});

}  // namespace tutti::algo
