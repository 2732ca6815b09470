// File: bench/xcore_probe.cc
// tutti-xcore-probe: how fast two CPUs of this machine hand data to each other right now, with no
// tutti code involved. Every shm number in docs/PERFORMANCE.md depends on it, and on the
// development VM it is not constant: the hypervisor moves the two vCPUs between placements where
// a cache-line round trip takes about 80 ns, the exchange below 45-55 ns and a 512 KiB handoff
// runs at 7-8 GB/s, and placements where they take about 330 ns, 240 ns and 2 GB/s (for minutes
// at a time). The benchmark scripts print this line before and after their runs so that a table
// taken in the slow placement is recognised.
//
// Usage: tutti-xcore-probe [CPU_A CPU_B]   (default: the first two CPUs this process may use)
// Prints: xcore cpus=A,B round_trip_ns=R exchange_ns=X handoff_gbps=G
//   round_trip_ns: one cache line bounced A -> B -> A (median of 5 runs of 20000 round trips);
//   exchange_ns:   A and B each publish 8 bytes with a sequence number in their own cache line
//                  and wait for the other's, 20000 times in a row: the floor under any 2-rank
//                  8-byte allreduce through shared memory (median of 5 runs);
//   handoff_gbps:  A copies 512 KiB into a shared buffer, B copies it out, alternately; bytes
//                  handed over per second (1e9), median of 5 runs of 200 handoffs.
// Exit 0; 1 if an exchange read a wrong value; 2 for bad arguments or fewer than two usable CPUs.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

bool pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return pthread_setaffinity_np(pthread_self(), sizeof s, &s) == 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The shared cache lines of one measurement, on a page of their own, and a start line: every
// measurement times its loop only once both threads are pinned and spinning: a helper thread that
// inherited the main thread's pinning to CPU A could not start, and pin itself to CPU B, until
// the scheduler preempted the main thread spinning on CPU A inside the timed loop, and that wait
// (3-4 ms) would be counted in the loop.
struct alignas(4096) Shared {
  struct alignas(128) Line {
    std::atomic<uint64_t> seq{0};
    uint64_t value = 0;
  };
  Line ping;          // round trips: both directions through this one line
  Line lines[2][2];   // exchanges: [side][parity]
  Line start;         // each thread adds 1 once pinned; the loops start at 2
  Line turn;          // handoffs: 1 = data ready for the reader, 0 = buffer free

  // Pins the calling thread to `cpu`, then waits until the other thread has done the same.
  void ready(int cpu) {
    pin(cpu);
    start.seq.fetch_add(1, std::memory_order_acq_rel);
    while (start.seq.load(std::memory_order_acquire) < 2) {
    }
  }
};

// Seconds for `iters` round trips of one cache line between cpuA (this thread) and cpuB.
double roundTrips(int cpuA, int cpuB, uint64_t iters) {
  auto shared = std::make_unique<Shared>();
  Shared::Line* line = &shared->ping;
  std::thread peer([sh = shared.get(), line, cpuB, iters] {
    sh->ready(cpuB);
    for (uint64_t i = 0; i < iters; ++i) {
      while (line->seq.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      line->seq.store(2 * i + 2, std::memory_order_release);
    }
  });
  shared->ready(cpuA);
  const auto t0 = Clock::now();
  for (uint64_t i = 0; i < iters; ++i) {
    line->seq.store(2 * i + 1, std::memory_order_release);
    while (line->seq.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  peer.join();
  return s;
}

// One side of the exchange: stores {seq, value} into its own line of this parity, waits for the
// other side's line of that seq, then adds the value. Returns the sum of the values it read.
uint64_t exchangeSide(Shared* shared, int me, uint64_t iters) {
  uint64_t acc = 0;
  for (uint64_t i = 1; i <= iters; ++i) {
    Shared::Line& mine = shared->lines[me][i & 1];
    Shared::Line& theirs = shared->lines[1 - me][i & 1];
    mine.value = i * static_cast<uint64_t>(me + 1);
    mine.seq.store(i, std::memory_order_release);
    while (theirs.seq.load(std::memory_order_acquire) != i) {
    }
    acc += theirs.value;
  }
  return acc;
}

// Seconds for `iters` symmetric exchanges: each side stores {seq, value} into a cache line of its
// own and waits for the other side's line of that seq, then adds the value: a 2-rank allreduce of
// one 8-byte word with nothing else around it. Each side owns two lines used by parity, so a
// line is rewritten (seq i + 2) only after the peer has published i + 1, which it does after
// reading seq i: no value is overwritten before it is read.
double exchanges(int cpuA, int cpuB, uint64_t iters) {
  auto shared = std::make_unique<Shared>();
  Shared* sh = shared.get();
  uint64_t sumB = 0;
  std::thread peer([sh, cpuB, iters, &sumB] {
    sh->ready(cpuB);
    sumB = exchangeSide(sh, 1, iters);
  });
  sh->ready(cpuA);
  const auto t0 = Clock::now();
  const uint64_t sumA = exchangeSide(sh, 0, iters);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  peer.join();
  const uint64_t tri = iters * (iters + 1) / 2;
  if (sumA != 2 * tri || sumB != tri) {  // each side must have read every one of the peer's values
    std::fprintf(stderr, "tutti-xcore-probe: exchange read a wrong value\n");
    std::exit(1);
  }
  return s;
}

// Seconds for `iters` handoffs of `bytes` from cpuA to cpuB through one shared buffer.
double handoffs(int cpuA, int cpuB, size_t bytes, int iters) {
  std::vector<char> src(bytes, 1), buffer(bytes, 0), dst(bytes, 0);
  auto shared = std::make_unique<Shared>();
  Shared* sh = shared.get();
  std::atomic<uint64_t>& turn = sh->turn.seq;
  std::thread reader([sh, &turn, &buffer, &dst, cpuB, bytes, iters] {
    sh->ready(cpuB);
    for (int i = 0; i < iters; ++i) {
      while (turn.load(std::memory_order_acquire) != 1) {
      }
      std::memcpy(dst.data(), buffer.data(), bytes);
      turn.store(0, std::memory_order_release);
    }
  });
  sh->ready(cpuA);
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    while (turn.load(std::memory_order_acquire) != 0) {
    }
    std::memcpy(buffer.data(), src.data(), bytes);
    src[static_cast<size_t>(i) % bytes] = static_cast<char>(i);  // keep the copies from being hoisted
    turn.store(1, std::memory_order_release);
  }
  while (turn.load(std::memory_order_acquire) != 0) {
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  reader.join();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int cpus[2] = {-1, -1};
  if (argc == 3) {
    cpus[0] = std::atoi(argv[1]);
    cpus[1] = std::atoi(argv[2]);
  } else if (argc == 1) {
    cpu_set_t s;
    if (sched_getaffinity(0, sizeof s, &s) == 0)
      for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; ++c)
        if (CPU_ISSET(c, &s)) cpus[k++] = c;
  } else {
    std::fprintf(stderr, "usage: tutti-xcore-probe [CPU_A CPU_B]\n");
    return 2;
  }
  if (cpus[0] < 0 || cpus[1] < 0 || cpus[0] == cpus[1]) {
    std::fprintf(stderr, "tutti-xcore-probe: needs two different CPUs (got %d and %d)\n",
                 cpus[0], cpus[1]);
    return 2;
  }
  constexpr int kRuns = 5, kTrips = 20000, kHandoffs = 200;
  constexpr size_t kBytes = 512 << 10;
  std::vector<double> rt, ex, bw;
  for (int r = 0; r < kRuns; ++r) {
    rt.push_back(roundTrips(cpus[0], cpus[1], kTrips) / kTrips * 1e9);
    ex.push_back(exchanges(cpus[0], cpus[1], kTrips) / kTrips * 1e9);
    bw.push_back(kBytes * double(kHandoffs) / handoffs(cpus[0], cpus[1], kBytes, kHandoffs) / 1e9);
  }
  std::printf("xcore cpus=%d,%d round_trip_ns=%.0f exchange_ns=%.0f handoff_gbps=%.2f\n", cpus[0],
              cpus[1], median(rt), median(ex), median(bw));
  return 0;
}
