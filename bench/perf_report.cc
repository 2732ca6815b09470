// File: bench/perf_report.cc
// nccl-tests table formatting (src/util.cu widths) and the JSON file of tutti-perf.
#include "bench/perf_report.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

namespace tutti::bench {
namespace {

void printMeasurement(const Measurement& m) {
  const std::string wrong = m.wrong ? std::to_string(*m.wrong) : "N/A";
  std::printf("  %7s  %6.2f  %6.2f  %5s", formatTimeUs(m.timeUs).c_str(), m.algBw, m.busBw,
              wrong.c_str());
}

nlohmann::ordered_json measurementJson(const Measurement& m) {
  nlohmann::ordered_json j = {{"time_us", m.timeUs}, {"algbw", m.algBw}, {"busbw", m.busBw}};
  j["wrong"] = m.wrong ? nlohmann::ordered_json(*m.wrong) : nlohmann::ordered_json(nullptr);
  return j;
}

}  // namespace

std::string formatTimeUs(double us) {
  char buf[32];
  const char* fmt = us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f";
  std::snprintf(buf, sizeof(buf), fmt, us);
  return buf;
}

void Report::printTableHeader() const {
  if (!print_) return;
  std::printf(
      "#\n"
      "#                                                              out-of-place            "
      "           in-place          selector (out-of-place)\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong    "
      " time   algbw   busbw #wrong            algorithm    pred\n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)           "
      " (us)  (GB/s)  (GB/s)                              (us)\n");
  std::fflush(stdout);
}

void Report::add(const Row& row) {
  rows_.push_back(row);
  auto account = [&](const Measurement& m) {
    busBwSum_ += m.busBw;
    ++busBwEntries_;
    totalWrong_ += m.wrong.value_or(0);
  };
  account(row.outOfPlace);
  if (row.inPlace) account(*row.inPlace);
  if (!print_) return;
  const std::string dtype(row.dtype), redop(row.redop);
  std::printf("%12zu  %12zu  %8s  %6s  %6d", row.bytes, row.count, dtype.c_str(), redop.c_str(),
              row.root);
  printMeasurement(row.outOfPlace);
  if (row.inPlace) {
    printMeasurement(*row.inPlace);
  } else {
    std::printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
  }
  std::printf("  %19s  %7s", row.algorithm.empty() ? "-" : row.algorithm.c_str(),
              row.predictedUs < 0 ? "-" : formatTimeUs(row.predictedUs).c_str());
  if (!row.variant.empty()) std::printf("  %6s", row.variant.c_str());
  std::printf("\n");
  std::fflush(stdout);
}

void Report::printFooter(std::string_view coll) const {
  if (!print_) return;
  const std::string name(coll);
  std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(totalWrong_),
              totalWrong_ ? "FAILED" : "OK");
  if (totalWrong_ > 0) std::printf("# Wrong results: %lld\n", static_cast<long long>(totalWrong_));
  std::printf("# Avg bus bandwidth    : %g\n", busBwEntries_ ? busBwSum_ / busBwEntries_ : 0.0);
  std::printf("#\n# Collective test concluded: %s\n", name.c_str());
  std::fflush(stdout);
}

void Report::printValidation() const {
  if (!print_) return;
  auto within = [](double r) { return r >= 1 / 1.2 && r <= 1.2; };
  auto far = [](double r) { return r >= 1 ? r : 1 / r; };
  std::printf("#\n# validation: measured (out of place) / predicted (the simulator's time of the "
              "algorithm that ran)\n");
  std::printf("# %11s  %8s  %6s  %19s  %7s  %9s  %9s  %9s\n", "size (B)", "type", "redop",
              "algorithm", "variant", "pred (us)", "meas (us)", "meas/pred");
  int rows = 0, inRows = 0, autoRows = 0, autoIn = 0;
  const Row* hi = nullptr;  // the row measured farthest above its prediction
  const Row* lo = nullptr;  // ... and below
  auto ratio = [](const Row& r) { return r.outOfPlace.timeUs / r.predictedUs; };
  for (const Row& r : rows_) {
    if (r.predictedUs <= 0 || r.outOfPlace.timeUs <= 0) continue;
    const double q = ratio(r);
    const std::string dtype(r.dtype), redop(r.redop);
    std::printf("  %11zu  %8s  %6s  %19s  %7s  %9s  %9s  %9.2f%s\n", r.bytes, dtype.c_str(),
                redop.c_str(), r.algorithm.c_str(), r.variant.empty() ? "auto" : r.variant.c_str(),
                formatTimeUs(r.predictedUs).c_str(), formatTimeUs(r.outOfPlace.timeUs).c_str(), q,
                within(q) ? "" : "  *");
    ++rows;
    inRows += within(q);
    if (r.variant.empty() || r.variant == "auto") {
      ++autoRows;
      autoIn += within(q);
    }
    if (q >= 1 && (!hi || q > ratio(*hi))) hi = &r;
    if (q < 1 && (!lo || q < ratio(*lo))) lo = &r;
  }
  if (rows == 0) {
    std::printf("# validation: no row has a prediction\n");
    return;
  }
  std::printf("# validation: %d of %d rows within 20%% of the prediction (%.0f%%); the selector's "
              "rows: %d of %d (%.0f%%)\n",
              inRows, rows, 100.0 * inRows / rows, autoIn, autoRows,
              autoRows ? 100.0 * autoIn / autoRows : 0.0);
  for (const Row* r : {hi, lo}) {
    if (!r) continue;
    const std::string v = r->variant.empty() ? "auto" : r->variant;
    std::printf("# validation: farthest %s: %.2fx at %zu B (%s, %s)%s\n",
                r == hi ? "above" : "below", ratio(*r), r->bytes, r->algorithm.c_str(), v.c_str(),
                far(ratio(*r)) > 2 ? "  (off by more than 2x)" : "");
  }
  // The selector against the best forced algorithm, per case (consecutive rows of one shape).
  int cases = 0, good = 0, choiceCases = 0, choiceGood = 0;
  for (size_t i = 0; i < rows_.size();) {
    size_t j = i;
    double autoUs = -1, bestUs = -1, choiceUs = -1;
    std::string chosen;
    auto sameCase = [&](size_t k) {
      return k < rows_.size() && rows_[k].bytes == rows_[i].bytes &&
             rows_[k].dtype == rows_[i].dtype && rows_[k].redop == rows_[i].redop &&
             rows_[k].root == rows_[i].root;
    };
    for (size_t k = i; sameCase(k); ++k)
      if (rows_[k].variant == "auto") chosen = rows_[k].algorithm;
    while (sameCase(j)) {
      const double us = rows_[j].outOfPlace.timeUs;
      if (rows_[j].variant == "auto") autoUs = us;
      if (rows_[j].variant == "forced" && (bestUs < 0 || us < bestUs)) bestUs = us;
      if (rows_[j].variant == "forced" && rows_[j].algorithm == chosen) choiceUs = us;
      ++j;
    }
    if (autoUs > 0 && bestUs > 0) {
      ++cases;
      good += autoUs <= 1.15 * bestUs;
    }
    if (choiceUs > 0 && bestUs > 0) {
      ++choiceCases;
      choiceGood += choiceUs <= 1.15 * bestUs;
    }
    i = j;
  }
  if (cases > 0)
    std::printf("# validation: the selector within 15%% of the best forced algorithm at %d of %d "
                "cases\n",
                good, cases);
  // The same choice timed as a forced algorithm, one sample among the others: what the selector
  // chose, apart from the run's spread between two timings of one algorithm.
  if (choiceCases > 0)
    std::printf("# validation: the selector's choice, timed forced, within 15%% of the best at %d "
                "of %d cases\n",
                choiceGood, choiceCases);
  std::fflush(stdout);
}

std::string Report::writeJson(const std::string& path) const {
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const Row& r : rows_) {
    nlohmann::ordered_json j = {{"coll", r.coll},    {"size", r.bytes},  {"count", r.count},
                                {"type", r.dtype},   {"redop", r.redop}, {"root", r.root},
                                {"nranks", r.nranks}};
    j["out_of_place"] = measurementJson(r.outOfPlace);
    j["in_place"] = r.inPlace ? measurementJson(*r.inPlace) : nlohmann::ordered_json(nullptr);
    j["algorithm"] = r.algorithm.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.algorithm);
    if (!r.variant.empty()) j["variant"] = r.variant;
    j["predicted_us"] = r.predictedUs < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.predictedUs);
    all.push_back(std::move(j));
  }
  std::ofstream out(path);
  if (!out) return "cannot open " + path + " for writing";
  out << all.dump(2) << "\n";
  out.close();
  if (!out) return "write to " + path + " failed";
  return "";
}

}  // namespace tutti::bench
