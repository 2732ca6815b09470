// File: tests/ib/ib_reg_cache_test.cc
// The registration cache with a fake register/deregister backend: hits, page rounding, overlap
// merging, eviction order, reference counts, retirement, invalidation, errors.
#include <catch2/catch.hpp>
#include <map>

#include "transports/ib/reg_cache.h"

namespace tutti::transport::ib {
namespace {

/// Records every registration; keys are handed out in order.
struct FakeBackend {
  struct Reg {
    uintptr_t addr;
    size_t bytes;
    MemKind kind;
  };
  std::map<uint32_t, Reg> live;  // by lkey
  uint32_t nextKey = 1;
  int regs = 0, deregs = 0;
  bool fail = false;

  RegistrationCache::Backend backend() {
    return {[this](uintptr_t a, size_t n, MemKind k) -> Result<MemRegistration> {
              if (fail) return systemError("fake: ibv_reg_mr failed: Cannot allocate memory");
              const uint32_t key = nextKey++;
              live[key] = {a, n, k};
              ++regs;
              return MemRegistration{key, key + 1000, reinterpret_cast<void*>(uintptr_t{key})};
            },
            [this](const MemRegistration& r) {
              REQUIRE(live.erase(r.lkey) == 1);  // never deregistered twice
              ++deregs;
            }};
  }
  const Reg& of(const Lease& l) { return live.at(l.lkey); }
};

const void* at(uintptr_t a) { return reinterpret_cast<const void*>(a); }
constexpr uintptr_t kBase = 0x10000000;

RegistrationCache::Limits limits(size_t entries, size_t bytes = size_t{1} << 40) {
  RegistrationCache::Limits l;
  l.maxEntries = entries;
  l.maxBytes = bytes;
  l.pageBytes = 4096;
  return l;
}

}  // namespace

TEST_CASE("reg cache: a covered range hits, the registration is page-aligned") {
  FakeBackend fb;
  RegistrationCache c(fb.backend(), limits(8));
  auto a = c.acquire(at(kBase + 100), 5000);
  REQUIRE(a.isOk());
  CHECK(fb.of(*a).addr == kBase);
  CHECK(fb.of(*a).bytes == 8192);
  c.release(*a);
  auto b = c.acquire(at(kBase + 4000), 4000);  // inside the same pages
  REQUIRE(b.isOk());
  CHECK(b->lkey == a->lkey);
  CHECK(c.stats().hits == 1);
  CHECK(c.stats().misses == 1);
  CHECK(fb.regs == 1);
  c.release(*b);
  CHECK(c.stats().entries == 1);
  CHECK(c.stats().bytes == 8192);
  CHECK(fb.deregs == 0);  // cached after release
}

TEST_CASE("reg cache: zero bytes and address overflow are rejected") {
  FakeBackend fb;
  RegistrationCache c(fb.backend(), limits(8));
  CHECK(c.acquire(at(kBase), 0).status().code() == Code::kInvalidArgument);
  CHECK_FALSE(c.acquire(at(UINTPTR_MAX - 10), 100).isOk());
  CHECK(fb.regs == 0);
}

TEST_CASE("reg cache: a partial overlap registers the union and retires the old entries") {
  FakeBackend fb;
  RegistrationCache c(fb.backend(), limits(8));
  auto a = c.acquire(at(kBase), 4096);             // [0, 4K)
  auto b = c.acquire(at(kBase + 3 * 4096), 4096);  // [12K, 16K)
  REQUIRE(a.isOk());
  REQUIRE(b.isOk());
  c.release(*a);                                   // a unreferenced, b still in use
  auto u = c.acquire(at(kBase + 2048), 3 * 4096);  // [2K, 14K) overlaps both
  REQUIRE(u.isOk());
  CHECK(fb.of(*u).addr == kBase);
  CHECK(fb.of(*u).bytes == 4 * 4096);  // union [0, 16K)
  CHECK(fb.deregs == 1);               // a went at once
  CHECK(fb.live.count(b->lkey) == 1);  // b is retired but still referenced
  auto s = c.stats();
  CHECK(s.entries == 1);
  CHECK(s.retired == 1);
  c.release(*b);  // last use of the retired entry
  CHECK(fb.deregs == 2);
  CHECK(fb.live.count(b->lkey) == 0);
  // The union serves later requests anywhere inside it.
  auto h = c.acquire(at(kBase + 12 * 1024), 4096);
  REQUIRE(h.isOk());
  CHECK(h->lkey == u->lkey);
  c.release(*h);
  c.release(*u);
}

TEST_CASE("reg cache: eviction is least recently used and spares referenced entries") {
  FakeBackend fb;
  RegistrationCache c(fb.backend(), limits(2));
  auto a = c.acquire(at(kBase), 4096);
  auto b = c.acquire(at(kBase + 0x100000), 4096);
  REQUIRE(a.isOk());
  REQUIRE(b.isOk());
  c.release(*a);
  c.release(*b);
  auto a2 = c.acquire(at(kBase), 100);  // touch a: b is now the least recently used
  REQUIRE(a2.isOk());
  c.release(*a2);
  auto d = c.acquire(at(kBase + 0x200000), 4096);  // third entry: evicts b
  REQUIRE(d.isOk());
  CHECK(fb.live.count(b->lkey) == 0);
  CHECK(fb.live.count(a->lkey) == 1);
  CHECK(c.stats().evictions == 1);
  CHECK(c.stats().entries == 2);
  c.release(*d);

  // Everything referenced: the cache goes over its limit instead of evicting an entry in use.
  auto x = c.acquire(at(kBase), 10);               // a, referenced
  auto y = c.acquire(at(kBase + 0x300000), 4096);  // evicts nothing but d (unreferenced)
  REQUIRE(x.isOk());
  REQUIRE(y.isOk());
  CHECK(fb.live.count(d->lkey) == 0);
  auto z = c.acquire(at(kBase + 0x400000), 4096);  // a and y referenced: over the limit
  REQUIRE(z.isOk());
  CHECK(c.stats().entries == 3);
  c.release(*z);  // back under the limit by evicting z (the only unreferenced one)
  CHECK(c.stats().entries == 2);
  CHECK(fb.live.count(z->lkey) == 0);
  c.release(*x);
  c.release(*y);
}

TEST_CASE("reg cache: byte limit") {
  FakeBackend fb;
  RegistrationCache c(fb.backend(), limits(100, 3 * 4096));
  for (int i = 0; i < 5; ++i) {
    auto l = c.acquire(at(kBase + i * 0x10000), 4096);
    REQUIRE(l.isOk());
    c.release(*l);
  }
  CHECK(c.stats().bytes <= 3 * 4096);
  CHECK(c.stats().entries == 3);
  CHECK(fb.live.size() == 3);
}

TEST_CASE("reg cache: a union larger than the byte limit registers only the request") {
  FakeBackend fb;
  RegistrationCache c(fb.backend(), limits(100, 2 * 4096));
  c.release(c.acquire(at(kBase), 2 * 4096).value());  // [0, 8K)
  auto big = c.acquire(at(kBase + 4096), 2 * 4096);   // [4K, 12K): union 12K
  REQUIRE(big.isOk());
  CHECK(fb.of(*big).addr == kBase + 4096);
  CHECK(fb.of(*big).bytes == 2 * 4096);
  CHECK(c.stats().entries == 1);  // the overlapped entry left the cache
  CHECK(fb.live.size() == 1);
  c.release(*big);
}

TEST_CASE("reg cache: reference counts") {
  FakeBackend fb;
  RegistrationCache c(fb.backend(), limits(1));
  auto a = c.acquire(at(kBase), 4096);
  auto a2 = c.acquire(at(kBase), 4096);
  REQUIRE(a.isOk());
  REQUIRE(a2.isOk());
  CHECK(a->id == a2->id);
  c.invalidate(at(kBase), 1);  // retired, two users left
  CHECK(fb.deregs == 0);
  c.release(*a);
  CHECK(fb.deregs == 0);
  c.release(*a2);
  CHECK(fb.deregs == 1);
  c.release(*a2);  // a stale lease is ignored
  c.release(Lease{});
  CHECK(fb.deregs == 1);
  // After invalidation the same address registers afresh.
  auto b = c.acquire(at(kBase), 4096);
  REQUIRE(b.isOk());
  CHECK(b->lkey != a->lkey);
  c.release(*b);
}

TEST_CASE("reg cache: invalidate drops every overlapping entry") {
  FakeBackend fb;
  RegistrationCache c(fb.backend(), limits(8));
  for (int i = 0; i < 4; ++i) c.release(c.acquire(at(kBase + i * 0x10000), 4096).value());
  c.invalidate(at(kBase + 0x10000 + 100), 0x10000);  // hits entries 1 and 2
  CHECK(c.stats().entries == 2);
  CHECK(fb.deregs == 2);
}

TEST_CASE("reg cache: memory kinds do not share entries, backend errors pass through") {
  FakeBackend fb;
  RegistrationCache c(fb.backend(), limits(8));
  auto h = c.acquire(at(kBase), 4096, MemKind::kHost);
  REQUIRE(h.isOk());
  auto d = c.acquire(at(kBase), 4096, MemKind::kDevice);
  REQUIRE(d.isOk());
  CHECK(d->lkey != h->lkey);
  CHECK(fb.of(*d).kind == MemKind::kDevice);
  c.release(*h);
  c.release(*d);
  fb.fail = true;
  auto e = c.acquire(at(kBase + 0x100000), 10);
  REQUIRE_FALSE(e.isOk());
  CHECK_THAT(e.status().message(), Catch::Contains("ibv_reg_mr"));
  CHECK(c.stats().entries == 1);  // the device entry replaced the host one; nothing else changed
}

TEST_CASE("reg cache: the destructor deregisters everything, in use or not") {
  FakeBackend fb;
  {
    RegistrationCache c(fb.backend(), limits(8));
    auto a = c.acquire(at(kBase), 4096);
    c.release(c.acquire(at(kBase + 0x100000), 4096).value());
    REQUIRE(a.isOk());
  }
  CHECK(fb.live.empty());
  CHECK(fb.regs == fb.deregs);
}

}  // namespace tutti::transport::ib
