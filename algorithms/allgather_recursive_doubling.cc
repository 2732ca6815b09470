// File: algorithms/allgather_recursive_doubling.cc
// Recursive-doubling allgather (Thakur, Rabenseifner, Gropp, IJHPCA 2005, section 4.1): in round
// j (j = 0..log2(n)-1) rank r holds the 2^j blocks of its aligned window (r with the low j bits
// cleared) and swaps them with rank r ^ 2^j, whose window is the adjacent one; windows double.
// Round 0 sends straight from the input while copying it to output block r (in place the copy
// is skipped: the input is output block r).
// Rounds: log2 n. Cost: log2(n) alpha + (n-1)/n S beta, S = n*count elements.
// Power-of-two nranks only (declines otherwise: ring and bruck cover those); any count >= 0.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

bool supports(const CollShape& s) { return s.nranks > 0 && (s.nranks & (s.nranks - 1)) == 0; }

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank;
  const size_t c = s.count;
  if (!supports(s))
    return invalidUsage("allgather recursive_doubling needs a power-of-two nranks, not {}", n);
  b.copy(Buf::kInput, 0, Buf::kOutput, static_cast<size_t>(r) * c, c);
  for (int w = 1; w < n; w *= 2) {
    const int peer = r ^ w;
    const size_t mine = static_cast<size_t>(r & ~(w - 1)) * c;
    const size_t theirs = static_cast<size_t>(peer & ~(w - 1)) * c;
    if (w == 1) b.send(peer, Buf::kInput, 0, c);
    else b.send(peer, Buf::kOutput, mine, static_cast<size_t>(w) * c);
    b.recv(peer, Buf::kOutput, theirs, static_cast<size_t>(w) * c);
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "recursive_doubling",
                          .coll = Coll::kAllGather,
                          .summary = "recursive doubling; log2 n rounds, power-of-two nranks",
                          .supports = supports,
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
