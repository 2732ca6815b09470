// File: tests/unit/emu_peer_device.h
// The peer executor's device (core/device/peer.h) emulated on CPU threads, for its tests without
// a GPU (peer_executor_test.cc, peer_process_test.cc): device memory is shared memory (so that
// another process of a test can map a rank's arena, as CUDA IPC does), mapped host memory is
// host memory, a stream is a worker thread (tests/unit/emu_stream.h), and a kernel launch runs
// the peer program in the host emulator (kernels/peer_host.h). Also the helpers both tests use:
// a rank's DeviceOwner, a small arena, a collective's BatchOp.
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "core/batch.h"
#include "core/device/peer.h"
#include "kernels/peer_host.h"
#include "tests/unit/emu_stream.h"
#include "tests/unit/engine_reference.h"

namespace tutti::device::emu {

namespace peer = kernels::peer;

class EmuPeerDevice final : public PeerDevice {
 public:
  ~EmuPeerDevice() override {
    for (auto& [p, a] : allocations_) {
      munmap(p, a.second);
      shm_unlink(a.first.c_str());
    }
  }
  Status setDevice(int device) override {
    current() = device;
    return Status::ok();
  }
  Result<int> currentDevice() override { return current(); }
  Result<void*> allocDevice(size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    static std::atomic<uint64_t> next{0};  // unique in the process, whatever the device object
    const std::string name = fmt::format("/tutti-emu-{}-{}", getpid(), next.fetch_add(1));
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return systemError("shm_open({}): {}", name, std::strerror(errno));
    void* p = MAP_FAILED;
    if (ftruncate(fd, static_cast<off_t>(bytes)) == 0)
      p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
      shm_unlink(name.c_str());
      return systemError("mapping {} bytes of {} failed", bytes, name);
    }
    allocations_[p] = {name, bytes};
    return p;
  }
  void freeDevice(void* p) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = allocations_.find(p);
    if (it == allocations_.end()) return;
    munmap(p, it->second.second);
    shm_unlink(it->second.first.c_str());
    allocations_.erase(it);
  }
  Result<void*> allocMapped(size_t bytes) override {
    void* p = ::operator new[](bytes, std::align_val_t{256});
    std::memset(p, 0, bytes);
    return p;
  }
  void freeMapped(void* p) override { ::operator delete[](p, std::align_val_t{256}); }
  Status enablePeerAccess(int peerDevice) override {
    if (unreachable_ >= 0 && (peerDevice == unreachable_ || current() == unreachable_))
      return invalidUsage("device {} cannot access device {}", current(), peerDevice);
    return Status::ok();
  }
  Status upload(void* dst, const void* src, size_t bytes) override {
    uploads_.fetch_add(1);
    std::memcpy(dst, src, bytes);
    return Status::ok();
  }
  Status launch(const peer::Launch& l, const peer::ProgramHeader& h, Stream s) override {
    launches_.fetch_add(1);
    if (h.direct != 0) directLaunches_.fetch_add(1);
    static_cast<tutti::test::EmuStream*>(s)->enqueue([this, l] {
      Status st = peer::runOnHost(l, peer::HostOptions{20, 7});
      std::lock_guard<std::mutex> lock(mu_);
      if (!st.isOk()) kernelErrors_.push_back(st.message());
    });
    return Status::ok();
  }
  Result<void*> registerHost(void* p, size_t) override {
    registered_.fetch_add(1);
    return p;
  }
  void unregisterHost(void*) override { registered_.fetch_sub(1); }
  // The handle: the shared memory's size (8 bytes), then its name.
  Result<PeerMemoryHandle> exportMemory(void* base) override {
    TUTTI_TRY_ASSIGN(const BufferExport e, exportBuffer(base));
    if (e.offset != 0) return invalidUsage("{} is no device allocation's base", base);
    return e.handle;
  }
  Result<void*> openMemory(const PeerMemoryHandle& h) override {
    uint64_t bytes = 0;
    std::memcpy(&bytes, h.data(), sizeof bytes);
    const std::string name(reinterpret_cast<const char*>(h.data()) + sizeof bytes);
    if (name.rfind(fmt::format("/tutti-emu-{}-", getpid()), 0) == 0)
      return internalError("{} is this process's own memory (never opened: CUDA IPC refuses)",
                           name);
    const int fd = shm_open(name.c_str(), O_RDWR, 0600);
    if (fd < 0) return systemError("shm_open({}): {}", name, std::strerror(errno));
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return systemError("mapping {} failed", name);
    std::lock_guard<std::mutex> lock(mu_);
    opened_[p] = bytes;
    return p;
  }
  void closeMemory(void* base) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = opened_.find(base);
    if (it == opened_.end()) return;
    munmap(base, it->second);
    opened_.erase(it);
  }

  // The allocation that holds p, and p's offset in it.
  Result<BufferExport> exportBuffer(const void* p) override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto* a = static_cast<const unsigned char*>(p);
    for (auto& [base, alloc] : allocations_) {
      const auto* b = static_cast<const unsigned char*>(base);
      if (a < b || a >= b + alloc.second) continue;
      BufferExport e;
      const uint64_t bytes = alloc.second;
      std::memcpy(e.handle.data(), &bytes, sizeof bytes);
      std::memcpy(e.handle.data() + sizeof bytes, alloc.first.c_str(), alloc.first.size());
      e.offset = static_cast<uint64_t>(a - b);
      return e;
    }
    return invalidUsage("buffer {} is no device allocation (CUDA IPC cannot share it)", p);
  }
  Status synchronize(Stream s) override {
    static_cast<tutti::test::EmuStream*>(s)->synchronize();
    return Status::ok();
  }

  size_t openedCount() {
    std::lock_guard<std::mutex> lock(mu_);
    return opened_.size();
  }

  std::atomic<int> uploads_{0}, launches_{0}, registered_{0};
  std::atomic<int> directLaunches_{0};  // of programs with direct messages
  int unreachable_ = -1;                // a device no other can reach
  std::mutex mu_;                       // kernelErrors_, allocations_, opened_
  std::vector<std::string> kernelErrors_;

 private:
  static int& current() {
    thread_local int d = 0;
    return d;
  }
  std::map<void*, std::pair<std::string, size_t>> allocations_;  // shared memory: name, bytes
  std::map<void*, size_t> opened_;                               // other processes': bytes
};

class FakeOwner final : public DeviceOwner {
 public:
  FakeOwner(int rank, int nranks) : rank_(rank), nranks_(nranks) {}
  int deviceRank() const override { return rank_; }
  int deviceRanks() const override { return nranks_; }
  bool deviceAborted() const override { return aborted.load(); }
  bool deviceReady() const override { return true; }
  void post(std::function<void()> task, const CallArgs&) override { task(); }
  Status runHost(std::vector<BatchOp>&) override { return internalError("not staged here"); }
  void recordDeviceError(const Status& s, bool) override {
    std::lock_guard<std::mutex> lock(mu);
    if (recorded.isOk()) recorded = s;
  }
  std::atomic<bool> aborted{false};
  std::mutex mu;
  Status recorded;

 private:
  int rank_, nranks_;
};

// FIFOs of a few small slots, so that a call of a few thousand elements wraps them many times.
inline peer::ArenaConfig smallArena(int nranks) {
  peer::ArenaConfig c;
  c.nranks = nranks;
  c.channels = 4;
  c.slots = 4;
  c.slotBytes = 256;
  c.llSlots = 4;
  c.llLines = 8;
  c.scratchBytes = 64 << 10;
  return c;
}

inline BatchOp collOp(Coll coll, tutti::test::UserRank& u, size_t count, DataType dtype, RedOp op,
                      int root, const char* api) {
  BatchOp o;
  o.kind = BatchOp::Kind::kColl;
  o.coll = coll;
  o.send = u.send();
  o.recv = u.recv();
  o.count = count;
  o.dtype = dtype;
  o.op = op;
  o.root = root;
  o.sendDevice = o.recvDevice = o.sendReachable = o.recvReachable = true;
  o.api = api;
  return o;
}

// The host engine's result of a call on every rank's memory (layOut's inputs), by the first
// registered algorithm that takes the shape; on exact arithmetic (integer sum, float max) any
// algorithm and piece split gives the same bits. Empty `err` on success.
struct Reference {
  std::vector<tutti::test::UserRank> users, want;
  std::string err;
};
inline Reference reference(const algo::CollShape& shape) {
  Reference ref;
  ref.users = tutti::test::layOut(shape, shape.dtype);
  ref.want = ref.users;
  for (const algo::AlgorithmInfo& info : algo::registry())
    if (info.coll == shape.coll && !info.loaded && (!info.supports || info.supports(shape))) {
      ref.err = tutti::test::runEngine(shape, info,
                                       tutti::test::Arith{shape.dtype, shape.op, false}, ref.want);
      if (!ref.err.empty()) ref.err = "engine: " + ref.err;
      return ref;
    }
  ref.err = "no reference algorithm";
  return ref;
}

}  // namespace tutti::device::emu
