// File: nccl/fusion_bench.cc
// tutti-nccl-fusion: the group-fusion benchmark of docs/NCCL.md, written against the NCCL API
// only. Forks -n ranks on this host (rank 0 creates the unique id and pipes it to the others),
// then times, per iteration, K allreduces of B bytes each (float sum):
//   separate: K ncclAllReduce calls, each outside any group;
//   grouped:  the same K calls inside one ncclGroupStart/End (fused when their total is at most
//             TUTTI_FUSION_BYTES; run with TUTTI_FUSION_BYTES=0 to time the group unfused).
// It checks that both give bit-identical results and prints the median time per iteration on
// rank 0. Ranks talk over loopback (NCCL_SOCKET_IFNAME=lo unless set).
// Usage: tutti-nccl-fusion [-n ranks=4] [-k calls=10] [-b bytes=4096] [-i iters=2000]
#include <sys/wait.h>
#include <tutti/nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench_check.h"  // this folder: the benchmarks see only the public headers

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int runRank(int rank, int nranks, int readFd, const std::vector<int>& writeFds, int calls,
            size_t bytes, int iters) {
  ncclUniqueId id;
  if (rank == 0) {
    NCCL_BENCH_OK(ncclGetUniqueId(&id));
    for (int fd : writeFds)
      if (write(fd, &id, sizeof id) != static_cast<ssize_t>(sizeof id)) return 1;
  } else if (read(readFd, &id, sizeof id) != static_cast<ssize_t>(sizeof id)) {
    return 1;
  }
  ncclComm_t comm;
  NCCL_BENCH_OK(ncclCommInitRank(&comm, nranks, id, rank));
  const size_t count = bytes / sizeof(float);
  std::vector<std::vector<float>> in(calls, std::vector<float>(count));
  std::vector<std::vector<float>> outSep(calls, std::vector<float>(count));
  std::vector<std::vector<float>> outGrp(calls, std::vector<float>(count));
  unsigned seed = 12345u + static_cast<unsigned>(rank);
  for (auto& v : in)
    for (auto& x : v) x = static_cast<float>(rand_r(&seed)) / RAND_MAX - 0.5f;  // inexact sums
  float one = 1, sum = 0;

  auto separate = [&]() -> int {
    for (int k = 0; k < calls; ++k)
      NCCL_BENCH_OK(
          ncclAllReduce(in[k].data(), outSep[k].data(), count, ncclFloat, ncclSum, comm, nullptr));
    return 0;
  };
  auto grouped = [&]() -> int {
    NCCL_BENCH_OK(ncclGroupStart());
    for (int k = 0; k < calls; ++k)
      NCCL_BENCH_OK(
          ncclAllReduce(in[k].data(), outGrp[k].data(), count, ncclFloat, ncclSum, comm, nullptr));
    NCCL_BENCH_OK(ncclGroupEnd());
    return 0;
  };
  auto time = [&](auto&& body, std::vector<double>& samples) -> int {
    for (int w = 0; w < iters / 10 + 1; ++w)
      if (body()) return 1;
    NCCL_BENCH_OK(ncclAllReduce(&one, &sum, 1, ncclFloat, ncclSum, comm, nullptr));  // line up
    for (int it = 0; it < iters; ++it) {
      auto t0 = Clock::now();
      if (body()) return 1;
      samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    return 0;
  };
  std::vector<double> sep, grp;
  if (time(separate, sep) || time(grouped, grp)) return 1;
  int wrong = 0;
  for (int k = 0; k < calls; ++k)
    wrong += std::memcmp(outSep[k].data(), outGrp[k].data(), bytes) != 0;
  if (rank == 0) {
    const char* fb = std::getenv("TUTTI_FUSION_BYTES");
    std::printf(
        "# tutti-nccl-fusion: %d ranks, %d allreduces of %zu bytes (float sum), %d iters, "
        "TUTTI_FUSION_BYTES=%s\n",
        nranks, calls, bytes, iters, fb ? fb : "(default)");
    std::printf("separate calls : %9.2f us per %d calls (median)\n", median(sep), calls);
    std::printf("one group      : %9.2f us per %d calls (median)\n", median(grp), calls);
    std::printf("speedup        : %9.2fx\n", median(sep) / median(grp));
    std::printf("results        : %s\n", wrong ? "DIFFER" : "bit-identical");
  }
  NCCL_BENCH_OK(ncclCommDestroy(comm));
  return wrong ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = 4, calls = 10, iters = 2000;
  size_t bytes = 4096;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "-n"))
      nranks = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "-k"))
      calls = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "-b"))
      bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "-i"))
      iters = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [-n ranks] [-k calls] [-b bytes] [-i iters]\n", argv[0]);
      return 2;
    }
  }
  if (nranks < 1 || calls < 1 || iters < 1 || bytes < sizeof(float)) return 2;
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);  // one host: keep the rendezvous on loopback
  std::vector<int> readFds(nranks, -1), writeFds;
  for (int r = 1; r < nranks; ++r) {
    int p[2];
    if (pipe(p) != 0) return 1;
    readFds[r] = p[0];
    writeFds.push_back(p[1]);
  }
  std::vector<pid_t> pids;
  for (int r = 1; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) _exit(runRank(r, nranks, readFds[r], {}, calls, bytes, iters));
    pids.push_back(pid);
  }
  int rc = runRank(0, nranks, -1, writeFds, calls, bytes, iters);
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = rc ? rc : 1;
  }
  return rc;
}
