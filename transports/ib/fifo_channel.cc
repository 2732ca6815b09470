// File: transports/ib/fifo_channel.cc
// The FIFO/credit protocol of one ib connection (see fifo_channel.h for the design and the
// receiver-not-ready argument).
#include "transports/ib/fifo_channel.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "transports/ib/wc_status.h"

namespace tutti::transport::ib {
namespace {

// Work request ids: kind in the top two bits, a counter below.
constexpr uint64_t kKindShift = 62;
constexpr uint64_t kKindData = 0, kKindCredit = 1, kKindRecv = 2, kKindProbe = 3;
constexpr uint64_t kCounterMask = (uint64_t{1} << kKindShift) - 1;
constexpr uint64_t wrId(uint64_t kind, uint64_t counter) {
  return (kind << kKindShift) | (counter & kCounterMask);
}
constexpr size_t kPollBatch = 32;

bool isReducing(const RecvSpec& s) { return s.reduce != nullptr && s.src != nullptr; }

}  // namespace

FifoChannel::FifoChannel(Wire& wire, ChannelConfig cfg) : wire_(wire), cfg_(std::move(cfg)) {}

FifoChannel::~FifoChannel() {
  if (cfg_.cache != nullptr)
    for (const SendOp& s : sends_) cfg_.cache->release(s.lease);
}

Status FifoChannel::start() {
  for (uint32_t i = 0; i < cfg_.recvDepth(); ++i)
    TUTTI_TRY(wire_.postRecv(wrId(kKindRecv, recvWrs_++)));
  return Status::ok();
}

uint64_t FifoChannel::postSend(const void* src, size_t bytes) {
  if (bytes == 0 && sends_.empty()) {
    ++sendsDone_;
  } else {
    sends_.push_back(SendOp{static_cast<const std::byte*>(src), bytes});
  }
  return ++sendsPosted_;
}

uint64_t FifoChannel::postRecv(const RecvSpec& spec) {
  const size_t elem = std::max<size_t>(spec.elemBytes, 1);
  if (isReducing(spec) && spec.bytes % elem != 0 && error_.isOk()) {
    error_ = invalidArgument(
        "ib: reducing receive of {} bytes is not a multiple of the element size {} (rank={}, "
        "peer={})",
        spec.bytes, elem, cfg_.rank, cfg_.peer);
  }
  if (spec.bytes == 0 && recvs_.empty()) {
    ++recvsDone_;
  } else {
    recvs_.push_back(RecvOp{spec});
  }
  return ++recvsPosted_;
}

Status FifoChannel::progress() {
  if (!error_.isOk()) return error_;
  Status s = poll();
  if (s.isOk()) s = deliver();
  if (s.isOk()) s = returnCredits();
  if (s.isOk()) s = pushSends();
  retireSends();
  if (!s.isOk()) error_ = s;
  return s;
}

Status FifoChannel::checkPeer() {
  if (!error_.isOk()) return error_;
  if (probeOutstanding_ || sqOutstanding_ >= cfg_.sendDepth()) return Status::ok();
  Status s = wire_.postProbe(wrId(kKindProbe, probes_));
  if (!s.isOk()) {
    error_ = s;
    return s;
  }
  ++probes_;
  ++sqOutstanding_;
  probeOutstanding_ = true;
  return Status::ok();
}

Status FifoChannel::protocolError(std::string what) const {
  return remoteError(
      "ib: protocol violation on the connection to rank {} (host {}): {} (rank={}, "
      "peer={}, device={})",
      cfg_.peer, cfg_.peerHost, what, cfg_.rank, cfg_.peer, cfg_.device);
}

Status FifoChannel::poll() {
  std::array<WireCompletion, kPollBatch> wcs;
  while (true) {
    TUTTI_TRY_ASSIGN(const size_t n, wire_.poll(wcs));
    for (size_t i = 0; i < n; ++i) TUTTI_TRY(handle(wcs[i]));
    if (n < wcs.size()) return Status::ok();
  }
}

Status FifoChannel::handle(const WireCompletion& wc) {
  if (wc.status != 0) {
    CompletionError e;
    e.status = wc.status;
    e.vendorErr = wc.vendorErr;
    e.isRecv = (wc.wrId >> kKindShift) == kKindRecv;  // opcode is undefined on errors
    e.rank = cfg_.rank;
    e.peer = cfg_.peer;
    e.peerHost = cfg_.peerHost;
    e.device = cfg_.device;
    e.timeout = cfg_.timeout;
    e.retryCnt = cfg_.retryCnt;
    return remoteError("{}", completionErrorMessage(e));
  }
  const uint64_t kind = wc.wrId >> kKindShift;
  if (wc.isRecv) {
    if (kind != kKindRecv) return internalError("ib: receive completion with id {:#x}", wc.wrId);
    // Re-arm first: the slot this completion used must be available before anything else.
    TUTTI_TRY(wire_.postRecv(wrId(kKindRecv, recvWrs_++)));
    if (wc.imm & kCreditFlag) {
      const uint32_t delta = wc.imm & ~kCreditFlag;
      if (delta == 0 || delta > chunksPosted_ - peerConsumed_) {
        return protocolError(fmt::format("credit for {} slots with only {} chunks outstanding",
                                         delta, chunksPosted_ - peerConsumed_));
      }
      peerConsumed_ += delta;
      return Status::ok();
    }
    if (wc.imm == 0 || wc.imm > cfg_.slotBytes) {
      return protocolError(
          fmt::format("chunk of {} bytes for {}-byte slots", wc.imm, cfg_.slotBytes));
    }
    if (arrivals_.size() >= cfg_.slots) {
      return protocolError(fmt::format("more than {} chunks written without credit", cfg_.slots));
    }
    arrivals_.push_back(wc.imm);
    ++chunksArrived_;
    return Status::ok();
  }
  if (sqOutstanding_ == 0) return internalError("ib: send completion with nothing outstanding");
  --sqOutstanding_;
  if (kind == kKindCredit) return Status::ok();
  if (kind == kKindProbe) {
    probeOutstanding_ = false;
    return Status::ok();
  }
  if (kind != kKindData || inFlight_.empty() ||
      (wc.wrId & kCounterMask) != (chunksCompleted_ & kCounterMask)) {
    return internalError("ib: unexpected send completion id {:#x} (next data chunk {})", wc.wrId,
                         chunksCompleted_);
  }
  const InFlight f = inFlight_.front();
  inFlight_.pop_front();
  ++chunksCompleted_;
  bytesSent_ += f.bytes;
  SendOp& op = sends_.at(f.msgSeq - (sendsDone_ + 1));
  op.completedBytes += f.bytes;
  return Status::ok();
}

Status FifoChannel::deliver() {
  while (true) {
    while (!recvs_.empty() && recvs_.front().doneBytes == recvs_.front().spec.bytes) {
      recvs_.pop_front();
      ++recvsDone_;
    }
    if (arrivals_.empty() || recvs_.empty()) return Status::ok();
    RecvOp& r = recvs_.front();
    const uint32_t bytes = arrivals_.front();
    const size_t left = r.spec.bytes - r.doneBytes;
    const size_t expected = std::min<size_t>(cfg_.slotBytes, left);
    if (bytes != expected) {
      return protocolError(fmt::format(
          "a chunk of {} bytes arrived where receive #{} ({} bytes, {} received) expects {}: the "
          "two ranks disagree on the message size",
          bytes, recvsDone_ + 1, r.spec.bytes, r.doneBytes, expected));
    }
    const std::byte* slot =
        cfg_.fifo + (chunksConsumed_ % cfg_.slots) * static_cast<size_t>(cfg_.slotBytes);
    auto* dst = static_cast<std::byte*>(r.spec.dst) + r.doneBytes;
    if (isReducing(r.spec)) {
      const size_t elem = std::max<size_t>(r.spec.elemBytes, 1);
      const auto* src = static_cast<const std::byte*>(r.spec.src) + r.doneBytes;
      r.spec.reduce(dst, src, slot, bytes / elem);
    } else {
      std::memcpy(dst, slot, bytes);
    }
    r.doneBytes += bytes;
    bytesReceived_ += bytes;
    arrivals_.pop_front();
    ++chunksConsumed_;
  }
}

Status FifoChannel::returnCredits() {
  if (chunksConsumed_ == creditsSent_ || sqOutstanding_ >= cfg_.sendDepth()) return Status::ok();
  const uint64_t delta = chunksConsumed_ - creditsSent_;  // <= slots
  TUTTI_TRY(wire_.postWrite(wrId(kKindCredit, creditMessages_), nullptr, 0, 0, 0,
                            kCreditFlag | static_cast<uint32_t>(delta)));
  ++sqOutstanding_;
  ++creditMessages_;
  creditsSent_ = chunksConsumed_;
  return Status::ok();
}

Status FifoChannel::pushSends() {
  const size_t slotBytes = cfg_.slotBytes;
  for (size_t i = 0; i < sends_.size(); ++i) {
    SendOp& op = sends_[i];
    while (op.postedBytes < op.bytes) {
      if (chunksPosted_ - peerConsumed_ >= cfg_.slots) return Status::ok();  // no credit
      if (sqOutstanding_ + 1 >= cfg_.sendDepth()) return Status::ok();       // keep one for credits
      const uint32_t slot = static_cast<uint32_t>(chunksPosted_ % cfg_.slots);
      const auto n = static_cast<uint32_t>(std::min(slotBytes, op.bytes - op.postedBytes));
      const std::byte* src = op.src + op.postedBytes;
      uint32_t lkey = cfg_.stagingLkey;
      if (cfg_.cache != nullptr) {
        if (op.lease.id == 0) {
          auto lease = cfg_.cache->acquire(op.src, op.bytes, MemKind::kHost);
          if (!lease.isOk()) {
            return Status(lease.status().code(),
                          fmt::format("{} (rank={}, peer={}, send of {} bytes)",
                                      lease.status().message(), cfg_.rank, cfg_.peer, op.bytes));
          }
          op.lease = lease.value();
        }
        lkey = op.lease.lkey;
      } else {
        if (chunksPosted_ - chunksCompleted_ >= cfg_.slots) return Status::ok();  // staging busy
        std::byte* stage = cfg_.staging + slot * slotBytes;
        std::memcpy(stage, src, n);
        src = stage;
      }
      TUTTI_TRY(wire_.postWrite(wrId(kKindData, chunksPosted_), src, n, lkey, slot * slotBytes, n));
      inFlight_.push_back(InFlight{sendsDone_ + 1 + i, n});
      op.postedBytes += n;
      ++chunksPosted_;
      ++sqOutstanding_;
    }
  }
  return Status::ok();
}

void FifoChannel::retireSends() {
  while (!sends_.empty() && sends_.front().completedBytes == sends_.front().bytes) {
    if (cfg_.cache != nullptr) cfg_.cache->release(sends_.front().lease);
    sends_.pop_front();
    ++sendsDone_;
  }
}

}  // namespace tutti::transport::ib
