// File: algorithms/alltoall_bruck.cc
// Bruck all-to-all (Bruck, Ho, Kipnis, Upfal, Weathersby, IEEE TPDS 1997; MPICH
// alltoall_intra_brucks). Rank r numbers its outgoing blocks by position: position i is the
// block for rank r+i (input block r+i mod n). In step k (d = 2^k < n) every block whose position
// has bit k set moves d ranks on: rank r sends those positions to r+d and receives the same
// positions from r-d. After all steps, position i on rank r holds the block that rank r-i
// addressed to r, so output block j is position r-j. The positions of a step are not
// contiguous: a local round packs them into scratch (runs that are already contiguous are
// copied at once; a step whose blocks are one contiguous range is sent without packing), then a
// round sends the pack and receives into a fresh scratch area, which from then on is where those
// positions live (no unpacking). A last local round copies every position to its output block.
// Rounds: 2 ceil(log2 n) + 1 (the pack and final rounds are local).
// Cost: ceil(log2 n) alpha + (n/2) ceil(log2 n) count beta + about (n/2 log2 n + n) count copy:
// fewer messages than pairwise (n-1 alpha), more bytes: for small blocks.
// Scratch: (n/2 log2 n + n/2) count elements; declines above 1 GiB of scratch.
// Any nranks >= 1, any count >= 0; out of place (NCCL defines no in-place all-to-all).
#include <algorithm>
#include <vector>

#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

constexpr size_t kMaxScratchBytes = size_t{1} << 30;

struct Loc {
  Buf buf;
  size_t offset;
};

// Blocks of the positions with bit d set in [0, n).
int blocksWithBit(int n, int d) {
  int m = 0;
  for (int i = 0; i < n; ++i) m += (i & d) != 0;
  return m;
}

size_t scratchBlocks(int n) {
  size_t total = 0, most = 0;
  for (int d = 1; d < n; d *= 2) {
    const size_t m = static_cast<size_t>(blocksWithBit(n, d));
    total += m;
    most = std::max(most, m);
  }
  return total + most;
}

bool supports(const CollShape& s) {
  return scratchBlocks(s.nranks) * s.count * dataTypeBytes(s.dtype) <= kMaxScratchBytes;
}

// Copies blocks src[0..] to dst, dst + c, ... merging runs that are contiguous in both.
void copyRuns(ScheduleBuilder& b, const std::vector<Loc>& src, Loc dst, size_t c) {
  for (size_t j = 0; j < src.size();) {
    size_t run = 1;
    while (j + run < src.size() && src[j + run].buf == src[j].buf &&
           src[j + run].offset == src[j].offset + run * c)
      ++run;
    b.copy(src[j].buf, src[j].offset, dst.buf, dst.offset + j * c, run * c);
    j += run;
  }
}

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank;
  const size_t c = s.count;
  if (!supports(s)) return invalidUsage("alltoall bruck: scratch above {} bytes", kMaxScratchBytes);
  std::vector<Loc> loc(n);
  for (int i = 0; i < n; ++i)
    loc[i] = {Buf::kInput, static_cast<size_t>(patterns::mod(r + i, n)) * c};
  int most = 0;
  for (int d = 1; d < n; d *= 2) most = std::max(most, blocksWithBit(n, d));
  const size_t pack = b.scratch(static_cast<size_t>(most) * c);

  for (int d = 1; d < n; d *= 2) {
    std::vector<int> pos;
    std::vector<Loc> from;
    for (int i = 0; i < n; ++i)
      if (i & d) pos.push_back(i), from.push_back(loc[i]);
    const size_t m = pos.size();
    bool contiguous = true;
    for (size_t j = 1; j < m; ++j)
      contiguous = contiguous && from[j].buf == from[0].buf &&
                   from[j].offset == from[0].offset + j * c;
    // Local round: pack (empty when the blocks are already one range).
    if (!contiguous) copyRuns(b, from, {Buf::kScratch, pack}, c);
    b.nextRound();
    const size_t area = b.scratch(m * c);
    if (contiguous) b.send(patterns::mod(r + d, n), from[0].buf, from[0].offset, m * c);
    else b.send(patterns::mod(r + d, n), Buf::kScratch, pack, m * c);
    b.recv(patterns::mod(r - d, n), Buf::kScratch, area, m * c);
    for (size_t j = 0; j < m; ++j) loc[pos[j]] = {Buf::kScratch, area + j * c};
    b.nextRound();
  }
  // Output block j (from rank j) is position r - j.
  for (int j = 0; j < n; ++j) {
    const Loc& l = loc[patterns::mod(r - j, n)];
    b.copy(l.buf, l.offset, Buf::kOutput, static_cast<size_t>(j) * c, c);
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "bruck",
                          .coll = Coll::kAllToAll,
                          .summary = "Bruck; ceil(log2 n) rounds with packing, small blocks",
                          .supports = supports,
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
