// File: core/huge_pages.h
// Large user buffers on transparent huge pages. A collective past the cache touches every 4 KiB
// page of its input and output once per call, on both sides of each copy (our reduce loops, the
// kernel's copies for tcp and single-copy shm), and in a virtual machine each TLB miss is a
// two-level page walk. Backing the same bytes with 2 MiB pages measured 2-rank shm allreduce of
// 16 MiB 1.94-2.41 -> 1.65-1.67 ms, 4 ranks 6.96 -> 5.24 ms and 2-rank tcp 6.9-7.4 -> 5.1-6.0 ms
// (docs/PERFORMANCE.md, "Session 10: huge pages").
//
// tutti cannot choose how the caller allocates, so on the first call that uses a buffer of at
// least TUTTI_HUGE_PAGE_BYTES it asks the kernel to rebuild the 2 MiB-aligned part inside the
// buffer from huge pages: madvise(MADV_COLLAPSE), Linux 6.1 and later. The kernel copies the
// pages it replaces, so the contents and the addresses stay as they were; only the physical
// backing changes. Memory outside [p, p + bytes) is never touched: a 2 MiB region that is not
// entirely inside the buffer is left alone. Each region is asked for once per process (a
// region the kernel refused, for example pinned or shared memory, is not asked again), so a
// repeated call costs a few hash lookups and no system call.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tutti::hugepages {

/// Size of the regions asked for (x86-64 and arm64 with 4 KiB base pages: 2 MiB).
inline constexpr size_t kRegionBytes = size_t(2) << 20;

/// The smallest buffer, in bytes, that is moved to huge pages (TUTTI_HUGE_PAGE_BYTES; default
/// 4 MiB; 0 turns the feature off). Cached after the first call; thread-safe.
size_t thresholdBytes();

/// The 2 MiB-aligned regions entirely inside [p, p + bytes): [*first, *last) as region-aligned
/// addresses. Empty (first == last) when the buffer holds no whole region. Pure arithmetic.
void interior(const void* p, size_t bytes, uintptr_t* first, uintptr_t* last);

/// What advise() did, summed over the process (for tests and the INFO log).
struct Counters {
  uint64_t regionsAsked = 0;      ///< regions passed to madvise(MADV_COLLAPSE)
  uint64_t regionsCollapsed = 0;  ///< of those, in calls that succeeded
  uint64_t regionsSkipped = 0;    ///< regions seen before (no system call)
};
Counters counters();

/// Moves the whole 2 MiB regions of host buffer [p, p + bytes) to huge pages, once per region
/// and process, when bytes >= thresholdBytes(). Never fails and never changes the buffer's
/// contents: a refusal by the kernel (EINVAL on kernels before 6.1 or for memory it cannot
/// collapse, EAGAIN or ENOMEM when no huge page is free, EBUSY for pinned pages) only leaves the
/// small pages in place; the first refusal is logged at INFO. p must be host memory the caller
/// may read (device pointers must not reach here). Thread-safe.
void advise(const void* p, size_t bytes);

}  // namespace tutti::hugepages
