// File: bench/kernel_bench_report.cc
// tutti-kernel-bench: argument parsing helpers, the text table and the JSON rows.
#include <cstdio>
#include <string>

#include "bench/kernel_bench.h"

namespace tutti::bench {

const char* benchOpName(BenchOp op) {
  constexpr const char* kNames[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return kNames[static_cast<int>(op)];
}

bool parseDtypes(const std::vector<std::string>& names, std::vector<DataType>& out) {
  out.clear();
  if (names.empty()) {
    for (int t = 0; t < kNumDataTypes; ++t) out.push_back(static_cast<DataType>(t));
    return true;
  }
  for (const std::string& n : names) {
    const auto t = parseDataType(n);
    if (!t) {
      std::fprintf(stderr, "tutti-kernel-bench: unknown dtype '%s'\n", n.c_str());
      return false;
    }
    out.push_back(*t);
  }
  return true;
}

bool parseOps(const std::vector<std::string>& names, std::vector<BenchOp>& out) {
  out.clear();
  if (names.empty()) {
    for (int o = 0; o <= static_cast<int>(BenchOp::kPreMulSum); ++o) {
      out.push_back(static_cast<BenchOp>(o));
    }
    return true;
  }
  for (const std::string& n : names) {
    bool found = false;
    for (int o = 0; o <= static_cast<int>(BenchOp::kPreMulSum); ++o) {
      if (n == benchOpName(static_cast<BenchOp>(o))) {
        out.push_back(static_cast<BenchOp>(o));
        found = true;
      }
    }
    if (!found) {
      std::fprintf(stderr, "tutti-kernel-bench: unknown op '%s' (sum prod max min avg premulsum)\n",
                   n.c_str());
      return false;
    }
  }
  return true;
}

nlohmann::json toJson(const std::vector<Row>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const Row& r : rows) {
    out.push_back({{"backend", r.backend},
                   {"isa", r.isa},
                   {"dtype", std::string(dataTypeName(r.dtype))},
                   {"op", benchOpName(r.op)},
                   {"sources", r.sources},
                   {"bytes", r.bytes},
                   {"gbps", r.gbps},
                   {"ceiling_gbps", r.ceilingGbps},
                   {"ceiling", r.ceiling},
                   {"ratio", r.ceilingGbps > 0 ? r.gbps / r.ceilingGbps : 0.0},
                   {"median_ratio", r.medianRatio},
                   {"memcpy_gbps", r.memcpyGbps}});
  }
  return out;
}

void printTable(const std::vector<Row>& rows, const Options& o) {
  std::printf("# tutti-kernel-bench: %zu bytes per buffer, best of %d; GB/s = (sources + 1) x "
              "bytes / time (read + written); ratio = GB/s / ceiling; median = median of the "
              "per-iteration ratios (back-to-back runs)\n",
              o.bytes, o.iters);
  std::string lastIsa;
  for (const Row& r : rows) {
    if (r.backend + r.isa != lastIsa) {
      lastIsa = r.backend + r.isa;
      std::printf("# %s %s: ceiling = %s; memcpy %.1f GB/s\n", r.backend.c_str(), r.isa.c_str(),
                  r.ceiling.c_str(), r.memcpyGbps);
      std::printf("%-8s %-10s %-10s %7s %12s %9s %12s %7s %7s\n", "backend", "dtype", "op",
                  "sources", "bytes", "GB/s", "ceiling", "ratio", "median");
    }
    std::printf("%-8s %-10s %-10s %7zu %12zu %9.2f %12.2f %7.3f %7.3f\n", r.backend.c_str(),
                std::string(dataTypeName(r.dtype)).c_str(), benchOpName(r.op), r.sources, r.bytes,
                r.gbps, r.ceilingGbps, r.ceilingGbps > 0 ? r.gbps / r.ceilingGbps : 0.0,
                r.medianRatio);
  }
}

}  // namespace tutti::bench
