// File: bench/tutti_kernel_bench.cc
// tutti-kernel-bench: throughput of the reduction kernels (kernels/reduce.h on the CPU,
// kernels/cuda_reduce.h on a GPU) for each dtype x op, in GB/s of bytes read + written, next to
// the ceiling measured in the same run: on the CPU a plain float c = a + b loop (and memcpy), on
// a GPU a device-to-device cudaMemcpy. Each row alternates kernel and ceiling iterations and
// keeps the best of each, so the ratio compares like with like on a busy machine.
#include <strings.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <strings.h>

#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "bench/kernel_bench.h"
#include "kernels/convert.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/reduce.h"

namespace tutti::bench {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The ceiling: c = a + b over floats. Fixed-length inner blocks so that GCC vectorises it at
// -O2 (see kernels/README.md); noinline so the call is not specialised for the buffers.
[[gnu::noinline]] void addFloats(float* __restrict c, const float* __restrict a,
                                 const float* __restrict b, size_t count) {
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    for (size_t j = 0; j < 16; ++j) c[i + j] = a[i + j] + b[i + j];
  }
  for (; i < count; ++i) c[i] = a[i] + b[i];
}

// 64-byte aligned, zero-filled heap bytes (pages touched before timing).
struct HostBuffer {
  explicit HostBuffer(size_t bytes)
      : p(static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64))) {
    if (p != nullptr) std::memset(p, 0, bytes);
  }
  ~HostBuffer() { std::free(p); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  unsigned char* p;
};

struct Timing {
  double kernelS;   // best kernel time
  double ceilingS;  // best ceiling time
  double medianTimeRatio;  // median over iterations of ceiling time / kernel time, run back to back
};

// `iters` runs of `kernel` and of `ceiling`, interleaved. The paired median is robust to load
// that comes and goes; the best times are what a quiet machine gives.
template <typename K, typename C>
Timing measure(int iters, K&& kernel, C&& ceiling) {
  Timing t{1e30, 1e30, 0};
  kernel();  // warm-up: page faults, caches, frequency
  ceiling();
  std::vector<double> ratios;
  for (int it = 0; it < iters; ++it) {
    auto t0 = Clock::now();
    kernel();
    const double k = secondsSince(t0);
    t0 = Clock::now();
    ceiling();
    const double c = secondsSince(t0);
    t.kernelS = std::min(t.kernelS, k);
    t.ceilingS = std::min(t.ceilingS, c);
    ratios.push_back(c / k);
  }
  std::sort(ratios.begin(), ratios.end());
  t.medianTimeRatio = ratios[ratios.size() / 2];
  return t;
}

std::vector<Row> runCpu(const Options& o, const kernels::cpu::Target& target) {
  std::vector<Row> rows;
  const size_t maxSources = *std::max_element(o.sources.begin(), o.sources.end());
  std::vector<std::unique_ptr<HostBuffer>> src;
  for (size_t k = 0; k < std::max<size_t>(maxSources, 2); ++k) {
    src.push_back(std::make_unique<HostBuffer>(o.bytes));
  }
  HostBuffer dst(o.bytes);
  for (const auto& b : src) {
    if (b->p == nullptr) return rows;
  }
  if (dst.p == nullptr) return rows;
  // memcpy once per target: printed for reference (2 x bytes moved).
  double memcpyS = 1e30;
  for (int it = 0; it < o.iters; ++it) {
    const auto t0 = Clock::now();
    std::memcpy(dst.p, src[0]->p, o.bytes);
    memcpyS = std::min(memcpyS, secondsSince(t0));
  }
  const double memcpyGbps = 2.0 * static_cast<double>(o.bytes) / memcpyS / 1e9;
  const size_t floatCount = o.bytes / sizeof(float);
  auto ceiling = [&] {
    addFloats(reinterpret_cast<float*>(dst.p), reinterpret_cast<const float*>(src[0]->p),
              reinterpret_cast<const float*>(src[1]->p), floatCount);
  };
  for (DataType dtype : o.dtypes) {
    const size_t esize = dataTypeBytes(dtype);
    const size_t count = o.bytes / esize;
    // Every source holds 1 (prod stays finite, no subnormal slow paths): one element, then
    // doubling copies.
    for (const auto& b : src) {
      kernels::storeFromDouble(dtype, b->p, 0, 1.0);
      for (size_t done = 1; done < count; done *= 2) {
        std::memcpy(b->p + done * esize, b->p, std::min(done, count - done) * esize);
      }
    }
    for (BenchOp op : o.ops) {
      for (size_t nsrcs : o.sources) {
        std::vector<const void*> ptrs;
        for (size_t k = 0; k < nsrcs; ++k) ptrs.push_back(src[k]->p);
        unsigned char scalar[8];
        kernels::storeFromDouble(dtype, scalar, 0, 1.0);
        const int row = static_cast<int>(dtype);
        const auto* t = target.table;
        auto kernel = [&] {
          if (op == BenchOp::kPreMulSum) {
            t->preMulSum[row](dst.p, ptrs.data(), nsrcs, count, scalar);
          } else if (nsrcs == 2) {
            t->reduce2[row][static_cast<int>(op)](dst.p, ptrs[0], ptrs[1], count);
          } else {
            t->reduceN[row][static_cast<int>(op)](dst.p, ptrs.data(), nsrcs, count);
          }
        };
        const Timing tm = measure(o.iters, kernel, ceiling);
        const double moved = static_cast<double>(count * esize * (nsrcs + 1));
        const double ceilingMoved = 3.0 * static_cast<double>(floatCount * sizeof(float));
        rows.push_back({"cpu", target.name, dtype, op, nsrcs, count * esize,
                        moved / tm.kernelS / 1e9, ceilingMoved / tm.ceilingS / 1e9, "a+b->c",
                        memcpyGbps, tm.medianTimeRatio * moved / ceilingMoved});
      }
    }
  }
  return rows;
}

int run(int argc, char** argv) {
  Options o;
  std::vector<std::string> dtypeNames, opNames;
  std::string backend = "all", cpuTarget = "active";
  CLI::App app{"tutti-kernel-bench: GB/s (bytes read + written) of the reduction kernels next to "
               "the a+b->c / device memcpy ceiling measured in the same run",
               "tutti-kernel-bench"};
  app.add_option("-b,--bytes", o.bytes, "bytes per buffer (K, M, G suffixes: powers of 1024)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  app.add_option("-d,--dtype", dtypeNames, "dtypes (default: all 12), e.g. -d float16 -d float32");
  app.add_option("-o,--op", opNames, "ops: sum prod max min avg premulsum (default: all)");
  app.add_option("-s,--sources", o.sources, "source counts (default: 2)");
  app.add_option("-n,--iters", o.iters, "timed iterations per row (the best is kept)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--backend", backend, "cpu, cuda or all (cuda: when built with CUDA and a GPU "
                 "is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "all"}))
      ->capture_default_str();
  app.add_option("--cpu-target", cpuTarget,
                 "CPU instruction set: active (TUTTI_CPU_TARGET or the best), all, or a name "
                 "(AVX3, AVX2, SSE4, SCALAR, ...)")
      ->capture_default_str();
  app.add_flag("-J,--json", o.json, "print a JSON array of rows instead of the table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (o.sources.empty()) o.sources = {2};
  for (size_t s : o.sources) {
    if (s < 1 || s > 64) {
      std::fprintf(stderr, "tutti-kernel-bench: --sources must be in [1, 64] (got %zu)\n", s);
      return 2;
    }
  }
  if (o.bytes < 64) {
    std::fprintf(stderr, "tutti-kernel-bench: --bytes must be at least 64 (got %zu)\n", o.bytes);
    return 2;
  }
  if (!parseDtypes(dtypeNames, o.dtypes) || !parseOps(opNames, o.ops)) return 2;

  std::vector<Row> rows;
  if (backend != "cuda") {
    for (const kernels::cpu::Target& t : kernels::cpu::targets()) {
      const bool pick = cpuTarget == "all" ? true
                        : cpuTarget == "active"
                            ? &t == &kernels::cpu::activeTarget()
                            : strcasecmp(cpuTarget.c_str(), t.name) == 0;
      if (!pick) continue;
      std::vector<Row> r = runCpu(o, t);
      if (r.empty()) {
        std::fprintf(stderr, "tutti-kernel-bench: cannot allocate %zu-byte buffers\n", o.bytes);
        return 1;
      }
      rows.insert(rows.end(), r.begin(), r.end());
    }
    if (rows.empty()) {
      std::fprintf(stderr, "tutti-kernel-bench: --cpu-target %s is not available here\n",
                   cpuTarget.c_str());
      return 2;
    }
  }
  if (backend != "cpu") {
    std::string why;
    std::vector<Row> r = runCuda(o, &why);
    if (r.empty() && backend == "cuda") {
      std::fprintf(stderr, "tutti-kernel-bench: no CUDA backend: %s\n", why.c_str());
      return 1;
    }
    if (r.empty() && !o.json) std::printf("# cuda: skipped (%s)\n", why.c_str());
    rows.insert(rows.end(), r.begin(), r.end());
  }
  if (o.json) {
    std::printf("%s\n", toJson(rows).dump(2).c_str());
  } else {
    printTable(rows, o);
  }
  return 0;
}

}  // namespace
}  // namespace tutti::bench

int main(int argc, char** argv) { return tutti::bench::run(argc, argv); }
