// File: tests/nccl/nccl_prog.cc
// An NCCL program that knows nothing of tutti: it is compiled against NVIDIA's nccl.h (or, with
// TUTTI_TEST_OWN_HEADER, tutti's) and runs the checks of nccl_suite.h on host memory.
//   nccl_prog fork N   forks N ranks; rank 0 calls ncclGetUniqueId and pipes the id to the others.
//   nccl_prog env      one rank of a launched job. Rank and size come from, in this order:
//                        Open MPI (OMPI_COMM_WORLD_*; id sent with MPI_Bcast, as nccl-tests does;
//                          only when built with WITH_MPI),
//                        torchrun (RANK, WORLD_SIZE; rank 0 serves the id on
//                        MASTER_ADDR:MASTER_PORT
//                          to the others, as torch's TCPStore does),
//                        tutti-run (TUTTI_RANK, TUTTI_NRANKS; every rank calls ncclGetUniqueId,
//                          which NCCL_COMM_ID / TUTTI_COMM_ID make identical on every rank).
// Options after the mode: --quick (collectives only). With TUTTI_EXPECT_LIB set, the program also
// checks that ncclGetVersion was resolved from a library whose path contains that text (proof that
// LD_LIBRARY_PATH swapped the library in). Exit status: 0 when every check passed.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "nccl_suite.h"

#ifdef WITH_MPI
#include <mpi.h>
#endif

namespace {

int envInt(const char* name, int def) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : def;
}

bool checkLibrary() {
  const char* want = std::getenv("TUTTI_EXPECT_LIB");
  if (!want) return true;
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&ncclGetVersion), &info) || !info.dli_fname) return false;
  if (std::string(info.dli_fname).find(want) == std::string::npos) {
    std::fprintf(stderr, "ncclGetVersion came from %s, not from %s\n", info.dli_fname, want);
    return false;
  }
  return true;
}

int runRank(int rank, int nranks, const ncclUniqueId& id, bool quick) {
  suite::Ctx c;
  c.rank = rank;
  c.nranks = nranks;
  c.quick = quick;
  if (!checkLibrary()) return 1;
  ncclResult_t r = ncclCommInitRank(&c.comm, nranks, id, rank);
  if (r != ncclSuccess) {
    std::fprintf(stderr, "rank %d: ncclCommInitRank failed: %s: %s\n", rank, ncclGetErrorString(r),
                 ncclGetLastError(nullptr));
    return 1;
  }
  int failures = suite::runAll(c);
  std::printf("rank %d/%d: %s (%d failed checks)\n", rank, nranks, failures ? "FAILED" : "passed",
              failures);
  std::fflush(stdout);
  return failures ? 1 : 0;
}

int forkMode(int nranks, bool quick) {
  // No launcher tells the library that every rank is local: keep the rendezvous on loopback.
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  std::vector<int> writeFds;
  std::vector<pid_t> pids;
  for (int r = 1; r < nranks; ++r) {
    int p[2];
    if (pipe(p) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) {
      close(p[1]);
      alarm(240);  // bounded: a hang becomes a failure
      ncclUniqueId id;
      if (read(p[0], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) _exit(1);
      _exit(runRank(r, nranks, id, quick));
    }
    close(p[0]);
    writeFds.push_back(p[1]);
    pids.push_back(pid);
  }
  alarm(240);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  for (int fd : writeFds) {
    if (write(fd, &id, sizeof id) != static_cast<ssize_t>(sizeof id)) return 1;
    close(fd);
  }
  int rc = runRank(0, nranks, id, quick);
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "rank process %d ended with status %d\n", static_cast<int>(pid), status);
      rc = 1;
    }
  }
  return rc;
}

// torch's TCPStore in miniature: rank 0 serves the id to nranks-1 connections.
bool storeExchange(int rank, int nranks, ncclUniqueId* id) {
  const char* host = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (!host || !port) return false;
  addrinfo hints{}, *ai = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, port, &hints, &ai) != 0) return false;
  bool ok = false;
  if (rank == 0) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s, ai->ai_addr, ai->ai_addrlen) == 0 && listen(s, 64) == 0) {
      ok = ncclGetUniqueId(id) == ncclSuccess;
      for (int i = 1; i < nranks && ok; ++i) {
        int c = accept(s, nullptr, nullptr);
        ok = c >= 0 && write(c, id, sizeof *id) == static_cast<ssize_t>(sizeof *id);
        if (c >= 0) close(c);
      }
    }
    close(s);
  } else {
    for (int attempt = 0; attempt < 300 && !ok; ++attempt) {  // 30 s
      int s = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(s, ai->ai_addr, ai->ai_addrlen) == 0) {
        size_t got = 0;
        while (got < sizeof *id) {
          ssize_t n = read(s, reinterpret_cast<char*>(id) + got, sizeof *id - got);
          if (n <= 0) break;
          got += static_cast<size_t>(n);
        }
        ok = got == sizeof *id;
      } else {
        usleep(100000);
      }
      close(s);
    }
  }
  freeaddrinfo(ai);
  return ok;
}

int envMode(int argc, char** argv, bool quick) {
  (void)argc;
  (void)argv;
  ncclUniqueId id;
#ifdef WITH_MPI
  if (std::getenv("OMPI_COMM_WORLD_RANK")) {
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    int rc = runRank(rank, nranks, id, quick);
    int worst = 0;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return worst;
  }
#endif
  if (std::getenv("RANK") && std::getenv("WORLD_SIZE")) {
    const int rank = envInt("RANK", 0), nranks = envInt("WORLD_SIZE", 1);
    if (!storeExchange(rank, nranks, &id)) {
      std::fprintf(stderr, "rank %d: could not exchange the id over MASTER_ADDR:MASTER_PORT\n",
                   rank);
      return 1;
    }
    return runRank(rank, nranks, id, quick);
  }
  if (std::getenv("TUTTI_RANK")) {
    const int rank = envInt("TUTTI_RANK", 0), nranks = envInt("TUTTI_NRANKS", 1);
    if (ncclGetUniqueId(&id) != ncclSuccess) {
      std::fprintf(stderr, "rank %d: ncclGetUniqueId failed: %s\n", rank,
                   ncclGetLastError(nullptr));
      return 1;
    }
    return runRank(rank, nranks, id, quick);
  }
  std::fprintf(stderr,
               "no launcher environment (OMPI_COMM_WORLD_RANK, RANK/WORLD_SIZE, "
               "TUTTI_RANK)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s fork N [--quick] | env [--quick]\n", argv[0]);
    return 2;
  }
  bool quick = false;
  for (int i = 2; i < argc; ++i) quick = quick || std::string(argv[i]) == "--quick";
  const std::string mode = argv[1];
  if (mode == "fork") return forkMode(argc > 2 ? std::max(1, std::atoi(argv[2])) : 4, quick);
  if (mode == "env") return envMode(argc, argv, quick);
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
