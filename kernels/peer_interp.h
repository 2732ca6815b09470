// File: kernels/peer_interp.h
// The peer interpreter: runs one channel of one rank's peer program (kernels/peer_program.h),
// written once for the GPU (a CTA per channel, kernels/cuda/peer_kernels.cuh) and for the host
// emulator (a CPU thread per channel, kernels/peer_host.h), over a memory policy P that supplies
// the loads, stores, fences and waits of each. The arithmetic is kernels/program_eval.h's, so
// each piece's results are the host engine's on that piece's schedule, bit for bit.
//
// How a channel runs a round: every op of the round is tried in turn, and an op moves as many
// slices as it can without waiting (a send while its FIFO has room, a receive while slices have
// arrived, a forward while both hold); local ops (copy, reduce, divide) run whole. When a pass
// over the round moves nothing, the channel idles (P::backoff), checks the abort flag, its
// timeout and the other channels' failure, and tries again. An op moves a slice only when the
// FIFO's counter stands at the op's slot, so messages on one FIFO keep the schedule's order even
// when several ops of a round use it. Direct messages (kernels/peer_program.h) move through the
// same counters: a direct send publishes without copying, a direct receive reads the sender's
// buffer through its CallRecord, and a channel with direct sends ends by waiting for their heads.
//
// Policy P (an object; every member TUTTI_HD):
//   int lane(), lanes()                      this thread among the channel's (0 of 1 on the host)
//   void sync()                              barrier of the channel's lanes
//   uint64_t uniform(uint64_t v)             lane 0's v, on every lane (a barrier inside)
//   bool any(bool v)                         v of any lane, on every lane (a barrier inside)
//   uint64_t loadAcquire(const uint64_t*)    a counter a peer releases
//   void publish(uint64_t*, uint64_t v)      lane 0 releases v after every lane's writes
//                                            (called by lane 0 after sync())
//   void llStore(uint64_t* line, uint64_t w0, uint64_t w1), llLoad(line, &w0, &w1)
//                                            one 16-byte line, each 8-byte word one access
//   void copy(void* dst, const void* src, uint64_t bytes)   all lanes together
//   uint64_t nowNs(); bool aborted(const uint32_t* flag)
//   void backoff(uint32_t idlePasses)        between passes that moved nothing
//   void shake()                             the emulator's random yield points; no-op on the GPU
//   bool claim(uint32_t* word)               0 -> 1 exchange, true for the first caller
//   void release32(uint32_t* p, uint32_t v); uint32_t acquire32(const uint32_t* p)
#pragma once

#include <cstdint>

#include "kernels/peer_program.h"
#include "kernels/program_eval.h"

namespace tutti::kernels::peer {

namespace detail {

/// A piece's view of one buffer (kernels/peer_program.h's view rule).
struct View {
  unsigned char* base = nullptr;
  uint64_t c0 = 0, n = 1, count = 0;
  bool blocked = false;
};

/// Element index in the buffer of the view's element i.
TUTTI_HD inline uint64_t viewIndex(const View& v, uint64_t i) {
  return v.blocked ? (i / v.n) * v.count + v.c0 + i % v.n : v.c0 + i;
}
/// Elements from the view's element i that are contiguous in the buffer.
TUTTI_HD inline uint64_t viewRun(const View& v, uint64_t i) {
  return v.blocked ? v.n - i % v.n : ~uint64_t{0};
}
TUTTI_HD inline uint64_t minU(uint64_t a, uint64_t b) { return a < b ? a : b; }

}  // namespace detail

/// Interprets channel `channel` of `launch.program` for element type T and op R (T of the
/// dtype's size; for programs without arithmetic any T works: their data moves as bytes).
template <typename T, RedOp R, class P>
class Interp {
 public:
  TUTTI_HD Interp(const Launch& launch, int channel, P& policy)
      : l_(launch), h_(launch.program), ch_(channel), p_(policy) {}

  /// Runs the channel's rounds; Failure::kNone when they completed. On failure the rank's
  /// ErrorRecord says why (the first failing channel writes it) and the FIFO counters are not
  /// written back: the arena is unusable afterwards.
  TUTTI_HD Failure run() {
    // The arena first, so that even a refused program's record is claimed once.
    if (h_ != nullptr && h_->magic == kMagic && h_->rank >= 0 && h_->rank < kMaxRanks)
      own_ = l_.arenas[h_->rank];
    if (!valid()) return fail(Failure::kBadProgram, -1, -1, 0, 0, 0);
    if (static_cast<uint32_t>(ch_) >= h_->nchannels) return Failure::kNone;
    const ArenaConfig& cfg = l_.layout.config;
    kSlots_ = h_->protocol == Protocol::kSimple ? cfg.slots : cfg.llSlots;
    payload_ = h_->payloadBytes;
    perSlot_ = payload_ / h_->elemBytes;
    for (int q = 0; q < h_->nranks; ++q) {
      const FifoState* st = state(q);
      sentBase_[q] = h_->protocol == Protocol::kSimple ? st->sent : st->llSent;
      recvdBase_[q] = h_->protocol == Protocol::kSimple ? st->recvd : st->llRecvd;
      sent_[q] = recvd_[q] = 0;
      headSeen_[q] = tailSeen_[q] = 0;
      directUntil_[q] = 0;
    }
    if (h_->direct != 0) {
      // The buffers this channel's direct receivers read; published by the first counter
      // release that announces a direct slice.
      if (p_.lane() == 0) {
        CallRecord* rec = record(h_->rank);
        rec->input = reinterpret_cast<uint64_t>(l_.input);
        rec->output = reinterpret_cast<uint64_t>(l_.output);
        rec->shape = h_->shape;
        for (int q = 0; q < h_->nranks; ++q) rec->start[q] = sentBase_[q];
      }
      p_.sync();
    }
    const Round* rs = rounds(h_);
    const uint32_t first = h_->channelRounds[ch_], last = h_->channelRounds[ch_ + 1];
    for (uint32_t ri = first; ri < last; ++ri) {
      round_ = static_cast<int>(ri - first);
      const Failure f = runRound(rs[ri]);
      if (f != Failure::kNone) return f;
    }
    if (const Failure f = awaitDirectReaders(); f != Failure::kNone) return f;
    p_.sync();
    if (p_.lane() == 0) {
      for (int q = 0; q < h_->nranks; ++q) {
        FifoState* st = state(q);
        if (h_->protocol == Protocol::kSimple) {
          st->sent = sentBase_[q] + sent_[q];
          st->recvd = recvdBase_[q] + recvd_[q];
        } else {
          st->llSent = sentBase_[q] + sent_[q];
          st->llRecvd = recvdBase_[q] + recvd_[q];
        }
      }
    }
    p_.sync();
    return Failure::kNone;
  }

 private:
  using View = detail::View;

  // ---- checks and addresses ----

  TUTTI_HD bool valid() const {
    const ArenaConfig& c = l_.layout.config;
    if (h_ == nullptr || h_->magic != kMagic || l_.error == nullptr) return false;
    if (h_->nranks != c.nranks || h_->rank < 0 || h_->rank >= h_->nranks) return false;
    if (h_->nranks > kMaxRanks || h_->nchannels > static_cast<uint32_t>(c.channels)) return false;
    if (h_->nchannels > static_cast<uint32_t>(kMaxChannels)) return false;
    if (h_->payloadBytes != payloadBytes(c, h_->protocol) || h_->payloadBytes % 16 != 0)
      return false;
    if (h_->elemBytes == 0 || h_->scratchBytes > c.scratchBytes) return false;
    for (int q = 0; q < h_->nranks; ++q)
      if (l_.arenas[q] == nullptr) return false;
    return true;
  }

  TUTTI_HD uint64_t fifo(int sender, int receiver) const {
    (void)receiver;
    return static_cast<uint64_t>(sender) * l_.layout.config.channels + ch_;
  }
  TUTTI_HD FifoState* state(int peer) const {
    return reinterpret_cast<FifoState*>(own_ + l_.layout.statesAt) +
           static_cast<uint64_t>(peer) * l_.layout.config.channels + ch_;
  }
  // The FIFO sender -> receiver's tail counter, in the receiver's arena.
  TUTTI_HD uint64_t* tail(int sender, int receiver) const {
    return &reinterpret_cast<Counter*>(l_.arenas[receiver] +
                                       l_.layout.tailsAt)[fifo(sender, receiver)]
                .value;
  }
  // The FIFO sender -> receiver's head counter (kSimple or kLowLatency), in the sender's arena.
  TUTTI_HD uint64_t* head(int sender, int receiver) const {
    const uint64_t at = h_->protocol == Protocol::kSimple ? l_.layout.headsAt : l_.layout.llHeadsAt;
    return &reinterpret_cast<Counter*>(
                l_.arenas[sender] +
                at)[static_cast<uint64_t>(receiver) * l_.layout.config.channels + ch_]
                .value;
  }
  TUTTI_HD unsigned char* slot(int sender, int receiver, uint64_t use) const {
    const ArenaConfig& c = l_.layout.config;
    return l_.arenas[receiver] + l_.layout.slotsAt +
           (fifo(sender, receiver) * c.slots + use % c.slots) * c.slotBytes;
  }
  TUTTI_HD uint64_t* line(int sender, int receiver, uint64_t use, uint64_t j) const {
    const ArenaConfig& c = l_.layout.config;
    return reinterpret_cast<uint64_t*>(
        l_.arenas[receiver] + l_.layout.llAt +
        ((fifo(sender, receiver) * c.llSlots + use % c.llSlots) * c.llLines + j) * 16);
  }

  TUTTI_HD CallRecord* record(int rank) const {
    return reinterpret_cast<CallRecord*>(l_.arenas[rank] + l_.layout.callsAt) + ch_;
  }
  // The piece's view of the buffer a direct receive reads: the sender's, by its CallRecord
  // (read after the slice's counter was acquired, which orders the record's writes before);
  // across processes, where this process mapped it. 0, or why there is none (Failure::kNotDirect's
  // ErrorRecord::seen), with the sender's address in `at`.
  TUTTI_HD uint32_t senderView(const Op& op, const Piece& pc, View& v, uint64_t& at) const {
    const CallRecord* rec = record(op.peer);
    v.c0 = pc.c0;
    v.n = pc.count == 0 ? 1 : pc.count;
    v.count = h_->count;
    const bool input = op.peerBuf == BufKind::kInput;
    at = input ? rec->input : rec->output;
    v.blocked = (input ? h_->inputBlocked : h_->outputBlocked) != 0;
    if (rec->shape != h_->shape || rec->start[h_->rank] != recvdBase_[op.peer]) return 1;
    if (((l_.remote >> op.peer) & 1u) == 0) {
      v.base = reinterpret_cast<unsigned char*>(at);
      return 0;
    }
    const uint64_t bytes = (v.blocked ? static_cast<uint64_t>(h_->nranks) : 1) * h_->count *
                           h_->elemBytes;
    const WindowMap* w =
        l_.windows == nullptr ? nullptr : l_.windows + static_cast<uint64_t>(op.peer) * kMaxWindows;
    for (int i = 0; w != nullptr && i < kMaxWindows; ++i)
      if (w[i].bytes != 0 && at >= w[i].base && at - w[i].base <= w[i].bytes &&
          bytes <= w[i].bytes - (at - w[i].base)) {
        v.base = reinterpret_cast<unsigned char*>(w[i].local + (at - w[i].base));
        return 0;
      }
    return 2;
  }

  TUTTI_HD View view(BufKind b, const Piece& pc) const {
    View v;
    v.c0 = pc.c0;
    v.n = pc.count == 0 ? 1 : pc.count;
    v.count = h_->count;
    if (b == BufKind::kInput) {
      v.base = static_cast<unsigned char*>(const_cast<void*>(l_.input));
      v.blocked = h_->inputBlocked != 0;
    } else if (b == BufKind::kOutput) {
      v.base = static_cast<unsigned char*>(l_.output);
      v.blocked = h_->outputBlocked != 0;
    } else if (b == BufKind::kScratch) {
      v.base =
          own_ + l_.layout.scratchAt + static_cast<uint64_t>(ch_) * l_.layout.config.scratchBytes;
      v.c0 = 0;
      v.blocked = false;
    } else {  // a launch buffer: its elements from 0, whatever the piece
      const uint32_t k = static_cast<uint32_t>(b) - kFirstBuffer;
      v.base = k < static_cast<uint32_t>(kMaxBuffers) ? static_cast<unsigned char*>(l_.buffers[k])
                                                      : nullptr;
      v.c0 = 0;
      v.blocked = false;
    }
    return v;
  }
  TUTTI_HD unsigned char* at(const View& v, uint64_t i) const {
    return v.base + detail::viewIndex(v, i) * h_->elemBytes;
  }

  // ---- failure ----

  TUTTI_HD Failure fail(Failure why, int op, int peer, uint64_t expected, uint64_t seen,
                        uint32_t kind) {
    if (p_.lane() == 0 && l_.error != nullptr) {
      ErrorRecord* e = l_.error;
      // The first failing channel writes the record. The claim is a device-memory word of the
      // rank's arena (atomics on mapped host memory are not portable); a program refused before
      // its arena is known writes without one.
      uint32_t* claim =
          own_ != nullptr ? reinterpret_cast<uint32_t*>(own_ + l_.layout.claimAt) : nullptr;
      if (claim == nullptr || p_.claim(claim)) {
        e->rank = h_ != nullptr ? h_->rank : -1;
        e->channel = ch_;
        e->round = round_;
        e->op = op;
        e->peer = peer;
        e->expected = expected;
        e->seen = seen;
        e->waitKind = kind;
        p_.release32(&e->failure, static_cast<uint32_t>(why));
      }
    }
    p_.sync();
    return why;
  }

  // Called after a pass that moved nothing. Failure::kNone: try again.
  TUTTI_HD Failure idle() {
    ++idlePasses_;
    p_.shake();
    if ((idlePasses_ & 63) == 0) {
      uint64_t why = 0;
      if (p_.lane() == 0) {
        const uint32_t other = p_.acquire32(&l_.error->failure);
        if (other != 0) {
          why = 100 + other;  // another channel failed: stop, no record
        } else if (p_.aborted(l_.abortFlag)) {
          why = static_cast<uint64_t>(Failure::kAborted);
        } else if (l_.timeoutNs != 0) {
          const uint64_t now = p_.nowNs();
          if (idleSince_ == 0)
            idleSince_ = now;
          else if (now - idleSince_ > l_.timeoutNs)
            why = static_cast<uint64_t>(Failure::kTimeout);
        }
      }
      why = p_.uniform(why);
      if (why >= 100) return static_cast<Failure>(why - 100);
      if (why != 0)
        return fail(static_cast<Failure>(why), waitOp_, waitPeer_, waitExpected_, waitSeen_,
                    waitKind_);
    }
    p_.backoff(idlePasses_);
    return Failure::kNone;
  }
  TUTTI_HD void moved() {
    idlePasses_ = 0;
    idleSince_ = 0;
  }
  TUTTI_HD void waiting(uint32_t op, int peer, uint64_t expected, uint64_t seen, uint32_t kind) {
    waitOp_ = static_cast<int>(op);
    waitPeer_ = peer;
    waitExpected_ = expected;
    waitSeen_ = seen;
    waitKind_ = kind;
  }

  // ---- FIFO conditions (uniform across lanes) ----

  // Whether the FIFO to q has a free slot for use `use`.
  TUTTI_HD bool room(uint32_t opIndex, int q, uint64_t use) {
    if (use - headSeen_[q] < kSlots_) return true;
    headSeen_[q] = p_.uniform(p_.lane() == 0 ? p_.loadAcquire(head(h_->rank, q)) : 0);
    if (use - headSeen_[q] < kSlots_) return true;
    waiting(opIndex, q, use - kSlots_ + 1, headSeen_[q], 2);
    return false;
  }
  // Whether slot use `use` of the FIFO from s has arrived.
  TUTTI_HD bool arrived(uint32_t opIndex, int s, uint64_t use) {
    if (h_->protocol == Protocol::kSimple) {
      if (tailSeen_[s] > use) return true;
      tailSeen_[s] = p_.uniform(p_.lane() == 0 ? p_.loadAcquire(tail(s, h_->rank)) : 0);
      if (tailSeen_[s] > use) return true;
      waiting(opIndex, s, use + 1, tailSeen_[s], 1);
      return false;
    }
    uint64_t w0 = 0, w1 = 0;
    if (p_.lane() == 0) p_.llLoad(line(s, h_->rank, use, 0), w0, w1);
    w0 = p_.uniform(w0);
    if (static_cast<uint32_t>(w0 >> 32) == llFlag(use)) return true;
    waiting(opIndex, s, llFlag(use), w0 >> 32, 1);
    return false;
  }
  // After a slice was written to the FIFO to q (use `use`): kSimple releases the tail.
  // After a slice of the FIFO from s was consumed: the head (both protocols).
  TUTTI_HD void finishSlice(int q, uint64_t sentUse, int s, uint64_t recvdUse) {
    p_.sync();
    if (p_.lane() == 0) {
      if (q >= 0 && h_->protocol == Protocol::kSimple) p_.publish(tail(h_->rank, q), sentUse + 1);
      if (s >= 0) p_.publish(head(s, h_->rank), recvdUse + 1);
    }
    p_.shake();
  }

  // ---- element arithmetic ----

  TUTTI_HD T scalar() const {
    T s;
    unsigned char* d = reinterpret_cast<unsigned char*>(&s);
    for (unsigned i = 0; i < sizeof(T); ++i) d[i] = h_->scalar[i];
    return s;
  }
  TUTTI_HD T load(const unsigned char* p, uint64_t i) const {
    return program::loadElement<T>(reinterpret_cast<uintptr_t>(p), i);
  }
  TUTTI_HD void store(unsigned char* p, uint64_t i, T v) const {
    program::storeElement<T>(reinterpret_cast<uintptr_t>(p), i, v);
  }
  TUTTI_HD T readSrc(const unsigned char* p, uint64_t i, bool preMul) const {
    const T v = load(p, i);
    return preMul ? program::premulOp<T>(v, scalar()) : v;
  }

  // One contiguous run of m elements, every lane taking its share. in: the incoming data (slot
  // or null); out: the outgoing slot (or null).
  TUTTI_HD void runElements(OpKind kind, unsigned char* dst, const unsigned char* src, bool preMul,
                            const unsigned char* in, unsigned char* out, uint64_t m) {
    const uint64_t bytes = m * h_->elemBytes;
    switch (kind) {
      case OpKind::kSend:
        if (!preMul) return p_.copy(out, src, bytes);
        for (uint64_t k = p_.lane(); k < m; k += p_.lanes()) store(out, k, readSrc(src, k, true));
        return;
      case OpKind::kRecv:
        return p_.copy(dst, in, bytes);
      case OpKind::kRecvCopySend:
        p_.copy(dst, in, bytes);
        return p_.copy(out, in, bytes);
      case OpKind::kCopy:
        if (!preMul) {
          if (dst != src) p_.copy(dst, src, bytes);
          return;
        }
        for (uint64_t k = p_.lane(); k < m; k += p_.lanes()) store(dst, k, readSrc(src, k, true));
        return;
      case OpKind::kRecvReduce:
      case OpKind::kRecvReduceSend:
        for (uint64_t k = p_.lane(); k < m; k += p_.lanes()) {
          const T v = program::applyOp<T, R>(readSrc(src, k, preMul), load(in, k));
          store(dst, k, v);
          if (out != nullptr) store(out, k, v);
        }
        return;
      case OpKind::kReduce:
        for (uint64_t k = p_.lane(); k < m; k += p_.lanes())
          store(dst, k, program::applyOp<T, R>(load(dst, k), readSrc(src, k, preMul)));
        return;
      case OpKind::kDivide:
        for (uint64_t k = p_.lane(); k < m; k += p_.lanes())
          store(dst, k, program::divideOp<T>(load(dst, k), h_->divisor));
        return;
    }
  }

  // Elements [e0, e1) of `op` (op-relative) with the slot data contiguous at `in` / `out`
  // (kSimple), or the incoming data in the sender's buffer (`iv`, a direct receive: element e at
  // the view's op.peerOffset + e): split into runs that are contiguous in every view.
  TUTTI_HD void runRange(const Op& op, const View& sv, const View& dv, uint64_t e0, uint64_t e1,
                         const unsigned char* in, unsigned char* out,
                         const View* iv = nullptr) {
    const bool readsSrc = op.kind == OpKind::kSend || op.kind == OpKind::kCopy ||
                          op.kind == OpKind::kReduce || op.kind == OpKind::kRecvReduce ||
                          op.kind == OpKind::kRecvReduceSend;
    const bool writesDst = op.kind != OpKind::kSend;
    const bool preMul = (op.flags & kPreMulSrc) != 0;
    const uint64_t eb = h_->elemBytes;
    for (uint64_t e = e0; e < e1;) {
      uint64_t m = e1 - e;
      if (readsSrc) m = detail::minU(m, detail::viewRun(sv, op.srcOffset + e));
      if (writesDst) m = detail::minU(m, detail::viewRun(dv, op.dstOffset + e));
      if (iv != nullptr) m = detail::minU(m, detail::viewRun(*iv, op.peerOffset + e));
      const unsigned char* inAt = iv != nullptr  ? at(*iv, op.peerOffset + e)
                                  : in != nullptr ? in + (e - e0) * eb
                                                  : nullptr;
      runElements(op.kind, writesDst ? at(dv, op.dstOffset + e) : nullptr,
                  readsSrc ? at(sv, op.srcOffset + e) : nullptr, preMul, inAt,
                  out != nullptr ? out + (e - e0) * eb : nullptr, m);
      e += m;
    }
  }

  // The low-latency form of one slice: elements [e0, e1) of `op`, incoming lines of use `inUse`
  // from s (s < 0: none), outgoing lines of use `outUse` to q (q < 0: none). Each lane takes
  // lines; a line carries 8 bytes, whole elements. Returns false when a lane's wait for a line
  // expired (timeout or abort: the caller fails).
  TUTTI_HD bool runLines(const Op& op, const View& sv, const View& dv, uint64_t e0, uint64_t e1,
                         int s, uint64_t inUse, int q, uint64_t outUse) {
    const uint64_t eb = h_->elemBytes;
    const uint64_t perLine = 8 / eb;
    const uint64_t nlines = ((e1 - e0) * eb + 7) / 8;
    const bool preMul = (op.flags & kPreMulSrc) != 0;
    const uint32_t inFlag = llFlag(inUse), outFlag = llFlag(outUse);
    bool ok = true;
    for (uint64_t j = p_.lane(); j < nlines; j += p_.lanes()) {
      uint64_t data = 0;
      if (s >= 0) {
        const uint64_t* ln = line(s, h_->rank, inUse, j);
        uint64_t w0 = 0, w1 = 0;
        uint32_t spins = 0;
        uint64_t since = 0;
        for (;;) {
          p_.llLoad(ln, w0, w1);
          if (static_cast<uint32_t>(w0 >> 32) == inFlag &&
              static_cast<uint32_t>(w1 >> 32) == inFlag)
            break;
          if ((++spins & 1023) == 0) {
            if (p_.aborted(l_.abortFlag)) {
              ok = false;
              break;
            }
            const uint64_t now = p_.nowNs();
            if (since == 0)
              since = now;
            else if (l_.timeoutNs != 0 && now - since > l_.timeoutNs) {
              ok = false;
              break;
            }
          }
        }
        if (!ok) break;
        data = (w0 & 0xFFFFFFFFull) | (w1 << 32);
      }
      const uint64_t first = e0 + j * perLine;
      const uint64_t n = detail::minU(perLine, e1 - first);
      uint64_t result = 0;
      for (uint64_t k = 0; k < n; ++k) {
        const uint64_t e = first + k;
        unsigned char* inb = reinterpret_cast<unsigned char*>(&data) + k * eb;
        unsigned char* outb = reinterpret_cast<unsigned char*>(&result) + k * eb;
        switch (op.kind) {
          case OpKind::kSend:
            if (preMul) {
              store(outb, 0, readSrc(at(sv, op.srcOffset + e), 0, true));
            } else {
              const unsigned char* sp = at(sv, op.srcOffset + e);
              for (uint64_t b = 0; b < eb; ++b) outb[b] = sp[b];
            }
            break;
          case OpKind::kRecv:
          case OpKind::kRecvCopySend: {
            unsigned char* dp = at(dv, op.dstOffset + e);
            for (uint64_t b = 0; b < eb; ++b) dp[b] = outb[b] = inb[b];
            break;
          }
          default: {  // kRecvReduce, kRecvReduceSend
            const T v =
                program::applyOp<T, R>(readSrc(at(sv, op.srcOffset + e), 0, preMul), load(inb, 0));
            store(at(dv, op.dstOffset + e), 0, v);
            store(outb, 0, v);
            break;
          }
        }
      }
      if (q >= 0) {
        uint64_t* out = line(h_->rank, q, outUse, j);
        p_.llStore(out, (result & 0xFFFFFFFFull) | (static_cast<uint64_t>(outFlag) << 32),
                   (result >> 32) | (static_cast<uint64_t>(outFlag) << 32));
      }
    }
    return !p_.any(!ok);
  }

  // ---- ops ----

  // Moves one slice of `op` ([e0, e1) of its elements): incoming from s (s < 0: none),
  // outgoing to q (q < 0: none), then releases the slots. False when a low-latency line's wait
  // failed (`failure` is set).
  // A direct send (a plain send, or a direct forward's send half) moves no data: its receiver
  // reads the sent elements in place.
  TUTTI_HD bool moveSlice(uint32_t index, const Op& op, const Piece& pc, const View& sv,
                          const View& dv, uint64_t slice, int s, int q, Failure& failure) {
    const uint64_t outUse = q >= 0 ? sentBase_[q] + sent_[q] : 0;
    const uint64_t inUse = s >= 0 ? recvdBase_[s] + recvd_[s] : 0;
    const uint64_t e0 = slice * perSlot_;
    const uint64_t e1 = detail::minU(op.count, e0 + perSlot_);
    if (h_->protocol == Protocol::kSimple) {
      if (q >= 0 && (op.flags & kDirectSend) != 0) {
        directUntil_[q] = outUse + 1;
      } else if (s >= 0 && (op.flags & kDirectRecv) != 0) {
        View iv;
        uint64_t at = 0;
        const uint32_t why = senderView(op, pc, iv, at);
        if (p_.any(why != 0)) {
          failure = fail(Failure::kNotDirect, static_cast<int>(index), s, at, why, 1);
          return false;
        }
        runRange(op, sv, dv, e0, e1, nullptr, q >= 0 ? slot(h_->rank, q, outUse) : nullptr, &iv);
      } else {
        runRange(op, sv, dv, e0, e1, s >= 0 ? slot(s, h_->rank, inUse) : nullptr,
                 q >= 0 ? slot(h_->rank, q, outUse) : nullptr);
      }
    } else if (!runLines(op, sv, dv, e0, e1, s, inUse, q, outUse)) {
      failure = fail(p_.aborted(l_.abortFlag) ? Failure::kAborted : Failure::kTimeout,
                     static_cast<int>(index), s, llFlag(inUse), 0, 1);
      return false;
    }
    finishSlice(q, outUse, s, inUse);
    if (q >= 0) ++sent_[q];
    if (s >= 0) ++recvd_[s];
    return true;
  }

  // Tries op `index`. `done`: slices received (a send: sent; a local op: 1 once run); `fwd`:
  // slices a forwarding op has sent on. A forward's receiving half never waits for its sending
  // half (as the host engine, which queues the forward): a slice whose forward finds no room is
  // received into dst and sent on from there later; only when both halves stand at the same slice
  // and both can move is it one pass (reduce once, write dst and the outgoing slot). Without that,
  // two ranks that forward to each other (the 2-rank ring) would each wait for room the other
  // frees only after its own plain send. Returns whether it moved anything; sets `complete`.
  TUTTI_HD bool tryOp(uint32_t index, const Op& op, const Piece& pc, uint64_t& done, uint64_t& fwd,
                      bool& complete, Failure& failure) {
    const View sv = view(op.src, pc), dv = view(op.dst, pc);
    if (op.kind == OpKind::kCopy || op.kind == OpKind::kReduce || op.kind == OpKind::kDivide) {
      runRange(op, sv, dv, 0, op.count, nullptr, nullptr);
      p_.sync();
      complete = true;
      return true;
    }
    const uint64_t nslices = slotsFor(op.count * h_->elemBytes, payload_);
    const bool forward = op.kind == OpKind::kRecvReduceSend || op.kind == OpKind::kRecvCopySend;
    // A direct forward receives every slice into dst first; its send half only announces it.
    const bool directForward = forward && (op.flags & kDirectSend) != 0;
    const bool sends = op.kind == OpKind::kSend || forward;
    const bool recvs = op.kind != OpKind::kSend;
    const int q = sends ? op.sendPeer : -1;
    const int s = recvs ? op.peer : -1;
    // The halves of a forward on their own: receive into dst; send dst on.
    Op recvHalf = op, sendHalf = op;
    recvHalf.kind = op.kind == OpKind::kRecvReduceSend ? OpKind::kRecvReduce : OpKind::kRecv;
    sendHalf.kind = OpKind::kSend;
    sendHalf.src = op.dst;
    sendHalf.srcOffset = op.dstOffset;
    sendHalf.flags = directForward ? kDirectSend : 0;
    const View hv = view(sendHalf.src, pc);
    bool any = false;
    // Whether the FIFO to q stands at slice `at` of this op and has room for it.
    auto canSend = [&](uint64_t at) {
      return at < nslices && sent_[q] == op.sendSlot + at &&
             room(index, q, sentBase_[q] + sent_[q]);
    };
    for (;;) {
      bool moved = false;
      if (forward && fwd < done && canSend(fwd)) {  // a received slice goes on
        if (!moveSlice(index, sendHalf, pc, hv, dv, fwd, -1, q, failure)) return false;
        ++fwd;
        moved = true;
      }
      if (done < nslices) {
        if (!recvs) {
          if (canSend(done)) {
            if (!moveSlice(index, op, pc, sv, dv, done, -1, q, failure)) return false;
            ++done;
            moved = true;
          }
        } else if (recvd_[s] == op.recvSlot + done &&
                   arrived(index, s, recvdBase_[s] + recvd_[s])) {
          if (!forward) {
            if (!moveSlice(index, op, pc, sv, dv, done, s, -1, failure)) return false;
          } else if (!directForward && fwd == done && canSend(fwd)) {
            if (!moveSlice(index, op, pc, sv, dv, done, s, q, failure)) return false;
            ++fwd;
          } else if (!moveSlice(index, recvHalf, pc, sv, dv, done, s, -1, failure)) {
            return false;
          }
          ++done;
          moved = true;
        }
      }
      if (!moved) break;
      any = true;
    }
    complete = done == nslices && (!forward || fwd == nslices);
    return any;
  }

  // After a channel's direct sends: waits until each peer it sent directly to has taken the last
  // of them (its head counter), so that the call's buffers may be reused once the kernel is done.
  // Slices that went through the FIFOs need no wait: their data is in the peers' arenas.
  TUTTI_HD Failure awaitDirectReaders() {
    for (int q = 0; q < h_->nranks; ++q) {
      const uint64_t want = directUntil_[q];  // the same on every lane (set by all of them)
      if (want == 0) continue;
      for (;;) {
        const uint64_t seen = p_.uniform(p_.lane() == 0 ? p_.loadAcquire(head(h_->rank, q)) : 0);
        if (seen >= want) break;
        waiting(static_cast<uint32_t>(-1), q, want, seen, 2);
        const Failure f = idle();
        if (f != Failure::kNone) return f;
      }
      moved();
    }
    return Failure::kNone;
  }

  TUTTI_HD Failure runRound(const Round& rd) {
    const Piece pc = pieces(h_)[rd.piece];
    const Op* all = ops(h_);
    uint64_t done[kMaxRoundOps], fwd[kMaxRoundOps];
    bool complete[kMaxRoundOps];
    const uint32_t n = rd.nops <= static_cast<uint32_t>(kMaxRoundOps) ? rd.nops : 0;
    if (rd.nops != n) return fail(Failure::kBadProgram, static_cast<int>(rd.firstOp), -1, 0, 0, 0);
    for (uint32_t k = 0; k < n; ++k) {
      done[k] = fwd[k] = 0;
      complete[k] = false;
    }
    uint32_t left = n;
    while (left > 0) {
      bool any = false;
      for (uint32_t k = 0; k < n; ++k) {
        if (complete[k]) continue;
        Failure failure = Failure::kNone;
        any |=
            tryOp(rd.firstOp + k, all[rd.firstOp + k], pc, done[k], fwd[k], complete[k], failure);
        if (failure != Failure::kNone) return failure;
        if (complete[k]) --left;
      }
      if (left == 0) break;
      if (any) {
        moved();
      } else {
        const Failure f = idle();
        if (f != Failure::kNone) return f;
      }
    }
    return Failure::kNone;
  }

  const Launch& l_;
  const ProgramHeader* h_;
  int ch_;
  P& p_;
  unsigned char* own_ = nullptr;
  uint64_t kSlots_ = 1;
  uint32_t payload_ = 16;
  uint64_t perSlot_ = 1;
  int round_ = -1;
  uint64_t directUntil_[kMaxRanks];  // per peer: 1 + the FIFO use of the last direct send, or 0
  uint64_t sentBase_[kMaxRanks], recvdBase_[kMaxRanks];
  uint64_t sent_[kMaxRanks], recvd_[kMaxRanks];
  uint64_t headSeen_[kMaxRanks], tailSeen_[kMaxRanks];
  uint32_t idlePasses_ = 0;
  uint64_t idleSince_ = 0;
  int waitOp_ = -1, waitPeer_ = -1;
  uint64_t waitExpected_ = 0, waitSeen_ = 0;
  uint32_t waitKind_ = 0;
};

}  // namespace tutti::kernels::peer
