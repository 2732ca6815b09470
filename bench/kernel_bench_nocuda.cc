// File: bench/kernel_bench_nocuda.cc
// tutti-kernel-bench's CUDA backend in a build without CUDA: no rows.
#include "bench/kernel_bench.h"

namespace tutti::bench {

std::vector<Row> runCuda(const Options&, std::string* why) {
  *why = "built without CUDA (TUTTI_WITH_CUDA=OFF or no nvcc)";
  return {};
}

}  // namespace tutti::bench
