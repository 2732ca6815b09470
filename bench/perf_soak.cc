// File: bench/perf_soak.cc
// tutti-perf --soak (bench/perf_soak.h).
#include "bench/perf_soak.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace tutti::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kCheckEvery = 32;       // cases between the ranks' agreement on stopping
constexpr int kWarmupCases = 1100;    // beyond two turnovers of the 512-shape plan cache
constexpr long kRssGrowthKiB = 16 << 10;  // allowed resident growth after the warm-up

struct Usage {
  long rssKiB = 0;
  int fds = 0;
  int threads = 0;
};

int countEntries(const char* dir) {
  DIR* d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  while (const dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - (std::string(dir) == "/proc/self/fd" ? 1 : 0);  // opendir's own descriptor
}

Usage sampleUsage() {
  Usage u;
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  u.rssKiB = resident * (sysconf(_SC_PAGESIZE) / 1024);
  u.fds = countEntries("/proc/self/fd");
  u.threads = countEntries("/proc/self/task");
  return u;
}

// One random case, the same on every rank (same seed, same draws).
struct Case {
  const PerfColl* coll = nullptr;
  std::string algorithm;  // "" = the selector
  CaseShape shape;
};

std::string describe(const Case& c) {
  return std::string(c.coll->name) + " algorithm=" +
         (c.algorithm.empty() ? std::string("auto") : c.algorithm) +
         " dtype=" + std::string(dataTypeName(c.shape.dtype)) +
         " op=" + std::string(redOpName(c.shape.op)) + " root=" + std::to_string(c.shape.root) +
         " count=" + std::to_string(c.shape.count) + " inPlace=" + (c.shape.inPlace ? "1" : "0");
}

}  // namespace

int runSoak(Communicator& comm, const Config& cfg) {
  const int n = comm.size(), rank = comm.rank();
  const bool printer = rank == 0;
  // Every collective with every dtype, op and root tutti-perf knows.
  std::vector<Plan> plans;
  std::vector<std::vector<std::string>> algos;  // per plan: its collective's algorithms
  for (const PerfColl& coll : perfColls()) {
    Config c = cfg;
    c.coll = std::string(coll.name);
    c.datatypes = "all";
    c.ops = "all";
    c.roots = "all";
    Result<Plan> p = makePlan(c, n);
    if (!p) return fail(comm, p.status());
    plans.push_back(*p);
    algos.push_back(Communicator::algorithms(coll.coll));
  }
  AlignedBuffer send, recv;
  const size_t bufBytes = size_t(cfg.maxBytes) * size_t(n) + 4096;
  if (Status st = send.allocate(bufBytes); !st) return fail(comm, st);
  if (Status st = recv.allocate(bufBytes); !st) return fail(comm, st);

  std::mt19937_64 rng(cfg.seed);
  auto pick = [&](size_t size) { return size_t(rng() % size); };
  const double logMax = std::log(double(std::max<uint64_t>(cfg.maxBytes, 1)));
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::duration<double>(cfg.soakSec);
  auto nextReport = t0 + std::chrono::seconds(10);
  int64_t cases = 0, skipped = 0, wrongTotal = 0;
  Usage start{}, last{};
  std::string firstWrong;
  for (;;) {
    if (cases % kCheckEvery == 0) {  // every rank stops at the same case
      Result<int64_t> done = sumInt64(comm, Clock::now() >= end ? 1 : 0);
      if (!done) return fail(comm, done.status());
      if (*done > 0) break;
      if (printer && Clock::now() >= nextReport) {
        nextReport += std::chrono::seconds(10);
        const Usage u = sampleUsage();
        std::printf("# soak: %.0f s, %lld cases (%lld declined), %lld wrong, rss %.1f MiB, %d fds, "
                    "%d threads\n",
                    std::chrono::duration<double>(Clock::now() - t0).count(), (long long)cases,
                    (long long)skipped, (long long)wrongTotal, u.rssKiB / 1024.0, u.fds,
                    u.threads);
        std::fflush(stdout);
      }
    }
    if (cases == kWarmupCases) start = sampleUsage();
    ++cases;
    const size_t which = pick(plans.size());
    const Plan& plan = plans[which];
    Case c;
    c.coll = plan.coll;
    const size_t a = pick(algos[which].size() + 1);
    c.algorithm = a == 0 ? std::string() : algos[which][a - 1];
    c.shape.rank = rank;
    c.shape.nranks = n;
    c.shape.dtype = plan.dtypes[pick(plan.dtypes.size())];
    c.shape.op = plan.ops[pick(plan.ops.size())];
    c.shape.root = plan.roots[pick(plan.roots.size())];
    const size_t elt = dataTypeBytes(c.shape.dtype);
    const size_t bytes = std::max<size_t>(
        size_t(std::exp(std::uniform_real_distribution<double>(0, logMax)(rng))), elt * n);
    const ByteCounts bc = plan.coll->byteCounts(bytes, elt, n);
    c.shape.count = bc.count;
    c.shape.inPlace = plan.coll->inPlace && pick(2) == 1;
    c.shape.seed = uint32_t(rng());
    if (Status st = comm.setAlgorithm(plan.coll->coll, c.algorithm); !st)
      return fail(comm, Status(st.code(), describe(c) + ": " + st.message()));
    const CallBuffers b = plan.coll->buffers(c.shape, send.data(), recv.data());
    plan.coll->initData(c.shape, b);
    if (Status st = comm.barrier(); !st) return fail(comm, st);
    Status st = plan.coll->run(comm, c.shape, b);
    // A combination the API refuses (an op the dtype has not) is refused on every rank alike.
    if (st.code() == Code::kInvalidArgument) {
      ++skipped;
      continue;
    }
    if (!st) return fail(comm, Status(st.code(), describe(c) + " failed: " + st.message()));
    Result<int64_t> wrong = sumInt64(comm, int64_t(plan.coll->check(c.shape, b)));
    if (!wrong) return fail(comm, wrong.status());
    if (*wrong > 0 && firstWrong.empty()) firstWrong = describe(c);
    wrongTotal += *wrong;
  }
  last = sampleUsage();
  if (Status st = comm.setAlgorithm(Coll::kAllReduce, ""); !st) return fail(comm, st);
  bool grew = false;
  std::string growth;
  if (cases > kWarmupCases) {
    grew = last.fds > start.fds || last.threads > start.threads ||
           last.rssKiB - start.rssKiB > kRssGrowthKiB;
    growth = "rss " + std::to_string(start.rssKiB) + " -> " + std::to_string(last.rssKiB) +
             " KiB, fds " + std::to_string(start.fds) + " -> " + std::to_string(last.fds) +
             ", threads " + std::to_string(start.threads) + " -> " + std::to_string(last.threads);
    if (grew) std::fprintf(stderr, "tutti-perf: rank %d: soak: usage grew: %s\n", rank, growth.c_str());
  }
  Result<int64_t> anyGrew = sumInt64(comm, grew ? 1 : 0);
  if (!anyGrew) return fail(comm, anyGrew.status());
  const bool ok = wrongTotal == 0 && *anyGrew == 0;
  if (printer) {
    if (!firstWrong.empty()) std::printf("# soak: first wrong case: %s\n", firstWrong.c_str());
    std::printf("# soak: %s: seed %llu, %d ranks, %.0f s, %lld cases (%lld declined), %lld wrong "
                "elements, %s\n",
                ok ? "PASS" : "FAIL", (unsigned long long)cfg.seed, n,
                std::chrono::duration<double>(Clock::now() - t0).count(), (long long)cases,
                (long long)skipped, (long long)wrongTotal,
                cases > kWarmupCases ? growth.c_str() : "too short to sample usage");
  }
  return ok ? 0 : 1;
}

}  // namespace tutti::bench
