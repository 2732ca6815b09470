// File: bench/check_calls_cost.cc
// tutti-check-cost: what the call-mismatch check (docs/errors.md) costs on small collectives.
// One pair of processes (fork) holds two communicators over the same transport, one with the
// check and one without, and times alternating blocks of calls on each, so that both see the same
// machine state (frequency, co-runners, cache); each process is pinned to its own CPU when there
// are two. Each block ends with a barrier (counted), so a block's time is the rate at which
// every rank completes calls. Prints the median and minimum time per call of each, and their
// ratio.
//   tutti-check-cost [--transport shm|tcp] [--bytes 8] [--blocks 200] [--iters 1000]
//                    [--coll allreduce|broadcast|allgather|barrier] [--in-place]
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <tutti/tutti.hpp>
#include <vector>

namespace {

using namespace tutti;

struct Setup {
  std::string transport = "shm";
  std::string coll = "allreduce";
  size_t bytes = 8;
  int blocks = 200;
  int iters = 1000;
  bool inPlace = false;
  bool aa = false;  // both communicators without the check: the measurement's own bias
};

Status one(Communicator& c, const Setup& s, std::vector<float>& in, std::vector<float>& out) {
  const size_t count = std::max<size_t>(1, s.bytes / sizeof(float));
  void* recv = s.inPlace ? in.data() : out.data();
  if (s.coll == "broadcast") return c.broadcast(in.data(), recv, count, DataType::kFloat32, 0);
  if (s.coll == "allgather")
    return c.allGather(s.inPlace ? in.data() + c.rank() * count : in.data(),
                       s.inPlace ? in.data() : out.data(), count, DataType::kFloat32);
  if (s.coll == "barrier") return c.barrier();
  return c.allReduce(in.data(), recv, count, DataType::kFloat32, RedOp::kSum);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

int rankMain(int rank, const UniqueId& idOff, const UniqueId& idOn, const Setup& s) {
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) >= 2) {
    int seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &cpus) || seen++ != rank) continue;
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      sched_setaffinity(0, sizeof one, &one);
      break;
    }
  }
  Options off, on;
  off.transports = on.transports = s.transport;
  off.checkCalls = 0;
  on.checkCalls = s.aa ? 0 : 1;
  auto a = Communicator::create(idOff, rank, 2, off);
  auto b = Communicator::create(idOn, rank, 2, on);
  if (!a.isOk() || !b.isOk()) {
    std::fprintf(stderr, "rank %d: init failed: %s\n", rank,
                 (a.isOk() ? b.status() : a.status()).toString().c_str());
    return 1;
  }
  const size_t count = std::max<size_t>(1, s.bytes / sizeof(float));
  std::vector<float> in(2 * count, 1.f), out(2 * count);
  std::vector<double> tOff, tOn;
  for (int w = 0; w < 1000; ++w)
    if (!one(a.value(), s, in, out).isOk() || !one(b.value(), s, in, out).isOk()) return 2;
  for (int blk = 0; blk < s.blocks; ++blk) {
    for (int k = 0; k < 2; ++k) {
      const bool useOn = (blk + k) % 2;
      Communicator& c = useOn ? b.value() : a.value();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < s.iters; ++i)
        if (!one(c, s, in, out).isOk()) return 2;
      // Inside the timing: a rank that only sends (a broadcast root) could otherwise run ahead of
      // its peer by a whole ring of messages, and its block time would not be the call rate.
      if (!c.barrier().isOk()) return 2;
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          s.iters;
      (useOn ? tOn : tOff).push_back(us);
    }
  }
  if (rank == 0) {
    const double mOff = median(tOff), mOn = median(tOn);
    const double minOff = *std::min_element(tOff.begin(), tOff.end());
    const double minOn = *std::min_element(tOn.begin(), tOn.end());
    std::printf(
        "%s %s%s %zu B, 2 ranks, %d blocks x %d calls: check off %.3f us, on %.3f us "
        "(median %+.1f%%); min off %.3f on %.3f (%+.1f%%)\n",
        s.transport.c_str(), s.coll.c_str(), s.inPlace ? " in place" : "", s.bytes, s.blocks,
        s.iters, mOff, mOn, 100 * (mOn - mOff) / mOff, minOff, minOn,
        100 * (minOn - minOff) / minOff);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Setup s;
  CLI::App app{"tutti-check-cost: the call check's cost on small collectives (A/B in one job)"};
  app.add_option("--transport", s.transport, "shm or tcp");
  app.add_option("--coll", s.coll, "allreduce, broadcast, allgather or barrier");
  app.add_option("--bytes", s.bytes, "message size in bytes (float elements)");
  app.add_option("--blocks", s.blocks, "timed blocks per variant");
  app.add_option("--iters", s.iters, "calls per block");
  app.add_flag("--in-place", s.inPlace, "in-place calls");
  app.add_flag("--aa", s.aa, "A/A: the check off on both communicators (the method's bias)");
  CLI11_PARSE(app, argc, argv);
  auto idOff = createUniqueId();
  auto idOn = createUniqueId();
  if (!idOff.isOk() || !idOn.isOk()) return 1;
  const pid_t pid = fork();
  if (pid == 0) _exit(rankMain(1, idOff.value(), idOn.value(), s));
  int rc = rankMain(0, idOff.value(), idOn.value(), s);
  int status = 0;
  waitpid(pid, &status, 0);
  return rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}
