// File: algorithms/scatter_binomial.cc
// Binomial-tree scatter (MPICH scatter_intra_binomial; Thakur, Rabenseifner, Gropp, IJHPCA
// 2005). Ranks are numbered relative to the root (v = r - root mod n); L = ceil(log2 n). In round
// j (d = 2^(L-1-j)) a rank v that is a multiple of 2d and holds the blocks of relative ranks
// [v, v + 2d) sends those of [v + d, min(v + 2d, n)) to v + d; so v receives its subtree
// [v, v + min(lowbit(v), n - v)) once, from v - lowbit(v). Non-root ranks with a subtree keep it
// in scratch in relative order and copy their own block to the output in the next round;
// leaves receive straight into their output. The root sends from its input; a range of relative
// ranks that wraps past rank n-1 (relative n - root) is sent as two messages split there, so
// every piece is contiguous in the root's input.
// Rounds: ceil(log2 n). Cost: ceil(log2 n) alpha + (n-1)/n S beta, S = n*count elements.
// Any nranks >= 1, any count >= 0, any root.
#include <algorithm>

#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank, v = patterns::mod(r - s.root, n);
  const size_t c = s.count;
  const int wrap = n - s.root;  // first relative rank whose real rank is below the root
  auto pieces = [&](int lo, int hi, auto&& f) {
    if (lo < wrap && wrap < hi) f(lo, wrap), f(wrap, hi);
    else f(lo, hi);
  };
  const int levels = patterns::ceilLog2(n);
  const int low = v == 0 ? n : (v & -v), sub = std::min(low, n - v);
  const size_t mine = v != 0 && sub > 1 ? b.scratch(static_cast<size_t>(sub) * c) : 0;
  if (v == 0) b.copy(Buf::kInput, static_cast<size_t>(r) * c, Buf::kOutput, 0, c);
  bool copyOwn = false;
  for (int j = 0; j < levels; ++j) {
    const int d = 1 << (levels - 1 - j);
    if (copyOwn) b.copy(Buf::kScratch, mine, Buf::kOutput, 0, c), copyOwn = false;
    if (d == low) {  // receive the subtree from the parent
      pieces(v, v + sub, [&](int lo, int hi) {
        const size_t cnt = static_cast<size_t>(hi - lo) * c;
        if (sub == 1) b.recv(patterns::mod(r - d, n), Buf::kOutput, 0, cnt);
        else b.recv(patterns::mod(r - d, n), Buf::kScratch, mine + (lo - v) * c, cnt);
      });
      copyOwn = sub > 1;
    } else if (d < low && v + d < n) {
      pieces(v + d, std::min(v + 2 * d, n), [&](int lo, int hi) {
        const size_t cnt = static_cast<size_t>(hi - lo) * c;
        if (v == 0) {
          const size_t at = static_cast<size_t>(patterns::mod(lo + s.root, n)) * c;
          b.send(patterns::mod(r + d, n), Buf::kInput, at, cnt);
        } else {
          b.send(patterns::mod(r + d, n), Buf::kScratch, mine + (lo - v) * c, cnt);
        }
      });
    }
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "binomial",
                          .coll = Coll::kScatter,
                          .summary = "binomial tree from the root; ceil(log2 n) rounds",
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
