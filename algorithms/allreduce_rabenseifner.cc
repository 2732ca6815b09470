// File: algorithms/allreduce_rabenseifner.cc
// Rabenseifner's allreduce = recursive-halving reduce-scatter + recursive-doubling allgather
// (Rabenseifner, ICCS 2004; Thakur, Rabenseifner, Gropp, IJHPCA 2005, section 4.4). With p the
// largest power of two <= n and rem = n - p, the first 2*rem ranks fold first (MPICH): each even
// rank r < 2*rem sends its whole input to r+1, which reduces it into its output, and sits out
// until the last round, when r+1 sends it the result. The p active ranks (new rank nr) split the
// vector into p blocks (evenChunk: sizes differ by at most one element).
// Reduce-scatter, round j = 0..log2(p)-1: an active rank owns a window of p/2^j blocks (all of
// them at first); with h = half the window, it sends the half its partner nr ^ h keeps and
// reduces the half it keeps (dst = src op incoming; the kept and the sent half are disjoint,
// so the output is the only buffer, no scratch). After log2(p) rounds rank nr owns block nr.
// Allgather, round j: windows double again: send the own window to nr ^ 2^j, receive the
// partner's window.
// Rounds: 2 log2(p) + 2 (the fold rounds are empty when n is a power of two).
// Cost: 2 log2(p) alpha + 2 (p-1)/p S beta + (p-1)/p S gamma; not a power of two: + 2 alpha +
// 2 S beta + S gamma for the fold. Bandwidth-optimal for power-of-two n, few rounds.
// Any nranks >= 1, any count >= 0 (empty blocks when count < p).
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
  const int p = fold.p, steps = fold.steps, nr = fold.newRank;
  const bool foldSender = fold.sender, foldReceiver = fold.receiver;
  auto realRank = [&](int newRank) { return fold.realRank(newRank); };
  // Element range of blocks [lo, hi) of the p-block split.
  auto blocks = [&](int lo, int hi) {
    const size_t begin = patterns::evenChunk(c, p, lo).offset;
    const auto last = patterns::evenChunk(c, p, hi - 1);
    return patterns::Chunk{begin, last.offset + last.count - begin};
  };

  // Round 0: fold.
  if (foldSender) b.send(r + 1, Buf::kInput, 0, c);
  else if (foldReceiver) b.recvReduce(r - 1, Buf::kInput, 0, Buf::kOutput, 0, c);
  b.nextRound();

  // Reduce-scatter by recursive halving (distance halving): window [lo, lo + size).
  int lo = 0;
  // Until this rank has reduced something into its output, its partial is its input.
  Buf partial = foldReceiver ? Buf::kOutput : Buf::kInput;
  for (int size = p; size > 1; size /= 2) {
    if (!foldSender) {
      const int h = size / 2, peer = realRank(nr ^ h);
      const bool upper = (nr & h) != 0;
      const auto keep = upper ? blocks(lo + h, lo + size) : blocks(lo, lo + h);
      const auto give = upper ? blocks(lo, lo + h) : blocks(lo + h, lo + size);
      b.send(peer, partial, give.offset, give.count);
      b.recvReduce(peer, partial, keep.offset, Buf::kOutput, keep.offset, keep.count);
      partial = Buf::kOutput;
      if (upper) lo += h;
    }
    b.nextRound();
  }

  // Allgather by recursive doubling: window of 2^j blocks containing nr.
  for (int j = 0; j < steps; ++j) {
    if (!foldSender) {
      const int w = 1 << j, peer = realRank(nr ^ w);
      const int mine = nr & ~(w - 1), theirs = (nr ^ w) & ~(w - 1);
      const auto out = blocks(mine, mine + w), in = blocks(theirs, theirs + w);
      b.send(peer, Buf::kOutput, out.offset, out.count);
      b.recv(peer, Buf::kOutput, in.offset, in.count);
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

TUTTI_REGISTER_ALGORITHM({.name = "rabenseifner",
                          .coll = Coll::kAllReduce,
                          .summary = "recursive-halving reduce-scatter + recursive-doubling "
                                     "allgather; 2 log2 n rounds, bandwidth-optimal",
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
