// File: bench/perf_report.h
// Output of tutti-perf: the nccl-tests table (header, one row per case, footer) printed by rank 0,
// and the optional JSON file (-J). Formatting only; no communication happens here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tutti::bench {

// One measurement: out-of-place or in-place columns.
struct Measurement {
  double timeUs = 0;
  double algBw = 0;              // GB/s (1e9 B/s): size / time
  double busBw = 0;              // algBw * busBwFactor(nranks)
  std::optional<int64_t> wrong;  // empty with -c 0 (printed N/A)
};

// One table row.
struct Row {
  std::string_view coll;
  size_t bytes = 0;  // max(send, recv) total bytes
  size_t count = 0;  // API count (elements)
  std::string_view dtype;
  std::string_view redop;  // "none" for collectives without reduction
  int root = -1;           // -1 for collectives without root
  int nranks = 1;
  Measurement outOfPlace;
  std::optional<Measurement> inPlace;  // empty: no in-place variant (columns read N/A)
  // After nccl-tests' columns: the algorithm the selector chose for the out-of-place call and
  // its predicted time (Communicator::algorithmFor); "" / -1 when unknown.
  std::string algorithm;
  double predictedUs = -1;
  // With --algo LIST: "auto" or "forced" (printed as one more column), else "".
  std::string variant;
};

// Collects rows, prints them as they come (when `print`), and writes the summary and JSON.
class Report {
 public:
  explicit Report(bool print) : print_(print) {}

  // The two column-title lines of nccl-tests (plus the "out-of-place / in-place" line).
  void printTableHeader() const;
  void add(const Row& row);
  // "# Out of bounds values", "# Avg bus bandwidth" (mean busbw over every printed measurement),
  // "#", "# Collective test concluded: <coll>".
  void printFooter(std::string_view coll) const;

  int64_t totalWrong() const { return totalWrong_; }
  // --validate: every row with a prediction, measured (out of place) over predicted, then the
  // summary: rows within 20% of their prediction (all, and the selector's), the farthest rows,
  // and at how many cases the selector was within 15% of the best forced algorithm.
  void printValidation() const;
  // Writes every row as a JSON array. Returns an error message, or "" on success.
  std::string writeJson(const std::string& path) const;

 private:
  bool print_;
  std::vector<Row> rows_;
  double busBwSum_ = 0;
  int busBwEntries_ = 0;
  int64_t totalWrong_ = 0;
};

// nccl-tests' adaptive time column: %7.0f from 10 ms, %7.1f from 100 us, else %7.2f.
std::string formatTimeUs(double us);

}  // namespace tutti::bench
