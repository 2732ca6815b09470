// File: tests/unit/peer_process_test.cc
// The peer executor (core/device/peer.h) with ranks in several processes, without a GPU: forked
// processes, each holding one or more ranks as threads, on the emulated device of
// tests/unit/emu_peer_device.h, whose device memory is shared memory that the other processes
// map through exportMemory/openMemory as CUDA IPC maps a cudaMalloc allocation. The ranks'
// allgather (the communicator's, in core/device/path.cc) is a board in shared memory made before
// the fork. Checked: every collective against the host engine with 2 processes of one rank,
// 2 processes of 2 ranks (threads' arenas as pointers, the other process's mapped) and 3
// processes; the other processes' arenas mapped once per process, and unmapped when the group
// goes, and a process's arenas freed only after the others unmapped them; an abort in one process
// releasing the kernels of the others and failing their later calls with its reason; ranks of one
// process on two devices, or arenas laid out differently, refused on every rank; windows shared
// across processes (sharePeerWindow) read in place, and a call with a window on one rank only
// failing on the rank that expected to read in place.
#include <pthread.h>
#include <sys/mman.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/device/executor.h"
#include "tests/unit/emu_peer_device.h"
#include "tools/launch/launcher.h"

namespace tutti::device {
namespace {

using namespace emu;          // NOLINT: the emulated device and its helpers
using namespace tutti::test;  // NOLINT: the reference helpers

// The ranks' allgather: slots and a barrier in shared memory, mapped before the fork.
class Board {
 public:
  static constexpr size_t kSlotBytes = 256;

  explicit Board(int nranks) : nranks_(nranks) {
    void* p =
        mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    shared_ = new (p) Shared;
    pthread_barrierattr_t attr;
    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&shared_->barrier, &attr, static_cast<unsigned>(nranks));
    pthread_barrierattr_destroy(&attr);
  }
  ~Board() {
    pthread_barrier_destroy(&shared_->barrier);
    munmap(shared_, sizeof(Shared));
  }
  Board(const Board&) = delete;
  Board& operator=(const Board&) = delete;

  PeerAllgather allgather(int rank) {
    return [this, rank](const void* mine, void* all, size_t bytes) -> Status {
      if (bytes > kSlotBytes) return invalidUsage("board: {} bytes per rank", bytes);
      std::memcpy(shared_->slots[rank], mine, bytes);
      pthread_barrier_wait(&shared_->barrier);
      for (int q = 0; q < nranks_; ++q)
        std::memcpy(static_cast<unsigned char*>(all) + q * bytes, shared_->slots[q], bytes);
      pthread_barrier_wait(&shared_->barrier);
      return Status::ok();
    };
  }

 private:
  struct Shared {
    pthread_barrier_t barrier;
    unsigned char slots[kernels::peer::kMaxRanks][kSlotBytes];
  };
  const int nranks_;
  Shared* shared_ = nullptr;
};

// One rank of a process: its group, executor, owner and stream, after join and connect.
struct RankState {
  std::shared_ptr<PeerGroup> group;
  std::unique_ptr<FakeOwner> owner;
  std::unique_ptr<Executor> executor;
  std::unique_ptr<EmuStream> stream;
  PeerAllgather allgather;  // over every rank: the board's
  Status setUp;             // join and connect
};

// Joins and connects rank `rank` of `nranks` on `device` (process ids exchanged over the board,
// as core/device/path.cc does over the communicator, and the join agreed on).
Status setUp(RankState& s, EmuPeerDevice& dev, uint64_t key, int rank, int nranks, int device,
             const kernels::peer::ArenaConfig& config) {
  const int64_t self = getpid();
  std::vector<int64_t> pids(nranks);
  TUTTI_TRY(s.allgather(&self, pids.data(), sizeof self));
  auto g = joinPeerGroup(key, nranks, rank, device, &dev, config, pids);
  const int32_t ok = g.isOk() ? 1 : 0;
  std::vector<int32_t> oks(nranks);
  TUTTI_TRY(s.allgather(&ok, oks.data(), sizeof ok));
  TUTTI_TRY(g.status());
  for (int q = 0; q < nranks; ++q)
    if (!oks[q]) return internalError("rank {} failed to join", q);
  s.group = std::move(g).value();
  TUTTI_TRY(connectPeerGroup(*s.group, rank, s.allgather));
  s.owner = std::make_unique<FakeOwner>(rank, nranks);
  s.executor = makePeerExecutor(s.group, rank);
  s.stream = std::make_unique<EmuStream>(static_cast<uint32_t>(key + rank));
  return Status::ok();
}

// Submits this rank's part of a call and waits for its stream: the submit's status.
Status submit(RankState& s, std::vector<BatchOp>& ops) {
  for (BatchOp& op : ops) op.stream = s.stream.get();
  const RankBatch rb{s.owner.get(), &ops, nullptr};
  Status st = s.executor->submit(std::span(&rb, 1));
  s.stream->synchronize();
  return st;
}

std::string kernelError(EmuPeerDevice& dev) {
  std::lock_guard<std::mutex> lock(dev.mu_);
  return dev.kernelErrors_.empty() ? "" : dev.kernelErrors_.front();
}

// A window of `bytes` at 4 KiB into a device allocation of this rank's (so that the window
// starts at an offset in the allocation CUDA IPC shares).
struct DeviceWindow {
  EmuPeerDevice* dev = nullptr;
  void* allocation = nullptr;
  unsigned char* base = nullptr;
  size_t bytes = 0;
  ~DeviceWindow() {
    if (allocation) dev->freeDevice(allocation);
  }
};

Status allocateWindow(DeviceWindow& w, EmuPeerDevice& dev, size_t bytes) {
  TUTTI_TRY_ASSIGN(void* a, dev.allocDevice(bytes + 8192));
  w.dev = &dev;
  w.allocation = a;
  w.base = static_cast<unsigned char*>(a) + 4096;
  w.bytes = bytes;
  return Status::ok();
}

// This rank's part of a call, checked against the engine: "" or what went wrong. With `w`, the
// rank's buffers lie in that window (copied in before, out after, and scribbled over so that a
// peer still reading would get wrong bits); else where the reference put them.
std::string runCall(RankState& s, EmuPeerDevice& dev, Coll coll, size_t count, DataType dtype,
                    int root, bool inPlace, int rank, int nranks, const DeviceWindow* w = nullptr) {
  Reference ref = reference(CollShape{coll, 0, nranks, count, dtype, RedOp::kSum, root, inPlace});
  if (!ref.err.empty()) return ref.err;
  UserRank& u = ref.users[rank];
  std::vector<BatchOp> ops{collOp(coll, u, count, dtype, RedOp::kSum, root, "test")};
  if (w) {
    if (u.mem.size() > w->bytes) return fmt::format("{} bytes exceed the window", u.mem.size());
    std::memcpy(w->base, u.mem.data(), u.mem.size());
    ops[0].send = w->base + u.sendOff;
    ops[0].recv = w->base + u.recvOff;
  }
  if (Status st = submit(s, ops); !st.isOk()) return "submit: " + st.message();
  if (std::string k = kernelError(dev); !k.empty()) return "kernel: " + k;
  if (w) {
    std::memcpy(u.mem.data(), w->base, u.mem.size());
    std::memset(w->base, 0xA5, w->bytes);
  }
  std::string err = compareMemory({u}, {ref.want[rank]}, dtype);
  return err.empty() ? err : fmt::format("rank {}: {}", rank, err);
}

// Forks `procs` processes of `perProcess` ranks each (rank = process * perProcess + thread, on
// device devices[rank]) and runs body(state, dev, rank, nranks) on every rank's thread after
// setUp; a body returns "" or what went wrong. Then checks, in each process, that the group
// mapped every other process's arena once while it lived (when `connected`) and unmapped them
// and the shared state when it went. REQUIREs that every rank passed. Every rank's arena is
// smallArena's, but rank `otherSlots`'s has 8 slots per FIFO instead of 4. `env`: variables
// every process sets before its ranks start (the executor reads them at its first use).
template <typename Body>
void runProcesses(int procs, int perProcess, uint64_t key, const std::vector<int>& devices,
                  bool connected, Body body, int otherSlots = -1,
                  const std::vector<std::pair<const char*, const char*>>& env = {}) {
  const int nranks = procs * perProcess;
  Board board(nranks);
  launch::LaunchOptions opts;
  opts.nranks = procs;
  opts.timeout = std::chrono::seconds(120);
  opts.captureOutput = true;
  auto outcomes = launch::runRanks(opts, [&](int proc, int) -> int {
    for (const auto& [name, value] : env) setenv(name, value, 1);
    EmuPeerDevice dev;
    std::vector<std::string> errors(perProcess + 1);
    {
      std::vector<RankState> states(perProcess);
      std::vector<std::thread> threads;
      for (int t = 0; t < perProcess; ++t)
        threads.emplace_back([&, t] {
          const int rank = proc * perProcess + t;
          states[t].allgather = board.allgather(rank);
          kernels::peer::ArenaConfig config = smallArena(nranks);
          if (rank == otherSlots) config.slots = 8;
          states[t].setUp = setUp(states[t], dev, key, rank, nranks, devices[rank], config);
          errors[t] = body(states[t], dev, rank, nranks);
          const int32_t done = 1;  // every rank done before any group goes
          std::vector<int32_t> all(nranks);
          (void)states[t].allgather(&done, all.data(), sizeof done);
        });
      for (std::thread& th : threads) th.join();
      if (connected && dev.openedCount() != static_cast<size_t>(nranks - perProcess))
        errors[perProcess] = fmt::format("process {}: {} arenas of other processes mapped, not {}",
                                         proc, dev.openedCount(), nranks - perProcess);
    }
    if (errors[perProcess].empty() && (dev.openedCount() != 0 || dev.registered_.load() != 0))
      errors[perProcess] = fmt::format("process {}: {} arenas and {} registrations left", proc,
                                       dev.openedCount(), dev.registered_.load());
    int failed = 0;
    for (const std::string& e : errors)
      if (!e.empty()) {
        std::fprintf(stderr, "%s\n", e.c_str());
        ++failed;
      }
    return failed == 0 ? 0 : 1;
  });
  const bool ok = launch::allPassed(outcomes);
  if (!ok)
    for (const auto& o : outcomes) UNSCOPED_INFO(launch::describe(o) << "\n" << o.output);
  REQUIRE(ok);
}

// Every collective at a few sizes (one FIFO slot, many wraps of the slots, several channels),
// in and out of place, roots 0 and the last rank.
std::string everyCollective(RankState& s, EmuPeerDevice& dev, int rank, int nranks) {
  if (!s.setUp.isOk()) return fmt::format("rank {}: set up: {}", rank, s.setUp.message());
  for (Coll coll : kColls)
    for (size_t count : {size_t{1}, size_t{37}, size_t{5000}})
      for (bool inPlace : {false, true}) {
        if (inPlace && (!inPlaceDefined(coll) || coll == Coll::kAllToAll)) continue;
        for (int root : {0, nranks - 1}) {
          if (root != 0 && !rooted(coll)) continue;
          const DataType dtype = reducing(coll) ? DataType::kInt32 : DataType::kFloat32;
          std::string err = runCall(s, dev, coll, count, dtype, root, inPlace, rank, nranks);
          if (!err.empty())
            return fmt::format("{} count={} root={}{}: {}", collName(coll), count, root,
                               inPlace ? " in place" : "", err);
        }
      }
  return "";
}

// Rank 2 never calls; ranks 0 and 1 wait in their kernels until rank 2 aborts; every later call
// of every rank fails with the abort's reason.
std::string abortByRank2(RankState& s, EmuPeerDevice& dev, int rank, int nranks) {
  if (!s.setUp.isOk()) return "set up: " + s.setUp.message();
  Reference ref = reference(
      CollShape{Coll::kAllReduce, 0, nranks, 1000, DataType::kFloat32, RedOp::kSum, 0, false});
  std::vector<BatchOp> ops{collOp(Coll::kAllReduce, ref.users[rank], 1000, DataType::kFloat32,
                                  RedOp::kSum, 0, "ncclAllReduce")};
  if (rank == 2) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    s.executor->fail(invalidUsage("rank 2 aborted"), true);  // ncclCommAbort
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    if (Status st = submit(s, ops); !st.isOk()) return "submit: " + st.message();
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(2))
      return "the abort took over 2 s";
    if (kernelError(dev).find("aborted") == std::string::npos)
      return "kernel error: '" + kernelError(dev) + "', not an abort";
  }
  std::vector<int32_t> all(nranks);
  const int32_t one = 1;
  (void)s.allgather(&one, all.data(), sizeof one);
  Status again = submit(s, ops);  // found in the shared state, whichever process aborted
  if (again.code() != Code::kInvalidUsage ||
      again.message().find("rank 2 aborted") == std::string::npos)
    return "the call after the abort: " + again.toString();
  return "";
}

// Rank 1's process keeps its group 500 ms longer; rank 0's process, whose group goes first, frees
// its arena only once rank 1's has unmapped it: its group's destruction waits that long.
std::string lastToUnmap(RankState& s, EmuPeerDevice& dev, int rank, int nranks) {
  if (std::string err =
          runCall(s, dev, Coll::kAllReduce, 3000, DataType::kInt32, 0, false, rank, nranks);
      !err.empty())
    return err;
  s.executor.reset();  // the group's last user in this process but s.group
  if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto t0 = std::chrono::steady_clock::now();
  s.group.reset();
  const auto waited = std::chrono::steady_clock::now() - t0;
  if (rank == 0 && waited < std::chrono::milliseconds(400))
    return fmt::format("rank 0's group went after {} ms, before rank 1 unmapped its arena",
                       std::chrono::duration_cast<std::chrono::milliseconds>(waited).count());
  if (waited > std::chrono::seconds(5)) return "a group took over 5 s to go";
  return "";
}

// Process 0's ranks (on two devices) say why they cannot connect; process 1's name rank 0.
std::string refusedTwoDevices(RankState& s, EmuPeerDevice&, int rank, int) {
  const std::string m = s.setUp.message();
  const bool why = s.setUp.code() == Code::kInvalidUsage &&
                   m.find("one device per process") != std::string::npos;
  const bool told = m.find("rank 0 could not share its arena") != std::string::npos;
  if (s.setUp.isOk() || (rank < 2 && !why) || (rank >= 2 && !told))
    return fmt::format("rank {}: {}", rank, s.setUp.toString());
  return "";
}

// Every rank is told that rank 1 (or, on rank 1, rank 0) has other settings.
std::string otherSettings(RankState& s, EmuPeerDevice&, int rank, int) {
  const std::string named = rank == 1 ? "rank 0 runs" : "rank 1 runs";
  if (s.setUp.code() != Code::kInvalidUsage ||
      s.setUp.message().find(named + " the peer executor with other settings") == std::string::npos)
    return fmt::format("rank {}: {}", rank, s.setUp.toString());
  return "";
}

// Every rank shares a window of device memory; collectives whose buffers lie in the windows
// read their peers' buffers in place (direct programs) and are exact; a window one rank cannot
// share (host memory) stays local on every rank; unsharing unmaps the others' windows.
std::string windows(RankState& s, EmuPeerDevice& dev, int rank, int nranks) {
  if (!s.setUp.isOk()) return fmt::format("rank {}: set up: {}", rank, s.setUp.message());
  DeviceWindow w;
  if (Status st = allocateWindow(w, dev, 1 << 20); !st.isOk()) return st.message();
  const size_t arenas = static_cast<size_t>(nranks - 1);
  if (Status st = sharePeerWindow(*s.group, rank, w.base, w.bytes, s.allgather); !st.isOk())
    return "share: " + st.message();
  if (dev.openedCount() != 2 * arenas)
    return fmt::format("{} mappings with a window shared, not {}", dev.openedCount(), 2 * arenas);
  for (Coll coll :
       {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast, Coll::kReduce})
    for (size_t count : {size_t{37}, size_t{5000}})
      for (bool inPlace : {false, true})
        for (int root : {0, nranks - 1}) {
          if (root != 0 && !rooted(coll)) continue;
          const DataType dtype = reducing(coll) ? DataType::kInt32 : DataType::kFloat32;
          std::string err = runCall(s, dev, coll, count, dtype, root, inPlace, rank, nranks, &w);
          if (!err.empty())
            return fmt::format("{} count={} root={}{}: {}", collName(coll), count, root,
                               inPlace ? " in place" : "", err);
        }
  const int direct = dev.directLaunches_.load();
  if (direct == 0) return "no call ran with direct messages";
  // Rank 1 offers host memory, which CUDA IPC cannot share: the window is shared nowhere.
  std::vector<unsigned char> host(1 << 16);
  void* second = rank == 1 ? static_cast<void*>(host.data()) : w.base + (w.bytes - host.size());
  if (Status st = sharePeerWindow(*s.group, rank, second, host.size(), s.allgather); !st.isOk())
    return "share (host memory on rank 1): " + st.message();
  if (dev.openedCount() != 2 * arenas)
    return fmt::format("{} mappings after a window rank 1 could not share", dev.openedCount());
  if (Status st = unsharePeerWindow(*s.group, rank, w.base, s.allgather); !st.isOk())
    return "unshare: " + st.message();
  if (dev.openedCount() != arenas)
    return fmt::format("{} mappings after unsharing, not {}", dev.openedCount(), arenas);
  // Without a shared window the same calls take the FIFOs.
  std::string err =
      runCall(s, dev, Coll::kAllReduce, 5000, DataType::kInt32, 0, false, rank, nranks, &w);
  if (!err.empty()) return "after unsharing: " + err;
  if (dev.directLaunches_.load() != direct) return "a direct program ran after unsharing";
  return "";
}

// Rank 1's buffers lie in its window, rank 0's do not: rank 1 reads rank 0's messages in place,
// rank 0 sent them through the FIFO; rank 1's kernel says so instead of reading other memory.
std::string windowOnOneRank(RankState& s, EmuPeerDevice& dev, int rank, int nranks) {
  if (!s.setUp.isOk()) return fmt::format("rank {}: set up: {}", rank, s.setUp.message());
  DeviceWindow w;
  if (Status st = allocateWindow(w, dev, 1 << 20); !st.isOk()) return st.message();
  if (Status st = sharePeerWindow(*s.group, rank, w.base, w.bytes, s.allgather); !st.isOk())
    return "share: " + st.message();
  const std::string err = runCall(s, dev, Coll::kAllGather, 20000, DataType::kFloat32, 0, false,
                                  rank, nranks, rank == 0 ? nullptr : &w);
  if (rank == 1 &&
      err.find("peer 0 did not run this call with direct messages") == std::string::npos)
    return "rank 1: " + (err.empty() ? std::string("no error") : err);
  return "";
}

}  // namespace

TEST_CASE("peer executor, ranks in processes: windows are read in place", "[peer]") {
  const std::vector<std::pair<const char*, const char*>> simple{{"TUTTI_PEER_LL_BYTES", "0"}};
  SECTION("2 processes") { runProcesses(2, 1, 0x2008, {0, 1}, true, windows, -1, simple); }
  SECTION("3 processes") { runProcesses(3, 1, 0x2009, {0, 1, 2}, true, windows, -1, simple); }
}

TEST_CASE("peer executor, ranks in processes: a window on one rank only fails the call", "[peer]") {
  runProcesses(2, 1, 0x200a, {0, 1}, false, windowOnOneRank, -1,
               {{"TUTTI_PEER_LL_BYTES", "0"}, {"TUTTI_TIMEOUT", "2"}});
}

TEST_CASE("peer executor, ranks in processes: every collective, exact", "[peer]") {
  SECTION("2 processes of 1 rank") { runProcesses(2, 1, 0x2001, {0, 1}, true, everyCollective); }
  SECTION("2 processes of 2 ranks") {
    runProcesses(2, 2, 0x2002, {0, 0, 1, 1}, true, everyCollective);
  }
  SECTION("3 processes of 1 rank") { runProcesses(3, 1, 0x2003, {0, 1, 2}, true, everyCollective); }
}

TEST_CASE("peer executor, ranks in processes: an abort in one releases the others", "[peer]") {
  runProcesses(3, 1, 0x2004, {0, 1, 2}, true, abortByRank2);
}

TEST_CASE("peer executor, ranks in processes: arenas are freed after the others unmapped them",
          "[peer]") {
  runProcesses(2, 1, 0x2006, {0, 1}, false, lastToUnmap);
}

TEST_CASE("peer executor, ranks in processes: arenas laid out differently are refused", "[peer]") {
  runProcesses(3, 1, 0x2007, {0, 1, 2}, false, otherSettings, /*otherSlots=*/1);
}

TEST_CASE("peer executor, ranks in processes: one process on two devices is refused", "[peer]") {
  runProcesses(2, 2, 0x2005, {0, 1, 2, 2}, false, refusedTwoDevices);
}

}  // namespace tutti::device
