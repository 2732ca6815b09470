// File: transports/ib/reg_cache.cc
// The registration cache (see reg_cache.h). Lookups are O(log n) in the disjoint index; eviction
// scans the cached entries for the least recently used unreferenced one, which is fine for the
// few hundred entries the limits allow.
#include "transports/ib/reg_cache.h"

#include <algorithm>
#include <vector>

#include "base/log.h"

namespace tutti::transport::ib {

RegistrationCache::RegistrationCache(Backend backend, Limits limits)
    : backend_(std::move(backend)), limits_(limits) {
  if (limits_.pageBytes == 0 || (limits_.pageBytes & (limits_.pageBytes - 1)) != 0)
    limits_.pageBytes = 4096;
  limits_.maxEntries = std::max<size_t>(limits_.maxEntries, 1);
}

RegistrationCache::~RegistrationCache() {
  for (auto& [id, e] : entries_) backend_.dereg(e.reg);
}

Result<Lease> RegistrationCache::acquire(const void* addr, size_t bytes, MemKind kind) {
  const auto begin = reinterpret_cast<uintptr_t>(addr);
  if (bytes == 0 || begin + bytes < begin) {
    return invalidArgument("ib: cannot register {} bytes at {}", bytes, addr);
  }
  const uintptr_t end = begin + bytes;
  ++tick_;
  // A hit: the cached entry starting at or before `begin` covers the whole range.
  if (auto it = index_.upper_bound(begin); it != index_.begin()) {
    Entry& e = entries_.at(std::prev(it)->second);
    if (e.begin <= begin && end <= e.end && e.kind == kind) {
      ++e.refs;
      e.lastUse = tick_;
      ++stats_.hits;
      return Lease{std::prev(it)->second, e.reg.lkey, e.reg.rkey};
    }
  }
  ++stats_.misses;
  // A miss: register the page-aligned union of the request and every overlapping cached entry of
  // the same kind, unless that would exceed the byte limit on its own.
  const uintptr_t mask = limits_.pageBytes - 1;
  uintptr_t lo = begin & ~mask;
  uintptr_t hi = (end + mask) & ~mask;
  std::vector<uint64_t> overlapped;
  auto it = index_.upper_bound(lo);
  if (it != index_.begin()) --it;
  for (; it != index_.end() && it->first < hi; ++it) {
    const Entry& e = entries_.at(it->second);
    if (e.end <= lo) continue;
    overlapped.push_back(it->second);
  }
  uintptr_t ulo = lo, uhi = hi;
  for (uint64_t id : overlapped) {
    const Entry& e = entries_.at(id);
    if (e.kind != kind) continue;
    ulo = std::min(ulo, e.begin);
    uhi = std::max(uhi, e.end);
  }
  if (uhi - ulo <= limits_.maxBytes) {
    lo = ulo;
    hi = uhi;
  }
  TUTTI_TRY_ASSIGN(MemRegistration reg, backend_.reg(lo, hi - lo, kind));
  ++stats_.registrations;
  for (uint64_t id : overlapped) retire(id);  // the new entry supersedes them
  const uint64_t id = nextId_++;
  Entry e;
  e.begin = lo;
  e.end = hi;
  e.kind = kind;
  e.reg = reg;
  e.refs = 1;
  e.lastUse = tick_;
  entries_.emplace(id, e);
  index_.emplace(lo, id);
  cachedBytes_ += hi - lo;
  evictToLimits(id);
  return Lease{id, reg.lkey, reg.rkey};
}

void RegistrationCache::release(const Lease& lease) {
  auto it = entries_.find(lease.id);
  if (lease.id == 0 || it == entries_.end() || it->second.refs == 0) return;
  Entry& e = it->second;
  --e.refs;
  if (e.refs == 0 && !e.cached) {
    destroy(lease.id);
  } else if (e.refs == 0) {
    evictToLimits(0);
  }
}

void RegistrationCache::invalidate(const void* addr, size_t bytes) {
  const auto lo = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t hi = lo + bytes;
  std::vector<uint64_t> hit;
  for (auto& [begin, id] : index_) {
    const Entry& e = entries_.at(id);
    if (e.begin < hi && lo < e.end) hit.push_back(id);
  }
  for (uint64_t id : hit) retire(id);
}

RegistrationCache::Stats RegistrationCache::stats() const {
  Stats s = stats_;
  s.entries = index_.size();
  s.bytes = cachedBytes_;
  s.retired = entries_.size() - index_.size();
  return s;
}

void RegistrationCache::retire(uint64_t id) {
  Entry& e = entries_.at(id);
  if (!e.cached) return;
  e.cached = false;
  index_.erase(e.begin);
  cachedBytes_ -= e.end - e.begin;
  if (e.refs == 0) destroy(id);
}

void RegistrationCache::destroy(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  backend_.dereg(it->second.reg);
  ++stats_.deregistrations;
  entries_.erase(it);
}

void RegistrationCache::evictToLimits(uint64_t keep) {
  while (index_.size() > limits_.maxEntries || cachedBytes_ > limits_.maxBytes) {
    uint64_t victim = 0;
    uint64_t oldest = UINT64_MAX;
    for (const auto& [begin, id] : index_) {
      const Entry& e = entries_.at(id);
      if (id != keep && e.refs == 0 && e.lastUse < oldest) {
        oldest = e.lastUse;
        victim = id;
      }
    }
    if (victim == 0) return;  // everything is in use: stay over the limit until a release
    ++stats_.evictions;
    retire(victim);
  }
}

}  // namespace tutti::transport::ib
