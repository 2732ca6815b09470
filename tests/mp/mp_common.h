// File: tests/mp/mp_common.h
// Shared helpers for the multi-process tests: run a body on N forked ranks (with a communicator
// over the chosen transport), typed buffers filled through kernels/convert.h, exact input patterns
// per (dtype, op) and their float64 references, and element-by-element comparison.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "tools/launch/launcher.h"
#include <tutti/tutti.hpp>

namespace tutti::test {

/// Forks `nranks` ranks; each creates a communicator from the launcher environment restricted to
/// `transport` ("shm" or "tcp") and runs body(comm). REQUIREs that every rank passed, printing
/// failing ranks' output.
template <typename Body>
void runOnRanks(int nranks, const std::string& transport, Body body, int timeoutSec = 100) {
  launch::LaunchOptions opts;
  opts.nranks = nranks;
  opts.timeout = std::chrono::seconds(timeoutSec);
  opts.env = {{"TUTTI_TRANSPORTS", transport}, {"TUTTI_BOOTSTRAP_TIMEOUT", "30"}};
  auto outcomes = launch::runRanks(opts, [&](int rank, int) -> int {
    auto comm = Communicator::fromEnvironment();
    if (!comm.isOk()) {
      std::fprintf(stderr, "rank %d: init failed: %s\n", rank, comm.status().toString().c_str());
      return 1;
    }
    return body(comm.value());
  });
  bool ok = launch::allPassed(outcomes);
  if (!ok) {
    for (const auto& o : outcomes) {
      if (o.exited && o.exitCode == 0) continue;
      UNSCOPED_INFO(launch::describe(o) << "\n" << o.output);
    }
  }
  REQUIRE(ok);
}

/// A buffer of `count` elements of a dtype, 64-byte aligned, with element access in double.
class Buffer {
 public:
  Buffer(DataType dtype, size_t count)
      : dtype_(dtype), count_(count), bytes_(std::max<size_t>(1, count * dataTypeBytes(dtype))) {
    data_ = static_cast<std::byte*>(std::aligned_alloc(64, (bytes_ + 63) / 64 * 64));
  }
  ~Buffer() { std::free(data_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return data_; }
  void* at(size_t element) { return data_ + element * dataTypeBytes(dtype_); }
  double get(size_t i) const { return kernels::loadAsDouble(dtype_, data_, i); }
  void set(size_t i, double v) { kernels::storeFromDouble(dtype_, data_, i, v); }
  /// Fills with a byte pattern that is no valid expected value of the tests' patterns.
  void poison() { std::memset(data_, 0xA5, bytes_); }
  size_t count() const { return count_; }

 private:
  DataType dtype_;
  size_t count_, bytes_;
  std::byte* data_;
};

inline bool isSigned(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64 || isFloating(t);
}
inline bool isFp8(DataType t) { return t == DataType::kFp8E4M3 || t == DataType::kFp8E5M2; }

/// Input of rank r at element i for a reduction with `op`, chosen so that every partial result
/// is exact in the dtype for up to 8 ranks (fp8 E5M2 holds integers exactly only up to 8).
inline double reductionInput(DataType t, RedOp op, int r, size_t i) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
      if (isFp8(t)) return static_cast<double>((i + r) % 2);
      return isSigned(t) ? static_cast<double>((i * 3 + r) % 5) - 2.0
                         : static_cast<double>((i * 3 + r) % 5);
    case RedOp::kProd:
      if (isSigned(t) && (i + 2 * r) % 5 == 0) return -1.0;
      return (i + r) % 4 == 0 ? 2.0 : 1.0;
    case RedOp::kMax:
    case RedOp::kMin:
      return isSigned(t) && !isFp8(t) ? static_cast<double>((i * 7 + r * 13) % 11) - 5.0
                                      : static_cast<double>((i * 7 + r * 13) % 9);
  }
  return 0;
}

/// The reduction of reductionInput over n ranks, computed in double.
inline double reductionExpected(DataType t, RedOp op, int n, size_t i) {
  double acc = reductionInput(t, op, 0, i);
  for (int r = 1; r < n; ++r) {
    double v = reductionInput(t, op, r, i);
    switch (op) {
      case RedOp::kSum:
      case RedOp::kAvg: acc += v; break;
      case RedOp::kProd: acc *= v; break;
      case RedOp::kMax: acc = std::max(acc, v); break;
      case RedOp::kMin: acc = std::min(acc, v); break;
    }
  }
  if (op == RedOp::kAvg) acc = isFloating(t) ? acc / n : std::trunc(acc / n);
  return acc;
}

/// Relative tolerance for avg on floating types (one unit in the last place); exact otherwise.
inline double tolerance(DataType t, RedOp op) {
  if (op != RedOp::kAvg || !isFloating(t)) return 0;
  switch (t) {
    case DataType::kFloat64: return 1e-15;
    case DataType::kFloat32: return 1.2e-7;
    case DataType::kFloat16: return 1.0 / 1024;
    case DataType::kBfloat16: return 1.0 / 128;
    case DataType::kFp8E4M3: return 1.0 / 8;
    case DataType::kFp8E5M2: return 1.0 / 4;
    default: return 0;
  }
}

/// Exact value for data-movement collectives, distinct per (rank, index) where the dtype allows:
/// 1-byte types wrap at 100, 2-byte floats at 2048 (their exact-integer range).
inline double movementInput(DataType t, int r, size_t i) {
  if (dataTypeBytes(t) == 1) return static_cast<double>((r * 31 + i * 7) % 100);
  if (dataTypeBytes(t) == 2) return static_cast<double>((r * 331 + i * 7) % 2048);
  return static_cast<double>(r * 1000003 + i + 1);
}

/// Compares got[i] with expected(i) for i < count; prints the first mismatches with `what`.
template <typename Expected>
int countWrong(const Buffer& got, size_t first, size_t count, double tol, const std::string& what,
               int rank, Expected expected) {
  int wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const double e = expected(i), g = got.get(first + i);
    const bool ok = tol == 0 ? g == e : std::fabs(g - e) <= tol * std::max(1.0, std::fabs(e));
    if (!ok) {
      if (wrong < 5)
        std::fprintf(stderr, "rank %d: %s: element %zu is %.17g, expected %.17g\n", rank,
                     what.c_str(), i, g, e);
      ++wrong;
    }
  }
  return wrong;
}

}  // namespace tutti::test
