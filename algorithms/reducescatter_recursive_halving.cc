// File: algorithms/reducescatter_recursive_halving.cc
// Recursive-halving reduce-scatter (Thakur, Rabenseifner, Gropp, IJHPCA 2005, section 4.3;
// MPICH reduce_scatter_intra_recursive_halving). With p the largest power of two <= n and rem =
// n - p, the first 2*rem ranks fold: each even rank r < 2*rem sends its whole input to r+1, which
// reduces it into scratch and from then on answers for blocks r and r+1. Active rank nr (r/2 for
// the odd folded ranks, r-rem above) owns the contiguous element range of its one or two blocks.
// Round j = 0..log2(p)-1: an active rank owns a window of p/2^j new ranks' ranges; with h = half
// the window it sends the half its partner nr ^ h keeps and reduces the half it keeps (dst = src
// op incoming; the halves are disjoint, so the partial stays in one scratch vector). The last
// exchange reduces straight into the output; a folded rank instead gets its block from r+1 in
// the last round.
// Rounds: log2(p) + 2 (the fold rounds are empty when n is a power of two).
// Cost: log2(p) alpha + (p-1)/p S beta + (p-1)/p S gamma, S = n*count elements; not a power of
// two: + 2 alpha + S beta + S gamma (fold). Scratch: S on ranks that exchange more than once.
// Any nranks >= 1, any count >= 0.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank;
  const size_t c = s.count, total = static_cast<size_t>(n) * c;
  if (n == 1) {
    b.copy(Buf::kInput, 0, Buf::kOutput, 0, c);
    return b.finish();
  }
  const patterns::PowerOfTwoFold fold(r, n);
  const int p = fold.p, steps = fold.steps, rem = fold.rem, nr = fold.newRank;
  const bool foldSender = fold.sender, foldReceiver = fold.receiver;
  auto realRank = [&](int newRank) { return fold.realRank(newRank); };
  // First element owned by new rank i (i == p: the end of the input).
  auto start = [&](int i) { return static_cast<size_t>(i < rem ? 2 * i : i + rem) * c; };
  const size_t acc = foldReceiver || (!foldSender && steps >= 2) ? b.scratch(total) : 0;

  // Round 0: fold.
  if (foldSender) b.send(r + 1, Buf::kInput, 0, total);
  else if (foldReceiver) b.recvReduce(r - 1, Buf::kInput, 0, Buf::kScratch, acc, total);
  b.nextRound();

  // Recursive halving over the window [lo, lo + size) of new ranks.
  int lo = 0;
  Buf partial = foldReceiver ? Buf::kScratch : Buf::kInput;
  for (int size = p; size > 1; size /= 2) {
    if (!foldSender) {
      const int h = size / 2, peer = realRank(nr ^ h);
      const bool upper = (nr & h) != 0;
      const int keepLo = upper ? lo + h : lo, giveLo = upper ? lo : lo + h;
      const size_t keep = start(keepLo), keepCount = start(keepLo + h) - keep;
      const size_t give = start(giveLo), giveCount = start(giveLo + h) - give;
      auto at = [&](Buf buf, size_t off) { return buf == Buf::kScratch ? acc + off : off; };
      b.send(peer, partial, at(partial, give), giveCount);
      if (size == 2 && !foldReceiver)
        b.recvReduce(peer, partial, at(partial, keep), Buf::kOutput, 0, keepCount);
      else
        b.recvReduce(peer, partial, at(partial, keep), Buf::kScratch, acc + keep, keepCount);
      partial = Buf::kScratch;
      lo = keepLo;
    }
    b.nextRound();
  }

  // Last round: a folded pair splits its two blocks.
  if (foldSender) {
    b.recv(r + 1, Buf::kOutput, 0, c);
  } else if (foldReceiver) {
    b.send(r - 1, Buf::kScratch, acc + static_cast<size_t>(r - 1) * c, c);
    b.copy(Buf::kScratch, acc + static_cast<size_t>(r) * c, Buf::kOutput, 0, c);
  }
  b.nextRound();
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "recursive_halving",
                          .coll = Coll::kReduceScatter,
                          .summary = "recursive halving (MPICH fold for non-powers of two); "
                                     "log2 n rounds",
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
