// File: core/plan_cache.h
// PlanCache: the plans a communicator has built, by call shape, and the memory they share. A
// repeated call (a training loop, a benchmark) finds its plan without a map walk and allocates
// nothing. Beside the plans: the scratch pool every plan borrows (one plan executes at a time),
// the batch entry's staging (core/batch.cc), and the huge-page advice for large user buffers
// (core/huge_pages.h), which a repeated call skips after the buffers' second use. Used by the
// thread that executes the communicator's calls, under its execution mutex.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "base/collectives.h"
#include "base/page_buffer.h"
#include "core/engine.h"

namespace tutti::detail {

class PlanCache {
 public:
  /// A call's shape: collective, count, dtype, op, root, in place, send peer, receive peer. The
  /// algorithm override is not part of it: the owner clears the collective's plans when its
  /// override changes.
  using Key = std::tuple<int, size_t, int, int, int, bool, int, int>;
  static Key keyOf(const CallArgs& a, bool inPlace) {
    return {static_cast<int>(a.coll), a.count, static_cast<int>(a.dtype), static_cast<int>(a.op),
            a.root, inPlace, a.sendPeer, a.recvPeer};
  }

  /// The plan stored under `key`, or nullptr. The last plan found is checked first.
  Plan* find(const Key& key) {
    if (last_ && key == lastKey_) return last_;
    auto it = plans_.find(key);
    if (it == plans_.end()) return nullptr;
    lastKey_ = key;
    last_ = it->second.get();
    return last_;
  }
  /// Stores `plan` under `key` (at most 512 shapes: a sweep's many shapes start the cache over)
  /// after growing the scratch pool to its needs. SystemError naming `api` when the pool cannot
  /// grow (nothing stored).
  Result<Plan*> insert(const Key& key, std::unique_ptr<Plan> plan, const char* api);
  /// Forgets every plan.
  void clear() {
    plans_.clear();
    last_ = nullptr;
    fused_.clear();
  }
  /// Forgets the plans of one collective (its algorithm override changed); fused batches are
  /// allreduces.
  void clear(Coll coll) {
    std::erase_if(plans_,
                  [&](const auto& kv) { return std::get<0>(kv.first) == static_cast<int>(coll); });
    last_ = nullptr;
    if (coll == Coll::kAllReduce) fused_.clear();
  }

  /// A fused batch of allreduces (core/batch.cc): dtype, op, then each call's count and whether
  /// it runs in place, in batch order.
  using FusedKey = std::tuple<int, int, std::vector<std::pair<size_t, bool>>>;
  /// Whether a fused plan is stored under `key`; if so `*plan` is it, or nullptr when the calls
  /// were found to share no round (they run one by one). Shared: a plan stays valid for a run
  /// that holds it while clear() or a later insertion drops it from the cache.
  bool findFused(const FusedKey& key, std::shared_ptr<Plan>* plan) const {
    auto it = fused_.find(key);
    if (it == fused_.end()) return false;
    *plan = it->second;
    return true;
  }
  /// Stores `plan` (or nullptr: share no round) under `key`; at most 64 shapes, as insert().
  void insertFused(FusedKey key, std::shared_ptr<Plan> plan) {
    if (fused_.size() >= 64) fused_.clear();
    fused_.insert_or_assign(std::move(key), std::move(plan));
  }

  /// Grows the scratch pool to at least `bytes`. SystemError naming `api` on failure.
  Status reserveScratch(size_t bytes, const char* api);
  std::byte* scratch() { return scratch_.data(); }
  /// Fused inputs and outputs and premultiplied inputs of batches (core/batch.cc); grows only.
  PageBuffer& batchStaging() { return batchStaging_; }

  /// Asks for the call's large buffers to be backed by huge pages (core/huge_pages.h), unless
  /// the same buffers and plan were already advised twice in a row.
  void adviseHugePages(const CallArgs& a, const Plan& plan, int rank, int nranks);

 private:
  std::map<Key, std::unique_ptr<Plan>> plans_;
  Key lastKey_{};
  Plan* last_ = nullptr;  // reset whenever plans_ changes
  std::map<FusedKey, std::shared_ptr<Plan>> fused_;
  PageBuffer scratch_;  // page-aligned: tcp receives into it (base/page_buffer.h)
  PageBuffer batchStaging_;
  // The buffers and plan of the last call advised, and how many calls in a row used them.
  const void* hugeSend_ = nullptr;
  const void* hugeRecv_ = nullptr;
  const Plan* hugePlan_ = nullptr;
  int hugeUses_ = 0;
};

}  // namespace tutti::detail
