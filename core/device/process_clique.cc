// File: core/device/process_clique.cc
// The process clique (core/device/process_clique.h): its shared memory, the mailboxes, the flag
// handshakes and the leader's mapping of its peers' buffers.
#include "core/device/process_clique.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <thread>

#include "base/log.h"
#include "base/shared_memory.h"

namespace tutti::device {

namespace {

namespace prog = kernels::program;

constexpr uint64_t kMagic = 0x7570677474747574ull;  // "tuttgpu"
constexpr int kDepth = 4;                           // posts a rank may be ahead of the leader
constexpr int kMaxCallsPerPost = 16;                // operations in one rank's batch (a group)
constexpr uint64_t kFlagBit = 1, kAbortBit = uint64_t{1} << 32;

}  // namespace

// The shared memory's parts, named outside the anonymous namespace because ProcessClique::Region
// holds them.
namespace process_clique_shm {

struct WireBuffer {
  std::array<std::byte, 64> handle{};
  uint64_t offset = 0, allocation = 0;
  uint8_t used = 0;
};

struct WireCall {
  uint8_t kind = 0, coll = 0, dtype = 0, op = 0, preMul = 0;
  int32_t root = 0, peer = -1;
  uint64_t count = 0;
  std::array<std::byte, 8> scalar{};
  WireBuffer send, recv;
  char api[32] = {};
};

struct Post {
  uint64_t seq = 0;
  int32_t ncalls = 0;
  char error[192] = {};  // why this rank could not describe its batch ("" when it could)
  WireCall calls[kMaxCallsPerPost];
};

// A stream-visible flag: the low 32 bits are the handshake, the high 32 bits the sticky abort.
struct alignas(64) Flag {
  uint64_t word = 0;
};

struct alignas(64) Mailbox {
  std::atomic<uint64_t> posted{0};             // posts made by the rank
  alignas(64) std::atomic<uint64_t> taken{0};  // posts the leader has read
  Post posts[kDepth];
};

}  // namespace process_clique_shm

namespace {

using process_clique_shm::Flag;
using process_clique_shm::Mailbox;
using process_clique_shm::Post;
using process_clique_shm::WireBuffer;
using process_clique_shm::WireCall;

uint32_t* handshake(Flag& f) { return reinterpret_cast<uint32_t*>(&f.word); }
// The host's side of an abort: one atomic read-modify-write of the whole word, so that a
// handshake write landing at the same time (the low half) is neither lost nor undone.
void setAbortBit(Flag& f) {
  std::atomic_ref<uint64_t>(f.word).fetch_or(kAbortBit, std::memory_order_acq_rel);
}

}  // namespace

struct ProcessClique::Region {
  uint64_t magic = 0;
  int32_t nranks = 0;
  Flag ready[prog::kMaxRanks];  // rank r's inputs are ready (rank r sets, the leader clears)
  Flag done[prog::kMaxRanks];   // rank r's outputs are written (the leader sets, rank r clears)
  std::atomic<uint32_t> failed{0};
  char why[256] = {};
  Mailbox box[prog::kMaxRanks];
};

namespace {

// The clique's shared memory as this process maps it: once per process and clique, however many
// of the clique's ranks live here (one, except in tests that emulate processes with threads), so
// that every rank of the process sees the flags and mailboxes at one address.
struct Mapping {
  ProcessClique::Region* host = nullptr;
  ProcessClique::Region* dev = nullptr;  // its device address, once registered
  int users = 0;
};
std::mutex gMappingMu;
std::map<uint64_t, Mapping>& mappings() {
  static auto* m = new std::map<uint64_t, Mapping>;  // never destroyed: used at exit
  return *m;
}

}  // namespace

Result<std::unique_ptr<ProcessClique>> ProcessClique::create(uint64_t key, int nranks, int rank,
                                                             int device, std::vector<int64_t> pids,
                                                             StreamOps* ops,
                                                             const Allgather& allgather) {
  if (nranks < 2 || nranks > prog::kMaxRanks)
    return invalidUsage("device process clique: {} ranks on one GPU; 2 to {} are supported", nranks,
                        prog::kMaxRanks);
  if (!ops) return invalidUsage("device process clique: no stream operations (no CUDA)");
  std::unique_ptr<ProcessClique> c(
      new ProcessClique(key, nranks, rank, device, std::move(pids), ops));
  TUTTI_TRY(c->attach(allgather));
  TUTTI_LOG_INFO(Subsys::kInit, "device process clique {:#x}: rank {} of {} processes on device {}",
                 key, rank, nranks, device);
  return c;
}

ProcessClique::ProcessClique(uint64_t key, int nranks, int rank, int device,
                             std::vector<int64_t> pids, StreamOps* ops)
    : key_(key),
      nranks_(nranks),
      rank_(rank),
      device_(device),
      pids_(std::move(pids)),
      ops_(ops),
      composer_(nranks, key) {}

// Three steps, each closed by an allgather of every rank's outcome, so that a failure anywhere
// fails every rank instead of leaving one waiting: rank 0 creates the shared memory; the others
// map it; every rank maps it for the GPU (and rank 0 removes its name).
Status ProcessClique::attach(const Allgather& allgather) {
  const std::string name = fmt::format("/tutti-gpu-{:016x}", key_);
  regionBytes_ = (sizeof(Region) + 4095) / 4096 * 4096;
  auto agree = [&](const Status& mine, const char* step) -> Status {
    int32_t ok = mine.isOk() ? 1 : 0;
    std::vector<int32_t> all(nranks_);
    TUTTI_TRY(allgather(&ok, all.data(), sizeof ok));
    TUTTI_TRY(mine);
    for (int r = 0; r < nranks_; ++r)
      if (!all[r])
        return systemError("device process clique {:#x}: rank {} failed to {}", key_, r, step);
    return Status::ok();
  };
  // Maps the region (creating it) unless this process has it mapped already.
  auto mapRegion = [&](bool create) -> Status {
    std::lock_guard<std::mutex> lock(gMappingMu);
    if (auto it = mappings().find(key_); it != mappings().end()) {
      ++it->second.users;
      region_ = it->second.host;
      return Status::ok();
    }
    TUTTI_TRY_ASSIGN(void* p, mapSharedMemory(name, regionBytes_, create));
    region_ = static_cast<Region*>(p);
    mappings()[key_] = Mapping{region_, nullptr, 1};
    return Status::ok();
  };
  Status st;
  if (rank_ == 0) {
    st = mapRegion(true);
    if (st.isOk()) {
      new (region_) Region;
      region_->nranks = nranks_;
      std::atomic_ref<uint64_t>(region_->magic).store(kMagic, std::memory_order_release);
    }
  }
  TUTTI_TRY(agree(st, "create the shared memory"));
  if (rank_ != 0) {
    st = mapRegion(false);
    if (st.isOk() &&
        (std::atomic_ref<uint64_t>(region_->magic).load(std::memory_order_acquire) != kMagic ||
         region_->nranks != nranks_))
      st = internalError("shared memory {} does not hold a clique of {} ranks", name, nranks_);
  }
  Status mapped = agree(st, "map the shared memory");
  if (rank_ == 0) shm_unlink(name.c_str());
  TUTTI_TRY(mapped);
  st = ops_->setDevice(device_);
  if (st.isOk()) {
    std::lock_guard<std::mutex> lock(gMappingMu);
    Mapping& m = mappings()[key_];
    if (!m.dev) {
      auto dev = ops_->registerHost(region_, regionBytes_);
      if (dev.isOk())
        m.dev = static_cast<Region*>(dev.value());
      else
        st = dev.status();
    }
    regionDev_ = m.dev;
  }
  for (int i = 0; i <= 2 * kMaxStreams && st.isOk(); ++i) {
    auto e = ops_->createEvent();
    if (e.isOk())
      events_.push_back(e.value());
    else
      st = e.status();
  }
  if (st.isOk()) {
    last_ = events_.back();
    events_.pop_back();
  }
  return agree(st, "map the shared memory for the GPU");
}

// The shared memory is unmapped only once this rank's stream is past its last handshake. It may
// still be waiting for the leader's kernel (a destroy right after the last call): that is given
// 10 s; a stream still blocked then (a peer that never came) is released with the abort bits, and
// if even that does not end it within a second, the memory is left mapped rather than pulled from
// under the GPU.
ProcessClique::~ProcessClique() {
  if (!ops_->setDevice(device_).isOk()) return;
  auto idleWithin = [&](int ms) {
    for (int i = 0; i < ms; ++i) {
      if (!used_ || ops_->finished(last_)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return !used_ || ops_->finished(last_);
  };
  bool idle = idleWithin(10000);
  if (!idle && region_) {
    abort();
    idle = idleWithin(1000);
  }
  if (!idle) {
    TUTTI_LOG_WARN(Subsys::kInit,
                   "device process clique {:#x}: rank {}'s stream still waits on the clique's "
                   "flags; its shared memory stays mapped",
                   key_, rank_);
    return;
  }
  for (auto& [key, base] : imports_) ops_->closeBuffer(base);
  for (Event e : events_) ops_->destroyEvent(e);
  if (last_) ops_->destroyEvent(last_);
  if (!region_) return;
  std::lock_guard<std::mutex> lock(gMappingMu);
  auto it = mappings().find(key_);
  if (it == mappings().end() || --it->second.users > 0) return;
  if (it->second.dev) ops_->unregisterHost(region_);
  munmap(region_, regionBytes_);
  mappings().erase(it);
}

void ProcessClique::fail(const std::string& why) {
  if (!region_) return;
  uint32_t expected = 0;
  if (region_->failed.compare_exchange_strong(expected, 1)) {
    std::snprintf(region_->why, sizeof region_->why, "%s", why.c_str());
    region_->failed.store(2, std::memory_order_release);
  }
}

Status ProcessClique::failure() const {
  if (region_->failed.load(std::memory_order_acquire) != 2)
    return invalidUsage("device process clique: failed (reason being written)");
  return invalidUsage("device process clique: {}", std::string(region_->why));
}

void ProcessClique::abort() {
  if (!region_) return;
  fail(fmt::format("rank {} was aborted (ncclCommAbort)", rank_));
  for (int r = 0; r < nranks_; ++r) {
    if (rank_ != 0 && r != rank_) continue;
    setAbortBit(region_->ready[r]);
    setAbortBit(region_->done[r]);
  }
}

Status ProcessClique::peerAlive(int r) const {
  if (kill(static_cast<pid_t>(pids_[r]), 0) != 0 && errno == ESRCH)
    return remoteError("rank {} (process {}) has exited", r, pids_[r]);
  return Status::ok();
}

Result<void*> ProcessClique::mapped(int r, const StreamOps::Export& e) {
  auto it = imports_.find({r, e.allocation});
  if (it == imports_.end()) {
    TUTTI_TRY_ASSIGN(void* base, ops_->openBuffer(e.handle));
    it = imports_.emplace(std::make_pair(r, e.allocation), base).first;
  }
  return static_cast<void*>(static_cast<std::byte*>(it->second) + e.offset);
}

Status ProcessClique::submit(const std::vector<Call>& calls, const std::atomic<bool>* aborted) {
  if (calls.empty()) return Status::ok();
  if (region_->failed.load(std::memory_order_acquire)) return failure();
  TUTTI_TRY(ops_->setDevice(device_));
  return rank_ == 0 ? submitLeader(calls, aborted) : submitPeer(calls, aborted);
}

namespace {

// Makes the leading stream wait for the others' earlier work (after: false), or the others wait
// for the leading stream's (after: true), with the events 2k (before) and 2k + 1 (after) of
// stream k.
Status joinStreams(StreamOps& ops, const BatchStreams& streams, const std::vector<Event>& events,
                   bool after) {
  for (int k = 1; k < streams.count; ++k) {
    const Event e = events[2 * k + (after ? 1 : 0)];
    TUTTI_TRY(ops.record(e, after ? streams.at[0] : streams.at[k]));
    TUTTI_TRY(ops.wait(after ? streams.at[k] : streams.at[0], e));
  }
  return Status::ok();
}

}  // namespace

Status ProcessClique::submitPeer(const std::vector<Call>& calls, const std::atomic<bool>* aborted) {
  TUTTI_TRY_ASSIGN(const BatchStreams streams, batchStreams(calls, rank_));
  Mailbox& box = region_->box[rank_];
  const auto limit = waitLimit();
  TUTTI_TRY(waitUntil(
      [&] { return box.taken.load(std::memory_order_acquire) + kDepth > seq_; },
      [&](std::chrono::milliseconds waited) -> Status {
        if (aborted && aborted->load()) return invalidUsage("rank {} was aborted", rank_);
        if (region_->failed.load(std::memory_order_acquire)) return failure();
        TUTTI_TRY(peerAlive(0));
        if (limit.count() > 0 && waited > limit)
          return makeStatus(Code::kTimeout,
                            "{}: rank {} waited more than {} s (TUTTI_TIMEOUT) for rank 0 to take "
                            "its call #{}",
                            calls.front().api, rank_, limit.count() / 1000, seq_ - kDepth);
        return Status::ok();
      }));
  // Describe the batch. A batch this rank cannot describe is still posted (with the reason), so
  // that the leader fails the call for every rank instead of waiting for it.
  Post& post = box.posts[seq_ % kDepth];
  post.seq = seq_;
  post.error[0] = '\0';
  post.ncalls = 0;
  std::string error;
  if (calls.size() > kMaxCallsPerPost)
    error = fmt::format("{} operations in one group; the device path takes at most {}",
                        calls.size(), kMaxCallsPerPost);
  for (size_t i = 0; i < calls.size() && error.empty(); ++i) {
    const Call& c = calls[i];
    WireCall& w = post.calls[i];
    w = WireCall{};
    w.kind = static_cast<uint8_t>(c.kind);
    w.coll = static_cast<uint8_t>(c.coll);
    w.dtype = static_cast<uint8_t>(c.dtype);
    w.op = static_cast<uint8_t>(c.op);
    w.preMul = c.preMul;
    w.root = c.root;
    w.peer = c.peer;
    w.count = c.count;
    w.scalar = c.scalar;
    std::snprintf(w.api, sizeof w.api, "%s", c.api);
    size_t in = 0, out = 0;
    if (c.kind == Call::Kind::kColl) {
      bufferCounts(c, rank_, nranks_, &in, &out);
    } else {
      (c.kind == Call::Kind::kSend ? in : out) = c.count;
    }
    auto describe = [&](const void* p, size_t n, WireBuffer& b) {
      if (n == 0 || !error.empty()) return;
      auto e = ops_->exportBuffer(p);
      if (!e.isOk()) {
        error = fmt::format("{}: {}", c.api, e.status().message());
        return;
      }
      b.handle = e->handle;
      b.offset = e->offset;
      b.allocation = e->allocation;
      b.used = 1;
    };
    describe(c.send, in, w.send);
    describe(c.recv, out, w.recv);
    post.ncalls = static_cast<int32_t>(i + 1);
  }
  std::snprintf(post.error, sizeof post.error, "%s", error.c_str());
  box.posted.store(seq_ + 1, std::memory_order_release);
  ++seq_;
  // The stream's side of the handshake, on the batch's first stream.
  TUTTI_TRY(joinStreams(*ops_, streams, events_, false));
  TUTTI_TRY(ops_->writeValue(streams.at[0], handshake(regionDev_->ready[rank_]), 1));
  TUTTI_TRY(ops_->waitAny(streams.at[0], &regionDev_->done[rank_].word, kFlagBit | kAbortBit));
  TUTTI_TRY(ops_->writeValue(streams.at[0], handshake(regionDev_->done[rank_]), 0));
  TUTTI_TRY(ops_->record(last_, streams.at[0]));
  used_ = true;
  TUTTI_TRY(joinStreams(*ops_, streams, events_, true));
  if (!error.empty()) return invalidUsage("{}", error);
  return Status::ok();
}

Status ProcessClique::submitLeader(const std::vector<Call>& calls,
                                   const std::atomic<bool>* aborted) {
  TUTTI_TRY_ASSIGN(const BatchStreams streams, batchStreams(calls, rank_));
  const auto limit = waitLimit();
  std::vector<std::vector<Call>> all(nranks_);
  std::vector<std::string> apis;  // the peers' api names, which the Calls point into
  apis.reserve(static_cast<size_t>(nranks_) * kMaxCallsPerPost);
  all[0] = calls;
  Status st;
  for (int r = 1; r < nranks_; ++r) {
    Mailbox& box = region_->box[r];
    auto nextReport = std::chrono::milliseconds(10000);
    Status waited = waitUntil(
        [&] { return box.posted.load(std::memory_order_acquire) > seq_; },
        [&](std::chrono::milliseconds w) -> Status {
          if (aborted && aborted->load()) return invalidUsage("rank 0 was aborted");
          if (region_->failed.load(std::memory_order_acquire)) return failure();
          TUTTI_TRY(peerAlive(r));
          if (limit.count() > 0 && w > limit)
            return makeStatus(Code::kTimeout,
                              "{}: rank 0 waited more than {} s (TUTTI_TIMEOUT) for rank {} to "
                              "make call #{} ({})",
                              calls.front().api, limit.count() / 1000, r, seq_,
                              describeCall(calls.front()));
          if (w > nextReport) {
            nextReport += std::chrono::milliseconds(10000);
            TUTTI_LOG_WARN(Subsys::kColl,
                           "{}: rank 0 has waited {} s for rank {} to make call #{} ({}) on the "
                           "device process clique",
                           calls.front().api, w.count() / 1000, r, seq_,
                           describeCall(calls.front()));
          }
          return Status::ok();
        });
    if (!waited.isOk()) {
      // Nothing is enqueued for this call: the peers that posted stay blocked on their streams
      // until the clique's failure reaches them (their abort releases them).
      fail(waited.message());
      return waited;
    }
    const Post& post = box.posts[seq_ % kDepth];
    if (post.error[0] && st.isOk()) st = invalidUsage("rank {}: {}", r, std::string(post.error));
    for (int i = 0; i < post.ncalls && st.isOk(); ++i) {
      const WireCall& w = post.calls[i];
      Call c;
      c.kind = static_cast<Call::Kind>(w.kind);
      c.coll = static_cast<Coll>(w.coll);
      c.dtype = static_cast<DataType>(w.dtype);
      c.op = static_cast<RedOp>(w.op);
      c.preMul = w.preMul != 0;
      c.root = w.root;
      c.peer = w.peer;
      c.count = w.count;
      c.scalar = w.scalar;
      apis.emplace_back(w.api, strnlen(w.api, sizeof w.api));
      c.api = apis.back().c_str();
      if (w.send.used) {
        auto p = mapped(r, {w.send.handle, w.send.offset, w.send.allocation});
        if (!p.isOk())
          st = Status(p.status().code(),
                      fmt::format("rank {}'s sendbuff: {}", r, p.status().message()));
        else
          c.send = p.value();
      }
      if (w.recv.used && st.isOk()) {
        auto p = mapped(r, {w.recv.handle, w.recv.offset, w.recv.allocation});
        if (!p.isOk())
          st = Status(p.status().code(),
                      fmt::format("rank {}'s recvbuff: {}", r, p.status().message()));
        else
          c.recv = p.value();
      }
      c.sendReachable = c.recvReachable = true;
      all[r].push_back(c);
    }
    box.taken.store(seq_ + 1, std::memory_order_release);
  }
  ++seq_;
  if (st.isOk()) st = composer_.check(all);
  // Every peer's stream is released whatever happened: ready consumed, done set.
  TUTTI_TRY(joinStreams(*ops_, streams, events_, false));
  for (int r = 1; r < nranks_; ++r) {
    TUTTI_TRY(ops_->waitAny(streams.at[0], &regionDev_->ready[r].word, kFlagBit | kAbortBit));
    TUTTI_TRY(ops_->writeValue(streams.at[0], handshake(regionDev_->ready[r]), 0));
  }
  if (st.isOk()) st = composer_.enqueue(all, *ops_, streams.at[0]);
  for (int r = 1; r < nranks_; ++r)
    TUTTI_TRY(ops_->writeValue(streams.at[0], handshake(regionDev_->done[r]), 1));
  TUTTI_TRY(ops_->record(last_, streams.at[0]));
  used_ = true;
  TUTTI_TRY(joinStreams(*ops_, streams, events_, true));
  if (!st.isOk()) fail(st.message());
  return st;
}

}  // namespace tutti::device
