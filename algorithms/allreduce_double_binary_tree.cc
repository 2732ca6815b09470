// File: algorithms/allreduce_double_binary_tree.cc
// Double-binary-tree allreduce (Sanders, Speck, Traff, "Two-tree algorithms for full bandwidth
// broadcast, reduction and scan", Parallel Computing 2009; the trees of NCCL's Tree algorithm).
// The vector is cut in two halves; half x is reduced up tree x to its root and broadcast back
// down. Tree 0 is NCCL's binary tree on positions (position 0 is the root; the parent of p
// clears p's lowest set bit b and sets b<<1, or only clears b where that leaves the range);
// tree 1 is the same tree mirrored (position n-1-r, n even) or shifted by one (position r-1,
// n odd), so most ranks are interior in one tree and a leaf in the other.
// Pipelining: each half is cut into K pieces and piece k moves one tree level per round. A node
// with two children cannot use recvReduceSend (one incoming stream per step; two recvReduce
// into one range in one round race), so the children's streams are staggered instead: child c
// sends piece k up in round k + up(c), where up() gives siblings distinct rounds and a parent
// sends after its last child (up(parent) = up(last child) + 1). A parent accumulates into its
// output (first child: output = input op incoming, later children: output op= incoming). The
// root of tree x holds piece k complete in round k + T_x - 1 (T_x = up(root)); a node at depth
// d receives it from its parent in round k + T_x + d - 1 and sends it to its children one
// round later. Reduction and broadcast of different pieces overlap; every step of a round
// touches a different piece, so no range is read and written in one round. Steps of tree 0
// come before those of tree 1 in every round (per-pair message order).
// Rounds: K + H with H = T + D - 1 (T <= 2 log2 n: staggering; D = depth <= log2 n + 1).
// Cost: about (K + H)(alpha + 2 S/K beta) + S gamma: a rank sends at most two pieces of S/2K
// up and two down per round. K = sqrt(H S/2 / A) minimises (K + H)(alpha + S/2K beta) for
// A = alpha/beta, taken as 32 KiB (host transports); at least S/2 / 256 KiB pieces (cache-sized
// pieces), at most 1024.
// Any nranks >= 1, any count >= 0.
#include <algorithm>
#include <cmath>
#include <vector>

#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

// Bytes whose transfer costs about one round's latency on a host transport (alpha / beta).
constexpr double kAlphaBytes = 32 << 10;
// Pieces are no larger than this (beyond the latency-optimal count): a piece then stays in cache
// between arriving, being reduced and being passed on, which is what makes the pipelined tree
// beat ring and Rabenseifner at large sizes on a loaded host (LinkModel::cacheBytes). 256 KiB
// rather than 512 (2 ranks, alternating launches in the fast vCPU placement): tcp
// 16 MiB 4.9 against 6.5-7.5 ms and 64 MiB 20.1-20.4 against 26.5-29.8 ms (the tcp transport
// reduces through a 256 KiB staging buffer); shm 16 MiB 1.63-1.85 against 1.81-2.19 ms; 64 and
// 256 MiB unchanged within the noise.
constexpr double kMaxPieceBytes = 256 << 10;
constexpr size_t kMaxPieces = 1024;

struct Tree {
  int n = 1;
  bool shifted = false, mirrored = false;
  std::vector<int> parent, depth, up;
  std::vector<std::vector<int>> children;  // in the order of their up() rounds
  int rankOf(int pos) const { return mirrored ? n - 1 - pos : shifted ? (pos + 1) % n : pos; }
  int posOf(int rank) const {
    return mirrored ? n - 1 - rank : shifted ? patterns::mod(rank - 1, n) : rank;
  }
};

Tree makeTree(int n, int which) {
  Tree t;
  t.n = n;
  t.shifted = which == 1 && n % 2 == 1;
  t.mirrored = which == 1 && n % 2 == 0;
  t.parent.assign(n, -1);
  t.depth.assign(n, 0);
  t.up.assign(n, 0);
  t.children.assign(n, {});
  for (int p = 1; p < n; ++p) {
    const int low = p & -p, up = (p ^ low) | (low << 1);
    t.parent[p] = up < n ? up : p ^ low;
    t.children[t.parent[p]].push_back(p);
  }
  // Top-down order (parents first), then depths and up() rounds bottom-up.
  std::vector<int> order{0};
  for (size_t i = 0; i < order.size(); ++i)
    for (int ch : t.children[order[i]]) {
      t.depth[ch] = t.depth[order[i]] + 1;
      order.push_back(ch);
    }
  std::vector<int> ready(n, 0);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    auto& ch = t.children[*it];
    std::sort(ch.begin(), ch.end(), [&](int a, int b) {
      return ready[a] != ready[b] ? ready[a] < ready[b] : a < b;
    });
    int last = -1;
    for (int c : ch) last = t.up[c] = std::max(ready[c], last + 1);
    ready[*it] = ch.empty() ? 0 : last + 1;
  }
  t.up[0] = ready[0];
  return t;
}

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank;
  if (n == 1) {
    b.copy(Buf::kInput, 0, Buf::kOutput, 0, s.count);
    return b.finish();
  }
  const Tree trees[2] = {makeTree(n, 0), makeTree(n, 1)};
  patterns::Chunk halves[2];
  size_t pieces[2];
  int rounds = 0;
  for (int x = 0; x < 2; ++x) {
    halves[x] = patterns::evenChunk(s.count, 2, x);
    const double bytes = static_cast<double>(halves[x].count * dataTypeBytes(s.dtype));
    const int maxDepth = *std::max_element(trees[x].depth.begin(), trees[x].depth.end());
    // (K + H) alpha + (K + H) / K * S beta is least at K = sqrt(H S beta / alpha).
    const double fill = trees[x].up[0] + maxDepth - 1;
    const auto best = static_cast<size_t>(
        std::ceil(std::max(std::sqrt(fill * bytes / kAlphaBytes), bytes / kMaxPieceBytes)));
    const size_t most = std::min(kMaxPieces, std::max<size_t>(halves[x].count, 1));
    pieces[x] = std::clamp<size_t>(best, 1, most);
    rounds = std::max(rounds, static_cast<int>(pieces[x]) + trees[x].up[0] + maxDepth - 1);
  }
  for (int t = 0; t < rounds; ++t) {
    for (int x = 0; x < 2; ++x) {
      const Tree& tr = trees[x];
      const int pos = tr.posOf(r), K = static_cast<int>(pieces[x]), T = tr.up[0];
      const auto& kids = tr.children[pos];
      auto piece = [&](int k) {
        auto ch = patterns::evenChunk(halves[x].count, K, k);
        return patterns::Chunk{halves[x].offset + ch.offset, ch.count};
      };
      auto valid = [&](int k) { return k >= 0 && k < K; };
      // Reduction: children's pieces in, own partial up.
      for (size_t i = 0; i < kids.size(); ++i) {
        const int k = t - tr.up[kids[i]];
        if (!valid(k)) continue;
        const auto pc = piece(k);
        b.recvReduce(tr.rankOf(kids[i]), i == 0 ? Buf::kInput : Buf::kOutput, pc.offset,
                     Buf::kOutput, pc.offset, pc.count);
      }
      if (pos != 0 && valid(t - tr.up[pos])) {
        const auto pc = piece(t - tr.up[pos]);
        b.send(tr.rankOf(tr.parent[pos]), kids.empty() ? Buf::kInput : Buf::kOutput, pc.offset,
               pc.count);
      }
      // Broadcast: the parent's result in, own result down.
      if (pos != 0 && valid(t - T - tr.depth[pos] + 1)) {
        const auto pc = piece(t - T - tr.depth[pos] + 1);
        b.recv(tr.rankOf(tr.parent[pos]), Buf::kOutput, pc.offset, pc.count);
      }
      if (valid(t - T - tr.depth[pos])) {
        const auto pc = piece(t - T - tr.depth[pos]);
        for (int ch : kids) b.send(tr.rankOf(ch), Buf::kOutput, pc.offset, pc.count);
      }
    }
    b.nextRound();
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "double_binary_tree",
                          .coll = Coll::kAllReduce,
                          .summary = "two complementary binary trees, one per half, pieces "
                                     "pipelined up and down; log-depth, full bandwidth",
                          .build = build,
                          .priority = 5});

}  // namespace tutti::algo
