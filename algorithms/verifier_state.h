// File: algorithms/verifier_state.h
// The verifier's data structures (algorithms/verifier.cc only): what an element holds (Content:
// its interned set of contributing ranks, its interned reduction tree, its source index and last
// writer), interned rank sets and reduction trees, and a buffer as run-length segments of
// Content, so that whole ranges move as O(segments) operations whatever the count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "algorithms/verifier.h"

namespace tutti::algo::verify_state {

inline constexpr uint32_t kInitial = UINT32_MAX;  // Content::round of data no step wrote (the input)

struct Content {
  uint32_t set = 0;                     // RankSets id; 0 (no rank): nothing wrote the element
  uint32_t round = kInitial, step = 0;  // last writer
  uint64_t index = 0;                   // source index of the first element
  uint32_t expr = 0;                    // Exprs id of the reduction tree (meaningful if set != 0)
};
struct Piece {
  uint64_t count;
  Content c;
};

inline Content advance(Content c, uint64_t by) {
  if (c.set != 0) c.index += by;
  return c;
}
// Whether b continues a (of length lenA) as one segment.
inline bool continues(const Content& a, uint64_t lenA, const Content& b) {
  return a.set == b.set && a.round == b.round && a.step == b.step &&
         (a.set == 0 || (b.index == a.index + lenA && a.expr == b.expr));
}

// Interned sets of ranks (bitsets of any width). Ids 0 (the empty set: nothing wrote the
// element) and 1..n (one rank) are implicit, so a verifier for n ranks starts without allocating;
// unions are interned on first use and cached.
class RankSets {
 public:
  explicit RankSets(int nranks) : nranks_(nranks), words_((nranks + 63) / 64) {
    u_.assign(words_, 0);
    for (int r = 0; r < nranks; ++r) u_[r / 64] |= uint64_t{1} << (r % 64);
    full_ = nranks == 1 ? single(0) : intern();
  }
  uint32_t single(int rank) const { return static_cast<uint32_t>(rank) + 1; }
  uint32_t full() const { return full_; }
  bool singleton(uint32_t id) const { return id >= 1 && id <= static_cast<uint32_t>(nranks_); }
  bool has(uint32_t id, int rank) const { return (word(id, rank / 64) >> (rank % 64)) & 1; }
  // The union of disjoint sets, or the first rank in both (common >= 0).
  uint32_t join(uint32_t a, uint32_t b, int& common) {
    common = -1;
    if (a > b) std::swap(a, b);
    const uint64_t key = (uint64_t{a} << 32) | b;
    if (auto it = cache_.find(key); it != cache_.end()) {
      if (it->second == UINT32_MAX) common = firstCommon(a, b);
      return it->second;
    }
    uint32_t result = 0;
    for (int w = 0; w < words_; ++w) {
      const uint64_t x = word(a, w), y = word(b, w);
      if (x & y) {
        result = UINT32_MAX;
        break;
      }
      u_[w] = x | y;
    }
    if (result != UINT32_MAX) result = intern();
    cache_.emplace(key, result);
    if (result == UINT32_MAX) common = firstCommon(a, b);
    return result;
  }
  // "0-3,5": the ranks in a that are not in minus.
  std::string describe(uint32_t a, uint32_t minus = 0) const {
    std::string out;
    for (int r = 0; r < nranks_;) {
      if (!has(a, r) || has(minus, r)) {
        ++r;
        continue;
      }
      int e = r;
      while (e + 1 < nranks_ && has(a, e + 1) && !has(minus, e + 1)) ++e;
      if (!out.empty()) out += ',';
      out += e == r ? std::to_string(r) : fmt::format("{}-{}", r, e);
      r = e + 1;
    }
    return out;
  }
  int firstIn(uint32_t id) const { return firstCommon(id, id); }

 private:
  uint64_t word(uint32_t id, int w) const {
    if (id == 0) return 0;
    if (id <= static_cast<uint32_t>(nranks_))
      return static_cast<int>(id - 1) / 64 == w ? uint64_t{1} << ((id - 1) % 64) : 0;
    return bits_[(id - nranks_ - 1) * static_cast<size_t>(words_) + w];
  }
  int firstCommon(uint32_t a, uint32_t b) const {
    for (int r = 0; r < nranks_; ++r)
      if (has(a, r) && has(b, r)) return r;
    return -1;
  }
  // The id of the set in u_ (never empty or a single rank: a union of disjoint non-empty sets).
  uint32_t intern() {
    const uint32_t next = static_cast<uint32_t>(nranks_ + 1 + bits_.size() / words_);
    uint32_t id;
    if (words_ == 1) {
      id = narrow_.emplace(u_[0], next).first->second;
    } else {
      id = wide_.emplace(u_, next).first->second;
    }
    if (id == next) bits_.insert(bits_.end(), u_.begin(), u_.end());
    return id;
  }
  int nranks_, words_;
  uint32_t full_ = 0;
  std::vector<uint64_t> bits_, u_;  // interned sets (words_ each), the set being built
  std::unordered_map<uint64_t, uint32_t> narrow_;   // nranks <= 64
  std::map<std::vector<uint64_t>, uint32_t> wide_;  // nranks > 64
  std::unordered_map<uint64_t, uint32_t> cache_;    // (a, b) -> union; UINT32_MAX: not disjoint
};

// Interned reduction trees: ids 0..n-1 are the leaves (rank r's input). The ops commute (see
// Dataflow in verifier.h), so a op b and b op a are one node, children in id order. Ids are
// numbered in creation order: deterministic for given schedules.
class Exprs {
 public:
  explicit Exprs(int nranks) {
    for (int r = 0; r < nranks; ++r) nodes_.push_back({r, 0, 0});
  }
  uint32_t combine(uint32_t a, uint32_t b) {
    if (a > b) std::swap(a, b);
    const uint64_t key = (uint64_t{a} << 32) | b;
    auto [it, added] = ids_.emplace(key, static_cast<uint32_t>(nodes_.size()));
    if (added) nodes_.push_back({-1, a, b});
    return it->second;
  }
  const std::vector<Dataflow::Node>& nodes() const { return nodes_; }

 private:
  std::vector<Dataflow::Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> ids_;  // (a, b) -> id
};

// A buffer as sorted segments covering [0, size); a segment ends where the next begins.
class SegBuffer {
 public:
  void reset(uint64_t size) {
    size_ = size;
    segs_.clear();
    if (size > 0) segs_.push_back({0, Content{}});
  }

  void read(uint64_t a, uint64_t n, std::vector<Piece>& out) const {
    out.clear();
    if (n == 0) return;
    for (size_t i = find(a); i < segs_.size() && segs_[i].begin < a + n; ++i) {
      const uint64_t b = std::max(a, segs_[i].begin), e = std::min(a + n, end(i));
      out.push_back({e - b, advance(segs_[i].c, b - segs_[i].begin)});
    }
  }

  void write(uint64_t a, const std::vector<Piece>& pieces) {
    uint64_t n = 0;
    for (const Piece& p : pieces) n += p.count;
    if (n == 0) return;
    const size_t lo = find(a), hi = find(a + n - 1);
    const size_t from = lo > 0 ? lo - 1 : lo, to = hi + 1 < segs_.size() ? hi + 1 : hi;
    mid_.clear();
    for (size_t i = from; i < lo; ++i) mid_.push_back(segs_[i]);
    if (segs_[lo].begin < a) mid_.push_back(segs_[lo]);
    uint64_t pos = a;
    for (const Piece& p : pieces) {
      if (p.count == 0) continue;
      mid_.push_back({pos, p.c});
      pos += p.count;
    }
    if (end(hi) > a + n) mid_.push_back({a + n, advance(segs_[hi].c, a + n - segs_[hi].begin)});
    for (size_t i = hi + 1; i <= to && i > hi; ++i) mid_.push_back(segs_[i]);
    merged_.clear();
    for (const Seg& s : mid_) {
      if (!merged_.empty() && continues(merged_.back().c, s.begin - merged_.back().begin, s.c))
        continue;
      merged_.push_back(s);
    }
    segs_.erase(segs_.begin() + from, segs_.begin() + to + 1);
    segs_.insert(segs_.begin() + from, merged_.begin(), merged_.end());
  }

 private:
  struct Seg {
    uint64_t begin;
    Content c;
  };
  uint64_t end(size_t i) const { return i + 1 < segs_.size() ? segs_[i + 1].begin : size_; }
  size_t find(uint64_t pos) const {
    auto it = std::upper_bound(segs_.begin(), segs_.end(), pos,
                               [](uint64_t p, const Seg& s) { return p < s.begin; });
    return static_cast<size_t>(it - segs_.begin()) - 1;
  }
  uint64_t size_ = 0;
  std::vector<Seg> segs_;
  std::vector<Seg> mid_, merged_;  // scratch space of write()
};

}  // namespace tutti::algo::verify_state
