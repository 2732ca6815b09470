// File: transports/shm/shm_transport.cc
// The `shm` transport between ranks of one host. Each rank owns one POSIX shared-memory segment:
// a header (futex doorbell, sleeping flag) and one inbound byte ring per peer rank. A sender
// writes into the receiver's ring; the receiver copies or reduces straight out of the ring into
// the destination (no intermediate buffer). Messages start on 64-byte boundaries of the stream,
// so an element never straddles the ring's wrap. Waiters sleep on their own doorbell; a peer that
// publishes data or frees space wakes a sleeping rank with FUTEX_WAKE.
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>

#include "core/env.h"
#include "core/log.h"
#include "transports/shm/shm_wire.h"
#include "transports/transport.h"

namespace tutti::transport {
namespace {

TUTTI_PARAM_INT(kRingBytes, "TUTTI_SHM_RING_BYTES", nullptr, "SHM", 1 << 20,
                "bytes of each per-peer shared-memory ring (power of two, >= 4096)");

constexpr size_t kLine = 64;
using shm_wire::kMagic;

struct alignas(kLine) SegmentHeader {
  uint64_t magic;
  int32_t pid;
  int32_t nranks;
  uint64_t ringBytes;
  alignas(kLine) std::atomic<uint32_t> doorbell;  // futex word: bumped to wake this rank
  std::atomic<uint32_t> sleeping;                 // this rank is (about to be) asleep
};

struct alignas(kLine) RingHeader {
  std::atomic<uint64_t> head;  // written by the sender: bytes published
  alignas(kLine) std::atomic<uint64_t> tail;  // written by the receiver: bytes consumed
};

size_t ringStride(size_t ringBytes) { return sizeof(RingHeader) + ringBytes; }
size_t segmentBytes(int nranks, size_t ringBytes) {
  return sizeof(SegmentHeader) + static_cast<size_t>(nranks) * ringStride(ringBytes);
}
RingHeader* ringAt(void* seg, int index, size_t ringBytes) {
  return reinterpret_cast<RingHeader*>(static_cast<std::byte*>(seg) + sizeof(SegmentHeader) +
                                       static_cast<size_t>(index) * ringStride(ringBytes));
}
std::byte* ringData(RingHeader* ring) { return reinterpret_cast<std::byte*>(ring + 1); }
uint64_t alignUp(uint64_t v) { return (v + kLine - 1) & ~uint64_t(kLine - 1); }

void wakeIfSleeping(SegmentHeader* h) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (h->sleeping.load(std::memory_order_relaxed)) {
    h->doorbell.fetch_add(1, std::memory_order_release);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&h->doorbell), FUTEX_WAKE, 1, nullptr,
            nullptr, 0);
  }
}

std::string segmentName(uint64_t secret, int rank) {
  return fmt::format("/tutti-{:016x}-{}-{}", secret, getpid(), rank);
}

// A process that exited but was not reaped yet (a zombie) still answers kill(pid, 0).
bool processAlive(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return true;  // no /proc: trust kill()
  char buf[512];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* paren = std::strrchr(buf, ')');  // "pid (comm) S ..."
  return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}

struct Mapping {
  void* addr = MAP_FAILED;
  size_t bytes = 0;
  ~Mapping() {
    if (addr != MAP_FAILED) munmap(addr, bytes);
  }
};

TUTTI_PARAM_INT(kShmFallback, "TUTTI_SHM_FALLBACK", nullptr, "SHM", 0,
                "1: when /dev/shm is missing or full, ranks of one host use tcp instead of failing");

// A segment that cannot be created: SystemError (init fails) naming the size and the fixes, or,
// with TUTTI_SHM_FALLBACK=1, InvalidUsage, which makes the communicator skip shm (tcp is used).
Status segmentUnavailable(const std::string& name, size_t bytes, int nranks, const char* what,
                          int err) {
  struct statvfs vfs {};
  const std::string room =
      statvfs("/dev/shm", &vfs) == 0
          ? fmt::format("{} bytes free in /dev/shm", static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize)
          : std::string("/dev/shm is missing");
  const std::string text = fmt::format(
      "shm: cannot {} the shared-memory segment {} of {} bytes ({} rings of TUTTI_SHM_RING_BYTES "
      "plus a header; every rank of this host needs one): {}; {}. Fix: make /dev/shm larger "
      "(docker run --shm-size=1g; mount -o remount,size=... /dev/shm) or mount it, lower "
      "TUTTI_SHM_RING_BYTES, or set TUTTI_SHM_FALLBACK=1 to use tcp between the ranks of this host",
      what, name, bytes, nranks, errnoString(err), room);
  if (kShmFallback.get() == 1)
    return invalidUsage("{} (TUTTI_SHM_FALLBACK=1: using tcp instead)", text);
  return systemError("{}", text);
}

Result<void*> mapSegment(const std::string& name, size_t bytes, bool create, int nranks) {
  // Owner-only (0600): only this user's processes may attach; the name is unlinked once every
  // peer has attached (finishSetup).
  int fd = create ? shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600)
                  : shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    const int e = errno;
    if (create) return segmentUnavailable(name, bytes, nranks, "create", e);
    return systemError("shm: shm_open({}): {}", name, errnoString(e));
  }
  if (create) {
    // Reserve the pages now: on a full tmpfs ftruncate succeeds and the first write raises
    // SIGBUS; posix_fallocate reports ENOSPC instead (NCCL does the same).
    int e = ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
    if (e == 0) {
      e = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
      if (e == EOPNOTSUPP || e == EINVAL) e = 0;  // no fallocate on this file system: as before
    }
    if (e != 0) {
      close(fd);
      shm_unlink(name.c_str());
      return segmentUnavailable(name, bytes, nranks, "allocate", e);
    }
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) return systemError("shm: mmap({}): {}", name, errnoString(e));
  return p;
}

class ShmConnection final : public Connection {
 public:
  ShmConnection(int rank, int peer, std::string peerHost, std::shared_ptr<Mapping> mine,
                std::shared_ptr<Mapping> theirs, size_t ringBytes)
      : rank_(rank),
        peer_(peer),
        peerHost_(std::move(peerHost)),
        ringBytes_(ringBytes),
        mask_(ringBytes - 1),
        peerHeader_(static_cast<SegmentHeader*>(theirs->addr)),
        mine_(std::move(mine)),
        theirs_(std::move(theirs)),
        in_(ringAt(mine_->addr, peer, ringBytes)),
        out_(ringAt(theirs_->addr, rank, ringBytes)),
        peerPid_(peerHeader_->pid) {}

  uint64_t postSend(const void* src, size_t bytes) override {
    sends_.push_back({static_cast<const std::byte*>(src), bytes, 0});
    return ++sendsPosted_;
  }
  uint64_t postRecv(const RecvSpec& spec) override {
    recvs_.push_back({spec, 0});
    return ++recvsPosted_;
  }

  Status progress() override {
    bool published = false, consumed = false;
    while (!sends_.empty()) {
      PendingSend& s = sends_.front();
      if (s.bytes == 0) {
        sends_.pop_front();
        ++sendsDone_;
        continue;
      }
      if (s.done == 0) sendPos_ = alignUp(sendPos_);
      const uint64_t tail = out_->tail.load(std::memory_order_acquire);
      const int64_t space = static_cast<int64_t>(ringBytes_) - static_cast<int64_t>(sendPos_ - tail);
      if (space <= 0) break;
      const size_t off = sendPos_ & mask_;
      size_t n = std::min<size_t>({static_cast<size_t>(space), s.bytes - s.done, ringBytes_ - off});
      std::memcpy(ringData(out_) + off, s.src + s.done, n);
      s.done += n;
      sendPos_ += n;
      bytesSent += n;
      out_->head.store(sendPos_, std::memory_order_release);
      published = true;
      if (s.done == s.bytes) {
        sends_.pop_front();
        ++sendsDone_;
      }
    }
    if (published) wakeIfSleeping(peerHeader_);

    while (!recvs_.empty()) {
      PendingRecv& r = recvs_.front();
      const RecvSpec& spec = r.spec;
      if (spec.bytes == 0) {
        recvs_.pop_front();
        ++recvsDone_;
        continue;
      }
      if (r.done == 0) recvPos_ = alignUp(recvPos_);
      const uint64_t head = in_->head.load(std::memory_order_acquire);
      const int64_t avail = static_cast<int64_t>(head) - static_cast<int64_t>(recvPos_);
      if (avail <= 0) break;
      const size_t off = recvPos_ & mask_;
      size_t n = std::min<size_t>({static_cast<size_t>(avail), spec.bytes - r.done, ringBytes_ - off});
      n -= n % spec.elemBytes;
      if (n == 0) break;
      const std::byte* slot = ringData(in_) + off;
      auto* dst = static_cast<std::byte*>(spec.dst) + r.done;
      if (spec.reduce) {
        const auto* src = static_cast<const std::byte*>(spec.src) + r.done;
        spec.reduce(dst, src, slot, n / spec.elemBytes);
      } else {
        std::memcpy(dst, slot, n);
      }
      r.done += n;
      recvPos_ += n;
      bytesReceived += n;
      in_->tail.store(recvPos_, std::memory_order_release);
      consumed = true;
      if (r.done == spec.bytes) {
        recvs_.pop_front();
        ++recvsDone_;
      }
    }
    if (consumed) wakeIfSleeping(peerHeader_);
    return Status::ok();
  }

  uint64_t sendsDone() const override { return sendsDone_; }
  uint64_t recvsDone() const override { return recvsDone_; }

  Status checkPeer() override {
    if (peerPid_ > 0 && !processAlive(peerPid_))
      return remoteError("shm: rank {} (pid {}, host {}) is gone (rank={}, peer={})", peer_,
                         peerPid_, peerHost_, rank_, peer_);
    return Status::ok();
  }

 private:
  struct PendingSend {
    const std::byte* src;
    size_t bytes;
    size_t done;
  };
  struct PendingRecv {
    RecvSpec spec;
    size_t done;
  };
  int rank_, peer_;
  std::string peerHost_;
  size_t ringBytes_, mask_;
  SegmentHeader* peerHeader_;
  std::shared_ptr<Mapping> mine_;  // both mappings live as long as any connection uses them
  std::shared_ptr<Mapping> theirs_;
  RingHeader* in_;   // in my segment: from peer to me
  RingHeader* out_;  // in the peer's segment: from me to peer
  int peerPid_;
  uint64_t sendPos_ = 0, recvPos_ = 0;
  uint64_t sendsDone_ = 0, recvsDone_ = 0;
  std::deque<PendingSend> sends_;
  std::deque<PendingRecv> recvs_;
};

using shm_wire::Blob;

class ShmTransport final : public Transport {
 public:
  ~ShmTransport() override { finishSetup(); }
  std::string_view name() const override { return "shm"; }

  Result<std::vector<std::byte>> setup(const Context& ctx) override {
    int64_t rb = kRingBytes.get();
    if (rb < 4096 || (rb & (rb - 1)) != 0)
      return invalidArgument("shm: TUTTI_SHM_RING_BYTES must be a power of two >= 4096 (value={})",
                             rb);
    ringBytes_ = static_cast<size_t>(rb);
    name_ = segmentName(ctx.secret, ctx.rank);
    mine_ = std::make_shared<Mapping>();
    mine_->bytes = segmentBytes(ctx.nranks, ringBytes_);
    TUTTI_TRY_ASSIGN(mine_->addr, mapSegment(name_, mine_->bytes, /*create=*/true, ctx.nranks));
    unlinkPending_ = true;
    auto* h = new (mine_->addr) SegmentHeader{};
    h->magic = kMagic;
    h->pid = getpid();
    h->nranks = ctx.nranks;
    h->ringBytes = ringBytes_;
    for (int p = 0; p < ctx.nranks; ++p) new (ringAt(mine_->addr, p, ringBytes_)) RingHeader{};
    Blob blob{};
    blob.magic = kMagic;
    blob.ringBytes = ringBytes_;
    std::snprintf(blob.name, sizeof blob.name, "%s", name_.c_str());
    std::vector<std::byte> out(sizeof blob);
    std::memcpy(out.data(), &blob, sizeof blob);
    TUTTI_LOG_INFO(Subsys::kShm, "shm: segment {} ({} bytes, ring {} bytes)", name_, mine_->bytes,
                   ringBytes_);
    return out;
  }

  bool canConnect(const Context& ctx, int peer) const override {
    return peer != ctx.rank && ctx.peers[peer].hostId == ctx.peers[ctx.rank].hostId;
  }

  Result<std::unique_ptr<Connection>> connect(const Context& ctx, int peer,
                                              std::span<const std::byte> peerBlob) override {
    TUTTI_TRY_ASSIGN(const Blob blob, shm_wire::parseBlob(peerBlob, peer, ringBytes_));
    auto theirs = std::make_shared<Mapping>();
    theirs->bytes = segmentBytes(ctx.nranks, ringBytes_);
    TUTTI_TRY_ASSIGN(theirs->addr,
                     mapSegment(blob.name, theirs->bytes, /*create=*/false, ctx.nranks));
    auto* h = static_cast<SegmentHeader*>(theirs->addr);
    if (h->magic != kMagic || h->nranks != ctx.nranks)
      return internalError("shm: segment {} of rank {} is not initialised", blob.name, peer);
    return std::unique_ptr<Connection>(std::make_unique<ShmConnection>(
        ctx.rank, peer, ctx.peers[peer].hostname, mine_, std::move(theirs), ringBytes_));
  }

  void finishSetup() override {
    if (unlinkPending_) {
      shm_unlink(name_.c_str());
      unlinkPending_ = false;
    }
  }

  uint32_t* doorbell() override {
    return mine_ ? reinterpret_cast<uint32_t*>(&static_cast<SegmentHeader*>(mine_->addr)->doorbell)
                 : nullptr;
  }
  void setSleeping(bool s) override {
    if (!mine_) return;
    static_cast<SegmentHeader*>(mine_->addr)->sleeping.store(s ? 1 : 0, std::memory_order_seq_cst);
  }

 private:
  size_t ringBytes_ = 0;
  std::string name_;
  std::shared_ptr<Mapping> mine_;
  bool unlinkPending_ = false;
};

}  // namespace

TUTTI_REGISTER_TRANSPORT({.name = "shm", .priority = 80,
                          .make = [] { return std::make_unique<ShmTransport>(); }});

}  // namespace tutti::transport
