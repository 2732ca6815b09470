// File: bench/tutti_perf.cc
// tutti-perf: the nccl-tests-compatible benchmark. Sweeps sizes (and dtypes / ops / roots) for one
// collective, validates each case (-c iterations) before timing it, and prints nccl-tests' table
// from rank 0 so that results diff line by line with nccl-tests and ../shared/peers/.
// Ranks come from the launcher (tutti-run, mpirun, srun, torchrun) through
// Communicator::fromEnvironment; with no launcher it runs as a single rank, or forks --nranks
// local ranks itself.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <tutti/tutti.hpp>
#include <vector>

#include "bench/perf_colls.h"
#include "bench/perf_report.h"
#include "bench/perf_setup.h"
#include "bench/perf_soak.h"

namespace tutti::bench {
namespace {

constexpr int kExitFailure = 1;  // a collective failed or returned wrong data

// ---- command line ----------------------------------------------------------------------------

std::string footerText() {
  std::string text =
      "Sizes are bytes (K, M, G suffixes are powers of 1024). size = max(send, recv) total bytes; "
      "count = the API count (per rank for allgather, reducescatter, alltoall, gather, scatter).\n"
      "In place: allreduce/broadcast/reduce use recv == send, allgather send = recv + "
      "rank*count, reducescatter recv = send + rank*count. alltoall, gather, scatter and "
      "sendrecv have no in-place form in tutti: their in-place columns read N/A and are left out "
      "of the average bus bandwidth.\n"
      "busbw factors (nccl-tests): allreduce 2(n-1)/n; allgather, reducescatter, alltoall, "
      "gather, scatter (n-1)/n; broadcast, reduce, sendrecv 1.\n"
      "Exit status: 0 ok, 1 wrong results or a failed collective, 2 bad arguments.\n"
      "Algorithms (--algo):";
  for (const PerfColl& c : perfColls()) {
    const std::vector<std::string> names = Communicator::algorithms(c.coll);
    text += "\n  " + std::string(c.name) + ":";
    for (const std::string& n : names) text += " " + n;
    if (names.empty()) text += " (none selectable)";
  }
  return text;
}

// Parses argv into cfg. Returns -1 to go on, else the exit status (0 for --help, 2 for errors).
int parseCommandLine(int argc, char** argv, Config& cfg) {
  CLI::App app{"tutti-perf: nccl-tests-compatible collective benchmark for tutti", "tutti-perf"};
  app.set_version_flag("--version", std::string("tutti-perf ") + versionString());
  app.footer(footerText());
  const CLI::AsSizeValue sizeUnits(false);  // 1K = 1024
  app.add_option("-b,--minbytes", cfg.minBytes, "smallest size in bytes")
      ->transform(sizeUnits)
      ->capture_default_str();
  app.add_option("-e,--maxbytes", cfg.maxBytes, "largest size in bytes")
      ->transform(sizeUnits)
      ->capture_default_str();
  app.add_option("-i,--stepbytes", cfg.stepBytes, "additive size step in bytes (without -f)")
      ->transform(sizeUnits)
      ->capture_default_str();
  auto* factor = app.add_option("-f,--stepfactor", cfg.stepFactor,
                                "multiplicative size step (> 1); overrides -i");
  app.add_option("-n,--iters", cfg.iters, "timed iterations per case")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  app.add_option("-w,--warmup_iters", cfg.warmup, "warm-up iterations per case")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  app.add_option("-c,--check", cfg.check,
                 "validated iterations per case before timing (0: #wrong reads N/A)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("-d,--datatype", cfg.datatypes,
                 "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2, "
                 "a comma list, or all")
      ->capture_default_str();
  app.add_option("-o,--op", cfg.ops,
                 "sum prod max min avg, a comma list, or all (reducing collectives only)")
      ->capture_default_str();
  app.add_option("-r,--root", cfg.roots, "root rank, a comma list, or all (rooted collectives)")
      ->capture_default_str();
  app.add_option("-a,--average", cfg.average,
                 "time reported: 0 rank 0's, 1 mean over ranks, 2 min, 3 max")
      ->check(CLI::Range(0, 3))
      ->capture_default_str();
  app.add_option("-J,--output_file,--json", cfg.jsonPath, "also write the rows to this JSON file");
  app.add_option("--coll", cfg.coll,
                 "allreduce allgather reducescatter broadcast reduce alltoall gather scatter "
                 "sendrecv (nccl-tests names such as all_reduce_perf work too)")
      ->capture_default_str();
  app.add_option("--algo", cfg.algo,
                 "algorithm name (Communicator::setAlgorithm); default auto. A comma list "
                 "(auto for the selector) or 'all' (auto and every algorithm) compares them in "
                 "one run: each size runs every listed algorithm in turn, --rounds times, and "
                 "reports the fastest round of each (interference only ever adds time)");
  app.add_option("--rounds", cfg.rounds,
                 "interleaved rounds per size with an --algo list (default 5)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--transport", cfg.transports, "shm or tcp (or a comma list): Options::transports")
      ->check([](const std::string& v) { return checkTransports(v); });
  app.add_option("-T,--timeout", cfg.timeoutSec, "collective timeout in seconds (0: none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--nranks", cfg.selfLaunchRanks,
                 "without a launcher, fork this many local ranks (like tutti-run -n N)")
      ->check(CLI::Range(1, 1024));
  app.add_option("-t,--nthreads", cfg.nthreads, "nccl-tests compatibility: must be 1")
      ->check(CLI::Range(1, 1));
  app.add_option("--soak", cfg.soakSec,
                 "seconds of random cases (every collective, algorithm, dtype, op, root, in or "
                 "out of place; sizes log-uniform up to -e), each checked, with memory, file "
                 "descriptor and thread counts compared after a warm-up and at the end")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", cfg.seed, "the soak's random cases (the same on every rank)");
  app.add_flag("--validate", cfg.validate,
               "the simulator against this machine: runs every algorithm (--algo all, unless "
               "--algo is given) and ends with each row's measured / predicted time and a "
               "summary: the share of rows within 20%, the farthest rows, and at how many sizes "
               "the selector was within 15% of the best forced algorithm");
  app.add_option("-g,--ngpus", cfg.ngpus, "nccl-tests compatibility: must be 1")
      ->check(CLI::Range(1, 1));
  try {
    app.parse(argc, argv);
    cfg.stepFactorGiven = factor->count() > 0;
    if (std::string err = validateConfig(cfg); !err.empty()) throw CLI::ValidationError(err);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version: print and exit 0
  } catch (const CLI::ParseError& e) {
    if (launcherRank() <= 0) {
      std::fprintf(stderr, "tutti-perf: %s\nRun with --help for more information.\n", e.what());
    }
    return 2;
  }
  return -1;
}

// ---- running one case ------------------------------------------------------------------------

// Adds the case to a failed call's Status (fail() prints it with the rank).
Status callFailed(const PerfColl& coll, const CaseShape& s, const Status& st) {
  return Status(st.code(),
                std::string(coll.name) + " (type=" + std::string(dataTypeName(s.dtype)) +
                    " op=" + std::string(redOpName(s.op)) + " root=" + std::to_string(s.root) +
                    " count=" + std::to_string(s.count) + " inPlace=" + (s.inPlace ? "1" : "0") +
                    ") failed: " + st.toString());
}

Status withContext(const Status& st, const std::string& what) {
  return Status(st.code(), what + ": " + st.message());
}

struct Buffers {
  AlignedBuffer send, recv;
};

// -c iterations: pattern in, sentinel out, one call, count wrong elements; summed over ranks.
Result<int64_t> validate(Communicator& comm, const PerfColl& coll, CaseShape s,
                         const CallBuffers& b, int iterations) {
  int64_t wrong = 0;
  for (int it = 0; it < iterations; ++it) {
    s.seed = uint32_t(it);
    coll.initData(s, b);
    // Every rank has written its pattern and sentinel before any data can arrive.
    if (Status st = comm.barrier(); !st) return withContext(st, "barrier before validation");
    if (Status st = coll.run(comm, s, b); !st) return callFailed(coll, s, st);
    wrong += int64_t(coll.check(s, b));
  }
  Result<int64_t> total = sumInt64(comm, wrong);
  if (!total) return withContext(total.status(), "summing #wrong over ranks");
  return total;
}

// Warm-up then `iters` timed calls; the per-op time in seconds, aggregated over ranks per -a.
Result<double> timeCase(Communicator& comm, const Config& cfg, const PerfColl& coll,
                        const CaseShape& s, const CallBuffers& b) {
  coll.initData(s, b);
  if (Status st = comm.barrier(); !st) return withContext(st, "barrier before warm-up");
  for (int i = 0; i < cfg.warmup; ++i) {
    if (Status st = coll.run(comm, s, b); !st) return callFailed(coll, s, st);
  }
  if (Status st = comm.barrier(); !st) return withContext(st, "barrier before timing");
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < cfg.iters; ++i) {
    if (Status st = coll.run(comm, s, b); !st) return callFailed(coll, s, st);
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - t0;
  Result<double> seconds = aggregateTime(comm, cfg.average, elapsed.count() / cfg.iters);
  if (!seconds) return withContext(seconds.status(), "aggregating the time over ranks");
  return seconds;
}

// Time per op -> the row's columns (bandwidths from `bytes`, the size column).
Measurement measurementOf(double seconds, size_t bytes, const PerfColl& coll, int nranks,
                          std::optional<int64_t> wrong) {
  Measurement m;
  m.timeUs = seconds * 1e6;
  m.algBw = seconds > 0 ? double(bytes) / seconds / 1e9 : 0;
  m.busBw = m.algBw * busBwFactor(coll.coll, nranks);
  m.wrong = wrong;
  return m;
}

Result<Measurement> measure(Communicator& comm, const Config& cfg, const PerfColl& coll,
                            const CaseShape& s, Buffers& bufs, size_t bytes) {
  const CallBuffers b = coll.buffers(s, bufs.send.data(), bufs.recv.data());
  std::optional<int64_t> wrong;
  if (cfg.check > 0) {
    Result<int64_t> w = validate(comm, coll, s, b, cfg.check);
    if (!w) return w.status();
    wrong = *w;
  }
  Result<double> seconds = timeCase(comm, cfg, coll, s, b);
  if (!seconds) return seconds.status();
  return measurementOf(*seconds, bytes, coll, s.nranks, wrong);
}

// ---- the sweep -------------------------------------------------------------------------------

// --algo LIST: the variants compared in one run ("" is the selector, printed "auto").
struct Compare {
  std::vector<std::string> names;
  int rounds = 5;
  double worst = 0;  // largest auto / best forced so far
  size_t worstBytes = 0;
};

double fastest(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
}

// One case with every variant of `cmp`: validation once each, then `rounds` rounds in which every
// variant is timed in turn (out of place, then in place; each round starting with the next
// variant), so that all of them see the same state of the machine; one row per variant with its
// fastest round (a round's time is the mean of its -n calls; the minimum over rounds filters out
// rounds that other processes or the VM slowed down), then a comparison line.
Status compareCase(Communicator& comm, const Config& cfg, const PerfColl& coll, CaseShape s,
                   Buffers& bufs, const Row& base, Compare& cmp, Report& report) {
  struct Acc {
    std::string name, chosen;
    double predictedUs = -1;
    std::optional<int64_t> wrong[2];  // out of place, in place
    std::vector<double> times[2];  // seconds per op, one per round
  };
  std::vector<Acc> accs;
  for (const std::string& name : cmp.names) {
    if (Status st = comm.setAlgorithm(coll.coll, name); !st) return st;
    auto choice = comm.algorithmFor(coll.coll, s.count, s.dtype, s.op, s.root);
    // A forced algorithm that declines this shape (algorithmFor fails, or names the algorithm
    // that runs in its place) is left out: the same on every rank.
    if (!choice || (!name.empty() && choice->algorithm != name)) continue;
    accs.push_back({.name = name, .chosen = choice->algorithm, .predictedUs = choice->predictedUs});
  }
  const bool inPlace = coll.inPlace;
  for (int round = 0; round < cmp.rounds; ++round) {
    // Each round starts one variant later, so that no variant always runs first (right after
    // the previous round's last one, or the previous size).
    for (size_t k = 0; k < accs.size(); ++k) {
      Acc& a = accs[(k + static_cast<size_t>(round)) % accs.size()];
      if (Status st = comm.setAlgorithm(coll.coll, a.name); !st) return st;
      for (const bool ip : {false, true}) {
        if (ip && !inPlace) continue;
        s.inPlace = ip;
        const CallBuffers b = coll.buffers(s, bufs.send.data(), bufs.recv.data());
        if (round == 0 && cfg.check > 0) {
          Result<int64_t> wrong = validate(comm, coll, s, b, cfg.check);
          if (!wrong) return wrong.status();
          a.wrong[ip] = *wrong;
        }
        Result<double> seconds = timeCase(comm, cfg, coll, s, b);
        if (!seconds) return seconds.status();
        a.times[ip].push_back(*seconds);
      }
    }
  }
  double autoUs = -1, bestUs = -1, choiceUs = -1;
  std::string autoAlgo, bestAlgo;
  for (const Acc& a : accs)
    if (a.name.empty()) autoAlgo = a.chosen;
  for (const Acc& a : accs) {
    Row row = base;
    row.outOfPlace = measurementOf(fastest(a.times[0]), base.bytes, coll, s.nranks, a.wrong[0]);
    if (inPlace)
      row.inPlace = measurementOf(fastest(a.times[1]), base.bytes, coll, s.nranks, a.wrong[1]);
    row.algorithm = a.chosen;
    row.predictedUs = a.predictedUs;
    row.variant = a.name.empty() ? "auto" : "forced";
    report.add(row);
    const double us = row.outOfPlace.timeUs;
    if (a.name.empty()) {
      autoUs = us;
    } else {
      if (a.chosen == autoAlgo) choiceUs = us;
      if (bestUs < 0 || us < bestUs) bestUs = us, bestAlgo = a.chosen;
    }
  }
  if (autoUs > 0 && bestUs > 0) {
    const double ratio = autoUs / bestUs;
    if (ratio > cmp.worst) cmp.worst = ratio, cmp.worstBytes = base.bytes;
    // The chosen algorithm's own forced row ("-" when it was not among the variants).
    char choice[16] = "-";
    if (choiceUs > 0) std::snprintf(choice, sizeof choice, "%.2f", choiceUs / bestUs);
    if (comm.rank() == 0)
      std::printf("# compare %zu B: auto %s %s us, best forced %s %s us, auto/best %.2f%s, "
                  "choice forced/best %s\n",
                  base.bytes, autoAlgo.c_str(), formatTimeUs(autoUs).c_str(), bestAlgo.c_str(),
                  formatTimeUs(bestUs).c_str(), ratio, ratio > 1.15 ? "  (over 15%)" : "", choice);
  }
  return Status::ok();
}

// Runs every (dtype, op, root, size) case in nccl-tests order. Returns the exit status.
int runSweep(Communicator& comm, const Config& cfg, const Plan& plan, Compare* cmp) {
  const bool printer = comm.rank() == 0;
  const PerfColl& coll = *plan.coll;
  const int n = comm.size();
  Buffers bufs;
  // Every rank learns whether any rank failed to allocate, so that none waits for it.
  const Status allocated = allocateBuffers(plan, n, bufs.send, bufs.recv);
  if (!allocated) {
    std::fprintf(stderr, "tutti-perf: rank %d: %s\n", comm.rank(), allocated.toString().c_str());
  }
  Result<int64_t> failedRanks = sumInt64(comm, allocated ? 0 : 1);
  if (!failedRanks) return fail(comm, withContext(failedRanks.status(), "allocation check"));
  if (*failedRanks > 0) return kExitFailure;
  if (Status st = printHeader(comm, cfg, plan); !st) {
    return fail(comm, withContext(st, "gathering rank information for the header"));
  }
  Report report(printer);
  report.printTableHeader();
  for (DataType dtype : plan.dtypes) {
    for (RedOp op : plan.ops) {
      for (int root : plan.roots) {
        for (size_t bytes : plan.sizes) {
          const ByteCounts bc = coll.byteCounts(bytes, dataTypeBytes(dtype), n);
          if (bc.count == 0 && bytes != 0) continue;  // too small for one element per rank
          CaseShape s{.rank = comm.rank(),
                      .nranks = n,
                      .dtype = dtype,
                      .op = op,
                      .root = root,
                      .count = bc.count};
          Row row{.coll = coll.name,
                  .bytes = std::max(bc.sendCount, bc.recvCount) * dataTypeBytes(dtype),
                  .count = bc.count,
                  .dtype = dataTypeName(dtype),
                  .redop = collInfo(coll.coll).reduces ? redOpName(op) : "none",
                  .root = collInfo(coll.coll).rooted ? root : -1,
                  .nranks = n,
                  .outOfPlace = {},
                  .inPlace = std::nullopt};
          if (cmp) {
            if (Status st = compareCase(comm, cfg, coll, s, bufs, row, *cmp, report); !st)
              return fail(comm, st);
            continue;
          }
          Result<Measurement> oop = measure(comm, cfg, coll, s, bufs, row.bytes);
          if (!oop) return fail(comm, oop.status());
          row.outOfPlace = *oop;
          if (auto choice = comm.algorithmFor(coll.coll, bc.count, dtype, op, root); choice) {
            row.algorithm = choice->algorithm;
            row.predictedUs = choice->predictedUs;
          }
          if (coll.inPlace) {
            s.inPlace = true;
            Result<Measurement> ip = measure(comm, cfg, coll, s, bufs, row.bytes);
            if (!ip) return fail(comm, ip.status());
            row.inPlace = *ip;
          }
          report.add(row);
        }
      }
    }
  }
  if (cmp && cmp->worst > 0 && printer)
    std::printf("# compare: worst auto/best %.2f at %zu B (%d interleaved rounds per size)\n",
                cmp->worst, cmp->worstBytes, cmp->rounds);
  if (cfg.validate) report.printValidation();
  report.printFooter(coll.name);
  if (printer && !cfg.jsonPath.empty()) {
    if (std::string err = report.writeJson(cfg.jsonPath); !err.empty()) {
      std::fprintf(stderr, "tutti-perf: %s\n", err.c_str());
      return kExitFailure;
    }
  }
  return report.totalWrong() > 0 ? kExitFailure : 0;
}

// Creates the communicator, applies --algo, and runs the sweep.
int runRank(const Config& cfg, Result<Communicator> created) {
  if (!created) {
    std::fprintf(stderr, "tutti-perf: cannot create the communicator: %s\n",
                 created.status().toString().c_str());
    return kExitFailure;
  }
  Communicator& comm = *created;
  Result<Plan> plan = makePlan(cfg, comm.size());
  if (!plan) {  // every rank sees the same arguments and size: all stop here
    if (comm.rank() == 0) std::fprintf(stderr, "tutti-perf: %s\n", plan.status().message().c_str());
    return 2;
  }
  if (cfg.soakSec > 0) return runSoak(comm, cfg);
  const Coll c = plan->coll->coll;
  std::vector<std::string> names;  // "" = the selector
  if (cfg.algo == "all" || (cfg.validate && cfg.algo.empty())) {
    names.push_back("");
    for (const std::string& a : Communicator::algorithms(c)) names.push_back(a);
  } else {
    for (const std::string& name : splitList(cfg.algo)) names.push_back(name == "auto" ? "" : name);
    if (names.empty()) names.push_back("");
  }
  for (const std::string& name : names) {
    if (Status st = comm.setAlgorithm(c, name); !st) {
      if (comm.rank() == 0) {
        std::string known;
        for (const std::string& a : Communicator::algorithms(c)) known += " " + a;
        std::fprintf(stderr, "tutti-perf: --algo %s: %s (known for %s:%s)\n", cfg.algo.c_str(),
                     st.toString().c_str(), std::string(plan->coll->name).c_str(),
                     known.empty() ? " none" : known.c_str());
      }
      return 2;
    }
  }
  if (names.size() == 1) return runSweep(comm, cfg, *plan, nullptr);  // set above (or auto)
  Compare cmp{.names = names, .rounds = cfg.rounds > 0 ? cfg.rounds : 5};
  return runSweep(comm, cfg, *plan, &cmp);
}

int benchMain(int argc, char** argv) {
  Config cfg;
  if (int rc = parseCommandLine(argc, argv, cfg); rc >= 0) return rc;
  Options options;
  options.timeout = std::chrono::milliseconds(int64_t(std::llround(cfg.timeoutSec * 1000)));
  options.transports = cfg.transports;
  if (const int rank = launcherRank(); rank >= 0) {
    if (cfg.selfLaunchRanks > 0 && rank == 0) {
      std::fprintf(stderr, "tutti-perf: --nranks ignored: ranks come from the launcher\n");
    }
    return runRank(cfg, Communicator::fromEnvironment(options));
  }
  if (cfg.selfLaunchRanks > 1) {
    return selfLaunch(cfg.selfLaunchRanks, [&](int rank, int nranks, const UniqueId& id) {
      return runRank(cfg, Communicator::create(id, rank, nranks, options));
    });
  }
  // No launcher: a single rank.
  Result<UniqueId> id = createUniqueId();
  if (!id) return runRank(cfg, id.status());
  return runRank(cfg, Communicator::create(*id, 0, 1, options));
}

}  // namespace
}  // namespace tutti::bench

int main(int argc, char** argv) {
  try {
    return tutti::bench::benchMain(argc, argv);
  } catch (const std::exception& e) {  // std::bad_alloc and friends: no exception leaks
    std::fprintf(stderr, "tutti-perf: fatal: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "tutti-perf: fatal: unknown exception\n");
  }
  return 1;
}
