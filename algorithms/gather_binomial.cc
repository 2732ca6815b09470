// File: algorithms/gather_binomial.cc
// Binomial-tree gather (MPICH gather_intra_binomial; Thakur, Rabenseifner, Gropp, IJHPCA 2005).
// Ranks are numbered relative to the root (v = r - root mod n). The subtree of v covers the
// relative ranks [v, v + min(lowbit(v), n - v)) (the root: all). In round j (d = 2^j) a rank v
// whose lowest set bit is d sends its whole subtree to v - d; a rank v that is a multiple of 2d
// receives the subtree of v + d. Non-root ranks collect their subtree in scratch in relative
// order (own block first); the root receives straight into its output. A range of relative
// ranks that wraps past rank n-1 (relative n - root) is sent as two messages split there, so
// every piece is contiguous in the root's output. Leaves send their input directly.
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
  // Calls f(lo, hi) for the pieces of relative ranks [lo, hi) split at the wrap point.
  auto pieces = [&](int lo, int hi, auto&& f) {
    if (lo < wrap && wrap < hi) f(lo, wrap), f(wrap, hi);
    else f(lo, hi);
  };
  const int low = v == 0 ? n : (v & -v), sub = std::min(low, n - v);
  if (v == 0) b.copy(Buf::kInput, 0, Buf::kOutput, static_cast<size_t>(r) * c, c);
  const size_t mine = v != 0 && sub > 1 ? b.scratch(static_cast<size_t>(sub) * c) : 0;
  if (v != 0 && sub > 1) b.copy(Buf::kInput, 0, Buf::kScratch, mine, c);
  for (int d = 1; d < n; d *= 2) {
    if (d == low) {  // send the subtree to the parent, then done
      pieces(v, v + sub, [&](int lo, int hi) {
        const size_t cnt = static_cast<size_t>(hi - lo) * c;
        if (sub == 1) b.send(patterns::mod(r - d, n), Buf::kInput, 0, cnt);
        else b.send(patterns::mod(r - d, n), Buf::kScratch, mine + (lo - v) * c, cnt);
      });
    } else if (d < low && v + d < n) {
      pieces(v + d, std::min(v + 2 * d, n), [&](int lo, int hi) {
        const size_t cnt = static_cast<size_t>(hi - lo) * c;
        if (v == 0) {
          const size_t at = static_cast<size_t>(patterns::mod(lo + s.root, n)) * c;
          b.recv(patterns::mod(r + d, n), Buf::kOutput, at, cnt);
        } else {
          b.recv(patterns::mod(r + d, n), Buf::kScratch, mine + (lo - v) * c, cnt);
        }
      });
    }
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "binomial",
                          .coll = Coll::kGather,
                          .summary = "binomial tree to the root; ceil(log2 n) rounds",
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
