// File: algorithms/allreduce_two_shot.cc
// Two-shot allreduce (MSCCL++ / vLLM custom allreduce for medium messages): a reduce-scatter by
// direct exchange followed by an allgather by direct exchange. The vector is split into n chunks
// (evenChunk). Round 0: rank r sends chunk p of its input to every rank p and receives chunk r
// from every peer: the one from r-1 is reduced straight into output chunk r (= input op
// incoming), the others land in distinct scratch blocks (several recvReduce into one range in
// one round would race). Local rounds sum the partials by a binary tree (item 0 = output chunk
// r, item j >= 1 = scratch block j-1; in local round k item i, a multiple of 2^(k+1), accumulates
// item i + 2^k: disjoint ranges per round). Last round: rank r sends its reduced chunk to every
// peer and receives theirs. In place, chunk r of the input is the only range written before the
// last round, and no peer is sent it in round 0.
// Rounds: 2 communication rounds + ceil(log2(n-1)) local rounds.
// Cost: 2 alpha + 2 (n-1)/n S beta + (n-1)/n S gamma (all links busy at once: needs a full
// mesh, e.g. one host). Scratch: (n-2) S/n. Any nranks >= 1, any count >= 0.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank;
  if (n == 1) {
    b.copy(Buf::kInput, 0, Buf::kOutput, 0, s.count);
    return b.finish();
  }
  auto chunk = [&](long i) { return patterns::evenChunk(s.count, n, patterns::mod(i, n)); };
  const auto mine = chunk(r);
  const size_t base = b.scratch(static_cast<size_t>(n - 2) * mine.count);
  auto item = [&](int j) { return base + static_cast<size_t>(j - 1) * mine.count; };  // j >= 1

  // Reduce-scatter: everyone's chunk r comes here.
  for (int i = 1; i < n; ++i) {
    const auto out = chunk(r + i);
    b.send(patterns::mod(r + i, n), Buf::kInput, out.offset, out.count);
  }
  b.recvReduce(patterns::mod(r - 1, n), Buf::kInput, mine.offset, Buf::kOutput, mine.offset,
               mine.count);
  for (int j = 1; j < n - 1; ++j)
    b.recv(patterns::mod(r - 1 - j, n), Buf::kScratch, item(j), mine.count);
  b.nextRound();
  for (int stride = 1; stride < n - 1; stride *= 2) {
    for (int i = 0; i + stride < n - 1; i += 2 * stride) {
      if (i == 0) b.reduce(Buf::kScratch, item(stride), Buf::kOutput, mine.offset, mine.count);
      else b.reduce(Buf::kScratch, item(i + stride), Buf::kScratch, item(i), mine.count);
    }
    b.nextRound();
  }

  // Allgather: the reduced chunk r goes everywhere.
  for (int i = 1; i < n; ++i)
    b.send(patterns::mod(r + i, n), Buf::kOutput, mine.offset, mine.count);
  for (int i = 1; i < n; ++i) {
    const auto in = chunk(r - i);
    b.recv(patterns::mod(r - i, n), Buf::kOutput, in.offset, in.count);
  }
  b.nextRound();
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "two_shot",
                          .coll = Coll::kAllReduce,
                          .summary = "direct reduce-scatter + direct allgather; 2 rounds, "
                                     "2(n-1)/n S per rank, for a full mesh",
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
