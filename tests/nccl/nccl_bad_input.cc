// File: tests/nccl/nccl_bad_input.cc
// Bad input through every NCCL collective and send/recv entry point of libnccl.so.2, through the
// NCCL API only (tutti's nccl.h), on 3 forked ranks: null buffers a call would touch on this rank,
// size_t counts whose byte size overflows, invalid datatypes, out-of-range and destroyed
// ncclRedOp_t, invalid roots and peers, partial overlaps of send and recv, destroyed and aborted
// communicator handles, and wrong ncclUniqueIds. Each must return ncclInvalidArgument or
// ncclInvalidUsage with a last-error text naming the call, the argument and its value, write
// nothing, and leave the communicator usable: after every rejected call all ranks run a correct
// ncclAllReduce and check it. Inside a group, a bad call cancels the group: nothing runs.
// Usage: nccl_bad_input [nranks]  (exit status 0 when every check passed).
#include <sys/wait.h>
#include <tutti/nccl.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

constexpr size_t kCount = 4;
int gRank = 0, gRanks = 1, gFailures = 0, gRejected = 0, gRound = 0;

void fail(const std::string& what, const std::string& why) {
  ++gFailures;
  if (gFailures <= 40) std::fprintf(stderr, "rank %d: %s: %s\n", gRank, what.c_str(), why.c_str());
}

// Every call of the table, with its NCCL name.
enum class Call {
  kAllReduce,
  kReduce,
  kBcast,
  kBroadcast,
  kReduceScatter,
  kAllGather,
  kAlltoAll,
  kGather,
  kScatter,
  kSend,
  kRecv
};
struct Entry {
  const char* api;
  Call call;
  bool reduces, rooted, p2p;
};
const Entry kEntries[] = {
    {"ncclAllReduce", Call::kAllReduce, true, false, false},
    {"ncclReduce", Call::kReduce, true, true, false},
    {"ncclBcast", Call::kBcast, false, true, false},
    {"ncclBroadcast", Call::kBroadcast, false, true, false},
    {"ncclReduceScatter", Call::kReduceScatter, true, false, false},
    {"ncclAllGather", Call::kAllGather, false, false, false},
    {"ncclAlltoAll", Call::kAlltoAll, false, false, false},
    {"ncclGather", Call::kGather, false, true, false},
    {"ncclScatter", Call::kScatter, false, true, false},
    {"ncclSend", Call::kSend, false, false, true},
    {"ncclRecv", Call::kRecv, false, false, true},
};

struct Args {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = kCount;
  ncclDataType_t dtype = ncclInt32;
  ncclRedOp_t op = ncclSum;
  int rootOrPeer = 0;
};

// Passes Args as a C caller would: dtype and op may hold values outside their enums on purpose,
// which a C++ load of the enum would treat as undefined (UBSan's enum check).
__attribute__((no_sanitize("enum"))) ncclResult_t run(const Entry& e, const Args& a,
                                                      ncclComm_t comm) {
  switch (e.call) {
    case Call::kAllReduce:
      return ncclAllReduce(a.send, a.recv, a.count, a.dtype, a.op, comm, nullptr);
    case Call::kReduce:
      return ncclReduce(a.send, a.recv, a.count, a.dtype, a.op, a.rootOrPeer, comm, nullptr);
    case Call::kBcast:
      return ncclBcast(a.recv, a.count, a.dtype, a.rootOrPeer, comm, nullptr);
    case Call::kBroadcast:
      return ncclBroadcast(a.send, a.recv, a.count, a.dtype, a.rootOrPeer, comm, nullptr);
    case Call::kReduceScatter:
      return ncclReduceScatter(a.send, a.recv, a.count, a.dtype, a.op, comm, nullptr);
    case Call::kAllGather:
      return ncclAllGather(a.send, a.recv, a.count, a.dtype, comm, nullptr);
    case Call::kAlltoAll:
      return ncclAlltoAll(a.send, a.recv, a.count, a.dtype, comm, nullptr);
    case Call::kGather:
      return ncclGather(a.send, a.recv, a.count, a.dtype, a.rootOrPeer, comm, nullptr);
    case Call::kScatter:
      return ncclScatter(a.send, a.recv, a.count, a.dtype, a.rootOrPeer, comm, nullptr);
    case Call::kSend:
      return ncclSend(a.send, a.count, a.dtype, a.rootOrPeer, comm, nullptr);
    case Call::kRecv:
      return ncclRecv(a.recv, a.count, a.dtype, a.rootOrPeer, comm, nullptr);
  }
  return ncclInternalError;
}

// Buffers with canaries; every case checks that the rejected call wrote nothing.
std::vector<int32_t> gSend, gRecv;
void fillCanary() {
  for (size_t i = 0; i < gSend.size(); ++i) {
    gSend[i] = static_cast<int32_t>(0x5EED0000 + i);
    gRecv[i] = static_cast<int32_t>(0x0CA40000 + i);
  }
}
bool canaryIntact() {
  for (size_t i = 0; i < gSend.size(); ++i)
    if (gSend[i] != static_cast<int32_t>(0x5EED0000 + i) ||
        gRecv[i] != static_cast<int32_t>(0x0CA40000 + i))
      return false;
  return true;
}

void expectBad(const std::string& what, ncclResult_t want, std::vector<std::string> needles,
               const std::function<ncclResult_t()>& badCall) {
  fillCanary();
  const ncclResult_t r = badCall();
  const std::string text = ncclGetLastError(nullptr);
  if (r != want)
    fail(what, "returned " + std::to_string(r) + " (" + ncclGetErrorString(r) + "), expected " +
                   std::to_string(want) + "; last error: " + text);
  for (const auto& n : needles)
    if (text.find(n) == std::string::npos)
      fail(what, "last error does not mention '" + n + "': " + text);
  if (!canaryIntact()) fail(what, "a buffer was written by the rejected call");
  ++gRejected;
}

// A correct allreduce on every rank; its result must be exact.
void healthy(ncclComm_t comm, const std::string& after) {
  ++gRound;
  int32_t in[kCount], out[kCount];
  for (size_t i = 0; i < kCount; ++i) {
    in[i] = static_cast<int32_t>((gRank + 1) * (i + 1) + gRound);
    out[i] = -1;
  }
  ncclResult_t r = ncclAllReduce(in, out, kCount, ncclInt32, ncclSum, comm, nullptr);
  if (r != ncclSuccess) {
    fail("allreduce after " + after,
         std::string(ncclGetErrorString(r)) + ": " + ncclGetLastError(nullptr));
    return;
  }
  for (size_t i = 0; i < kCount; ++i) {
    const int32_t want =
        static_cast<int32_t>((i + 1) * gRanks * (gRanks + 1) / 2 + gRanks * gRound);
    if (out[i] != want) {
      fail("allreduce after " + after, "element " + std::to_string(i) + " is " +
                                           std::to_string(out[i]) + ", expected " +
                                           std::to_string(want));
      return;
    }
  }
}

bool usesSend(const Entry& e, int root) {
  if (e.call == Call::kRecv) return false;
  if (e.call == Call::kBcast) return false;  // one buffer: checked as recvbuff
  return !((e.call == Call::kBroadcast || e.call == Call::kScatter) && gRank != root);
}
bool usesRecv(const Entry& e, int root) {
  if (e.call == Call::kSend) return false;
  return !((e.call == Call::kReduce || e.call == Call::kGather) && gRank != root);
}

void badArguments(ncclComm_t comm, const Entry& e) {
  const int n = gRanks, root = 1;
  const std::string api = e.api;
  auto base = [&] {
    Args a;
    a.send = gSend.data();
    a.recv = gRecv.data();
    a.rootOrPeer = e.p2p ? (gRank + 1) % n : root;
    return a;
  };
  // Issues the bad call where `here` holds (a rejected call communicates nothing); the check
  // allreduce runs on every rank.
  auto bad = [&](const std::string& what, ncclResult_t want, std::vector<std::string> needles,
                 const Args& a, bool here = true) {
    needles.insert(needles.begin(), api + ":");
    if (here) expectBad(api + ": " + what, want, needles, [&] { return run(e, a, comm); });
    healthy(comm, api + ": " + what);
  };
  {
    Args a = base();
    a.send = nullptr;
    bad("null sendbuff", ncclInvalidArgument, {"sendbuff is NULL", "count=4"}, a,
        usesSend(e, root));
    a = base();
    a.recv = nullptr;
    // ncclBcast's one buffer is its sendbuff on the root and its recvbuff elsewhere.
    bad("null recvbuff", ncclInvalidArgument,
        {e.call == Call::kBcast ? "buff is NULL" : "recvbuff is NULL", "count=4"}, a,
        usesRecv(e, root));
  }
  for (size_t count : {SIZE_MAX, SIZE_MAX / 2, SIZE_MAX / 4 + 1}) {
    Args a = base();
    a.count = count;
    bad("count " + std::to_string(count), ncclInvalidArgument,
        {"count " + std::to_string(count), "too large"}, a);
  }
  for (int dt : {static_cast<int>(ncclNumTypes), -1, 1000}) {
    Args a = base();
    a.dtype = static_cast<ncclDataType_t>(dt);
    bad("datatype " + std::to_string(dt), ncclInvalidArgument, {"datatype=" + std::to_string(dt)},
        a);
  }
  if (e.reduces) {
    for (int op : {static_cast<int>(ncclNumOps), static_cast<int>(ncclNumOps) + 17, -1,
                   static_cast<int>(ncclMaxRedOp)}) {
      Args a = base();
      a.op = static_cast<ncclRedOp_t>(op);
      bad("op " + std::to_string(op), ncclInvalidArgument, {"op=" + std::to_string(op)}, a);
    }
    // A premulsum operator after ncclRedOpDestroy.
    ncclRedOp_t pre;
    int32_t scalar = 2;
    if (ncclRedOpCreatePreMulSum(&pre, &scalar, ncclInt32, ncclScalarHostImmediate, comm) !=
        ncclSuccess) {
      fail(api, "ncclRedOpCreatePreMulSum failed");
    } else {
      ncclRedOpDestroy(pre, comm);
      Args a = base();
      a.op = pre;
      bad("destroyed premulsum op", ncclInvalidArgument,
          {"op=" + std::to_string(static_cast<int>(pre)), "destroyed"}, a);
    }
  }
  if (e.rooted) {
    for (int r : {-1, n, INT_MIN}) {
      Args a = base();
      a.rootOrPeer = r;
      bad("root " + std::to_string(r), ncclInvalidArgument, {"root " + std::to_string(r)}, a);
    }
  }
  if (e.p2p) {
    for (int p : {-1, n, INT_MIN}) {
      Args a = base();
      a.rootOrPeer = p;
      bad("peer " + std::to_string(p), ncclInvalidArgument,
          {"peer " + std::to_string(p), "peer=" + std::to_string(p)}, a);
    }
  }
  // Partial overlaps (the exact in-place forms are valid and run in validNeighbours).
  {
    Args a = base();
    const size_t blk = static_cast<size_t>(gRank) * kCount;
    bool applies = true;
    switch (e.call) {
      case Call::kAllReduce:
        a.send = gRecv.data() + 1;
        break;
      case Call::kReduce:
      case Call::kBroadcast:
        a.send = gRecv.data() + 1;
        applies = gRank == root;
        break;
      case Call::kAllGather:
        a.send = gRecv.data() + blk + 1;
        break;
      case Call::kReduceScatter:
        a.send = gRecv.data();
        a.recv = gRecv.data() + blk + 1;
        break;
      case Call::kAlltoAll:
        a.send = gRecv.data();
        break;
      case Call::kGather:
      case Call::kScatter:
        a.send = gRecv.data();
        applies = gRank == root;
        break;
      default:
        applies = false;  // ncclBcast has one buffer; send/recv one each
    }
    bad("partial overlap", ncclInvalidArgument, {"overlap", "sendbuff=0x"}, a, applies);
  }
  // Inside a group: the bad call fails at once, ncclGroupEnd returns the error, and the valid
  // call recorded before it in the group does not run.
  {
    int32_t in[kCount] = {1, 2, 3, 4}, out[kCount] = {-7, -7, -7, -7};
    ncclGroupStart();
    ncclResult_t first = ncclAllReduce(in, out, kCount, ncclInt32, ncclSum, comm, nullptr);
    Args a = base();
    a.dtype = static_cast<ncclDataType_t>(99);
    expectBad(api + ": datatype 99 in a group", ncclInvalidArgument, {api + ":", "datatype=99"},
              [&] { return run(e, a, comm); });
    ncclResult_t end = ncclGroupEnd();
    if (first != ncclSuccess) fail(api + " in a group", "the valid call was refused");
    if (end != ncclInvalidArgument)
      fail(api + " in a group", "ncclGroupEnd returned " + std::to_string(end));
    for (int32_t v : out)
      if (v != -7) fail(api + " in a group", "the cancelled group wrote its output");
    healthy(comm, api + " in a group");
  }
}

// Valid calls next to the bad ones: count 0 with null buffers, null buffers a rank does not use,
// and NCCL's exact in-place forms.
void validNeighbours(ncclComm_t comm) {
  for (const Entry& e : kEntries) {
    Args a;
    a.count = 0;
    a.rootOrPeer = e.p2p ? (gRank + 1) % gRanks : 0;
    ncclResult_t r = run(e, a, comm);
    if (r != ncclSuccess)
      fail(std::string(e.api) + ": count 0 with null buffers",
           std::string(ncclGetErrorString(r)) + ": " + ncclGetLastError(nullptr));
  }
  healthy(comm, "count 0 calls");
  const int root = 2 % gRanks, n = gRanks;
  auto value = [](int r, size_t i) { return static_cast<int32_t>(100 * r + i + 1); };
  std::vector<int32_t> buf(n * kCount), out(n * kCount, -1);
  auto expect = [&](const std::string& what, ncclResult_t r, const std::vector<int32_t>& got,
                    size_t count, const std::function<int32_t(size_t)>& want) {
    if (r != ncclSuccess) {
      fail(what, std::string(ncclGetErrorString(r)) + ": " + ncclGetLastError(nullptr));
      return;
    }
    for (size_t i = 0; i < count; ++i)
      if (got[i] != want(i)) {
        fail(what, "element " + std::to_string(i) + " is " + std::to_string(got[i]) +
                       ", expected " + std::to_string(want(i)));
        return;
      }
  };
  for (size_t i = 0; i < kCount; ++i) buf[i] = value(gRank, i);
  ncclResult_t r = ncclBroadcast(gRank == root ? buf.data() : nullptr, out.data(), kCount,
                                 ncclInt32, root, comm, nullptr);
  expect("ncclBroadcast: null sendbuff off the root", r, out, kCount,
         [&](size_t i) { return value(root, i); });
  std::fill(out.begin(), out.end(), -1);
  r = ncclReduce(buf.data(), gRank == root ? out.data() : nullptr, kCount, ncclInt32, ncclMax, root,
                 comm, nullptr);
  expect("ncclReduce: null recvbuff off the root", r, out, gRank == root ? kCount : 0,
         [&](size_t i) { return value(n - 1, i); });
  std::fill(out.begin(), out.end(), -1);
  r = ncclGather(buf.data(), gRank == root ? out.data() : nullptr, kCount, ncclInt32, root, comm,
                 nullptr);
  expect("ncclGather: null recvbuff off the root", r, out, gRank == root ? n * kCount : 0,
         [&](size_t i) { return value(static_cast<int>(i / kCount), i % kCount); });
  for (size_t i = 0; i < n * kCount; ++i) buf[i] = value(static_cast<int>(i / kCount), i);
  std::fill(out.begin(), out.end(), -1);
  r = ncclScatter(gRank == root ? buf.data() : nullptr, out.data(), kCount, ncclInt32, root, comm,
                  nullptr);
  expect("ncclScatter: null sendbuff off the root", r, out, kCount,
         [&](size_t i) { return value(gRank, gRank * kCount + i); });
  // In place.
  for (size_t i = 0; i < kCount; ++i) buf[i] = value(gRank, i);
  r = ncclAllReduce(buf.data(), buf.data(), kCount, ncclInt32, ncclSum, comm, nullptr);
  expect("ncclAllReduce in place", r, buf, kCount,
         [&](size_t i) { return static_cast<int32_t>(100 * n * (n - 1) / 2 + n * (i + 1)); });
  for (size_t i = 0; i < kCount; ++i) buf[i] = value(gRank, i);
  r = ncclBcast(buf.data(), kCount, ncclInt32, root, comm, nullptr);
  expect("ncclBcast", r, buf, kCount, [&](size_t i) { return value(root, i); });
  for (size_t i = 0; i < kCount; ++i) buf[i] = value(gRank, i);
  r = ncclReduce(buf.data(), buf.data(), kCount, ncclInt32, ncclMin, root, comm, nullptr);
  expect("ncclReduce in place", r, buf, gRank == root ? kCount : 0,
         [&](size_t i) { return value(0, i); });
  std::fill(buf.begin(), buf.end(), -1);
  for (size_t i = 0; i < kCount; ++i) buf[gRank * kCount + i] = value(gRank, i);
  r = ncclAllGather(buf.data() + gRank * kCount, buf.data(), kCount, ncclInt32, comm, nullptr);
  expect("ncclAllGather in place", r, buf, n * kCount,
         [&](size_t i) { return value(static_cast<int>(i / kCount), i % kCount); });
  for (size_t i = 0; i < n * kCount; ++i) buf[i] = value(gRank, i);
  r = ncclReduceScatter(buf.data(), buf.data() + gRank * kCount, kCount, ncclInt32, ncclSum, comm,
                        nullptr);
  std::vector<int32_t> mine(buf.begin() + gRank * kCount, buf.begin() + (gRank + 1) * kCount);
  expect("ncclReduceScatter in place", r, mine, kCount, [&](size_t i) {
    return static_cast<int32_t>(100 * n * (n - 1) / 2 + n * (gRank * kCount + i + 1));
  });
  healthy(comm, "valid neighbours");
}

// Handles that are no longer communicators, and ids that are not this job's.
void deadHandlesAndIds() {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fail("ncclGetUniqueId", ncclGetLastError(nullptr));
    return;
  }
  // Garbage bytes.
  ncclUniqueId junk;
  for (size_t i = 0; i < sizeof junk.internal; ++i)
    junk.internal[i] = static_cast<char>(i * 37 + 11);
  ncclComm_t c = nullptr;
  expectBad("ncclCommInitRank with garbage id", ncclInvalidArgument,
            {"ncclCommInitRank:", "commId"}, [&] { return ncclCommInitRank(&c, 1, junk, 0); });
  if (c) fail("ncclCommInitRank with garbage id", "returned a handle");
  // A well-formed id with a wrong secret (tutti's layout: magic, then the 64-bit secret). The
  // root refuses it and says so.
  ncclUniqueId wrong = id;
  for (int i = 8; i < 16; ++i) wrong.internal[i] = static_cast<char>(wrong.internal[i] ^ 0x5a);
  expectBad("ncclCommInitRank with a wrong secret", ncclInvalidUsage, {"another secret"},
            [&] { return ncclCommInitRank(&c, 1, wrong, 0); });
  // The right id still works; then destroy and use the handle.
  if (ncclCommInitRank(&c, 1, id, 0) != ncclSuccess) {
    fail("ncclCommInitRank", ncclGetLastError(nullptr));
    return;
  }
  ncclComm_t aborted = nullptr;
  ncclUniqueId id2;
  if (ncclGetUniqueId(&id2) != ncclSuccess ||
      ncclCommInitRank(&aborted, 1, id2, 0) != ncclSuccess) {
    fail("second ncclCommInitRank", ncclGetLastError(nullptr));
    return;
  }
  if (ncclCommDestroy(c) != ncclSuccess) fail("ncclCommDestroy", ncclGetLastError(nullptr));
  if (ncclCommAbort(aborted) != ncclSuccess) fail("ncclCommAbort", ncclGetLastError(nullptr));
  for (ncclComm_t dead : {c, aborted}) {
    const std::string how = dead == c ? "destroyed" : "aborted";
    for (const Entry& e : kEntries) {
      Args a;
      a.send = gSend.data();
      a.recv = gRecv.data();
      a.rootOrPeer = 0;
      expectBad(std::string(e.api) + " on a " + how + " comm", ncclInvalidArgument,
                {std::string(e.api) + ":", "not a live communicator"},
                [&] { return run(e, a, dead); });
    }
    expectBad("ncclCommDestroy of a " + how + " comm", ncclInvalidArgument,
              {"not a live communicator"}, [&] { return ncclCommDestroy(dead); });
    int count = 0;
    expectBad("ncclCommCount of a " + how + " comm", ncclInvalidArgument,
              {"not a live communicator"}, [&] { return ncclCommCount(dead, &count); });
  }
  Args a;
  expectBad("ncclAllReduce with comm NULL", ncclInvalidArgument, {"comm is NULL"},
            [&] { return run(kEntries[0], a, nullptr); });
}

int runRank(int rank, int nranks, const ncclUniqueId& id) {
  gRank = rank;
  gRanks = nranks;
  gSend.resize(4 * nranks * kCount);
  gRecv.resize(4 * nranks * kCount);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
    std::fprintf(stderr, "rank %d: init failed: %s\n", rank, ncclGetLastError(nullptr));
    return 1;
  }
  for (const Entry& e : kEntries) badArguments(comm, e);
  validNeighbours(comm);
  deadHandlesAndIds();
  healthy(comm, "everything");
  ncclCommDestroy(comm);
  if (gRejected < 150) fail("coverage", "only " + std::to_string(gRejected) + " cases");
  std::printf("rank %d/%d: %d calls rejected, %d failed checks\n", rank, nranks, gRejected,
              gFailures);
  std::fflush(stdout);  // children leave with _exit
  return gFailures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? std::atoi(argv[1]) : 3;
  if (nranks < 3) {
    std::fprintf(stderr, "usage: nccl_bad_input [nranks >= 3]\n");
    return 2;
  }
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
  setenv("TUTTI_BOOTSTRAP_TIMEOUT", "30", 0);
  std::vector<int> fds;
  std::vector<pid_t> pids;
  for (int r = 1; r < nranks; ++r) {
    int p[2];
    if (pipe(p) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) {
      close(p[1]);
      alarm(240);  // a hang becomes a failure
      ncclUniqueId id;
      if (read(p[0], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) _exit(1);
      _exit(runRank(r, nranks, id));
    }
    close(p[0]);
    fds.push_back(p[1]);
    pids.push_back(pid);
  }
  alarm(240);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  for (int fd : fds) {
    if (write(fd, &id, sizeof id) != static_cast<ssize_t>(sizeof id)) return 1;
    close(fd);
  }
  int rc = runRank(0, nranks, id);
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  return rc;
}
