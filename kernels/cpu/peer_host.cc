// File: kernels/cpu/peer_host.cc
// The host emulator's memory policy and its runner. A channel is one thread (one lane), so the
// policy's barriers and broadcasts are trivial; counters are read with acquire and written with
// release through std::atomic_ref, low-latency words with relaxed 8-byte atomics (flag and data
// in one access, as the GPU's stores), so that ThreadSanitizer sees every handoff.
#include "kernels/peer_host.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "kernels/convert.h"
#include "kernels/peer_interp.h"

namespace tutti::kernels::peer {

namespace {

class HostPolicy {
 public:
  HostPolicy(uint32_t yieldPerMille, uint64_t seed) : perMille_(yieldPerMille), rng_(seed) {}

  int lane() const { return 0; }
  int lanes() const { return 1; }
  void sync() {}
  uint64_t uniform(uint64_t v) { return v; }
  bool any(bool v) { return v; }
  uint64_t loadAcquire(const uint64_t* p) {
    return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p)).load(std::memory_order_acquire);
  }
  void publish(uint64_t* p, uint64_t v) {
    std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_release);
  }
  void llStore(uint64_t* line, uint64_t w0, uint64_t w1) {
    std::atomic_ref<uint64_t>(line[0]).store(w0, std::memory_order_relaxed);
    shake();  // a reader may see one word of the line before the other
    std::atomic_ref<uint64_t>(line[1]).store(w1, std::memory_order_relaxed);
  }
  void llLoad(const uint64_t* line, uint64_t& w0, uint64_t& w1) {
    uint64_t* l = const_cast<uint64_t*>(line);
    w0 = std::atomic_ref<uint64_t>(l[0]).load(std::memory_order_relaxed);
    w1 = std::atomic_ref<uint64_t>(l[1]).load(std::memory_order_relaxed);
  }
  void copy(void* dst, const void* src, uint64_t bytes) {
    if (bytes != 0 && dst != src) std::memmove(dst, src, bytes);
  }
  uint64_t nowNs() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }
  bool aborted(const uint32_t* flag) {
    return flag != nullptr && std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(flag))
                                      .load(std::memory_order_acquire) != 0;
  }
  void backoff(uint32_t idlePasses) {
    // Ranks and channels outnumber the cores: a thread that spins takes the CPU its peer needs.
    if (idlePasses > 64) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    } else if (idlePasses > 4) {
      std::this_thread::yield();
    }
  }
  void shake() {
    if (perMille_ != 0 && rng_() % 1000 < perMille_) std::this_thread::yield();
  }
  bool claim(uint32_t* word) {
    uint32_t expected = 0;
    return std::atomic_ref<uint32_t>(*word).compare_exchange_strong(expected, 1,
                                                                    std::memory_order_acq_rel);
  }
  void release32(uint32_t* p, uint32_t v) {
    std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_release);
  }
  uint32_t acquire32(const uint32_t* p) {
    return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_acquire);
  }

 private:
  uint32_t perMille_;
  std::minstd_rand rng_;
};

template <typename T, RedOp R>
Failure runChannel(const Launch& launch, int channel, HostPolicy& policy) {
  return Interp<T, R, HostPolicy>(launch, channel, policy).run();
}

template <typename T>
Failure runTyped(const Launch& launch, int channel, HostPolicy& policy) {
  switch (launch.program->op) {
    case RedOp::kProd:
      return runChannel<T, RedOp::kProd>(launch, channel, policy);
    case RedOp::kMax:
      return runChannel<T, RedOp::kMax>(launch, channel, policy);
    case RedOp::kMin:
      return runChannel<T, RedOp::kMin>(launch, channel, policy);
    default:  // kSum; avg is compiled to kSum and a divide
      return runChannel<T, RedOp::kSum>(launch, channel, policy);
  }
}

Failure runAny(const Launch& launch, int channel, HostPolicy& policy) {
  Failure f = Failure::kBadProgram;
  if (!isValid(launch.program->dtype)) return f;
  kernels::detail::withElementType(
      launch.program->dtype, [&]<typename T>(T) { f = runTyped<T>(launch, channel, policy); });
  return f;
}

const char* waitName(uint32_t kind) { return kind == 1 ? "data from" : kind == 2 ? "room at" : ""; }

}  // namespace

Status failureStatus(const ErrorRecord& e, uint64_t timeoutNs) {
  switch (static_cast<Failure>(e.failure)) {
    case Failure::kNone:
      return Status::ok();
    case Failure::kTimeout:
      return timeoutError(
          "rank {} (channel {}, round {}, op {}) waited {} ms for {} peer {}: counter {} "
          "expected, {} seen",
          e.rank, e.channel, e.round, e.op, timeoutNs / 1000000, waitName(e.waitKind), e.peer,
          e.expected, e.seen);
    case Failure::kAborted:
      return invalidUsage(
          "rank {} (channel {}, round {}, op {}): aborted while waiting for {} "
          "peer {}",
          e.rank, e.channel, e.round, e.op, waitName(e.waitKind), e.peer);
    case Failure::kNotDirect:
      if (e.seen == 1)
        return invalidUsage(
            "rank {} (channel {}, round {}, op {}): peer {} did not run this call with direct "
            "messages as this rank did: its buffers must lie in windows "
            "(ncclCommWindowRegister) on every rank of the call or on none",
            e.rank, e.channel, e.round, e.op, e.peer);
      return invalidUsage(
          "rank {} (channel {}, round {}, op {}): peer {}'s buffer at {:#x} lies in no window "
          "this process mapped: with ranks in several processes, a call's buffers must lie in "
          "windows (ncclCommWindowRegister) on every rank or on none",
          e.rank, e.channel, e.round, e.op, e.peer, e.expected);
    case Failure::kBadProgram:
      break;
  }
  return internalError(
      "rank {} channel {}: the peer program does not fit its launch (arena, "
      "ranks, channels or protocol)",
      e.rank, e.channel);
}

Status runOnHost(const Launch& launch, const HostOptions& options) {
  if (launch.program == nullptr || launch.program->magic != kMagic)
    return invalidArgument("peer::runOnHost: launch.program is not a peer program");
  const int rank = launch.program->rank;
  if (rank < 0 || rank >= kMaxRanks || launch.arenas[rank] == nullptr)
    return invalidArgument("peer::runOnHost: no arena for rank {}", rank);
  if (launch.error == nullptr) return invalidArgument("peer::runOnHost: launch.error is null");
  const int channels = static_cast<int>(launch.program->nchannels);
  std::vector<Failure> results(channels, Failure::kNone);
  auto body = [&](int c) {
    HostPolicy policy(options.yieldPerMille,
                      options.seed * 7919 + static_cast<uint64_t>(rank) * 131 + c);
    results[c] = runAny(launch, c, policy);
  };
  if (channels == 1) {
    body(0);
  } else {
    std::vector<std::thread> threads;
    threads.reserve(channels);
    for (int c = 0; c < channels; ++c) threads.emplace_back(body, c);
    for (auto& t : threads) t.join();
  }
  for (Failure f : results) {
    if (f == Failure::kNone) continue;
    Status s = failureStatus(*launch.error, launch.timeoutNs);
    return s.isOk() ? internalError("peer::runOnHost: rank {} failed without a record", rank) : s;
  }
  return Status::ok();
}

void HostArena::Free::operator()(unsigned char* p) const {
  ::operator delete[](p, std::align_val_t{256});
}

HostArena::HostArena(const ArenaLayout& layout)
    : mem_(static_cast<unsigned char*>(::operator new[](layout.bytes, std::align_val_t{256}))),
      layout_(layout) {
  std::memset(mem_.get(), 0, layout.bytes);
}

void HostArena::startCountersAt(uint64_t start) {
  const ArenaConfig& c = layout_.config;
  const uint64_t fifos = static_cast<uint64_t>(c.nranks) * c.channels;
  auto* tails = reinterpret_cast<Counter*>(mem_.get() + layout_.tailsAt);
  auto* heads = reinterpret_cast<Counter*>(mem_.get() + layout_.headsAt);
  auto* llHeads = reinterpret_cast<Counter*>(mem_.get() + layout_.llHeadsAt);
  auto* states = reinterpret_cast<FifoState*>(mem_.get() + layout_.statesAt);
  for (uint64_t f = 0; f < fifos; ++f) {
    tails[f].value = heads[f].value = llHeads[f].value = start;
    states[f].sent = states[f].recvd = states[f].llSent = states[f].llRecvd = start;
  }
  const uint64_t flag = static_cast<uint64_t>(llFlag(start - 1)) << 32;
  auto* words = reinterpret_cast<uint64_t*>(mem_.get() + layout_.llAt);
  const uint64_t nwords = fifos * c.llSlots * c.llLines * 2;
  for (uint64_t w = 0; w < nwords; ++w) words[w] = flag;
}

}  // namespace tutti::kernels::peer
