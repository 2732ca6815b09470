// File: bench/perf_setup.h
// tutti-perf's configuration and everything around the measurement loop: argument validation,
// the plan of cases (sizes x dtypes x ops x roots), buffers, the header, the control traffic
// (time aggregation, wrong-element sums) and the --nranks self-launcher.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <tutti/tutti.hpp>
#include <vector>

#include "bench/perf_colls.h"

namespace tutti::bench {

// Command-line values (defaults as nccl-tests, except warm-up 5 as older nccl-tests).
struct Config {
  uint64_t minBytes = uint64_t(32) << 20;
  uint64_t maxBytes = uint64_t(32) << 20;
  uint64_t stepBytes = uint64_t(1) << 20;
  double stepFactor = 2;
  bool stepFactorGiven = false;  // -f given: multiplicative steps, else additive -i
  int iters = 20;
  int warmup = 5;
  int check = 1;
  int average = 1;
  std::string datatypes = "float";
  std::string ops = "sum";
  std::string roots = "0";
  std::string jsonPath;
  std::string coll = "allreduce";
  std::string algo;  // "", a name, or a comma list / "all" (interleaved comparison, --rounds)
  int rounds = 0;    // 0: 1 for one algorithm, 5 for a list
  std::string transports;
  double timeoutSec = 0;
  int selfLaunchRanks = 0;
  int nthreads = 1;
  int ngpus = 1;
  bool validate = false;  // --validate: the measured/predicted summary (algorithms: all)
  double soakSec = 0;  // --soak: random checked cases for this long instead of the sweep
  uint64_t seed = 1;   // --seed: the soak's cases
};

// "a,b,,c" -> {"a", "b", "c"} (empty items dropped).
std::vector<std::string> splitList(const std::string& s);

// Checks what can be checked before the communicator exists; "" when fine.
std::string validateConfig(const Config& cfg);
// CLI11 validator for --transport: "" when every comma-separated name is shm or tcp.
std::string checkTransports(const std::string& value);

// The cases to run, in nccl-tests order: for each dtype, op, root: every size.
struct Plan {
  const PerfColl* coll = nullptr;
  std::vector<DataType> dtypes;
  std::vector<RedOp> ops;     // {kSum} (printed "none") for collectives without reduction
  std::vector<int> roots;     // {0} (printed -1) for collectives without root
  std::vector<size_t> sizes;  // requested sizes in bytes
};
// InvalidArgument naming the bad value (e.g. a root >= nranks).
Result<Plan> makePlan(const Config& cfg, int nranks);

// A page-aligned, pre-touched host allocation.
class AlignedBuffer {
 public:
  void* data() const { return ptr_.get(); }
  size_t bytes() const { return bytes_; }
  // SystemError when the allocation fails.
  Status allocate(size_t bytes);

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> ptr_;
  size_t bytes_ = 0;
};
// Sized for the largest send / recv of the plan.
Status allocateBuffers(const Plan& plan, int nranks, AlignedBuffer& send, AlignedBuffer& recv);

// Gathers each rank's pid / host / cpus (collective: every rank calls it) and prints the header
// on rank 0.
Status printHeader(Communicator& comm, const Config& cfg, const Plan& plan);

// Control traffic through the communicator itself (out of place, int64 / float64).
Result<int64_t> sumInt64(Communicator& comm, int64_t value);
// -a: 0 this rank's value (rank 0's is printed), 1 mean, 2 min, 3 max across ranks.
Result<double> aggregateTime(Communicator& comm, int average, double seconds);

// Prints "tutti-perf: rank R: <status>" on stderr, aborts the communicator so that peers stop
// waiting, and returns exit status 1.
int fail(Communicator& comm, const Status& st);

// Rank given by a launcher's environment (TUTTI_RANK, RANK+WORLD_SIZE, OMPI_COMM_WORLD_RANK,
// PMI_RANK, SLURM_PROCID+SLURM_NTASKS), or -1 when none is set.
int launcherRank();

// Forks `nranks` local ranks; rank 0 creates the UniqueId and hands it to the others through
// pipes (before any of them touches tutti). Each child runs body(rank, nranks, id) and exits with
// its result. Returns the largest exit status (1 for a rank killed by a signal); once one rank
// fails, the others get 10 s to finish and are then killed.
int selfLaunch(int nranks, const std::function<int(int, int, const UniqueId&)>& body);

}  // namespace tutti::bench
