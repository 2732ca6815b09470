// File: core/device/peer.cc
// The peer executor (see peer.h): the group of a communicator's ranks in this process, their
// arenas and program areas, the other processes' arenas, the choice of algorithm, protocol and
// channels per call shape, the program cache, and the launches.
#include "core/device/peer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <thread>
#include <tuple>

#include "base/arg_check.h"
#include "base/env.h"
#include "base/log.h"
#include "base/shared_memory.h"
#include "core/batch.h"
#include "core/device/compose.h"
#include "core/device/executor.h"
#include "core/device/peer_compile.h"
#include "kernels/peer_host.h"

namespace tutti::device {

namespace peer = kernels::peer;

namespace {

TUTTI_PARAM_INT(kPeerChannels, "TUTTI_PEER_CHANNELS", nullptr, "NCCL", 8,
                "peer executor (TUTTI_DEVICE_PATH=peer): channels (CTAs) per rank at most");
TUTTI_PARAM_INT(kPeerScratchBytes, "TUTTI_PEER_SCRATCH_BYTES", nullptr, "NCCL", 4 << 20,
                "peer executor: scratch bytes per channel in each rank's arena");
TUTTI_PARAM_INT(kPeerDirect, "TUTTI_PEER_DIRECT", nullptr, "NCCL", 1,
                "peer executor: 1: where the ranks are threads of one process on one device, a "
                "receiver reads a peer's send buffer in place where the schedule allows "
                "(kernels/peer_program.h's direct messages); 0: every message through the FIFOs");
TUTTI_PARAM_INT(kPeerLlBytes, "TUTTI_PEER_LL_BYTES", nullptr, "NCCL", 64 << 10,
                "peer executor: calls up to this size (nccl-tests' size) use the low-latency "
                "protocol");
TUTTI_PARAM_INT(kPeerProgramBytes, "TUTTI_PEER_PROGRAM_BYTES", nullptr, "NCCL", 4 << 20,
                "peer executor: device memory per rank for compiled programs (one per call "
                "shape)");

constexpr uint64_t kBytesPerChannel = 512 << 10;

// The algorithms tried for a shape, best first: TUTTI_ALGO's alone when it names one; else, up
// to 64 KiB per rank, those with the fewest rounds (every round waits for a peer's message),
// and above, the bandwidth-optimal ones (every byte crosses a link the fewest times).
std::vector<std::string> candidates(const algo::CollShape& s) {
  if (std::string r = requestedAlgorithm(s.coll); !r.empty()) return {r};
  const bool small = s.count * dataTypeBytes(s.dtype) <= (64 << 10);
  switch (s.coll) {
    case Coll::kAllReduce:
      return small ? std::vector<std::string>{"one_shot", "recursive_doubling", "ring"}
                   : std::vector<std::string>{"ring", "rabenseifner", "two_shot"};
    case Coll::kAllGather:
      return small ? std::vector<std::string>{"direct", "recursive_doubling", "ring"}
                   : std::vector<std::string>{"ring", "direct"};
    case Coll::kReduceScatter:
      return small ? std::vector<std::string>{"pairwise", "recursive_halving", "ring"}
                   : std::vector<std::string>{"ring", "pairwise"};
    case Coll::kBroadcast:
      return small ? std::vector<std::string>{"binomial", "chain"}
                   : std::vector<std::string>{"chain", "scatter_allgather", "binomial"};
    case Coll::kReduce:
      return small ? std::vector<std::string>{"binomial", "chain"}
                   : std::vector<std::string>{"chain", "reducescatter_gather", "binomial"};
    case Coll::kAllToAll:
      return {"pairwise", "bruck"};
    default:  // gather, scatter
      return {"direct", "binomial"};
  }
}

bool inPlaceOn(const BatchOp& op, int rank, int nranks) {
  return detail::inPlaceOf(op.callArgs(), rank, nranks);
}

constexpr size_t kSharedBytes = 4096;  // PeerGroup::SharedState's page

}  // namespace

peer::ArenaConfig peerArenaConfig(int nranks) {
  peer::ArenaConfig c;
  c.nranks = nranks;
  c.channels =
      static_cast<int32_t>(std::clamp<int64_t>(kPeerChannels.get(), 1, peer::kMaxChannels));
  c.slots = 8;
  c.slotBytes = 128 << 10;
  c.llSlots = 8;
  c.llLines = 512;  // a line per thread of a 512-thread CTA: 4 KiB of data per slot
  c.scratchBytes =
      peer::alignUp(static_cast<uint64_t>(std::max<int64_t>(kPeerScratchBytes.get(), 0)), 256);
  return c;
}

bool peerEligible(const std::vector<BatchOp>& ops, int rank, int nranks) {
  if (ops.empty()) return false;
  for (const BatchOp& op : ops) {
    if (op.kind == BatchOp::Kind::kTask || op.stream != ops.front().stream) return false;
    if (op.kind == BatchOp::Kind::kColl && op.preMul && inPlaceOn(op, rank, nranks)) return false;
    const auto [in, out] = op.ioBytes(rank, nranks);
    if ((in > 0 && !op.sendReachable) || (out > 0 && !op.recvReachable)) return false;
  }
  return true;
}

class PeerGroup {
 public:
  // What every rank of a group shares in host memory: the kernels' abort flag (the GPU reads it)
  // and the group's failure, which every rank reports from its next call on. In mapped host memory
  // when the ranks are threads of one process; in shared memory, mapped by every process and
  // registered for its device, when they are not.
  struct SharedState {
    uint32_t abort = 0;   // peer::Launch::abortFlag
    uint32_t failed = 0;  // 0; 1 while `code` and `why` are written; 2 once they are
    int32_t code = 0;     // the failure's Code
    char why[948] = {};
    // Rank q's process has closed its mappings of the other processes' arenas (a group spanning
    // processes, when it goes): each process frees its own arenas only after that.
    uint32_t closed[peer::kMaxRanks] = {};
  };
  static_assert(sizeof(SharedState) <= kSharedBytes);

  // A call shape: (coll, count, dtype, op, root, in place, premulsum, the scalar's bytes, direct).
  using Key = std::tuple<int, size_t, int, int, int, bool, bool, int64_t, bool>;

  // A window of a rank's that the other processes mapped (sharePeerWindow).
  struct Window {
    uint64_t base = 0, bytes = 0;
    int slot = 0;  // its entries' index among the rank's in every process's WindowMap table
  };

  struct Placed {
    uint64_t offset = 0;  // in the rank's program area
    peer::ProgramHeader header;
    std::string algorithm;
  };

  struct Rank {
    bool local = true;  // a thread of this process (else the fields below stay empty)
    int device = -1;
    bool direct = false;  // its programs read peers' buffers in place (set by connect)
    unsigned char* arena = nullptr;              // device memory of `device`
    unsigned char* programs = nullptr;           // device memory of `device`
    unsigned char* mirror = nullptr;             // mapped host memory: what `programs` holds
    peer::ErrorRecord* error = nullptr;          // mapped host memory
    uint64_t used = 0;                           // bytes of `programs` placed
    std::map<Key, Placed> cache;                 // collectives
    std::map<std::string, Placed> messageCache;  // batches of sends and receives
    std::vector<Window> windows;                 // shared with the other processes
    std::set<Stream> streams;  // launched on since the last quiesce (windows shared only)
    std::mutex mu;  // the above: one thread per rank at a time, but a group may span threads
  };

  PeerGroup(uint64_t key, int nranks, PeerDevice* dev, const peer::ArenaConfig& config,
            const std::vector<int64_t>& pids)
      : key_(key),
        nranks_(nranks),
        dev_(dev),
        layout_(peer::arenaLayout(config)),
        programBytes_(peer::alignUp(
            static_cast<uint64_t>(std::max<int64_t>(kPeerProgramBytes.get(), 4096)), 256)),
        arenas_(nranks, nullptr) {
    for (int r = 0; r < nranks; ++r) {
      ranks_.push_back(std::make_unique<Rank>());
      ranks_.back()->local = inThisProcess(pids, r);
      spansProcesses_ = spansProcesses_ || !ranks_.back()->local;
    }
    // Windows are shared when every rank is a process of its own: then no thread drives two
    // ranks of the group, whose collective window calls would wait for each other.
    windowsShareable_ = spansProcesses_ &&
                        std::set<int64_t>(pids.begin(), pids.end()).size() == pids.size();
    for (int r = 0; r < nranks; ++r)
      if (!ranks_[r]->local) remote_ |= 1u << r;
  }

  ~PeerGroup() {
    {
      std::lock_guard<std::mutex> lock(registryMu());
      auto& reg = registry();
      if (auto it = reg.find(key_); it != reg.end() && it->second.expired()) reg.erase(it);
    }
    const Result<int> previous = dev_->currentDevice();
    const bool arenasUnmapped = releaseMappings();
    for (auto& r : ranks_) {
      if (r->device >= 0 && dev_->setDevice(r->device).isOk()) {
        if (r->arena && arenasUnmapped) dev_->freeDevice(r->arena);
        if (r->programs) dev_->freeDevice(r->programs);
      }
      if (r->mirror) dev_->freeMapped(r->mirror);
      if (r->error) dev_->freeMapped(r->error);
    }
    if (windows_) dev_->freeMapped(windows_);
    if (state_ && spansProcesses_)
      munmap(state_, kSharedBytes);
    else if (state_)
      dev_->freeMapped(state_);
    if (previous.isOk()) (void)dev_->setDevice(previous.value());
  }

  static std::mutex& registryMu() {
    static std::mutex mu;
    return mu;
  }
  static std::map<uint64_t, std::weak_ptr<PeerGroup>>& registry() {
    static std::map<uint64_t, std::weak_ptr<PeerGroup>> reg;
    return reg;
  }

  int nranks() const { return nranks_; }

  // Whether rank q is a thread of this process, by every rank's process id (none: all are).
  static bool inThisProcess(const std::vector<int64_t>& pids, int q) {
    return pids.empty() || pids[q] == static_cast<int64_t>(getpid());
  }

  // Whether the group was made with the same ranks in this process as `pids` says.
  bool sameProcesses(const std::vector<int64_t>& pids) const {
    for (int q = 0; q < nranks_; ++q)
      if (ranks_[q]->local != inThisProcess(pids, q)) return false;
    return true;
  }

  // Allocates `rank`'s memory on `device` (and, for a group of one process, the shared state).
  Status allocate(int rank, int device) {
    Rank& r = *ranks_[rank];
    std::lock_guard<std::mutex> lock(r.mu);
    if (!r.local)
      return invalidUsage("peer group {:#x}: rank {} is in another process", key_, rank);
    if (r.device >= 0) return invalidUsage("peer group {:#x}: rank {} joined twice", key_, rank);
    TUTTI_TRY(dev_->setDevice(device));
    r.device = device;
    if (!spansProcesses_) {
      std::lock_guard<std::mutex> g(mu_);
      if (!state_) {
        TUTTI_TRY_ASSIGN(void* a, dev_->allocMapped(kSharedBytes));
        state_ = new (a) SharedState;
        abortDevice_ = &state_->abort;
      }
    } else if (windowsShareable_) {
      std::lock_guard<std::mutex> g(mu_);
      TUTTI_TRY_ASSIGN(void* w, dev_->allocMapped(sizeof(peer::WindowMap) * peer::kMaxRanks *
                                                  peer::kMaxWindows));
      windows_ = static_cast<peer::WindowMap*>(w);
    }
    TUTTI_TRY_ASSIGN(void* arena, dev_->allocDevice(layout_.bytes));
    r.arena = static_cast<unsigned char*>(arena);
    TUTTI_TRY_ASSIGN(void* programs, dev_->allocDevice(programBytes_));
    r.programs = static_cast<unsigned char*>(programs);
    TUTTI_TRY_ASSIGN(void* mirror, dev_->allocMapped(programBytes_));
    r.mirror = static_cast<unsigned char*>(mirror);
    TUTTI_TRY_ASSIGN(void* error, dev_->allocMapped(sizeof(peer::ErrorRecord)));
    r.error = static_cast<peer::ErrorRecord*>(error);
    return Status::ok();
  }

  Status connect(int rank, const PeerAllgather& allgather) {
    Rank& r = *ranks_[rank];
    TUTTI_TRY_ASSIGN(const int previous, dev_->currentDevice());
    TUTTI_TRY(dev_->setDevice(r.device));
    Status st = spansProcesses_ ? connectProcesses(rank, allgather) : connectThreads(rank);
    if (Status back = dev_->setDevice(previous); st.isOk()) st = back;
    return st;
  }

  // The group's failure, recorded by a rank of any process.
  Status failure() {
    if (!state_ || std::atomic_ref<uint32_t>(state_->failed).load(std::memory_order_acquire) != 2)
      return Status::ok();
    return makeStatus(static_cast<Code>(state_->code), "{}", state_->why);
  }

  // Records the group's failure (the first one wins, across processes too) and, for an abort,
  // releases every waiting kernel of the group.
  void fail(const Status& why, bool abort) {
    if (!state_) return;  // a group spanning processes that never connected: no kernel ran
    uint32_t expected = 0;
    if (std::atomic_ref<uint32_t>(state_->failed)
            .compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      state_->code = static_cast<int32_t>(why.code());
      std::snprintf(state_->why, sizeof state_->why, "%s", why.message().c_str());
      std::atomic_ref<uint32_t>(state_->failed).store(2, std::memory_order_release);
    }
    if (abort) std::atomic_ref<uint32_t>(state_->abort).store(1, std::memory_order_release);
  }

  // The rank's kernels' failure, if one was recorded (mapped memory the GPU writes).
  Status kernelFailure(int rank) {
    peer::ErrorRecord* e = ranks_[rank]->error;
    if (std::atomic_ref<uint32_t>(e->failure).load(std::memory_order_acquire) == 0)
      return Status::ok();
    return peer::failureStatus(*e, timeoutNs());
  }

  Status submit(int rank, std::vector<BatchOp>& ops) {
    TUTTI_TRY(failure());
    if (Status k = kernelFailure(rank); !k.isOk()) {
      fail(k, false);
      return k;
    }
    Rank& r = *ranks_[rank];
    std::lock_guard<std::mutex> lock(r.mu);
    TUTTI_TRY_ASSIGN(const int previous, dev_->currentDevice());
    TUTTI_TRY(dev_->setDevice(r.device));
    // The collectives in issue order, then every send and receive as one program (as the host
    // path runs a batch: core/batch.h).
    Status st;
    std::vector<const BatchOp*> messages;
    for (const BatchOp& op : ops) {
      if (op.kind != BatchOp::Kind::kColl) {
        messages.push_back(&op);
        continue;
      }
      st = launch(rank, r, op);
      if (!st.isOk()) break;
    }
    if (st.isOk() && !messages.empty()) st = launchMessages(rank, r, messages);
    if (Status back = dev_->setDevice(previous); st.isOk()) st = back;
    return st;
  }

  // sharePeerWindow: every rank offers its window (its allocation's IPC handle), and only when
  // every rank could do each process maps the others' (a second allgather agrees on that).
  Status shareWindow(int rank, void* buff, size_t bytes, const PeerAllgather& allgather) {
    if (!windowsShareable_) return Status::ok();
    TUTTI_TRY_ASSIGN(const int previous, dev_->currentDevice());
    Status st = shareWindowOn(rank, buff, bytes, allgather);
    if (Status back = dev_->setDevice(previous); st.isOk()) st = back;
    return st;
  }

  Status unshareWindow(int rank, void* buff, const PeerAllgather& allgather) {
    if (!windowsShareable_) return Status::ok();
    TUTTI_TRY_ASSIGN(const int previous, dev_->currentDevice());
    Status st = unshareWindowOn(rank, buff, allgather);
    if (Status back = dev_->setDevice(previous); st.isOk()) st = back;
    return st;
  }

 private:
  Status shareWindowOn(int rank, void* buff, size_t bytes, const PeerAllgather& allgather) {
    if (!allgather)
      return invalidUsage("peer group {:#x}: sharing a window needs an allgather", key_);
    Rank& r = *ranks_[rank];
    std::lock_guard<std::mutex> lock(r.mu);
    struct Offer {
      PeerMemoryHandle handle{};
      uint64_t base = 0, bytes = 0, offset = 0;
      int32_t slot = -1, ok = 0;
    };
    Offer mine{.base = reinterpret_cast<uint64_t>(buff), .bytes = bytes};
    Status why;
    std::vector<bool> used(peer::kMaxWindows, false);
    for (const Window& w : r.windows) used[w.slot] = true;
    mine.slot = static_cast<int32_t>(std::find(used.begin(), used.end(), false) - used.begin());
    if (kPeerDirect.get() == 0)
      why = invalidUsage("TUTTI_PEER_DIRECT=0");
    else if (mine.slot >= peer::kMaxWindows)
      why = invalidUsage("rank {} has {} shared windows already", rank, peer::kMaxWindows);
    else if (bytes == 0)
      why = invalidUsage("an empty window");
    else if (Status d = dev_->setDevice(r.device); !d.isOk())
      why = d;
    else if (auto e = dev_->exportBuffer(buff); !e.isOk())
      why = e.status();
    else
      mine.handle = e.value().handle, mine.offset = e.value().offset;
    mine.ok = why.isOk() ? 1 : 0;
    std::vector<Offer> all(nranks_);
    TUTTI_TRY(allgather(&mine, all.data(), sizeof(Offer)));
    for (int q = 0; q < nranks_ && why.isOk(); ++q)
      if (!all[q].ok) why = invalidUsage("rank {} could not share its window", q);
    std::vector<int> mapped;
    Status st = why.isOk() ? quiesce(r) : why;
    for (int q = 0; q < nranks_ && st.isOk() && why.isOk(); ++q) {
      if (ranks_[q]->local) continue;
      st = mapEntry(q, all[q].slot, all[q].handle, all[q].base, all[q].bytes, all[q].offset);
      if (st.isOk()) mapped.push_back(q);
    }
    if (why.isOk()) {  // every rank took part in the first allgather's outcome alike
      const int32_t ok = st.isOk() ? 1 : 0;
      std::vector<int32_t> oks(nranks_);
      TUTTI_TRY(allgather(&ok, oks.data(), sizeof ok));
      for (int q = 0; q < nranks_ && st.isOk(); ++q)
        if (!oks[q]) st = invalidUsage("rank {} could not map its peers' windows", q);
      if (st.isOk()) {
        r.windows.push_back({mine.base, bytes, mine.slot});
        return Status::ok();
      }
      for (int q : mapped) unmapEntry(q, all[q].slot);
      why = st;
    }
    TUTTI_LOG_INFO(Subsys::kInit,
                   "peer group {:#x} rank {}: window {} ({} bytes) not shared with the other "
                   "processes ({}); calls on it take the FIFOs",
                   key_, rank, buff, bytes, why.message());
    return Status::ok();
  }

  // unsharePeerWindow: every rank says which of its windows goes; each process unmaps the
  // others' (after its own kernels ended), and a last allgather lets the owners free them.
  Status unshareWindowOn(int rank, void* buff, const PeerAllgather& allgather) {
    if (!allgather)
      return invalidUsage("peer group {:#x}: unsharing a window needs an allgather", key_);
    Rank& r = *ranks_[rank];
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = std::find_if(r.windows.begin(), r.windows.end(), [&](const Window& w) {
      return w.base == reinterpret_cast<uint64_t>(buff);
    });
    const int32_t mine = it == r.windows.end() ? -1 : it->slot;
    std::vector<int32_t> slots(nranks_);
    TUTTI_TRY(allgather(&mine, slots.data(), sizeof mine));
    Status st = dev_->setDevice(r.device);
    if (st.isOk()) st = quiesce(r);
    for (int q = 0; q < nranks_; ++q)
      if (!ranks_[q]->local && slots[q] >= 0) unmapEntry(q, slots[q]);
    if (it != r.windows.end()) r.windows.erase(it);
    const int32_t ok = 1;
    std::vector<int32_t> oks(nranks_);
    TUTTI_TRY(allgather(&ok, oks.data(), sizeof ok));
    return st;
  }

  // Whether [p, p + bytes) lies in one of the rank's shared windows (true for no bytes).
  static bool inWindow(const Rank& r, const void* p, size_t bytes) {
    if (bytes == 0) return true;
    const uint64_t a = reinterpret_cast<uint64_t>(p);
    return std::any_of(r.windows.begin(), r.windows.end(), [&](const Window& w) {
      return a >= w.base && a - w.base <= w.bytes && bytes <= w.bytes - (a - w.base);
    });
  }

  // Waits for the kernels the rank launched since the last time (before mapping or unmapping
  // memory: no IPC call while one of them may wait).
  Status quiesce(Rank& r) {
    for (Stream s : r.streams) TUTTI_TRY(dev_->synchronize(s));
    r.streams.clear();
    return Status::ok();
  }

  // Maps rank q's window (its allocation once per process, counted) into entry (q, slot).
  Status mapEntry(int q, int slot, const PeerMemoryHandle& handle, uint64_t base, uint64_t bytes,
                  uint64_t offset) {
    if (slot < 0 || slot >= peer::kMaxWindows)
      return internalError("peer group {:#x}: rank {} offered window slot {}", key_, q, slot);
    std::lock_guard<std::mutex> lock(attachMu_);
    auto it = opened_.find(handle);
    if (it == opened_.end()) {
      TUTTI_TRY_ASSIGN(void* p, dev_->openMemory(handle));
      it = opened_.emplace(handle, std::make_pair(p, 0)).first;
    }
    ++it->second.second;
    const size_t i = static_cast<size_t>(q) * peer::kMaxWindows + slot;
    entryHandles_[i] = handle;
    peer::WindowMap& e = windows_[i];
    e.base = base;
    e.local = reinterpret_cast<uint64_t>(it->second.first) + offset;
    std::atomic_ref<uint64_t>(e.bytes).store(bytes, std::memory_order_release);
    return Status::ok();
  }

  void unmapEntry(int q, int slot) {
    if (slot < 0 || slot >= peer::kMaxWindows) return;
    std::lock_guard<std::mutex> lock(attachMu_);
    const size_t i = static_cast<size_t>(q) * peer::kMaxWindows + slot;
    peer::WindowMap& e = windows_[i];
    if (e.bytes == 0) return;
    std::atomic_ref<uint64_t>(e.bytes).store(0, std::memory_order_release);
    e.base = e.local = 0;
    auto it = opened_.find(entryHandles_[i]);
    if (it != opened_.end() && --it->second.second == 0) {
      dev_->closeMemory(it->second.first);
      opened_.erase(it);
    }
  }

  uint64_t timeoutNs() const { return static_cast<uint64_t>(waitLimit().count()) * 1000000ull; }

  Result<const Placed*> program(int rank, Rank& r, const BatchOp& op) {
    const bool inPlace = inPlaceOn(op, rank, nranks_);
    int64_t scalar = 0;
    if (op.preMul) std::memcpy(&scalar, op.scalar.data(), dataTypeBytes(op.dtype));
    const auto [inBytes, outBytes] = op.ioBytes(rank, nranks_);
    const bool direct = r.direct || (!r.windows.empty() && inWindow(r, op.send, inBytes) &&
                                     inWindow(r, op.recv, outBytes));
    const Key key{static_cast<int>(op.coll),
                  op.count,
                  static_cast<int>(op.dtype),
                  static_cast<int>(op.op),
                  op.root,
                  inPlace,
                  op.preMul,
                  scalar,
                  direct};
    if (auto it = r.cache.find(key); it != r.cache.end()) return &it->second;
    const algo::CollShape shape{op.coll,  rank,  nranks_, op.count,
                                op.dtype, op.op, op.root, inPlace};
    const uint64_t callBytes = messageBytes(op.coll, op.count, op.dtype, nranks_);
    PeerCompileConfig cfg;
    cfg.protocol = callBytes <= static_cast<uint64_t>(std::max<int64_t>(kPeerLlBytes.get(), 0))
                       ? peer::Protocol::kLowLatency
                       : peer::Protocol::kSimple;
    cfg.channels = static_cast<int>(
        std::clamp<uint64_t>(callBytes / kBytesPerChannel, 1, layout_.config.channels));
    cfg.payloadBytes = peer::payloadBytes(layout_.config, cfg.protocol);
    cfg.scratchBytes = layout_.config.scratchBytes;
    cfg.direct = direct;
    Status first;
    for (const std::string& name : candidates(shape)) {
      const algo::AlgorithmInfo* info = algo::find(shape.coll, name);
      if (info == nullptr) {
        if (first.isOk())
          first = invalidArgument("{}: no algorithm {} for {} (TUTTI_ALGO)", op.api, name,
                                  collInfo(shape.coll).name);
        continue;
      }
      auto compiled = compilePeer(shape, *info, cfg, op.preMul ? op.scalar.data() : nullptr);
      if (!compiled.isOk()) {
        if (first.isOk()) first = compiled.status();
        continue;
      }
      const PeerProgram& p = compiled.value();
      TUTTI_TRY_ASSIGN(Placed placed, place(r, p, op.api, rank));
      TUTTI_LOG_INFO(Subsys::kTuning,
                     "peer group {:#x} rank {}: {} of {} {}{}: {} ({}{}, {} channels, {} pieces)",
                     key_, rank, collInfo(op.coll).name, op.count, dataTypeName(op.dtype),
                     inPlace ? " in place" : "", p.algorithm(),
                     cfg.protocol == peer::Protocol::kSimple ? "simple" : "low latency",
                     p.header()->direct != 0 ? ", direct" : "",
                     p.header()->nchannels, p.header()->npieces);
      return &r.cache.emplace(key, std::move(placed)).first->second;
    }
    return first.isOk() ? invalidUsage("{}: no algorithm runs {} on the peer executor", op.api,
                                       collInfo(shape.coll).name)
                        : first;
  }

  // Places a compiled program in the rank's program area (once): copies it there and caches it.
  Result<Placed> place(Rank& r, const PeerProgram& p, const char* api, int rank) {
    const uint64_t bytes = peer::alignUp(p.bytes(), 256);
    if (r.used + bytes > programBytes_)
      return invalidUsage(
          "{}: rank {}: the peer program area ({} bytes, "
          "TUTTI_PEER_PROGRAM_BYTES) is full after {} programs",
          api, rank, programBytes_, r.cache.size() + r.messageCache.size());
    std::memcpy(r.mirror + r.used, p.header(), p.bytes());
    TUTTI_TRY(dev_->upload(r.programs + r.used, r.mirror + r.used, p.bytes()));
    Placed placed;
    placed.offset = r.used;
    placed.header = *p.header();
    placed.algorithm = p.algorithm();
    r.used += bytes;
    return placed;
  }

  peer::Launch launchFor(Rank& r, const Placed& placed) const {
    peer::Launch l;
    l.program = reinterpret_cast<const peer::ProgramHeader*>(r.programs + placed.offset);
    for (int q = 0; q < nranks_; ++q) l.arenas[q] = arenas_[q];
    l.layout = layout_;
    l.error = r.error;
    l.abortFlag = abortDevice_;
    l.timeoutNs = timeoutNs();
    l.remote = remote_;
    l.windows = windows_;
    return l;
  }

  // A batch's sends and receives: one program (the simple protocol, whatever the sizes: both
  // sides of a FIFO must agree, and each knows only its own messages), cached by the sequence of
  // (direction, peer, bytes); each message's buffer goes in the launch.
  Status launchMessages(int rank, Rank& r, const std::vector<const BatchOp*>& msgs) {
    const char* api = msgs.front()->api;
    if (msgs.size() > static_cast<size_t>(peer::kMaxBuffers))
      return invalidUsage(
          "{}: rank {}: {} sends and receives in one group; the peer executor "
          "takes at most {}",
          api, rank, msgs.size(), peer::kMaxBuffers);
    std::vector<PeerMessage> list;
    std::string key;
    for (size_t i = 0; i < msgs.size(); ++i) {
      const BatchOp& op = *msgs[i];
      const bool send = op.kind == BatchOp::Kind::kSend;
      const uint64_t bytes = op.count * dataTypeBytes(op.dtype);
      list.push_back({send, op.peer, bytes, static_cast<int>(i)});
      key += fmt::format("{}{}:{},", send ? 's' : 'r', op.peer, bytes);
    }
    auto it = r.messageCache.find(key);
    if (it == r.messageCache.end()) {
      PeerCompileConfig cfg;
      cfg.channels = layout_.config.channels;
      cfg.protocol = peer::Protocol::kSimple;
      cfg.payloadBytes = peer::payloadBytes(layout_.config, cfg.protocol);
      cfg.messageBytesPerChannel = kBytesPerChannel;
      TUTTI_TRY_ASSIGN(PeerProgram p, compilePeerMessages(rank, nranks_, list, cfg));
      TUTTI_TRY_ASSIGN(Placed placed, place(r, p, api, rank));
      it = r.messageCache.emplace(key, std::move(placed)).first;
    }
    peer::Launch l = launchFor(r, it->second);
    if (windowsShareable_) r.streams.insert(msgs.front()->stream);
    for (size_t i = 0; i < msgs.size(); ++i)
      l.buffers[i] =
          msgs[i]->kind == BatchOp::Kind::kSend ? const_cast<void*>(msgs[i]->send) : msgs[i]->recv;
    return dev_->launch(l, it->second.header, msgs.front()->stream);
  }

  Status launch(int rank, Rank& r, const BatchOp& op) {
    TUTTI_TRY_ASSIGN(const Placed* placed, program(rank, r, op));
    peer::Launch l = launchFor(r, *placed);
    l.input = op.send;
    l.output = op.recv;
    if (windowsShareable_) r.streams.insert(op.stream);
    return dev_->launch(l, placed->header, op.stream);
  }

  std::string sharedName() const { return fmt::format("/tutti-peer-{:016x}", key_); }

  // A group spanning processes, going: closes this process's mappings of the other processes'
  // arenas, says so in the shared state, and waits up to 10 s for every other process to have
  // closed its mappings of this process's arenas, since freeing memory that another process
  // still has mapped is undefined (cudaIpcOpenMemHandle's documentation). False when they did
  // not (a process that died, or never mapped the shared state): the arenas then stay allocated.
  bool releaseMappings() {
    if (!spansProcesses_) return true;
    if (mappedOn_ >= 0 && dev_->setDevice(mappedOn_).isOk()) {
      for (int q = 0; q < nranks_; ++q)
        if (!ranks_[q]->local && arenas_[q]) dev_->closeMemory(arenas_[q]);
      for (auto& [handle, mapping] : opened_) dev_->closeMemory(mapping.first);
      opened_.clear();
    }
    // Unless no process got as far as mapping another's arenas, wait until every one has closed.
    bool unmapped = !exported_ || state_ != nullptr;
    if (exported_ && state_) {
      for (int q = 0; q < nranks_; ++q)
        if (ranks_[q]->local)
          std::atomic_ref<uint32_t>(state_->closed[q]).store(1, std::memory_order_release);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      auto allClosed = [&] {
        for (int q = 0; q < nranks_; ++q)
          if (std::atomic_ref<uint32_t>(state_->closed[q]).load(std::memory_order_acquire) == 0)
            return false;
        return true;
      };
      while (!allClosed() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      unmapped = allClosed();
    }
    if (state_ && mappedOn_ >= 0 && dev_->setDevice(mappedOn_).isOk()) dev_->unregisterHost(state_);
    if (!unmapped)
      TUTTI_LOG_WARN(Subsys::kInit,
                     "peer group {:#x}: another process did not say it unmapped this process's "
                     "arenas within 10 s; they stay allocated",
                     key_);
    return unmapped;
  }

  // Every rank's arena as this process's ranks reach it, peer access enabled where their devices
  // differ (ncclCommInitAll over several GPUs).
  Status connectThreads(int rank) {
    const Rank& r = *ranks_[rank];
    for (int q = 0; q < nranks_; ++q) {
      const Rank& o = *ranks_[q];
      if (o.arena == nullptr)
        return internalError("peer group {:#x}: rank {} connects before rank {} has joined", key_,
                             rank, q);
      if (o.device != r.device) TUTTI_TRY(dev_->enablePeerAccess(o.device));
    }
    // Direct reads of peers' buffers: only on one device, where every buffer a rank may pass is
    // at the same address for all (peer access across devices does not reach every kind of
    // allocation, e.g. stream-ordered pools).
    bool oneDevice = true;
    for (int q = 0; q < nranks_; ++q) oneDevice = oneDevice && ranks_[q]->device == r.device;
    ranks_[rank]->direct = oneDevice && kPeerDirect.get() != 0;
    std::lock_guard<std::mutex> lock(mu_);
    for (int q = 0; q < nranks_; ++q) arenas_[q] = ranks_[q]->arena;
    return Status::ok();
  }

  // Ranks in several processes. Step 1: rank 0 creates the shared state; every rank exports its
  // arena; allgather. Step 2: each process maps the shared state and the other processes' arenas
  // (once, whichever of its ranks comes first); allgather of the outcomes; rank 0 removes the
  // shared memory's name (every process has it mapped by then). Each rank takes part in both
  // allgathers whatever its own outcome, so that every rank returns the same verdict.
  Status connectProcesses(int rank, const PeerAllgather& allgather) {
    if (!allgather)
      return invalidUsage("peer group {:#x}: ranks in other processes need an allgather", key_);
    const Rank& r = *ranks_[rank];
    struct Exported {
      PeerMemoryHandle handle{};
      int32_t ok = 0;
      int32_t pad = 0;
      // What every rank must agree on, though each process reads it from its own environment:
      // the arena's layout and the protocol's threshold.
      int64_t settings[7] = {};
    };
    const peer::ArenaConfig& c = layout_.config;
    Exported mine{.settings = {c.channels, c.slots, c.slotBytes, c.llSlots, c.llLines,
                               static_cast<int64_t>(c.scratchBytes), kPeerLlBytes.get()}};
    Status st;
    for (int q = 0; q < nranks_ && st.isOk(); ++q)
      if (ranks_[q]->local && ranks_[q]->device != r.device)
        st = invalidUsage(
            "peer group {:#x}: ranks {} and {} of one process are on devices {} and {}, and the "
            "group spans processes: the peer executor takes one device per process then",
            key_, rank, q, r.device, ranks_[q]->device);
    if (st.isOk() && rank == 0) st = mapShared(true);
    if (st.isOk()) {
      auto h = dev_->exportMemory(r.arena);
      if (h.isOk())
        mine.handle = h.value();
      else
        st = h.status();
    }
    mine.ok = st.isOk() ? 1 : 0;
    std::vector<Exported> all(nranks_);
    TUTTI_TRY(allgather(&mine, all.data(), sizeof(Exported)));
    for (int q = 0; q < nranks_ && st.isOk(); ++q)
      if (!all[q].ok)
        st = systemError("peer group {:#x}: rank {} could not share its arena", key_, q);
    for (int q = 0; q < nranks_ && st.isOk(); ++q)
      if (std::memcmp(all[q].settings, mine.settings, sizeof mine.settings) != 0)
        st = invalidUsage(
            "peer group {:#x}: rank {} runs the peer executor with other settings than rank {} "
            "(set the same TUTTI_PEER_CHANNELS, TUTTI_PEER_SCRATCH_BYTES and TUTTI_PEER_LL_BYTES "
            "on every rank)",
            key_, q, rank);
    if (st.isOk()) {
      exported_ = true;  // every process now maps the others' arenas (or fails to)
      std::vector<PeerMemoryHandle> handles;
      for (const Exported& e : all) handles.push_back(e.handle);
      st = attach(rank, handles);
    }
    const int32_t ok = st.isOk() ? 1 : 0;
    std::vector<int32_t> oks(nranks_);
    Status gathered = allgather(&ok, oks.data(), sizeof ok);
    if (rank == 0) shm_unlink(sharedName().c_str());
    TUTTI_TRY(gathered);
    for (int q = 0; q < nranks_ && st.isOk(); ++q)
      if (!oks[q])
        st = systemError("peer group {:#x}: rank {} could not map its peers' memory", key_, q);
    return st;
  }

  // Maps the shared state into this process (rank 0's process makes it, removing a stale name
  // of an earlier job first) and registers it for the current device.
  Status mapShared(bool create) {
    const std::string name = sharedName();
    if (create) shm_unlink(name.c_str());
    TUTTI_TRY_ASSIGN(void* p, mapSharedMemory(name, kSharedBytes, create));
    auto device = dev_->currentDevice();
    auto mapped =
        device.isOk() ? dev_->registerHost(p, kSharedBytes) : Result<void*>(device.status());
    if (!mapped.isOk()) {
      munmap(p, kSharedBytes);
      return mapped.status();
    }
    std::lock_guard<std::mutex> lock(mu_);
    state_ = static_cast<SharedState*>(p);
    abortDevice_ = static_cast<uint32_t*>(mapped.value());  // SharedState::abort: the first word
    mappedOn_ = device.value();
    return Status::ok();
  }

  // This process's view of the group: the shared state (unless rank 0 made it here) and every
  // other process's arena; its own ranks' arenas are plain pointers.
  Status attach(int rank, const std::vector<PeerMemoryHandle>& handles) {
    std::lock_guard<std::mutex> lock(attachMu_);
    if (!state_) TUTTI_TRY(mapShared(false));
    for (int q = 0; q < nranks_; ++q) {
      if (arenas_[q]) continue;
      if (ranks_[q]->local) {
        if (ranks_[q]->arena == nullptr)
          return internalError("peer group {:#x}: rank {} connects before rank {} has joined", key_,
                               rank, q);
        arenas_[q] = ranks_[q]->arena;
        continue;
      }
      TUTTI_TRY_ASSIGN(void* base, dev_->openMemory(handles[q]));
      arenas_[q] = static_cast<unsigned char*>(base);
    }
    return Status::ok();
  }

  const uint64_t key_;
  const int nranks_;
  PeerDevice* const dev_;
  const peer::ArenaLayout layout_;
  const uint64_t programBytes_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  bool spansProcesses_ = false;
  std::atomic<bool> exported_{false};  // every rank shared its arena: processes map them
  bool windowsShareable_ = false;       // every rank is a process of its own (sharePeerWindow)
  uint32_t remote_ = 0;                 // bit q: rank q is in another process
  // Other processes' windows as this process's kernels reach them (WindowMap[kMaxRanks]
  // [kMaxWindows], mapped host memory), the handle behind each entry, and the allocations
  // opened (base, entries using it). attachMu_ guards the last two.
  peer::WindowMap* windows_ = nullptr;
  std::array<PeerMemoryHandle, peer::kMaxRanks * peer::kMaxWindows> entryHandles_{};
  std::map<PeerMemoryHandle, std::pair<void*, int>> opened_;
  // Every rank's arena as this process's kernels reach it: its own ranks' allocations and the
  // other processes' mapped ones (closed when the group goes). Set by connect; read by the
  // launches, which come after every rank connected.
  std::vector<unsigned char*> arenas_;
  SharedState* state_ = nullptr;     // host address
  uint32_t* abortDevice_ = nullptr;  // state_->abort as the device reaches it
  int mappedOn_ = -1;                // the device this process mapped the shared memory for
  std::mutex mu_;                    // state_ and arenas_ while they are set
  std::mutex attachMu_;              // one rank of this process attaches at a time
};

Result<std::shared_ptr<PeerGroup>> joinPeerGroup(uint64_t key, int nranks, int rank, int device,
                                                 PeerDevice* dev, const peer::ArenaConfig& config,
                                                 std::vector<int64_t> pids) {
  if (nranks < 1 || nranks > peer::kMaxRanks)
    return invalidUsage("peer group: nranks={} outside [1, {}]", nranks, peer::kMaxRanks);
  if (rank < 0 || rank >= nranks)
    return invalidUsage("peer group: rank={} outside [0, {})", rank, nranks);
  if (!pids.empty() && pids.size() != static_cast<size_t>(nranks))
    return invalidUsage("peer group: pids holds {} process ids for {} ranks", pids.size(), nranks);
  if (dev == nullptr)
    return invalidUsage("peer group: no device operations (a build without CUDA)");
  std::shared_ptr<PeerGroup> g;
  {
    std::lock_guard<std::mutex> lock(PeerGroup::registryMu());
    auto& reg = PeerGroup::registry();
    if (auto it = reg.find(key); it != reg.end()) g = it->second.lock();
    if (g && g->nranks() != nranks)
      return invalidUsage("peer group {:#x}: rank {} joins with {} ranks, the group has {}", key,
                          rank, nranks, g->nranks());
    if (g && !g->sameProcesses(pids))
      return invalidUsage("peer group {:#x}: rank {} joins with other ranks in this process", key,
                          rank);
    if (!g) {
      g = std::make_shared<PeerGroup>(key, nranks, dev, config, pids);
      reg[key] = g;
    }
  }
  TUTTI_TRY(g->allocate(rank, device));
  return g;
}

Status connectPeerGroup(PeerGroup& group, int rank, const PeerAllgather& allgather) {
  return group.connect(rank, allgather);
}

Status sharePeerWindow(PeerGroup& group, int rank, void* buff, size_t bytes,
                       const PeerAllgather& allgather) {
  return group.shareWindow(rank, buff, bytes, allgather);
}

Status unsharePeerWindow(PeerGroup& group, int rank, void* buff, const PeerAllgather& allgather) {
  return group.unshareWindow(rank, buff, allgather);
}

namespace {

class PeerExecutor final : public Executor {
 public:
  PeerExecutor(std::shared_ptr<PeerGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  const char* name() const override { return "peer"; }

  Status submit(std::span<const RankBatch> batches) override {
    Status first;
    for (const RankBatch& b : batches) {
      if (b.owner->deviceAborted())
        group_->fail(invalidUsage("peer executor: rank {} was aborted", rank_), true);
      Status st = group_->submit(rank_, *b.ops);
      if (!st.isOk()) b.owner->recordDeviceError(st, true);
      if (first.isOk() && !st.isOk()) first = st;
    }
    return first;
  }

  void fail(const Status& why, bool abort) override {
    if (abort) group_->fail(why, true);
  }

  Status poll() override {
    Status k = group_->kernelFailure(rank_);
    if (!k.isOk()) group_->fail(k, false);
    return k;
  }

 private:
  std::shared_ptr<PeerGroup> group_;
  const int rank_;
};

}  // namespace

std::unique_ptr<Executor> makePeerExecutor(std::shared_ptr<PeerGroup> group, int rank) {
  return std::make_unique<PeerExecutor>(std::move(group), rank);
}

}  // namespace tutti::device
