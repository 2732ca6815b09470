// File: tests/mp/huge_pages_mp_test.cc
// Large buffers move to huge pages through the public API (core/huge_pages.h): two forked ranks
// over shm and tcp run the same 8 MiB float allreduce three times from and into buffers inside
// one anonymous mapping of their own. After the first call nothing is on huge pages; after the
// second, exactly the 2 MiB regions inside the input and the output are (read back from
// /proc/self/smaps), and none around them. Every call's result is checked, element by element.
// With TUTTI_HUGE_PAGE_BYTES=0 (a second registration of this test) nothing becomes huge.
#include <sys/mman.h>

#include <cstdlib>

#include "core/huge_pages.h"
#include "tests/mp/mp_common.h"

namespace tutti::test {
namespace {

constexpr size_t kR = hugepages::kRegionBytes;
constexpr size_t kCount = size_t(2) << 20;  // floats: 8 MiB per buffer
constexpr size_t kInteriorKb = 3 * 2048;    // 3 whole regions inside each buffer (see layout)

// Whether this kernel collapses a region of ours at all (Linux >= 6.1, a free huge page, THP not
// "never"). Asked on a mapping of its own, in the test process, before the ranks fork.
bool collapseWorks() {
  void* m = mmap(nullptr, 2 * kR, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  const uintptr_t r = (reinterpret_cast<uintptr_t>(m) + kR - 1) & ~(kR - 1);
  std::memset(m, 1, 2 * kR);
  const bool ok = madvise(reinterpret_cast<void*>(r), kR, hugepages::kMadvCollapse) == 0;
  munmap(m, 2 * kR);
  return ok;
}

// Layout, in regions from the first 2 MiB boundary `base` of a 24 MiB mapping: input at
// base + 1R + 4 KiB (whole regions 2-4 inside it), output at base + 6R + 4 KiB (regions 7-9).
int body(Communicator& comm, bool expectHuge) {
  const int n = comm.size(), r = comm.rank();
  const size_t span = 12 * kR;
  void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 1;
  std::memset(m, 0x5A, span);
  const uintptr_t base = (reinterpret_cast<uintptr_t>(m) + kR - 1) & ~(kR - 1);
  auto* in = reinterpret_cast<float*>(base + 1 * kR + 4096);
  auto* out = reinterpret_cast<float*>(base + 6 * kR + 4096);
  for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<float>(r + 1 + i % 5);
  // With THP "always" the kernel may add huge pages itself: then only a lower bound holds.
  const bool strict = !hugepages::thpAlways();
  int failures = 0;
  for (int call = 1; call <= 3; ++call) {
    std::memset(out, 0xA5, kCount * sizeof(float));
    Status s = comm.allReduce(in, out, kCount, DataType::kFloat32, RedOp::kSum);
    if (!s.isOk()) {
      std::fprintf(stderr, "rank %d call %d: %s\n", r, call, s.toString().c_str());
      return 1;
    }
    size_t wrong = 0;
    for (size_t i = 0; i < kCount; ++i)
      wrong += out[i] != static_cast<float>(n * (n + 1) / 2 + n * (i % 5));
    for (size_t i = 0; i < kCount; ++i) wrong += in[i] != static_cast<float>(r + 1 + i % 5);
    if (wrong) {
      std::fprintf(stderr, "rank %d call %d: %zu wrong elements\n", r, call, wrong);
      ++failures;
    }
    const long kb = hugepages::anonHugeKbOfMapping(in);
    const long want = call >= 2 && expectHuge ? long(2 * kInteriorKb) : 0;
    if (strict ? kb != want : kb < want) {
      std::fprintf(stderr, "rank %d after call %d: %ld kB on huge pages, expected %ld\n", r, call,
                   kb, want);
      ++failures;
    }
  }
  munmap(m, span);
  return failures == 0 ? 0 : 1;
}

TEST_CASE("large allreduce buffers move to huge pages at their second use", "[mp][huge]") {
  const char* knob = std::getenv("TUTTI_HUGE_PAGE_BYTES");
  const bool off = knob && std::atol(knob) == 0;
  const bool works = collapseWorks();
  if (!works) WARN("MADV_COLLAPSE refused here: only the results and 'nothing huge' are checked");
  for (const char* transport : {"shm", "tcp"}) {
    INFO("transport=" << transport << " TUTTI_HUGE_PAGE_BYTES=" << (knob ? knob : "(default)"));
    runOnRanks(2, transport, [&](Communicator& comm) { return body(comm, works && !off); });
  }
}

}  // namespace
}  // namespace tutti::test
