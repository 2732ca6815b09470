// File: transports/ib/reg_cache.h
// A memory-registration cache: user buffers are registered with the NIC once and reused while
// they stay in the cache. Entries are page-aligned, disjoint ranges; a request that overlaps
// cached entries without being covered registers the union, and the overlapped entries leave the
// cache (deregistered at once, or when their last user releases them). Unreferenced entries are
// evicted least recently used first when the entry or byte limit is exceeded. The backend (real
// ibv_reg_mr / ibv_dereg_mr, or a fake in tests) is a pair of functions, and the memory kind
// travels to it, so device memory (dma-buf, peer memory) plugs in without touching the cache.
//
// Hazard (shared with every cache that has no munmap hook): if the user frees a cached buffer and
// the allocator maps new pages at the same address, a hit sends the old pages. The transport
// therefore enables the cache only on request (TUTTI_IB_REG_CACHE=1) and documents the contract in
// docs/IB.md; invalidate() is the hook for explicit deregistration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <unordered_map>

#include "base/status.h"

namespace tutti::transport::ib {

enum class MemKind : uint8_t { kHost = 0, kDevice = 1 };

/// What the backend returns for one registered range.
struct MemRegistration {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  void* handle = nullptr;  ///< backend-owned (an ibv_mr*); passed back to deregister
};

/// A use of a cached registration; give it back with release().
struct Lease {
  uint64_t id = 0;  ///< 0: empty lease
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

class RegistrationCache {
 public:
  struct Backend {
    /// Registers [addr, addr + bytes) (page-aligned). Errors are returned to acquire()'s caller.
    std::function<Result<MemRegistration>(uintptr_t addr, size_t bytes, MemKind kind)> reg;
    std::function<void(const MemRegistration&)> dereg;
  };
  struct Limits {
    size_t maxEntries = 256;
    size_t maxBytes = size_t{1} << 34;  // 16 GiB of pinned memory
    size_t pageBytes = 4096;            // a power of two
  };
  struct Stats {
    uint64_t hits = 0, misses = 0, evictions = 0, registrations = 0, deregistrations = 0;
    size_t entries = 0;  ///< cached (findable) entries
    size_t bytes = 0;    ///< bytes registered by cached entries
    size_t retired = 0;  ///< entries out of the cache but still referenced
  };

  RegistrationCache(Backend backend, Limits limits);
  /// Deregisters every entry, referenced or not (the owner outlives all its users).
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  /// Returns a lease on a registration covering [addr, addr + bytes), registering on a miss.
  /// bytes == 0 is InvalidArgument (nothing to register). Not thread-safe.
  Result<Lease> acquire(const void* addr, size_t bytes, MemKind kind = MemKind::kHost);
  /// Ends a lease. Unknown or empty leases are ignored.
  void release(const Lease& lease);
  /// Drops every cached entry overlapping [addr, addr + bytes) (e.g. before the memory is freed);
  /// referenced ones are deregistered when their last lease ends.
  void invalidate(const void* addr, size_t bytes);

  Stats stats() const;

 private:
  struct Entry {
    uintptr_t begin = 0, end = 0;
    MemKind kind = MemKind::kHost;
    MemRegistration reg;
    int refs = 0;
    bool cached = true;  ///< findable; false once retired
    uint64_t lastUse = 0;
  };
  void retire(uint64_t id);  // removes from the index; deregisters now if unreferenced
  void destroy(uint64_t id);
  void evictToLimits(uint64_t keep);

  Backend backend_;
  Limits limits_;
  std::unordered_map<uint64_t, Entry> entries_;  // every live registration by id
  std::map<uintptr_t, uint64_t> index_;          // cached entries by begin address (disjoint)
  uint64_t nextId_ = 1;
  uint64_t tick_ = 0;
  size_t cachedBytes_ = 0;
  Stats stats_;
};

}  // namespace tutti::transport::ib
