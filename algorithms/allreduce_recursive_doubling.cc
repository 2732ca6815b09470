// File: algorithms/allreduce_recursive_doubling.cc
// Recursive-doubling allreduce (Thakur, Rabenseifner, Gropp, IJHPCA 2005; MPICH
// allreduce_intra_recursive_doubling). With p = the largest power of two <= n and rem = n - p,
// the first 2*rem ranks fold: in round 0 each even rank r < 2*rem sends its whole input to r+1,
// which reduces it into its own; the even rank then sits out. The p remaining ranks (new rank
// nr: r/2 for the odd folded ranks, r-rem above 2*rem) run log2(p) exchange rounds: in round j
// rank nr swaps its whole partial vector with nr ^ 2^j and reduces the incoming one. A last
// round hands the result from each odd folded rank back to its even partner.
// A rank never writes the range it is sending in the same round: the partial vector alternates
// between the output and one scratch vector, chosen from the end so that the last exchange
// reduces into the output (dst = src op incoming, no extra pass).
// Rounds: log2(p) + 2 (the fold rounds are empty when n is a power of two).
// Cost: (log2 p + 2) alpha + (log2 p + 2) S beta + (log2 p + 1) S gamma (the +2 / +1 terms only
// when n is not a power of two). Latency-optimal for small S; every round moves the whole vector.
// Any nranks >= 1, any count >= 0.
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
  const patterns::PowerOfTwoFold fold(r, n);
  const int steps = fold.steps, nr = fold.newRank;
  const bool foldSender = fold.sender, foldReceiver = fold.receiver;
  auto realRank = [&](int newRank) { return fold.realRank(newRank); };

  // The partial vector before exchange j lives in where(j); where(steps) is the output and the
  // buffers alternate output / scratch backwards from there.
  const size_t tmp = steps >= 2 || foldReceiver || s.inPlace ? b.scratch(c) : 0;
  auto where = [&](int j) { return (steps - j) % 2 == 0 ? Buf::kOutput : Buf::kScratch; };
  auto offsetIn = [&](Buf buf) { return buf == Buf::kScratch ? tmp : size_t{0}; };
  // Where the partial starts (exchange 0 reads it): the folded sum, or this rank's input.
  Buf start = where(0);
  if (foldReceiver) {
    start = where(1) == Buf::kOutput ? Buf::kScratch : Buf::kOutput;
  } else if (!foldSender) {
    // Reading the input while exchange 0 writes the output is fine unless they alias.
    start = where(1) == Buf::kOutput && s.inPlace ? Buf::kScratch : Buf::kInput;
  }

  // Round 0: fold (or stage the input where an in-place exchange 0 can read it).
  if (foldSender) {
    b.send(r + 1, Buf::kInput, 0, c);
  } else if (foldReceiver) {
    b.recvReduce(r - 1, Buf::kInput, 0, start, offsetIn(start), c);
  } else if (start == Buf::kScratch) {
    b.copy(Buf::kInput, 0, Buf::kScratch, tmp, c);
  }
  b.nextRound();

  // Rounds 1..steps: exchange with nr ^ 2^j, reduce into the other buffer.
  for (int j = 0; j < steps; ++j) {
    if (!foldSender) {
      const int peer = realRank(nr ^ (1 << j));
      const Buf from = j == 0 ? start : where(j), to = where(j + 1);
      b.send(peer, from, offsetIn(from), c);
      b.recvReduce(peer, from, offsetIn(from), to, offsetIn(to), c);
    }
    b.nextRound();
  }

  // Last round: unfold.
  if (foldSender) b.recv(r + 1, Buf::kOutput, 0, c);
  else if (foldReceiver) b.send(r - 1, Buf::kOutput, 0, c);
  b.nextRound();
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "recursive_doubling",
                          .coll = Coll::kAllReduce,
                          .summary = "recursive doubling (MPICH fold for non-powers of two); "
                                     "log2 n rounds of whole-vector exchanges, small messages",
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
