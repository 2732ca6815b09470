// File: tests/mp/hot_path_test.cc
// The repeated-call path allocates nothing: after a warm-up, many identical blocking collectives
// run with the process's allocator instrumented (operator new and malloc/calloc/realloc are
// counted in this binary, which links tutti's objects directly), and the count must stay 0. Real
// forked ranks over shm and tcp; results are checked so that a skipped call cannot pass.
#include <cstdlib>
#include <new>

#include "tests/mp/mp_common.h"

extern "C" void* __libc_malloc(size_t);
extern "C" void* __libc_calloc(size_t, size_t);
extern "C" void* __libc_realloc(void*, size_t);
extern "C" void __libc_free(void*);

namespace {
bool gCounting = false;
long gAllocs = 0;
}  // namespace

extern "C" void* malloc(size_t n) {
  if (gCounting) ++gAllocs;
  return __libc_malloc(n);
}
extern "C" void* calloc(size_t n, size_t s) {
  if (gCounting) ++gAllocs;
  return __libc_calloc(n, s);
}
extern "C" void* realloc(void* p, size_t n) {
  if (gCounting) ++gAllocs;
  return __libc_realloc(p, n);
}
extern "C" void free(void* p) { __libc_free(p); }

void* operator new(size_t n) {
  if (gCounting) ++gAllocs;
  if (void* p = __libc_malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { __libc_free(p); }
void operator delete[](void* p) noexcept { __libc_free(p); }
void operator delete(void* p, size_t) noexcept { __libc_free(p); }
void operator delete[](void* p, size_t) noexcept { __libc_free(p); }

namespace tutti::test {
namespace {

// Runs `call` `warm` times, then `iters` times while counting allocations; returns the count.
template <typename Call>
long allocationsPerLoop(Call call, int warm, int iters, bool* ok) {
  for (int i = 0; i < warm; ++i) *ok = call().isOk() && *ok;
  gAllocs = 0;
  gCounting = true;
  for (int i = 0; i < iters; ++i) *ok = call().isOk() && *ok;
  gCounting = false;
  return gAllocs;
}

int hotPathBody(Communicator& comm, size_t count) {
  const int n = comm.size(), r = comm.rank();
  std::vector<float> in(count * n), out(count * n);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(r + 1 + i % 3);
  bool ok = true;
  int failures = 0;
  auto report = [&](const char* what, long allocs) {
    if (allocs != 0 || !ok) {
      std::fprintf(stderr, "rank %d: %s count=%zu: %ld allocations in the timed loop (ok=%d)\n", r,
                   what, count, allocs, ok);
      ++failures;
    }
  };
  const DataType F = DataType::kFloat32;
  report("allReduce", allocationsPerLoop(
                          [&] { return comm.allReduce(in.data(), out.data(), count, F, RedOp::kSum); },
                          20, 300, &ok));
  const float expect = static_cast<float>(n * (n + 1) / 2);  // element 0: sum of r + 1
  if (out[0] != expect) {
    std::fprintf(stderr, "rank %d: allReduce element 0 is %g, expected %g\n", r, out[0], expect);
    ++failures;
  }
  report("allGather", allocationsPerLoop(
                          [&] { return comm.allGather(in.data(), out.data(), count, F); }, 20, 300,
                          &ok));
  report("reduceScatter",
         allocationsPerLoop(
             [&] { return comm.reduceScatter(in.data(), out.data(), count, F, RedOp::kSum); }, 20,
             300, &ok));
  report("broadcast", allocationsPerLoop(
                          [&] { return comm.broadcast(in.data(), out.data(), count, F, 0); }, 20,
                          300, &ok));
  report("allToAll", allocationsPerLoop(
                         [&] { return comm.allToAll(in.data(), out.data(), count, F); }, 20, 300,
                         &ok));
  return failures == 0 ? 0 : 1;
}

TEST_CASE("repeated collectives allocate nothing", "[mp][hotpath]") {
  for (const char* transport : {"shm", "tcp"}) {
    for (int n : {2, 3}) {
      for (size_t count : {size_t{2}, size_t{300}, size_t{100000}}) {
        INFO("transport=" << transport << " nranks=" << n << " count=" << count);
        runOnRanks(n, transport, [&](Communicator& comm) { return hotPathBody(comm, count); });
      }
    }
  }
}

}  // namespace
}  // namespace tutti::test
