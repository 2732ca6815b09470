// File: bench/compare/tutti_coll_perf.cc
// tutti_coll_perf: tutti's driver for the peers' harness (../shared/peers/bench_common.h), so that
// tutti runs the exact sweep, warm-up, calibration, timing and correctness check that Open MPI,
// MPICH and Gloo run in ../shared/peers, and prints the same table. Collectives (float32, out of
// place, nccl-tests sizes): allreduce (sum), allgather, reduce_scatter (sum), bcast, alltoall.
//
// Built and run by bench/compare_peers.sh (compiled against a copy of bench_common.h, linked to
// build/lib/libtutti.so); ranks come from tutti-run (Communicator::fromEnvironment). The transport
// is TUTTI_TRANSPORTS (shm or tcp). Options: the harness's (-b -e -f -T -w -m -M -c -o) plus
// -t label, -r root, -p 0|1 (pin local rank r to CPU r when the host has at least as many CPUs as
// local ranks, as Open MPI binds np2 to cores; default 1).
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <tutti/tutti.hpp>
#include <vector>

#include "bench_common.h"

using namespace bench;

namespace {

[[noreturn]] void die(const char* what, const tutti::Status& s) {
  std::fprintf(stderr, "tutti_coll_perf: %s failed: %s\n", what, s.message().c_str());
  std::exit(1);
}

void must(const char* what, const tutti::Status& s) {
  if (!s.isOk()) die(what, s);
}

int envInt(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

// Pins this process to CPU (local rank) when every local rank can have its own CPU.
std::string pin(bool want) {
  const int localRank = envInt("TUTTI_LOCAL_RANK", -1);
  const int localSize = envInt("TUTTI_LOCAL_SIZE", -1);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (!want || localRank < 0 || sched_getaffinity(0, sizeof set, &set) != 0) return "not pinned";
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  if (localSize > static_cast<int>(cpus.size())) return "not pinned (more ranks than CPUs)";
  CPU_ZERO(&set);
  CPU_SET(cpus[localRank], &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) return "not pinned (sched_setaffinity failed)";
  return "local rank r pinned to CPU r";
}

}  // namespace

int main(int argc, char** argv) {
  Params P;
  std::string tag;
  int root = 0;
  bool pinRanks = true;
  auto extra = [&](const std::string& a, const char* v) {
    if (a == "-t" && v) { tag = v; return true; }
    if (a == "-r" && v) { root = std::atoi(v); return true; }
    if (a == "-p" && v) { pinRanks = std::atoi(v) != 0; return true; }
    return false;
  };
  if (!parseArgs(argc, argv, P, extra)) {
    usage(argv[0], "[-t label] [-r root] [-p 0|1]");
    return 2;
  }
  const std::string placement = pin(pinRanks);

  auto made = tutti::Communicator::fromEnvironment();
  if (!made.isOk()) die("Communicator::fromEnvironment", made.status());
  tutti::Communicator comm = std::move(made).value();
  const int rank = comm.rank(), n = comm.size();
  using tutti::DataType;
  using tutti::RedOp;

  Sync S;
  S.barrier = [&] { must("barrier", comm.barrier()); };
  S.maxd = [&](double v) {
    double r = 0;
    must("allReduce(max)", comm.allReduce(&v, &r, 1, DataType::kFloat64, RedOp::kMax));
    return r;
  };
  S.suml = [&](long v) {
    int64_t in = v, r = 0;
    must("allReduce(sum)", comm.allReduce(&in, &r, 1, DataType::kInt64, RedOp::kSum));
    return static_cast<long>(r);
  };

  // Header: library, ranks, placement (gathered with tutti itself).
  char me[160] = {0};
  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  std::snprintf(me, sizeof(me), "#  Rank %2d Pid %7d on %10s cpus [%s] (cpu now %d)", rank,
                int(getpid()), host, affinity().c_str(), sched_getcpu());
  std::vector<char> all(size_t(n) * sizeof(me));
  must("allGather", comm.allGather(me, all.data(), sizeof(me), DataType::kInt8));
  const std::string transport = n > 1 ? comm.transportTo((rank + 1) % n) : "self";
  if (rank == 0) {
    std::printf("# tutti_coll_perf  label: %s\n# library: tutti %s (transport to peers: %s; %s)\n",
                tag.c_str(), tutti::versionString(), transport.c_str(), placement.c_str());
    std::printf("# nranks %d minBytes %zu maxBytes %zu step: %g(factor) warmup iters: %d "
                "(1 at >= %zu B) iters: adaptive (target %.3f s per size, min %ld, max %ld) "
                "validation: %d\n",
                n, P.minBytes, P.maxBytes, P.factor, P.warmup, P.bigBytes, P.target, P.minIters,
                P.maxIters, int(P.check));
    std::printf("# time = average per op over the timed loop, max across ranks; algbw = size/time "
                "(1e9 B/s); minflt = minor page faults per op in the timed loop, max across "
                "ranks\n");
    for (int r = 0; r < n; r++) std::printf("%s\n", all.data() + size_t(r) * sizeof(me));
  }

  const size_t maxB = P.maxBytes + 64;
  float* sbuf = allocFloats(maxB);
  float* rbuf = allocFloats(maxB);
  const std::vector<size_t> sz = sizes(P);

  struct Coll { const char* name; const char* redop; int root; };
  const Coll colls[] = {{"allreduce", "sum", -1},
                        {"allgather", "none", -1},
                        {"reduce_scatter", "sum", -1},
                        {"bcast", "none", root},
                        {"alltoall", "none", -1}};
  const DataType F = DataType::kFloat32;
  int rc = 0;
  for (const Coll& cl : colls) {
    if (!wanted(P, cl.name)) continue;
    const std::string nm = cl.name;
    char hx[200];
    std::snprintf(hx, sizeof(hx), "label: %s", tag.c_str());
    if (rank == 0) printTableHeader(cl.name, n, hx);
    long wrongTot = 0;
    double busSum = 0;
    int rows = 0;
    for (size_t bytes : sz) {
      const size_t count = bytes / sizeof(float);
      Case C;
      if (nm == "allreduce") {
        C.bytes = count * 4; C.count = count; C.busFactor = 2.0 * (n - 1) / n;
        C.op = [=, &comm] { must("allReduce", comm.allReduce(sbuf, rbuf, count, F, RedOp::kSum)); };
        C.prepareCheck = [=] {
          for (size_t i = 0; i < count; i++) { sbuf[i] = patIn(rank, i); rbuf[i] = kSentinel; }
        };
        C.verify = [=] {
          long w = 0;
          for (size_t i = 0; i < count; i++) w += rbuf[i] != patSum(n, i);
          return w;
        };
      } else if (nm == "allgather") {
        const size_t per = count / n;
        if (per == 0) continue;
        C.bytes = per * n * 4; C.count = per; C.busFactor = double(n - 1) / n;
        C.op = [=, &comm] { must("allGather", comm.allGather(sbuf, rbuf, per, F)); };
        C.prepareCheck = [=] {
          for (size_t i = 0; i < per; i++) sbuf[i] = patBlk(rank, 0, i);
          for (size_t i = 0; i < per * n; i++) rbuf[i] = kSentinel;
        };
        C.verify = [=] {
          long w = 0;
          for (int s = 0; s < n; s++)
            for (size_t i = 0; i < per; i++) w += rbuf[s * per + i] != patBlk(s, 0, i);
          return w;
        };
      } else if (nm == "reduce_scatter") {
        const size_t per = count / n;
        if (per == 0) continue;
        C.bytes = per * n * 4; C.count = per; C.busFactor = double(n - 1) / n;
        C.op = [=, &comm] {
          must("reduceScatter", comm.reduceScatter(sbuf, rbuf, per, F, RedOp::kSum));
        };
        C.prepareCheck = [=] {
          for (size_t i = 0; i < per * n; i++) sbuf[i] = patIn(rank, i);
          for (size_t i = 0; i < per; i++) rbuf[i] = kSentinel;
        };
        C.verify = [=] {
          long w = 0;
          for (size_t i = 0; i < per; i++) w += rbuf[i] != patSum(n, rank * per + i);
          return w;
        };
      } else if (nm == "bcast") {
        // In place, as MPI_Bcast: the root's buffer is both send and receive.
        C.bytes = count * 4; C.count = count; C.busFactor = 1.0;
        C.op = [=, &comm] { must("broadcast", comm.broadcast(rbuf, rbuf, count, F, root)); };
        C.prepareCheck = [=] {
          for (size_t i = 0; i < count; i++) rbuf[i] = rank == root ? patBlk(root, 1, i) : kSentinel;
        };
        C.verify = [=] {
          long w = 0;
          for (size_t i = 0; i < count; i++) w += rbuf[i] != patBlk(root, 1, i);
          return w;
        };
      } else if (nm == "alltoall") {
        const size_t per = count / n;
        if (per == 0) continue;
        C.bytes = per * n * 4; C.count = per; C.busFactor = double(n - 1) / n;
        C.op = [=, &comm] { must("allToAll", comm.allToAll(sbuf, rbuf, per, F)); };
        C.prepareCheck = [=] {
          for (int d = 0; d < n; d++)
            for (size_t i = 0; i < per; i++) sbuf[d * per + i] = patBlk(rank, d, i);
          for (size_t i = 0; i < per * n; i++) rbuf[i] = kSentinel;
        };
        C.verify = [=] {
          long w = 0;
          for (int s = 0; s < n; s++)
            for (size_t i = 0; i < per; i++) w += rbuf[s * per + i] != patBlk(s, rank, i);
          return w;
        };
      }
      Result R = runCase(P, S, C);
      if (rank == 0) printRow(C, cl.redop, cl.root, R);
      wrongTot += R.wrong;
      busSum += R.busbw;
      rows++;
    }
    if (rank == 0) printTableFooter(wrongTot, busSum, rows);
    if (wrongTot) rc = 1;
  }
  free(sbuf);
  free(rbuf);
  return rc;
}
