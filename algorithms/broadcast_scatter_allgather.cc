// File: algorithms/broadcast_scatter_allgather.cc
// Scatter-allgather broadcast (van de Geijn; Barnett et al. 1994; MPICH
// bcast_intra_scatter_ring_allgather; Thakur, Rabenseifner, Gropp, IJHPCA 2005, section 4.2).
// The root's vector is split into n chunks (evenChunk); relative rank v = r - root mod n ends
// up owning chunk v. Binomial scatter, round j (distance d = 2^(L-1-j), L = ceil(log2 n)): a rank
// v that holds the chunks [v, v + 2d) (v a multiple of 2d) sends chunks [v + d, min(v + 2d, n))
// to v + d; the chunks are contiguous in the vector, so every message is one range, received
// straight into the output. Then a ring allgather over relative ranks: in round k (k = 0..n-2)
// v sends chunk v-k to v+1 and receives chunk v-k-1 from v-1. The root holds every chunk from
// the start, so the ring is cut in front of it (rank n-1 does not send to the root).
// Rounds: ceil(log2 n) + n - 1.
// Cost: (ceil(log2 n) + n - 1) alpha + 2 (n-1)/n S beta: bandwidth-optimal, for large S.
// Any nranks >= 1, any count >= 0 (empty chunks when count < n), any root.
#include <algorithm>

#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank, v = patterns::mod(r - s.root, n);
  auto real = [&](int rel) { return patterns::mod(rel + s.root, n); };
  auto chunk = [&](long i) { return patterns::evenChunk(s.count, n, patterns::mod(i, n)); };
  // Element range of chunks [lo, hi), hi > lo.
  auto chunks = [&](int lo, int hi) {
    const auto first = chunk(lo), last = chunk(hi - 1);
    return patterns::Chunk{first.offset, last.offset + last.count - first.offset};
  };
  const int levels = patterns::ceilLog2(n);

  // Binomial scatter.
  if (v == 0) b.copy(Buf::kInput, 0, Buf::kOutput, 0, s.count);
  for (int j = 0; j < levels; ++j) {
    const int d = 1 << (levels - 1 - j);
    if (v % (2 * d) == 0 && v + d < n) {
      const auto part = chunks(v + d, std::min(v + 2 * d, n));
      b.send(real(v + d), v == 0 ? Buf::kInput : Buf::kOutput, part.offset, part.count);
    } else if (v % (2 * d) == d) {
      const auto part = chunks(v, std::min(v + d, n));
      b.recv(real(v - d), Buf::kOutput, part.offset, part.count);
    }
    b.nextRound();
  }

  // Ring allgather, cut in front of the root.
  for (int k = 0; k < n - 1; ++k) {
    if (v != n - 1) {
      const auto out = chunk(v - k);
      b.send(real(v + 1), Buf::kOutput, out.offset, out.count);
    }
    if (v != 0) {
      const auto in = chunk(v - k - 1);
      b.recv(real(v - 1), Buf::kOutput, in.offset, in.count);
    }
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "scatter_allgather",
                          .coll = Coll::kBroadcast,
                          .summary = "binomial scatter + ring allgather (van de Geijn); "
                                     "2(n-1)/n S per rank, large messages",
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
