// File: core/huge_pages.h
// Large user buffers on transparent huge pages. A collective past the cache touches every 4 KiB
// page of its input and output once per call, on both sides of each copy (our reduce loops, the
// kernel's copies for tcp and single-copy shm), and in a virtual machine each TLB miss is a
// two-level page walk. With the buffers on 2 MiB pages, float32 allreduce over shm measured
// 2 ranks 16 MiB 1.90-2.43 -> 1.72-1.92 ms, 64 MiB 9.1-10.5 -> 8.1-8.3 ms, 4 ranks 16 MiB
// 5.9-8.4 -> 5.2-6.4 ms; over tcp no gain was measured.
//
// tutti cannot choose how the caller allocates, so on the second call that uses a buffer of at
// least TUTTI_HUGE_PAGE_BYTES it asks the kernel to rebuild the 2 MiB-aligned part inside the
// buffer from huge pages: madvise(MADV_COLLAPSE), Linux 6.1 and later. The kernel copies the
// pages it replaces, so the contents and the addresses stay as they were; only the physical
// backing changes. Memory outside [p, p + bytes) is never touched: a 2 MiB region that is not
// entirely inside the buffer is left alone.
//
// The collapse is not cheap: 0.4-0.55 GB/s here (16 MiB in 36 ms, 256 MiB in 0.48 s, against
// 1.8 ms for a 16 MiB allreduce). Hence the second use: a buffer used once (a fresh allocation
// per call) never pays it; a buffer used again (a benchmark, a training loop) pays it once.
// Each region is asked for at most once per process (a region the kernel refused, for example
// pinned or shared memory, is not asked again); later uses cost a hash lookup per region.
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
  uint64_t regionsFirstUse = 0;   ///< first uses recorded (no system call)
  uint64_t regionsAsked = 0;      ///< regions passed to madvise(MADV_COLLAPSE), at their second use
  uint64_t regionsCollapsed = 0;  ///< of those, in calls that succeeded
  uint64_t regionsSkipped = 0;    ///< uses of regions asked for before (no system call)
};
Counters counters();

/// madvise() advice MADV_COLLAPSE (Linux 6.1, include/uapi/asm-generic/mman-common.h), spelled
/// out because older C library headers lack the name.
inline constexpr int kMadvCollapse = 25;

/// Whether the kernel puts anonymous memory on huge pages without being asked (THP mode
/// "always" in /sys/kernel/mm/transparent_hugepage/enabled). For tests and diagnostics.
bool thpAlways();

/// kB of AnonHugePages in the mapping (VMA) that contains addr, read from /proc/self/smaps; -1
/// when no mapping contains it or the file cannot be read. For tests and diagnostics (it reads
/// the whole file: milliseconds).
long anonHugeKbOfMapping(const void* addr);

/// Records a use of the whole 2 MiB regions of host buffer [p, p + bytes) when bytes >=
/// thresholdBytes(), and moves each region to huge pages at its second recorded use (once per
/// region and process; the caller records one use per call). Never fails and never changes the
/// buffer's contents: a refusal by the kernel (EINVAL on kernels before 6.1 or for memory it cannot
/// collapse, EAGAIN or ENOMEM when no huge page is free, EBUSY for pinned pages) only leaves the
/// small pages in place; the first refusal is logged at INFO. p must be host memory the caller
/// may read (device pointers must not reach here). Thread-safe.
void advise(const void* p, size_t bytes);

}  // namespace tutti::hugepages
