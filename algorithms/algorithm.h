// File: algorithms/algorithm.h
// How an algorithm is declared: a pure build function plus metadata, registered from its own
// file with TUTTI_REGISTER_ALGORITHM. No central list, no enum: adding an algorithm is adding one
// .cc file to algorithms/. Also the ScheduleBuilder and the rank-math helpers (patterns).
#pragma once

#include <deque>
#include <functional>
#include <string_view>
#include <vector>

#include "algorithms/schedule.h"
#include "base/status.h"

namespace tutti::algo {

/// Metadata of one algorithm. Designated initialisers must follow this declaration order.
struct AlgorithmInfo {
  std::string_view name;     ///< unique per coll; selectable with Communicator::setAlgorithm
  Coll coll;
  std::string_view summary;  ///< one line
  /// Whether the algorithm handles this shape; empty means always. Declining is not an error.
  std::function<bool(const CollShape&)> supports;
  /// Pure: no I/O, no globals, deterministic. Same round numbering on every rank.
  std::function<Result<Schedule>(const CollShape&)> build;
  /// Preference when no algorithm is requested (higher wins among those that support the
  /// shape). The cost-model selector replaces this.
  int priority = 0;
  /// Loaded from a schedule file (TUTTI_SCHEDULE_FILE): verified before first use.
  bool loaded = false;
};

/// Every registered algorithm (registration order is unspecified). A deque: entries never move,
/// so pointers from find() stay valid when algorithms are added later.
const std::deque<AlgorithmInfo>& registry();
/// The algorithm named `name` for `coll`, or nullptr.
const AlgorithmInfo* find(Coll coll, std::string_view name);

struct Registrar {
  explicit Registrar(const AlgorithmInfo& info);
};
/// Adds an algorithm at run time (loaded schedules). InvalidArgument when (coll, name) exists.
/// Not thread-safe against concurrent registry readers: call before communicators use it.
Status registerAlgorithm(AlgorithmInfo info);

/// Rank arithmetic shared by algorithms (UCC's coll_patterns idea).
namespace patterns {
inline int mod(long a, int n) { return static_cast<int>(((a % n) + n) % n); }
inline int ringNext(int r, int n) { return mod(r + 1, n); }
inline int ringPrev(int r, int n) { return mod(r - 1, n); }
/// The smallest k with 2^k >= n (0 for n <= 1): the rounds of a binomial tree over n ranks.
inline int ceilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}
struct Chunk {
  size_t offset = 0, count = 0;
};
/// Splits `count` elements into n chunks whose sizes differ by at most one (the first
/// count % n chunks get the extra element). Chunk i of n.
inline Chunk evenChunk(size_t count, int n, int i) {
  size_t base = count / n, extra = count % n, ui = static_cast<size_t>(i);
  return {ui * base + (ui < extra ? ui : extra), base + (ui < extra ? 1 : 0)};
}
/// MPICH's fold for recursive doubling/halving on n ranks that are not a power of two: p is the
/// largest power of two <= n and rem = n - p. The first 2*rem ranks pair up: even rank r sends
/// to r+1 and sits out until the end (sender), r+1 carries on for both (receiver). The p ranks
/// that carry on get new ranks 0..p-1: r/2 for receivers, r-rem above 2*rem.
struct PowerOfTwoFold {
  int p = 1, steps = 0, rem = 0;  // steps = log2(p)
  bool sender = false, receiver = false;
  int newRank = 0;  // meaningful unless sender
  PowerOfTwoFold(int rank, int n) {
    while (p * 2 <= n) p *= 2, ++steps;
    rem = n - p;
    sender = rank < 2 * rem && rank % 2 == 0;
    receiver = rank < 2 * rem && rank % 2 == 1;
    newRank = rank < 2 * rem ? rank / 2 : rank - rem;
  }
  /// The real rank behind new rank i.
  int realRank(int i) const { return i < rem ? 2 * i + 1 : i + rem; }
};
}  // namespace patterns

/// Builds a Schedule round by round; finish() validates it (peers in range and not self for
/// communication, src/dst ranges inside bufferCount / scratchCount, forward peers set).
class ScheduleBuilder {
 public:
  explicit ScheduleBuilder(const CollShape& shape);

  ScheduleBuilder& send(int peer, Buf src, size_t srcOffset, size_t count);
  ScheduleBuilder& recv(int peer, Buf dst, size_t dstOffset, size_t count);
  /// dst = src op incoming.
  ScheduleBuilder& recvReduce(int peer, Buf src, size_t srcOffset, Buf dst, size_t dstOffset,
                              size_t count);
  /// dst = src op incoming, then forward dst to sendPeer.
  ScheduleBuilder& recvReduceSend(int peer, int sendPeer, Buf src, size_t srcOffset, Buf dst,
                                  size_t dstOffset, size_t count);
  /// dst = incoming, then forward dst to sendPeer.
  ScheduleBuilder& recvCopySend(int peer, int sendPeer, Buf dst, size_t dstOffset, size_t count);
  ScheduleBuilder& copy(Buf src, size_t srcOffset, Buf dst, size_t dstOffset, size_t count);
  ScheduleBuilder& reduce(Buf src, size_t srcOffset, Buf dst, size_t dstOffset, size_t count);
  /// Closes the current round (an empty round is kept: round numbers align across ranks).
  ScheduleBuilder& nextRound();
  /// Reserves scratch space; returns the offset of the reserved range.
  size_t scratch(size_t count);

  Result<Schedule> finish();

 private:
  ScheduleBuilder& add(const Step& step);
  CollShape shape_;
  Schedule sched_;
  std::vector<Step> current_;
};

}  // namespace tutti::algo

#define TUTTI_ALGO_CONCAT_(a, b) a##b
#define TUTTI_ALGO_CONCAT(a, b) TUTTI_ALGO_CONCAT_(a, b)
/// TUTTI_REGISTER_ALGORITHM({.name = "ring", .coll = Coll::kAllReduce, .summary = "...",
///                           .build = build});
#define TUTTI_REGISTER_ALGORITHM(...)                                                 \
  static const ::tutti::algo::Registrar TUTTI_ALGO_CONCAT(tutti_algorithm_, __LINE__)( \
      ::tutti::algo::AlgorithmInfo __VA_ARGS__)
