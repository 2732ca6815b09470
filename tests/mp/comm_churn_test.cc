// File: tests/mp/comm_churn_test.cc
// A communicator created and destroyed 1,000 times on each rank leaves nothing behind: no open
// file descriptor, no thread, no /dev/shm segment of this process, and no memory beyond a small
// bound (heap bytes in use and RSS, measured after a warm-up; under AddressSanitizer,
// LeakSanitizer's own check instead). Real forked ranks over shm and over tcp.
#include <dirent.h>
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "tests/mp/mp_common.h"

#if defined(__SANITIZE_ADDRESS__)
#define TUTTI_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TUTTI_TEST_ASAN 1
#endif
#endif
#ifdef TUTTI_TEST_ASAN
#include <sanitizer/lsan_interface.h>
#endif

namespace tutti::test {
namespace {

constexpr int kCycles = 1000;
// The first cycles fill the process-wide caches (topology probe, parameter registry, logger,
// plan-independent tables); memory is compared from here on.
constexpr int kWarmCycles = 20;
// 1,000 cycles: a leak of more than 64 bytes of heap per communicator exceeds it; a normal
// run grows by 0-1 KiB (the allocator's bookkeeping).
constexpr long kHeapBoundBytes = 64 << 10;
// RSS also counts mappings (shm rings, thread stacks: a leaked segment or stack is >= 64 KiB, so
// 1,000 of them are >= 64 MiB) and pages the allocator takes; a normal run grows by 0-24 KiB.
constexpr long kRssBoundBytes = 2 << 20;

int countEntries(const char* dir, const std::string& contains = "") {
  DIR* d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (contains.empty() || name.find(contains) != std::string::npos) ++n;
  }
  closedir(d);
  return n - (std::string(dir) == "/proc/self/fd" ? 1 : 0);  // opendir's own descriptor
}

long rssBytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  const int got = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return got == 2 ? resident * sysconf(_SC_PAGESIZE) : -1;
}

long heapBytes() { return static_cast<long>(mallinfo2().uordblks); }

struct Snapshot {
  int fds = 0, threads = 0, shmSegments = 0;
  long rss = 0, heap = 0;
};

// This process's shm segments are named /tutti-<secret>-<pid>-<rank> (shm_transport.cc).
Snapshot snapshot() {
  Snapshot s;
  s.fds = countEntries("/proc/self/fd");
  s.threads = countEntries("/proc/self/task");
  s.shmSegments = countEntries("/dev/shm", "-" + std::to_string(getpid()) + "-");
  s.rss = rssBytes();
  s.heap = heapBytes();
  return s;
}

int churn(int rank) {
  const Snapshot start = snapshot();
  Snapshot warm;
  std::vector<float> in(64, 1.f), out(64);
  for (int i = 0; i < kCycles; ++i) {
    if (i == kWarmCycles) warm = snapshot();
    auto c = Communicator::fromEnvironment();
    if (!c.isOk()) {
      std::fprintf(stderr, "rank %d: cycle %d: init failed: %s\n", rank, i,
                   c.status().toString().c_str());
      return 1;
    }
    TUTTI_CHILD_CHECK(
        c->allReduce(in.data(), out.data(), in.size(), DataType::kFloat32, RedOp::kSum).isOk());
    TUTTI_CHILD_CHECK(out[0] == 2.f);
  }
  // The rendezvous root's thread (rank 0) is detached and ends on its own once every rank has
  // its reply: give it a moment.
  Snapshot end = snapshot();
  for (int i = 0; i < 100 && (end.threads != start.threads || end.fds != start.fds); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    end = snapshot();
  }
  std::fprintf(stderr,
               "rank %d: fds %d -> %d, threads %d -> %d, shm segments %d -> %d, "
               "RSS %ld -> %ld KiB, heap %ld -> %ld KiB (from cycle %d)\n",
               rank, start.fds, end.fds, start.threads, end.threads, start.shmSegments,
               end.shmSegments, warm.rss >> 10, end.rss >> 10, warm.heap >> 10, end.heap >> 10,
               kWarmCycles);
  TUTTI_CHILD_CHECK(end.fds == start.fds);
  TUTTI_CHILD_CHECK(end.threads == start.threads);
  TUTTI_CHILD_CHECK(end.shmSegments == 0);
#ifdef TUTTI_TEST_ASAN
  // ASan's allocator keeps freed blocks in quarantine (RSS grows) and mallinfo2 does not see
  // it; its leak check finds what neither number would.
  TUTTI_CHILD_CHECK(__lsan_do_recoverable_leak_check() == 0);
#else
  TUTTI_CHILD_CHECK(end.heap - warm.heap <= kHeapBoundBytes);
  TUTTI_CHILD_CHECK(end.rss - warm.rss <= kRssBoundBytes);
#endif
  return 0;
}

}  // namespace

TEST_CASE("a communicator created and destroyed 1,000 times leaves nothing behind", "[mp]") {
  const std::string transport = GENERATE("shm", "tcp");
  INFO("transport=" << transport);
  launch::LaunchOptions opts;
  opts.nranks = 2;
  opts.timeout = std::chrono::seconds(240);
  opts.env = {{"TUTTI_TRANSPORTS", transport}, {"TUTTI_BOOTSTRAP_TIMEOUT", "30"}};
  auto outcomes = launch::runRanks(opts, [](int rank, int) { return churn(rank); });
  const bool ok = launch::allPassed(outcomes);
  for (const auto& o : outcomes) UNSCOPED_INFO(launch::describe(o) << "\n" << o.output);
  REQUIRE(ok);
}

}  // namespace tutti::test
