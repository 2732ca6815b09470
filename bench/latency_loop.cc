// File: bench/latency_loop.cc
// tutti-latency: nanoseconds per small allreduce, for A/B comparisons finer than tutti-perf's
// two-decimal microseconds (nccl-tests' format) between builds or environment settings, which
// tutti-check-cost cannot do (it compares two communicators of one 2-rank job, one library and
// one environment). Any rank count; run it under a launcher:
//
//   tutti-run -n 2 -- bash -c 'exec taskset -c $TUTTI_LOCAL_RANK tutti-latency 2'
//
// Usage: tutti-latency [COUNT] [BATCHES] [CALLS]   (defaults 2, 7, 200000)
// Each batch starts after a barrier and times CALLS back-to-back float32 sum allreduces of COUNT
// elements, out of place. Rank 0 prints
//   latency nranks=N count=C bytes=B min_ns=X median_ns=Y
// with the fastest and the median batch, in nanoseconds per call (rank 0's clock: back-to-back
// calls of a collective run at the pace of the slowest rank). Every rank checks the last result
// (rank r contributes r + 1 to each element): exit 1 if it is wrong, 2 for bad arguments or a
// failed call.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <tutti/tutti.hpp>

namespace {

bool parse(const char* text, long lo, long hi, long* out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  long count = 2, batches = 7, calls = 200000;
  const char* names[] = {"COUNT", "BATCHES", "CALLS"};
  long* values[] = {&count, &batches, &calls};
  const long limits[][2] = {{1, 1L << 24}, {1, 1000}, {1, 100000000}};
  if (argc > 4) {
    std::fprintf(stderr, "usage: tutti-latency [COUNT] [BATCHES] [CALLS]\n");
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    if (!parse(argv[i], limits[i - 1][0], limits[i - 1][1], values[i - 1])) {
      std::fprintf(stderr, "tutti-latency: %s must be an integer in [%ld, %ld] (value=%s)\n",
                   names[i - 1], limits[i - 1][0], limits[i - 1][1], argv[i]);
      return 2;
    }
  }
  auto made = tutti::Communicator::fromEnvironment();
  if (!made.isOk()) {
    std::fprintf(stderr, "tutti-latency: %s\n", made.status().toString().c_str());
    return 2;
  }
  tutti::Communicator& comm = made.value();
  const auto n = static_cast<size_t>(count);
  std::vector<float> in(n, static_cast<float>(comm.rank() + 1)), out(n, 0.f);
  std::vector<double> ns;
  for (long b = 0; b < batches; ++b) {
    tutti::Status s = comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < calls && s.isOk(); ++i)
      s = comm.allReduce(in.data(), out.data(), n, tutti::DataType::kFloat32, tutti::RedOp::kSum);
    const auto t1 = std::chrono::steady_clock::now();
    if (!s.isOk()) {
      std::fprintf(stderr, "tutti-latency: %s\n", s.toString().c_str());
      return 2;
    }
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / calls);
  }
  const float want = static_cast<float>(comm.size()) * (comm.size() + 1) / 2;
  const bool right = std::all_of(out.begin(), out.end(), [&](float v) { return v == want; });
  if (!right) std::fprintf(stderr, "tutti-latency: rank %d: wrong result\n", comm.rank());
  std::sort(ns.begin(), ns.end());
  if (comm.rank() == 0)
    std::printf("latency nranks=%d count=%zu bytes=%zu min_ns=%.1f median_ns=%.1f\n", comm.size(),
                n, n * sizeof(float), ns.front(), ns[ns.size() / 2]);
  return right ? 0 : 1;
}
