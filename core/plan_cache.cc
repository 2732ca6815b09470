// File: core/plan_cache.cc
// The plan cache's memory: scratch, insertion, huge-page advice (core/plan_cache.h).
#include "core/plan_cache.h"

#include "core/huge_pages.h"

namespace tutti::detail {

Status PlanCache::reserveScratch(size_t bytes, const char* api) {
  if (bytes <= scratch_.size()) return Status::ok();
  // Grows only; sized by the largest plan so far. No exception escapes: failure is reported.
  try {
    scratch_.grow(bytes);
  } catch (const std::bad_alloc&) {
    return systemError("{}: cannot allocate {} bytes of scratch", api, bytes);
  }
  return Status::ok();
}

Result<Plan*> PlanCache::insert(const Key& key, std::unique_ptr<Plan> plan, const char* api) {
  TUTTI_TRY(reserveScratch(plan->scratchBytes, api));
  if (plans_.size() >= 512) plans_.clear();
  last_ = nullptr;
  Plan* raw = plan.get();
  plans_.emplace(key, std::move(plan));
  return raw;
}

void PlanCache::adviseHugePages(const CallArgs& a, const Plan& plan, int rank, int nranks) {
  const size_t threshold = hugepages::thresholdBytes();
  // No buffer of the call is larger than count * element * nranks bytes.
  if (threshold == 0 || a.count * plan.elemBytes * static_cast<size_t>(nranks) < threshold)
    return;
  // A call repeating the previous one records its use only until the buffers' second use,
  // where hugepages::advise asks for them; later repeats skip even the lookup.
  if (a.send == hugeSend_ && a.recv == hugeRecv_ && &plan == hugePlan_) {
    if (hugeUses_ >= 2) return;
    ++hugeUses_;
  } else {
    hugeSend_ = a.send;
    hugeRecv_ = a.recv;
    hugePlan_ = &plan;
    hugeUses_ = 1;
  }
  const bool p2p = a.coll == Coll::kSendRecv;
  if (!p2p || a.sendPeer >= 0)
    hugepages::advise(a.send, inputCount(a.coll, a.count, nranks, rank, a.root) * plan.elemBytes);
  if ((!p2p || a.recvPeer >= 0) && a.recv != a.send)
    hugepages::advise(a.recv,
                      outputCount(a.coll, a.count, nranks, rank, a.root) * plan.elemBytes);
}

}  // namespace tutti::detail
