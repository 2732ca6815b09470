// File: tests/nccl/shrink_fault.cc
// ncclCommShrink after a rank died: the use NCCL_SHRINK_ABORT is made for. Four forked ranks build
// a communicator and run an allreduce; rank 2 then kills itself with SIGKILL (no cleanup, as a
// crash). The survivors' next allreduce must fail (ncclRemoteError or another error, in bounded
// time; ncclCommGetAsyncError reports it), then they call ncclCommShrink(excludeRanksList={2},
// NCCL_SHRINK_ABORT) on the failed parent and run allreduces on the new 3-rank communicator,
// checking every element against the reference. Uses only the NCCL API (tutti's header).
//   nccl_shrink_fault [N [DEAD]]   (default 4 ranks, rank 2 dies)
// Exit status 0 when every survivor passed and the dead rank died of SIGKILL.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <tutti/nccl.h>
#include <vector>

namespace {

#define CHECK(cond, ...)                                            \
  do {                                                              \
    if (!(cond)) {                                                  \
      std::fprintf(stderr, "rank %d: check failed: %s: ", rank, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                            \
      std::fprintf(stderr, "\n");                                   \
      return 1;                                                     \
    }                                                               \
  } while (0)

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Allreduce of (rank + 1) * (i % 7 + 1) over `members` (parent ranks): element i is
// (i % 7 + 1) * sum(members + 1); exact in float for these small integers.
int allreduceAndCheck(ncclComm_t comm, int rank, const std::vector<int>& members, size_t count) {
  std::vector<float> in(count), out(count, -1.0f);
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((rank + 1) * (i % 7 + 1));
  ncclResult_t r = ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr);
  CHECK(r == ncclSuccess, "ncclAllReduce returned %s: %s", ncclGetErrorString(r),
        ncclGetLastError(comm));
  float sum = 0;
  for (int m : members) sum += static_cast<float>(m + 1);
  for (size_t i = 0; i < count; ++i)
    CHECK(out[i] == sum * static_cast<float>(i % 7 + 1), "element %zu is %g, expected %g", i,
          static_cast<double>(out[i]), static_cast<double>(sum * static_cast<float>(i % 7 + 1)));
  return 0;
}

int runRank(int rank, int nranks, int dead, const ncclUniqueId& id) {
  ncclComm_t parent = nullptr;
  ncclResult_t r = ncclCommInitRank(&parent, nranks, id, rank);
  CHECK(r == ncclSuccess, "ncclCommInitRank: %s: %s", ncclGetErrorString(r),
        ncclGetLastError(nullptr));
  std::vector<int> all;
  for (int i = 0; i < nranks; ++i) all.push_back(i);
  if (allreduceAndCheck(parent, rank, all, 4096)) return 1;

  if (rank == dead) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    raise(SIGKILL);  // a crash: no destroy, no exit handlers, sockets closed by the kernel
  }

  // The parent fails: rank `dead` never joins this allreduce.
  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> buf(4096, 1.0f);
  r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, parent, nullptr);
  CHECK(r != ncclSuccess && r != ncclInProgress, "the allreduce without rank %d returned %s", dead,
        ncclGetErrorString(r));
  std::printf("rank %d: allreduce without rank %d failed after %.2f s: %s (%s)\n", rank, dead,
              secondsSince(t0), ncclGetErrorString(r), ncclGetLastError(parent));
  ncclResult_t async = ncclSuccess;
  CHECK(ncclCommGetAsyncError(parent, &async) == ncclSuccess, "ncclCommGetAsyncError failed");
  CHECK(async != ncclSuccess, "ncclCommGetAsyncError reports no error after the failure");

  // Shrink the failed parent: the survivors only, without contacting rank `dead`.
  t0 = std::chrono::steady_clock::now();
  ncclComm_t small = nullptr;
  int excluded = dead;
  r = ncclCommShrink(parent, &excluded, 1, &small, nullptr, NCCL_SHRINK_ABORT);
  CHECK(r == ncclSuccess, "ncclCommShrink: %s: %s", ncclGetErrorString(r),
        ncclGetLastError(parent));
  std::printf("rank %d: ncclCommShrink took %.2f s\n", rank, secondsSince(t0));
  int count = 0, newRank = -1;
  CHECK(ncclCommCount(small, &count) == ncclSuccess && count == nranks - 1,
        "new communicator has %d ranks, expected %d", count, nranks - 1);
  CHECK(ncclCommUserRank(small, &newRank) == ncclSuccess && newRank == (rank < dead ? rank : rank - 1),
        "new rank %d, expected %d", newRank, rank < dead ? rank : rank - 1);
  std::vector<int> survivors;
  for (int i = 0; i < nranks; ++i)
    if (i != dead) survivors.push_back(i);
  for (size_t n : {size_t(1), size_t(1000), size_t(300000)})
    if (allreduceAndCheck(small, rank, survivors, n)) return 1;

  // The parent was aborted by the shrink: it refuses work, and can still be destroyed.
  r = ncclAllReduce(buf.data(), buf.data(), 1, ncclFloat32, ncclSum, parent, nullptr);
  CHECK(r != ncclSuccess, "the aborted parent accepted an allreduce");
  CHECK(ncclCommDestroy(small) == ncclSuccess, "ncclCommDestroy(new): %s", ncclGetLastError(small));
  CHECK(ncclCommDestroy(parent) == ncclSuccess, "ncclCommDestroy(parent)");
  std::printf("rank %d: passed\n", rank);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? std::atoi(argv[1]) : 4;
  const int dead = argc > 2 ? std::atoi(argv[2]) : 2;
  if (nranks < 3 || dead < 0 || dead >= nranks) {
    std::fprintf(stderr, "usage: %s [N >= 3 [DEAD in [0, N)]]\n", argv[0]);
    return 2;
  }
  // Bounded: a failing call may not wait long, nor a rendezvous; the whole run at most 120 s.
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  setenv("TUTTI_TIMEOUT", "30", 0);
  setenv("TUTTI_BOOTSTRAP_TIMEOUT", "30", 0);
  // Rank 0 makes the id and writes it into the pipe of every other rank.
  std::vector<int> rd(nranks, -1), wr(nranks, -1);
  for (int r = 1; r < nranks; ++r) {
    int p[2];
    if (pipe(p) != 0) return 1;
    rd[r] = p[0];
    wr[r] = p[1];
  }
  std::vector<pid_t> pids(nranks, -1);
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      alarm(120);  // bounded: a hang becomes a failure (SIGALRM)
      ncclUniqueId id;
      if (r == 0) {
        if (ncclGetUniqueId(&id) != ncclSuccess) _exit(1);
        for (int k = 1; k < nranks; ++k)
          if (write(wr[k], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) _exit(1);
      } else if (read(rd[r], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) {
        _exit(1);
      }
      for (int k = 1; k < nranks; ++k) {
        close(rd[k]);
        close(wr[k]);
      }
      _exit(runRank(r, nranks, dead, id));
    }
    pids[r] = pid;
  }
  for (int k = 1; k < nranks; ++k) {
    close(rd[k]);
    close(wr[k]);
  }
  int rc = 0;
  for (int r = 0; r < nranks; ++r) {
    int status = 0;
    if (waitpid(pids[r], &status, 0) != pids[r]) return 1;
    const bool ok = r == dead ? WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL
                              : WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
      std::fprintf(stderr, "rank %d ended with status %#x (%s)\n", r, status,
                   r == dead ? "expected death by SIGKILL" : "expected exit 0");
      rc = 1;
    }
  }
  std::printf("%s\n", rc == 0 ? "ok" : "FAILED");
  return rc;
}
