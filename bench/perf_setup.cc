// File: bench/perf_setup.cc
// Configuration checks, the case plan, buffers, header, control traffic and the --nranks
// self-launcher of tutti-perf.
#include "bench/perf_setup.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

namespace tutti::bench {

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = std::min(s.find(',', start), s.size());
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

namespace {

constexpr DataType kAllDataTypes[] = {DataType::kInt8,     DataType::kUint8,   DataType::kInt32,
                                      DataType::kUint32,   DataType::kInt64,   DataType::kUint64,
                                      DataType::kFloat16,  DataType::kFloat32, DataType::kFloat64,
                                      DataType::kBfloat16, DataType::kFp8E4M3, DataType::kFp8E5M2};
constexpr RedOp kAllRedOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};

Status invalid(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }

Result<std::vector<DataType>> parseDataTypes(const std::string& arg) {
  if (arg == "all")
    return std::vector<DataType>(std::begin(kAllDataTypes), std::end(kAllDataTypes));
  std::vector<DataType> out;
  for (const std::string& name : splitList(arg)) {
    const std::optional<DataType> t = parseDataType(name);
    if (!t) return invalid("-d/--datatype: unknown type '" + name + "'");
    out.push_back(*t);
  }
  if (out.empty()) return invalid("-d/--datatype: empty");
  return out;
}

Result<std::vector<RedOp>> parseRedOps(const std::string& arg) {
  if (arg == "all") return std::vector<RedOp>(std::begin(kAllRedOps), std::end(kAllRedOps));
  std::vector<RedOp> out;
  for (const std::string& name : splitList(arg)) {
    const std::optional<RedOp> op = parseRedOp(name);
    if (!op) return invalid("-o/--op: unknown op '" + name + "' (sum prod max min avg all)");
    out.push_back(*op);
  }
  if (out.empty()) return invalid("-o/--op: empty");
  return out;
}

// nranks < 0: syntax only.
Result<std::vector<int>> parseRoots(const std::string& arg, int nranks) {
  std::vector<int> out;
  if (arg == "all") {
    for (int r = 0; r < std::max(nranks, 1); ++r) out.push_back(r);
    return out;
  }
  for (const std::string& item : splitList(arg)) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (end == item.c_str() || *end != '\0' || v < 0 || v > (1 << 20)) {
      return invalid("-r/--root: '" + item + "' is not a rank number or 'all'");
    }
    if (nranks > 0 && v >= nranks) {
      return invalid("-r/--root: root " + item + " is outside [0, " + std::to_string(nranks) +
                     ") (nranks=" + std::to_string(nranks) + ")");
    }
    out.push_back(int(v));
  }
  if (out.empty()) return invalid("-r/--root: empty");
  return out;
}

std::vector<size_t> sweepSizes(const Config& cfg) {
  std::vector<size_t> sizes;
  for (uint64_t s = cfg.minBytes; s <= cfg.maxBytes;) {
    sizes.push_back(size_t(s));
    uint64_t next = cfg.stepFactorGiven ? uint64_t(std::llround(double(s) * cfg.stepFactor))
                                        : s + cfg.stepBytes;
    if (next <= s) next = s + 1;  // 0 * factor, or a factor rounding back to s
    if (next < s) break;          // overflow
    s = next;
  }
  return sizes;
}

std::string affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return "?";
  std::string s;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) s += (s.empty() ? "" : ",") + std::to_string(c);
  }
  return s;
}

// What each rank contributes to the header (fixed size, gathered as uint8).
struct RankInfo {
  int64_t pid = 0;
  std::array<char, 56> host{};
  std::array<char, 64> cpus{};
};
static_assert(sizeof(RankInfo) == 128);

template <size_t N>
void copyTruncated(std::array<char, N>& dst, const std::string& src) {
  std::snprintf(dst.data(), N, "%s", src.c_str());
}

const char* averageName(int average) {
  switch (average) {
    case 0:
      return "rank 0's";
    case 2:
      return "min across ranks";
    case 3:
      return "max across ranks";
    default:
      return "mean across ranks";
  }
}

}  // namespace

std::string validateConfig(const Config& cfg) {
  if (cfg.minBytes > cfg.maxBytes && cfg.soakSec == 0) {  // the soak draws sizes up to -e only
    return "-b/--minbytes (" + std::to_string(cfg.minBytes) + ") is larger than -e/--maxbytes (" +
           std::to_string(cfg.maxBytes) + ")";
  }
  if (cfg.stepFactorGiven && !(cfg.stepFactor > 1.0)) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", cfg.stepFactor);
    return "-f/--stepfactor must be > 1 (got " + std::string(buf) + ")";
  }
  if (!cfg.stepFactorGiven && cfg.stepBytes == 0) return "-i/--stepbytes must be > 0";
  if (findPerfColl(cfg.coll) == nullptr) {
    std::string known;
    for (const PerfColl& c : perfColls()) known += " " + std::string(c.name);
    return "--coll: unknown collective '" + cfg.coll + "' (one of:" + known + ")";
  }
  if (auto t = parseDataTypes(cfg.datatypes); !t) return t.status().message();
  if (auto o = parseRedOps(cfg.ops); !o) return o.status().message();
  if (auto r = parseRoots(cfg.roots, -1); !r) return r.status().message();
  return "";
}

std::string checkTransports(const std::string& value) {
  const std::vector<std::string> names = splitList(value);
  if (names.empty()) return "empty (shm or tcp)";
  for (const std::string& n : names) {
    if (n != "shm" && n != "tcp") return "unknown transport '" + n + "' (shm, tcp)";
  }
  return "";
}

Result<Plan> makePlan(const Config& cfg, int nranks) {
  Plan plan;
  plan.coll = findPerfColl(cfg.coll);
  if (plan.coll == nullptr) return invalid("--coll: unknown collective '" + cfg.coll + "'");
  Result<std::vector<DataType>> dtypes = parseDataTypes(cfg.datatypes);
  if (!dtypes) return dtypes.status();
  plan.dtypes = *dtypes;
  plan.ops = {RedOp::kSum};
  if (collInfo(plan.coll->coll).reduces) {
    Result<std::vector<RedOp>> ops = parseRedOps(cfg.ops);
    if (!ops) return ops.status();
    plan.ops = *ops;
  }
  plan.roots = {0};
  if (collInfo(plan.coll->coll).rooted) {
    Result<std::vector<int>> roots = parseRoots(cfg.roots, nranks);
    if (!roots) return roots.status();
    plan.roots = *roots;
  }
  plan.sizes = sweepSizes(cfg);
  return plan;
}

Status AlignedBuffer::allocate(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 64) + 4095) & ~size_t(4095);
  void* p = nullptr;
  if (posix_memalign(&p, 4096, rounded) != 0) {
    return Status(Code::kSystemError,
                  "cannot allocate " + std::to_string(rounded) + " bytes (posix_memalign)");
  }
  std::memset(p, 0, rounded);  // fault every page in before any timing
  ptr_.reset(p);
  bytes_ = rounded;
  return Status();
}

Status allocateBuffers(const Plan& plan, int nranks, AlignedBuffer& send, AlignedBuffer& recv) {
  size_t sendBytes = 0, recvBytes = 0;
  for (DataType t : plan.dtypes) {
    const size_t elt = dataTypeBytes(t);
    for (size_t bytes : plan.sizes) {
      const ByteCounts bc = plan.coll->byteCounts(bytes, elt, nranks);
      sendBytes = std::max(sendBytes, bc.sendCount * elt);
      recvBytes = std::max(recvBytes, bc.recvCount * elt);
    }
  }
  if (Status st = send.allocate(sendBytes); !st) return st;
  return recv.allocate(recvBytes);
}

Status printHeader(Communicator& comm, const Config& cfg, const Plan& plan) {
  const int n = comm.size();
  RankInfo mine;
  mine.pid = int64_t(getpid());
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  copyTruncated(mine.host, host);
  copyTruncated(mine.cpus, affinity());
  std::vector<RankInfo> all(static_cast<size_t>(n));
  if (Status st = comm.allGather(&mine, all.data(), sizeof(RankInfo), DataType::kUint8); !st) {
    return st;
  }
  if (comm.rank() != 0) return Status();

  std::printf("# tutti-perf %s (libtutti %s, host memory)\n", versionString(), versionString());
  std::printf("# Collective test starting: %s\n", std::string(plan.coll->name).c_str());
  char step[64];
  if (cfg.stepFactorGiven) {
    std::snprintf(step, sizeof(step), "%g(factor)", cfg.stepFactor);
  } else {
    std::snprintf(step, sizeof(step), "%llu(bytes)",
                  static_cast<unsigned long long>(cfg.stepBytes));
  }
  std::printf(
      "# nranks %d minBytes %llu maxBytes %llu step: %s warmup iters: %d iters: %d "
      "validation: %d\n",
      n, static_cast<unsigned long long>(cfg.minBytes),
      static_cast<unsigned long long>(cfg.maxBytes), step, cfg.warmup, cfg.iters, cfg.check);
  std::printf(
      "# time = mean per op over the timed loop, %s (-a %d); algbw = size/time "
      "(1e9 B/s); busbw = algbw * factor\n",
      averageName(cfg.average), cfg.average);
  std::printf("# algorithm: %s  transports allowed: %s  timeout: %g s\n",
              cfg.algo.empty() ? "auto" : cfg.algo.c_str(),
              cfg.transports.empty() ? "default" : cfg.transports.c_str(), cfg.timeoutSec);
  std::printf("#\n# Using transports:");
  for (int peer = 0; peer < n; ++peer) std::printf(" %d:%s", peer, comm.transportTo(peer).c_str());
  std::printf("\n");
  for (int r = 0; r < n; ++r) {
    const RankInfo& info = all[size_t(r)];
    std::printf("#  Rank %2d Pid %7lld on %10.56s cpus [%.64s]\n", r,
                static_cast<long long>(info.pid), info.host.data(), info.cpus.data());
  }
  std::fflush(stdout);
  return Status();
}

Result<int64_t> sumInt64(Communicator& comm, int64_t value) {
  int64_t total = 0;
  if (Status st = comm.allReduce(&value, &total, 1, DataType::kInt64, RedOp::kSum); !st) return st;
  return total;
}

Result<double> aggregateTime(Communicator& comm, int average, double seconds) {
  if (average == 0) return seconds;
  const RedOp op = average == 2 ? RedOp::kMin : average == 3 ? RedOp::kMax : RedOp::kSum;
  double out = 0;
  if (Status st = comm.allReduce(&seconds, &out, 1, DataType::kFloat64, op); !st) return st;
  return average == 1 ? out / comm.size() : out;
}

int fail(Communicator& comm, const Status& st) {
  std::fprintf(stderr, "tutti-perf: rank %d: %s\n", comm.rank(), st.toString().c_str());
  std::fflush(stderr);
  comm.abort();
  return 1;
}

int launcherRank() {
  auto get = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  const std::pair<const char*, const char*> vars[] = {
      {"TUTTI_RANK", "TUTTI_NRANKS"},
      {"RANK", "WORLD_SIZE"},
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
      {"PMI_RANK", "PMI_SIZE"},
      {"SLURM_PROCID", "SLURM_NTASKS"}};
  for (const auto& [rank, size] : vars) {
    if (get(rank) != nullptr && get(size) != nullptr) return std::max(0, std::atoi(get(rank)));
  }
  return -1;
}

int selfLaunch(int nranks, const std::function<int(int, int, const UniqueId&)>& body) {
  std::vector<std::array<int, 2>> pipes(static_cast<size_t>(nranks));
  for (auto& p : pipes) {
    if (pipe(p.data()) != 0) {
      std::perror("tutti-perf: pipe");
      return 1;
    }
  }
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("tutti-perf: fork");
      for (pid_t p : pids) kill(p, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      UniqueId id;
      int rc = 1;
      if (r == 0) {
        Result<UniqueId> created = createUniqueId();
        if (!created) {
          std::fprintf(stderr, "tutti-perf: createUniqueId: %s\n",
                       created.status().toString().c_str());
          std::fflush(stderr);
          _exit(1);
        }
        id = *created;
        for (int k = 1; k < nranks; ++k) {
          if (write(pipes[size_t(k)][1], id.bytes.data(), id.bytes.size()) !=
              ssize_t(id.bytes.size())) {
            _exit(1);
          }
        }
      } else if (read(pipes[size_t(r)][0], id.bytes.data(), id.bytes.size()) !=
                 ssize_t(id.bytes.size())) {
        _exit(1);  // rank 0 died before sending the id
      }
      for (auto& p : pipes) {
        close(p[0]);
        close(p[1]);
      }
      rc = body(r, nranks, id);
      std::fflush(nullptr);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  for (auto& p : pipes) {
    close(p[0]);
    close(p[1]);
  }
  int worst = 0, running = nranks;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  while (running > 0) {
    int status = 0;
    const pid_t done = waitpid(-1, &status, WNOHANG);
    if (done > 0) {
      auto it = std::find(pids.begin(), pids.end(), done);
      if (it == pids.end()) continue;
      *it = -1;
      --running;
      const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
      if (rc != 0 && worst == 0)
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      worst = std::max(worst, rc);
      continue;
    }
    if (done < 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (pid_t p : pids) {
        if (p > 0) kill(p, SIGKILL);
      }
      deadline = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return worst;
}

}  // namespace tutti::bench
