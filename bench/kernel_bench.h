// File: bench/kernel_bench.h
// Shared pieces of tutti-kernel-bench: options, result rows, table/JSON output, and the CUDA
// backend (bench/kernel_bench_cuda.cc; empty without CUDA or without a GPU).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <tutti/types.hpp>
#include <vector>

namespace tutti::bench {

/// The five RedOps (same values) and premulsum.
enum class BenchOp : int { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };
const char* benchOpName(BenchOp op);

struct Options {
  size_t bytes = size_t{64} << 20;  ///< bytes per buffer (each source and dst)
  std::vector<DataType> dtypes;
  std::vector<BenchOp> ops;
  std::vector<size_t> sources;
  int iters = 5;
  bool json = false;
};

/// One measurement. gbps and ceilingGbps count bytes read + written: (sources + 1) x bytes for
/// a reduction, 3 x bytes for a+b->c, 2 x bytes for a copy.
struct Row {
  std::string backend;  ///< "cpu" or "cuda"
  std::string isa;      ///< CPU target ("AVX3", ...) or the GPU ("sm_90 NVIDIA H100 ...")
  DataType dtype;
  BenchOp op;
  size_t sources;
  size_t bytes;  ///< per buffer
  double gbps;
  double ceilingGbps;
  std::string ceiling;  ///< what the ceiling is: "a+b->c" or "cudaMemcpy d2d"
  double memcpyGbps;    ///< CPU: memcpy; CUDA: same as the ceiling
  /// Median over iterations of (kernel GB/s / ceiling GB/s) measured back to back: steadier
  /// than gbps / ceilingGbps on a loaded machine.
  double medianRatio;
};

/// Names to values; an empty list selects all. False (after a message on stderr) for a bad name.
bool parseDtypes(const std::vector<std::string>& names, std::vector<DataType>& out);
bool parseOps(const std::vector<std::string>& names, std::vector<BenchOp>& out);

nlohmann::json toJson(const std::vector<Row>& rows);
void printTable(const std::vector<Row>& rows, const Options& o);

/// The CUDA rows on device 0 (ceiling: device-to-device cudaMemcpy). Empty, with *why set, when
/// built without CUDA, when no GPU is present, or on a CUDA error.
std::vector<Row> runCuda(const Options& o, std::string* why);

}  // namespace tutti::bench
