// File: tests/unit/huge_pages_test.cc
// hugepages::interior picks the whole 2 MiB regions inside a buffer; hugepages::advise records
// a region's first use, asks the kernel at its second and never again, never changes a byte
// inside or around the buffer, and (on a kernel with MADV_COLLAPSE and free huge pages) leaves
// the regions on huge pages, read back from /proc/self/smaps.
#include <sys/mman.h>
#include <sys/utsname.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>

#include "core/huge_pages.h"

namespace tutti::hugepages {
namespace {

constexpr size_t kR = kRegionBytes;

bool kernelAtLeast(int major, int minor) {
  utsname u{};
  int ma = 0, mi = 0;
  return uname(&u) == 0 && std::sscanf(u.release, "%d.%d", &ma, &mi) == 2 &&
         (ma > major || (ma == major && mi >= minor));
}

}  // namespace

TEST_CASE("interior holds the whole 2 MiB regions inside the buffer, nothing else", "[huge]") {
  uintptr_t f = 1, l = 1;
  const auto at = [](uintptr_t a) { return reinterpret_cast<const void*>(a); };
  interior(at(16 * kR), 4 * kR, &f, &l);  // aligned at both ends
  CHECK(f == 16 * kR);
  CHECK(l == 20 * kR);
  interior(at(16 * kR + 4096), 4 * kR, &f, &l);  // starts 4 KiB in: the first region is partial
  CHECK(f == 17 * kR);
  CHECK(l == 20 * kR);
  interior(at(16 * kR + 4096), 2 * kR, &f, &l);  // one whole region between two partial ones
  CHECK(f == 17 * kR);
  CHECK(l == 18 * kR);
  interior(at(16 * kR + 4096), kR + kR / 2, &f, &l);  // two partial regions, no whole one
  CHECK(f == l);
  interior(at(16 * kR), kR - 1, &f, &l);
  CHECK(f == l);
  interior(at(UINTPTR_MAX - kR), 4 * kR, &f, &l);  // wraps around: nothing
  CHECK(f == l);
}

TEST_CASE("advise asks at the second use, once per region, and keeps every byte", "[huge]") {
  REQUIRE(thresholdBytes() == 4u << 20);  // the default (the test runs without the variable)
  // 10 regions of address space; the buffer starts 4 KiB after the second region's start and
  // holds 8 MiB: regions 2..4 (3 whole ones) are inside it, regions 1 and 5 only in part.
  const size_t span = 10 * kR;
  void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(m != MAP_FAILED);
  const uintptr_t base = (reinterpret_cast<uintptr_t>(m) + kR - 1) & ~(kR - 1);  // region 0
  unsigned char* all = reinterpret_cast<unsigned char*>(m);
  for (size_t i = 0; i < span; ++i) all[i] = static_cast<unsigned char>(i * 131 + 7);
  auto* buf = reinterpret_cast<unsigned char*>(base + kR + 4096);
  const size_t bytes = 4 * kR;

  const Counters before = counters();
  advise(buf, kR);  // below the 4 MiB threshold: not even recorded
  advise(buf, kR);
  CHECK(counters().regionsFirstUse == before.regionsFirstUse);
  CHECK(counters().regionsAsked == before.regionsAsked);
  advise(buf, bytes);  // first use: recorded, not asked
  const Counters first = counters();
  CHECK(first.regionsFirstUse - before.regionsFirstUse == 3);
  CHECK(first.regionsAsked == before.regionsAsked);
  const void* mid = reinterpret_cast<const void*>(base + 2 * kR);
  if (!thpAlways()) CHECK(anonHugeKbOfMapping(mid) == 0);  // nothing asked, nothing huge yet
  advise(buf, bytes);  // second use: the 3 whole regions are asked for
  const Counters once = counters();
  CHECK(once.regionsAsked - before.regionsAsked == 3);
  advise(buf, bytes);  // a third use: looked up, not asked
  const Counters twice = counters();
  CHECK(twice.regionsAsked == once.regionsAsked);
  CHECK(twice.regionsSkipped - once.regionsSkipped == 3);

  size_t wrong = 0;
  for (size_t i = 0; i < span; ++i) wrong += all[i] != static_cast<unsigned char>(i * 131 + 7);
  CHECK(wrong == 0);

  // MADV_COLLAPSE came with Linux 6.1; where it succeeded, the 3 regions are huge pages now.
  if (kernelAtLeast(6, 1) && once.regionsCollapsed - before.regionsCollapsed == 3) {
    // Exactly the 3 regions inside the buffer, none of the 7 around it (unless THP is "always").
    const long kb = anonHugeKbOfMapping(mid);
    CHECK(kb >= 3 * 2048);
    if (!thpAlways()) CHECK(kb == 3 * 2048);
  } else {
    WARN("MADV_COLLAPSE refused or unavailable here: only the bookkeeping and contents checked");
  }
  munmap(m, span);
}

}  // namespace tutti::hugepages
