// File: algorithms/hierarchy.h
// Rank groups for hierarchical algorithms, from CollShape::hostOf: which ranks share a host (or
// a NUMA node), this rank's group and its index inside it. Pure rank arithmetic.
#pragma once

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "algorithms/schedule.h"

namespace tutti::algo::patterns {

struct Hierarchy {
  int groups = 0;    ///< H: number of groups (hosts)
  int perGroup = 0;  ///< L: ranks in every group
  int group = 0;     ///< this rank's group
  int local = 0;     ///< this rank's index inside its group (ranks of a group in ascending order)
  std::vector<std::vector<int>> members;  ///< members[g][i]: rank with local index i in group g
};

/// The hierarchy of s.hostOf when it is regular: s.hostOf has one entry per rank, the groups
/// are numbered 0..H-1, H >= 2 and every group has the same number of ranks. nullopt otherwise
/// (hierarchical algorithms then decline). Ranks of a group need not be contiguous.
inline std::optional<Hierarchy> regularHierarchy(const CollShape& s) {
  if (s.nranks < 2 || s.hostOf.size() != static_cast<size_t>(s.nranks)) return std::nullopt;
  const int h = *std::max_element(s.hostOf.begin(), s.hostOf.end()) + 1;
  if (h < 2 || *std::min_element(s.hostOf.begin(), s.hostOf.end()) < 0) return std::nullopt;
  Hierarchy out;
  out.groups = h;
  out.members.resize(h);
  for (int r = 0; r < s.nranks; ++r) out.members[s.hostOf[r]].push_back(r);
  out.perGroup = static_cast<int>(out.members[0].size());
  for (const auto& m : out.members)
    if (static_cast<int>(m.size()) != out.perGroup || m.empty()) return std::nullopt;
  out.group = s.hostOf[s.rank];
  const auto& mine = out.members[out.group];
  out.local = static_cast<int>(std::find(mine.begin(), mine.end(), s.rank) - mine.begin());
  return out;
}

/// The `supports` of every hierarchical algorithm: a regular hierarchy.
inline bool hasRegularHierarchy(const CollShape& s) { return regularHierarchy(s).has_value(); }

/// regularHierarchy, or InvalidArgument naming `algo` (a hierarchical algorithm's build() when
/// its supports() was not asked).
inline Result<Hierarchy> requireHierarchy(const CollShape& s, std::string_view algo) {
  auto h = regularHierarchy(s);
  if (!h) return invalidArgument("{}: needs hostOf with equal groups (nranks={})", algo, s.nranks);
  return std::move(*h);
}

/// The group of `rank` and its index inside it (ranks of a group in ascending order), e.g. the
/// root's: rooted hierarchical algorithms lead each group from the rank with the root's index.
inline std::pair<int, int> placeOf(const Hierarchy& h, const CollShape& s, int rank) {
  const int group = s.hostOf[rank];
  const auto& m = h.members[group];
  return {group, static_cast<int>(std::find(m.begin(), m.end(), rank) - m.begin())};
}

}  // namespace tutti::algo::patterns
