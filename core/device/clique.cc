// File: core/device/clique.cc
// The thread clique's protocol (core/device/clique.h): the registry of cliques by key, the two
// call slots, the waiting ranks, and the launcher's capture check and stream dependencies (the
// checks of the calls and the launches themselves are core/device/compose.h's).
#include "core/device/clique.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "base/log.h"

namespace tutti::device {

namespace {

namespace prog = kernels::program;  // kMaxRanks

constexpr int kSlots = 2;
constexpr int kCollecting = 0, kLaunched = 1, kFailed = 2;

std::mutex gRegistryMu;
std::map<uint64_t, std::weak_ptr<Clique>>& registry() {
  static auto* r = new std::map<uint64_t, std::weak_ptr<Clique>>;  // never destroyed: used at exit
  return *r;
}

}  // namespace

struct Clique::Slot {
  std::mutex mu;
  uint64_t seq = UINT64_MAX;
  int arrived = 0;
  std::vector<std::vector<Call>> calls;                   // by rank
  std::vector<BatchStreams> streams;                      // by rank
  std::vector<std::array<Event, kMaxStreams>> ready;      // by rank: "inputs ready" per stream
  std::vector<uint8_t> present;                           // by rank: deposited
  Event done = nullptr;
  std::atomic<int> state{kCollecting};
  Status error;  // the launcher's result, written before `state`
};

Result<std::shared_ptr<Clique>> Clique::join(uint64_t key, int nranks, int rank, int device,
                                             StreamOps* ops) {
  if (nranks < 1 || nranks > prog::kMaxRanks)
    return invalidUsage("device clique: {} ranks on one GPU; at most {} are supported (nranks={})",
                        nranks, prog::kMaxRanks, nranks);
  if (rank < 0 || rank >= nranks)
    return invalidArgument("device clique: rank {} is outside [0, {})", rank, nranks);
  if (!ops) return invalidUsage("device clique: no stream operations (a build without CUDA)");
  std::lock_guard<std::mutex> lock(gRegistryMu);
  auto& reg = registry();
  if (auto it = reg.find(key); it != reg.end()) {
    if (auto c = it->second.lock()) {
      if (c->nranks_ != nranks || c->device_ != device)
        return invalidUsage(
            "device clique {:#x}: rank {} joins with {} ranks on device {}, but the clique has {} "
            "ranks on device {}",
            key, rank, nranks, device, c->nranks_, c->device_);
      return c;
    }
  }
  std::shared_ptr<Clique> c(new Clique(key, nranks, device, ops));
  TUTTI_TRY(c->init());
  reg[key] = c;
  TUTTI_LOG_INFO(Subsys::kInit, "device clique {:#x}: {} ranks as threads on device {}", key,
                 nranks, device);
  return c;
}

Clique::Clique(uint64_t key, int nranks, int device, StreamOps* ops)
    : key_(key),
      nranks_(nranks),
      device_(device),
      ops_(ops),
      seq_(nranks, 0),
      composer_(nranks, key) {}

Status Clique::init() {
  TUTTI_TRY(ops_->setDevice(device_));
  for (int k = 0; k < kSlots; ++k) {
    auto s = std::make_unique<Slot>();
    s->calls.resize(nranks_);
    s->streams.resize(nranks_);
    s->ready.resize(nranks_);
    s->present.assign(nranks_, 0);
    for (auto& perRank : s->ready) {
      for (Event& e : perRank) {
        TUTTI_TRY_ASSIGN(e, ops_->createEvent());
      }
    }
    TUTTI_TRY_ASSIGN(s->done, ops_->createEvent());
    slots_.push_back(std::move(s));
  }
  return Status::ok();
}

Clique::~Clique() {
  {
    std::lock_guard<std::mutex> lock(gRegistryMu);
    auto& reg = registry();
    if (auto it = reg.find(key_); it != reg.end() && it->second.expired()) reg.erase(it);
  }
  if (ops_->setDevice(device_).isOk()) {
    for (auto& s : slots_) {
      for (auto& perRank : s->ready)
        for (Event e : perRank)
          if (e) ops_->destroyEvent(e);
      if (s->done) ops_->destroyEvent(s->done);
    }
  }
}

void Clique::fail(const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.load()) return;
  failure_ = why;
  failed_.store(true, std::memory_order_release);
}

Status Clique::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Status(failure_.code(), "device clique: " + failure_.message());
}

Status Clique::submit(std::span<const RankBatch> batches) {
  if (batches.empty()) return Status::ok();
  if (failed_.load(std::memory_order_acquire)) return failure();
  const uint64_t seq = seq_[batches.front().rank];
  for (const RankBatch& b : batches)
    if (seq_[b.rank] != seq)
      return invalidUsage(
          "device clique: ranks {} and {} are submitted together at different call numbers "
          "({} and {}); a thread must submit its ranks' calls together every time",
          batches.front().rank, b.rank, seq, seq_[b.rank]);
  Slot& s = *slots_[seq % kSlots];

  std::vector<BatchStreams> streams(batches.size());
  for (size_t i = 0; i < batches.size(); ++i) {
    TUTTI_TRY_ASSIGN(streams[i], batchStreams(*batches[i].calls, batches[i].rank));
  }

  // Deposit. The launcher makes every CUDA call of the step (the ready events on every rank's
  // streams, the launches, the waits for "done"): the other ranks' threads are blocked here
  // meanwhile, so their streams hold exactly their work before the call, and one thread's calls
  // do not contend with the others' for the context's lock.
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.seq != seq) {  // first deposit of this call: the slot's previous call is over
      s.seq = seq;
      s.arrived = 0;
      std::fill(s.present.begin(), s.present.end(), 0);
      s.error = Status::ok();
      s.state.store(kCollecting, std::memory_order_relaxed);
    }
    for (size_t i = 0; i < batches.size(); ++i) {
      const int r = batches[i].rank;
      s.calls[r] = *batches[i].calls;
      s.streams[r] = streams[i];
      s.present[r] = 1;
    }
    s.arrived += static_cast<int>(batches.size());
    last = s.arrived == nranks_;
  }
  if (last) {
    Status st = ops_->setDevice(device_);
    if (st.isOk()) st = launch(s, streams.front().at[0]);
    if (!st.isOk()) fail(st);
    s.error = st;
    s.state.store(st.isOk() ? kLaunched : kFailed, std::memory_order_release);
  } else {
    TUTTI_TRY(await(s, batches, seq));
    if (s.state.load(std::memory_order_acquire) == kCollecting) return failure();
  }
  for (const RankBatch& b : batches) ++seq_[b.rank];
  return s.error;
}

// Waits until the launcher has published the slot, polling the abort flags, the clique's failure
// and TUTTI_TIMEOUT; a WARN names the missing ranks every 10 s.
Status Clique::await(Slot& s, std::span<const RankBatch> batches, uint64_t seq) {
  const auto limit = waitLimit();
  auto nextReport = std::chrono::milliseconds(10000);
  auto missing = [&] {
    std::lock_guard<std::mutex> lock(s.mu);
    std::string out;
    for (int r = 0; r < nranks_; ++r)
      if (!s.present[r]) out += fmt::format("{}{}", out.empty() ? "" : ",", r);
    return out;
  };
  const Call& first = batches.front().calls->front();
  return waitUntil(
      [&] {
        return s.state.load(std::memory_order_acquire) != kCollecting ||
               failed_.load(std::memory_order_acquire);
      },
      [&](std::chrono::milliseconds waited) -> Status {
        for (const RankBatch& b : batches) {
          if (b.aborted && b.aborted->load(std::memory_order_relaxed)) {
            Status why = invalidUsage("{}: rank {} was aborted while waiting for its peers",
                                      first.api, b.rank);
            fail(why);
            return why;
          }
        }
        if (limit.count() > 0 && waited > limit) {
          Status why = makeStatus(Code::kTimeout,
                                  "{}: rank {} waited more than {} s (TUTTI_TIMEOUT) for ranks "
                                  "{} to make call #{} ({}) on the device clique",
                                  first.api, batches.front().rank, limit.count() / 1000,
                                  missing(), seq, describeCall(first));
          fail(why);
          return why;
        }
        if (waited > nextReport) {
          nextReport += std::chrono::milliseconds(10000);
          TUTTI_LOG_WARN(Subsys::kColl,
                         "{}: rank {} has waited {} s for ranks {} to make call #{} ({}) on the "
                         "device clique",
                         first.api, batches.front().rank, waited.count() / 1000, missing(), seq,
                         describeCall(first));
        }
        return Status::ok();
      });
}

Status Clique::launch(Slot& s, Stream launchStream) {
  TUTTI_TRY(composer_.check(s.calls));
  // A graph capture must hold every rank's stream (one capture, or none).
  uint64_t capture = 0;
  int captureRank = -1;
  for (int r = 0; r < nranks_; ++r) {
    for (int j = 0; j < s.streams[r].count; ++j) {
      TUTTI_TRY_ASSIGN(const uint64_t id, ops_->captureId(s.streams[r].at[j]));
      if (captureRank < 0) {
        capture = id;
        captureRank = r;
      } else if (id != capture) {
        auto what = [](uint64_t c) {
          return c ? fmt::format("captured (capture {})", c) : std::string("not captured");
        };
        return invalidUsage(
            "{}: rank {}'s stream is {} but rank {}'s stream is {}: on the device path the "
            "calls of every rank of one process must be captured in one graph (capture the "
            "group of all ranks' calls from one thread) or not at all",
            s.calls[r].front().api, captureRank, what(capture), r, what(id));
      }
    }
  }
  if (failed_.load(std::memory_order_acquire)) return failure();
  // Every other stream's work so far before the launches; from then on "done" is recorded and
  // waited on by every other stream even when a launch fails, so that the streams stay ordered.
  for (int r = 0; r < nranks_; ++r) {
    for (int j = 0; j < s.streams[r].count; ++j) {
      if (s.streams[r].at[j] == launchStream) continue;
      TUTTI_TRY(ops_->record(s.ready[r][j], s.streams[r].at[j]));
      TUTTI_TRY(ops_->wait(launchStream, s.ready[r][j]));
    }
  }
  Status st = composer_.enqueue(s.calls, *ops_, launchStream);
  TUTTI_TRY(ops_->record(s.done, launchStream));
  for (int r = 0; r < nranks_; ++r) {
    for (int j = 0; j < s.streams[r].count; ++j) {
      if (s.streams[r].at[j] == launchStream) continue;
      Status w = ops_->wait(s.streams[r].at[j], s.done);
      if (st.isOk() && !w.isOk()) st = w;
    }
  }
  return st;
}

}  // namespace tutti::device
