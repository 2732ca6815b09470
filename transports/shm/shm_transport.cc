// File: transports/shm/shm_transport.cc
// The `shm` transport between ranks of one host. Each rank owns one POSIX shared-memory segment:
// a header (futex doorbell, sleeping flag) and, per peer rank, an inbound channel made of
//  - an inline ring of cache lines for small messages: each 64-byte line carries 56 bytes of
//    payload and an 8-byte flag (the line's sequence number + 1) written last, so one cache-line
//    transfer delivers data and "ready" together (NCCL's LL128 idea, on host memory);
//  - a byte ring for larger messages, with a head (bytes published, sender) and a tail (bytes
//    consumed, receiver) on their own cache lines. The sender reads the tail only when its cached
//    copy says the ring is full.
// The receiver copies or reduces straight out of the line or ring into the destination (no
// intermediate buffer; with RecvSpec::streaming a copy uses non-temporal stores). Messages of at
// least TUTTI_SHM_CMA_BYTES (off by default) go by single copy instead: the sender puts only a
// descriptor (its buffer's address) in the byte ring, the receiver reads the data straight out
// of the sender's process with process_vm_readv (Linux cross-memory attach, CMA) and then
// acknowledges, which completes the send. Messages match by order per direction and both sides
// give the same byte count, so both pick the same path from the size alone. Byte-ring messages
// (and descriptors) start on 64-byte boundaries, so an element never straddles the ring's wrap.
// Waiters sleep on their own doorbell; a peer that publishes data or frees space wakes a sleeping
// rank with FUTEX_WAKE.
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/env.h"
#include "base/log.h"
#include "base/page_buffer.h"
#include "transports/fifo.h"
#include "transports/shm/shm_wire.h"
#include "transports/transport.h"

namespace tutti::transport {
namespace {

TUTTI_PARAM_INT(kRingBytes, "TUTTI_SHM_RING_BYTES", nullptr, "SHM", 1 << 20,
                "bytes of each per-peer shared-memory ring (power of two, >= 4096)");
// Default 112 bytes (two lines). 2-rank allreduce on the development VM (ns per call,
// tutti-latency), byte ring against inline: 8 B 170 vs 166 in the fast vCPU placement and 430
// vs 374 in the slow one (tutti-xcore-probe; one line instead of a head line plus a data line);
// 56 B 173 vs 163; 112 B 185 vs 169; but 256 B 190 vs 235 and 512 B 260 vs 345 (a flag check
// and a reduction call per 56-byte line). 0 sends every message through the byte ring.
TUTTI_PARAM_INT(kInlineBytes, "TUTTI_SHM_INLINE_BYTES", nullptr, "SHM", 112,
                "messages up to this many bytes travel in flagged cache lines (56 payload bytes "
                "per line); 0 sends every message through the byte ring");
// Off by default: on the development VM single copy measured slower than the ring at every size:
// 2-rank allgather 12.1-12.3 ms against 10.5-10.8 at 64 MiB and 80-82 us against 40-44 at 1 MiB.
TUTTI_PARAM_INT(kCmaBytes, "TUTTI_SHM_CMA_BYTES", nullptr, "SHM", 0,
                "messages (slices) of at least this many bytes are read by the receiver straight "
                "out of the sender's memory with process_vm_readv (single copy); 0: never");

constexpr size_t kLine = 64;
using shm_wire::kMagic;

struct alignas(kLine) SegmentHeader {
  uint64_t magic;
  int32_t pid;
  int32_t nranks;
  uint64_t ringBytes;
  uint64_t selfAddr;  // where the owner maps this segment (probed with CMA by peers)
  alignas(kLine) std::atomic<uint32_t> doorbell;  // futex word: bumped to wake this rank
  std::atomic<uint32_t> sleeping;                 // this rank is (about to be) asleep
};

struct alignas(kLine) RingHeader {
  std::atomic<uint64_t> head;  // written by the sender: bytes published
  alignas(kLine) std::atomic<uint64_t> tail;  // written by the receiver: bytes consumed
  alignas(kLine) std::atomic<uint64_t> inlineTail;  // written by the receiver: lines consumed
  alignas(kLine) std::atomic<uint64_t> cmaDone;  // written by the receiver: CMA messages read
};

// A single-copy message's record in the byte ring (one 64-byte slot).
struct CmaDescriptor {
  uint64_t addr;   // the message's bytes in the sender's address space
  uint64_t bytes;  // its size (both ends know it; checked)
};
static_assert(sizeof(CmaDescriptor) <= kLine);

// The inline ring: kInlineLines lines of kInlinePayload bytes + an 8-byte flag.
constexpr size_t kInlineLines = 256;
constexpr size_t kInlinePayload = kLine - sizeof(uint64_t);
static_assert((kInlineLines & (kInlineLines - 1)) == 0);
static_assert(kInlinePayload % 8 == 0, "whole elements of every dtype fit a line");

size_t ringStride(size_t ringBytes) {
  return sizeof(RingHeader) + kInlineLines * kLine + ringBytes;
}
size_t segmentBytes(int nranks, size_t ringBytes) {
  return sizeof(SegmentHeader) + static_cast<size_t>(nranks) * ringStride(ringBytes);
}
RingHeader* ringAt(void* seg, int index, size_t ringBytes) {
  return reinterpret_cast<RingHeader*>(static_cast<std::byte*>(seg) + sizeof(SegmentHeader) +
                                       static_cast<size_t>(index) * ringStride(ringBytes));
}
std::byte* inlineLines(RingHeader* ring) { return reinterpret_cast<std::byte*>(ring + 1); }
std::byte* ringData(RingHeader* ring) { return inlineLines(ring) + kInlineLines * kLine; }
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
  // MAP_POPULATE: the sender maps its peer's segment and would otherwise take a page-table fault
  // on its first write to each ring page, inside the first collectives (about +0.05 us per
  // message for the first 1 MiB of small messages through a ring).
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) return systemError("shm: mmap({}): {}", name, errnoString(e));
  return p;
}

class ShmConnection final : public Connection {
 public:
  ShmConnection(int rank, int peer, std::string peerHost, std::shared_ptr<Mapping> mine,
                std::shared_ptr<Mapping> theirs, size_t ringBytes, size_t inlineMax,
                size_t cmaMin)
      : rank_(rank),
        peer_(peer),
        peerHost_(std::move(peerHost)),
        ringBytes_(ringBytes),
        mask_(ringBytes - 1),
        inlineMax_(inlineMax),
        cmaMin_(cmaMin),
        peerHeader_(static_cast<SegmentHeader*>(theirs->addr)),
        mine_(std::move(mine)),
        theirs_(std::move(theirs)),
        in_(ringAt(mine_->addr, peer, ringBytes)),
        out_(ringAt(theirs_->addr, rank, ringBytes)),
        inLines_(inlineLines(in_)),
        outLines_(inlineLines(out_)),
        peerPid_(peerHeader_->pid) {}

  uint64_t postSend(const void* src, size_t bytes) override {
    sends_.push({static_cast<const std::byte*>(src), bytes, 0, 0});
    return ++sendsPosted_;
  }
  uint64_t postRecv(const RecvSpec& spec) override {
    recvs_.push({spec, 0, 0});
    return ++recvsPosted_;
  }

  Status progress() override {
    const uint64_t before = bytesSent + bytesReceived + cmaPosted_;
    while (!sends_.empty()) {
      PendingSend& s = sends_.front();
      if (s.bytes > 0 && !(s.bytes <= inlineMax_ ? sendInline(s)
                           : isCma(s.bytes)       ? sendCma(s)
                                                  : sendRing(s)))
        break;
      sends_.pop();
      ++sendsDone_;
    }
    // Single-copy sends queued behind one that awaits its acknowledgement: publish their
    // descriptors now, so the receiver reads them back to back instead of one per round trip.
    if (!sends_.empty() && sends_.front().cmaSeq != 0)
      for (size_t i = 1; i < sends_.size(); ++i) {
        PendingSend& s = sends_[i];
        if (!isCma(s.bytes) || (s.cmaSeq == 0 && !postDescriptor(s)))
          break;
      }
    while (!recvs_.empty()) {
      PendingRecv& r = recvs_.front();
      if (r.spec.bytes > 0 && !(r.spec.bytes <= inlineMax_ ? recvInline(r)
                                : isCma(r.spec.bytes)      ? recvCma(r)
                                                           : recvRing(r)))
        break;
      recvs_.pop();
      ++recvsDone_;
    }
    // One fence for everything published or consumed in this pass: a sleeping peer is woken.
    if (bytesSent + bytesReceived + cmaPosted_ != before) wakeIfSleeping(peerHeader_);
    if (!error_.isOk()) return error_;
    return Status::ok();
  }

  uint64_t sendsDone() const override { return sendsDone_; }
  uint64_t recvsDone() const override { return recvsDone_; }

  // Either ring holds unread bytes: the next inline line's flag is set, or the byte ring's head
  // (written by the sender after the data) is past what was consumed.
  Result<bool> incomingPending() override {
    std::byte* line = inLines_ + (inlineRecvd_ & (kInlineLines - 1)) * kLine;
    if (__atomic_load_n(flagOf(line), __ATOMIC_ACQUIRE) == inlineRecvd_ + 1) return true;
    return in_->head.load(std::memory_order_acquire) > recvPos_;
  }

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
    uint64_t cmaSeq;  // single copy: its descriptor's number once published, else 0
  };
  struct PendingRecv {
    RecvSpec spec;
    size_t done;
    uint64_t remote;  // single copy: the sender's address once its descriptor was read, else 0
  };

  // Whether a message of `bytes` goes by single copy (inline lines win for the smallest).
  bool isCma(size_t bytes) const { return cmaMin_ > 0 && bytes >= cmaMin_ && bytes > inlineMax_; }

  // Publishes the descriptor of single-copy send `s` in the byte ring; false when it is full.
  bool postDescriptor(PendingSend& s) {
    sendPos_ = alignUp(sendPos_);
    if (sendPos_ + kLine - tailSeen_ > ringBytes_) {
      tailSeen_ = out_->tail.load(std::memory_order_acquire);
      if (sendPos_ + kLine - tailSeen_ > ringBytes_) return false;
    }
    const CmaDescriptor d{reinterpret_cast<uint64_t>(s.src), s.bytes};
    std::memcpy(ringData(out_) + (sendPos_ & mask_), &d, sizeof d);
    sendPos_ += kLine;
    out_->head.store(sendPos_, std::memory_order_release);
    s.cmaSeq = ++cmaPosted_;
    return true;
  }

  // A single-copy send is done when the receiver has acknowledged reading it.
  bool sendCma(PendingSend& s) {
    if (s.cmaSeq == 0 && !postDescriptor(s)) return false;
    if (cmaAckSeen_ < s.cmaSeq) {
      cmaAckSeen_ = out_->cmaDone.load(std::memory_order_acquire);
      if (cmaAckSeen_ < s.cmaSeq) return false;
    }
    bytesSent += s.bytes;
    return true;
  }

  // Reads (and reduces) a single-copy message out of the sender's memory, at most kCmaStep bytes
  // per call so that other connections progress between; true when it is complete. A failure
  // goes to error_ (progress() returns it).
  bool recvCma(PendingRecv& r) {
    const RecvSpec& spec = r.spec;
    if (r.remote == 0) {
      recvPos_ = alignUp(recvPos_);
      if (in_->head.load(std::memory_order_acquire) < recvPos_ + kLine) return false;
      CmaDescriptor d;
      std::memcpy(&d, ringData(in_) + (recvPos_ & mask_), sizeof d);
      recvPos_ += kLine;
      in_->tail.store(recvPos_, std::memory_order_release);
      if (d.bytes != spec.bytes || d.addr == 0) {
        error_ = internalError("shm: rank {} announced a single-copy message of {} bytes where "
                               "rank {} expects {} bytes (rank={}, peer={})",
                               peer_, d.bytes, rank_, spec.bytes, rank_, peer_);
        return false;
      }
      r.remote = d.addr;
    }
    constexpr size_t kCmaStep = 1 << 20;
    const size_t n = std::min(kCmaStep, spec.bytes - r.done);
    auto* dst = static_cast<std::byte*>(spec.dst) + r.done;
    if (!spec.reduce) {
      if (!readRemote(dst, r.remote + r.done, n)) return false;
    } else {
      // Through a small buffer that stays in cache: dst = src op (what the sender holds).
      constexpr size_t kBounce = 64 << 10;  // a multiple of every element size
      if (bounce_.empty()) bounce_.grow(kBounce);
      for (size_t off = 0; off < n; off += kBounce) {
        const size_t m = std::min(kBounce, n - off);
        if (!readRemote(bounce_.data(), r.remote + r.done + off, m)) return false;
        spec.reduce(dst + off, static_cast<const std::byte*>(spec.src) + r.done + off,
                    bounce_.data(), m / spec.elemBytes);
      }
    }
    r.done += n;
    bytesReceived += n;
    if (r.done < spec.bytes) return false;
    in_->cmaDone.store(++cmaRead_, std::memory_order_release);
    return true;
  }

  // process_vm_readv of [addr, addr + n) of the peer into dst; false (error_ set) on failure.
  bool readRemote(std::byte* dst, uint64_t addr, size_t n) {
    while (n > 0) {
      iovec local{dst, n};
      iovec remote{reinterpret_cast<void*>(addr), n};
      const ssize_t got = process_vm_readv(peerPid_, &local, 1, &remote, 1, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        const int e = got < 0 ? errno : EIO;
        error_ = e == ESRCH ? remoteError("shm: rank {} (pid {}, host {}) is gone (rank={}, "
                                          "peer={})",
                                          peer_, peerPid_, peerHost_, rank_, peer_)
                            : systemError("shm: single-copy read of {} bytes from rank {} (pid "
                                          "{}) failed: {} (TUTTI_SHM_CMA_BYTES={}; rank={}, "
                                          "peer={})",
                                          n, peer_, peerPid_, errnoString(e), cmaMin_, rank_,
                                          peer_);
        return false;
      }
      dst += got;
      addr += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
    return true;
  }

  static uint64_t* flagOf(std::byte* line) {
    return reinterpret_cast<uint64_t*>(line + kInlinePayload);
  }

  // Writes as many lines of `s` as the inline ring has room for; true when all are written.
  bool sendInline(PendingSend& s) {
    while (s.done < s.bytes) {
      if (inlineSent_ - inlineTailSeen_ >= kInlineLines) {
        inlineTailSeen_ = out_->inlineTail.load(std::memory_order_acquire);
        if (inlineSent_ - inlineTailSeen_ >= kInlineLines) return false;
      }
      std::byte* line = outLines_ + (inlineSent_ & (kInlineLines - 1)) * kLine;
      const size_t n = std::min(kInlinePayload, s.bytes - s.done);
      std::memcpy(line, s.src + s.done, n);
      __atomic_store_n(flagOf(line), inlineSent_ + 1, __ATOMIC_RELEASE);
      ++inlineSent_;
      s.done += n;
      bytesSent += n;
    }
    return true;
  }

  // Copies or reduces every line of `r` that has arrived; true when the message is complete.
  bool recvInline(PendingRecv& r) {
    const RecvSpec& spec = r.spec;
    const uint64_t first = inlineRecvd_;
    while (r.done < spec.bytes) {
      std::byte* line = inLines_ + (inlineRecvd_ & (kInlineLines - 1)) * kLine;
      if (__atomic_load_n(flagOf(line), __ATOMIC_ACQUIRE) != inlineRecvd_ + 1) break;
      const size_t n = std::min(kInlinePayload, spec.bytes - r.done);
      auto* dst = static_cast<std::byte*>(spec.dst) + r.done;
      if (spec.reduce)
        spec.reduce(dst, static_cast<const std::byte*>(spec.src) + r.done, line, n / spec.elemBytes);
      else
        std::memcpy(dst, line, n);
      ++inlineRecvd_;
      r.done += n;
      bytesReceived += n;
    }
    if (inlineRecvd_ != first) in_->inlineTail.store(inlineRecvd_, std::memory_order_release);
    return r.done == spec.bytes;
  }

  // Copies as much of `s` into the byte ring as fits; true when all of it is published.
  bool sendRing(PendingSend& s) {
    if (s.done == 0) sendPos_ = alignUp(sendPos_);
    while (s.done < s.bytes) {
      int64_t space = static_cast<int64_t>(ringBytes_) - static_cast<int64_t>(sendPos_ - tailSeen_);
      if (space <= 0) {
        tailSeen_ = out_->tail.load(std::memory_order_acquire);
        space = static_cast<int64_t>(ringBytes_) - static_cast<int64_t>(sendPos_ - tailSeen_);
        if (space <= 0) return false;
      }
      const size_t off = sendPos_ & mask_;
      const size_t n =
          std::min<size_t>({static_cast<size_t>(space), s.bytes - s.done, ringBytes_ - off});
      std::memcpy(ringData(out_) + off, s.src + s.done, n);
      s.done += n;
      sendPos_ += n;
      bytesSent += n;
      out_->head.store(sendPos_, std::memory_order_release);
    }
    return true;
  }

  // Copies or reduces what has arrived of `r` out of the byte ring; true when it is complete.
  bool recvRing(PendingRecv& r) {
    const RecvSpec& spec = r.spec;
    if (r.done == 0) recvPos_ = alignUp(recvPos_);
    bool consumed = false;
    while (r.done < spec.bytes) {
      const uint64_t head = in_->head.load(std::memory_order_acquire);
      const int64_t avail = static_cast<int64_t>(head) - static_cast<int64_t>(recvPos_);
      if (avail <= 0) break;
      const size_t off = recvPos_ & mask_;
      size_t n =
          std::min<size_t>({static_cast<size_t>(avail), spec.bytes - r.done, ringBytes_ - off});
      n -= n % spec.elemBytes;
      if (n == 0) break;
      const std::byte* slot = ringData(in_) + off;
      auto* dst = static_cast<std::byte*>(spec.dst) + r.done;
      if (spec.reduce)
        spec.reduce(dst, static_cast<const std::byte*>(spec.src) + r.done, slot, n / spec.elemBytes);
      else if (spec.streaming)
        kernels::copyStreaming(dst, slot, n);
      else
        std::memcpy(dst, slot, n);
      r.done += n;
      recvPos_ += n;
      bytesReceived += n;
      consumed = true;
    }
    if (consumed) in_->tail.store(recvPos_, std::memory_order_release);
    return r.done == spec.bytes;
  }

  int rank_, peer_;
  std::string peerHost_;
  size_t ringBytes_, mask_, inlineMax_, cmaMin_;
  SegmentHeader* peerHeader_;
  std::shared_ptr<Mapping> mine_;  // both mappings live as long as any connection uses them
  std::shared_ptr<Mapping> theirs_;
  RingHeader* in_;   // in my segment: from peer to me
  RingHeader* out_;  // in the peer's segment: from me to peer
  std::byte* inLines_;
  std::byte* outLines_;
  int peerPid_;
  uint64_t sendPos_ = 0, recvPos_ = 0, tailSeen_ = 0;
  uint64_t inlineSent_ = 0, inlineRecvd_ = 0, inlineTailSeen_ = 0;  // in lines
  uint64_t sendsDone_ = 0, recvsDone_ = 0;
  uint64_t cmaPosted_ = 0, cmaAckSeen_ = 0, cmaRead_ = 0;  // single-copy messages
  PageBuffer bounce_;  // single-copy reductions read through it (page-aligned: process_vm_readv)
  Status error_ = Status::ok();
  Fifo<PendingSend> sends_;
  Fifo<PendingRecv> recvs_;
};

using shm_wire::Blob;

// Touches one byte per page (the segment is zero-filled, so writing 0 changes nothing).
void prefault(void* addr, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* p = static_cast<volatile std::byte*>(addr);
  for (size_t off = 0; off < bytes; off += page) p[off] = p[off];
}

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
    const int64_t ib = kInlineBytes.get();
    if (ib < 0 || ib > static_cast<int64_t>(kInlineLines / 2 * kInlinePayload))
      return invalidArgument("shm: TUTTI_SHM_INLINE_BYTES must be in [0, {}] (value={})",
                             kInlineLines / 2 * kInlinePayload, ib);
    inlineBytes_ = static_cast<size_t>(ib);
    const int64_t cb = kCmaBytes.get();
    if (cb < 0)
      return invalidArgument("shm: TUTTI_SHM_CMA_BYTES must be >= 0 (value={})", cb);
    cmaBytes_ = static_cast<size_t>(cb);
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
    h->selfAddr = reinterpret_cast<uint64_t>(mine_->addr);
    for (int p = 0; p < ctx.nranks; ++p) new (ringAt(mine_->addr, p, ringBytes_)) RingHeader{};
    // NUMA placement by first touch: the owner (the receiving rank) faults in every page of its
    // inbound rings now, so they sit on its memory node and no collective takes the faults.
    prefault(mine_->addr, mine_->bytes);
    Blob blob{};
    blob.magic = kMagic;
    blob.ringBytes = ringBytes_;
    blob.inlineBytes = inlineBytes_;
    blob.cmaBytes = cmaBytes_;
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
    TUTTI_TRY_ASSIGN(const Blob blob, shm_wire::parseBlob(peerBlob, peer, ringBytes_, inlineBytes_,
                                                                cmaBytes_));
    auto theirs = std::make_shared<Mapping>();
    theirs->bytes = segmentBytes(ctx.nranks, ringBytes_);
    TUTTI_TRY_ASSIGN(theirs->addr,
                     mapSegment(blob.name, theirs->bytes, /*create=*/false, ctx.nranks));
    auto* h = static_cast<SegmentHeader*>(theirs->addr);
    if (h->magic != kMagic || h->nranks != ctx.nranks)
      return internalError("shm: segment {} of rank {} is not initialised", blob.name, peer);
    if (cmaBytes_ > 0) TUTTI_TRY(probeCma(*h, peer, ctx.peers[peer].hostname));
    return std::unique_ptr<Connection>(std::make_unique<ShmConnection>(
        ctx.rank, peer, ctx.peers[peer].hostname, mine_, std::move(theirs), ringBytes_,
        inlineBytes_, cmaBytes_));
  }

  // Single copy needs process_vm_readv on the peer (same user, and no ptrace restriction such as
  // Yama's ptrace_scope >= 1 or a container without CAP_SYS_PTRACE): one read of the peer's
  // segment magic through it now, so that a refusal fails init with its reason, not a call.
  Status probeCma(const SegmentHeader& h, int peer, const std::string& host) const {
    uint64_t magic = 0;
    iovec local{&magic, sizeof magic};
    iovec remote{reinterpret_cast<void*>(h.selfAddr), sizeof magic};
    if (process_vm_readv(h.pid, &local, 1, &remote, 1, 0) == sizeof magic && magic == kMagic)
      return Status::ok();
    const int e = errno;
    return systemError("shm: TUTTI_SHM_CMA_BYTES={} needs process_vm_readv on rank {} (pid {}, "
                       "host {}), which fails: {} (ptrace restrictions: kernel.yama.ptrace_scope, "
                       "a container without CAP_SYS_PTRACE); set TUTTI_SHM_CMA_BYTES=0",
                       cmaBytes_, peer, h.pid, host, magic == 0 ? errnoString(e) : "wrong data");
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
  size_t inlineBytes_ = 0;
  size_t cmaBytes_ = 0;
  std::string name_;
  std::shared_ptr<Mapping> mine_;
  bool unlinkPending_ = false;
};

}  // namespace

TUTTI_REGISTER_TRANSPORT({.name = "shm", .priority = 80,
                          .make = [] { return std::make_unique<ShmTransport>(); }});

}  // namespace tutti::transport
