// File: core/checked_call.cc
// One call's part in the call-mismatch check (see checked_call.h and call_check.h).
#include "core/checked_call.h"

#include <cstring>

namespace tutti {

void CheckedCall::start(CallCheck* check, const algo::Schedule& schedule,
                        std::span<transport::Connection* const> conns, Coll coll, uint64_t seq,
                        int rank) {
  check_ = check;
  sign_ = check && check->sign;
  if (!check) return;
  coll_ = coll;
  seq_ = seq;
  rank_ = rank;
  prevConn_ = conns[check->prev];
  nextConn_ = conns[check->next];
  sigPending_ = false;
  inlinePending_ = false;
  lastPrevSend_ = 0;
  lazyOk_ = true;
  for (const auto& round : schedule.rounds)
    for (const algo::Step& st : round)
      if (st.count > 0 && algo::receives(st.op) && st.peer == check->prev) lazyOk_ = false;
}

std::string CheckedCall::what() const { return fmt::format("{} #{}", collName(coll_), seq_); }

bool CheckedCall::postMessages(const std::byte* first, size_t firstBytes) {
  CallCheck& c = *check_;
  c.seq = seq_;
  c.mine.sig.inlineBytes = 0;
  const bool inlined = first && firstBytes <= kInlineBytes;
  if (inlined) {  // the round's local steps have run: the data is final
    std::memcpy(c.mine.data, first, firstBytes);
    c.mine.sig.inlineBytes = static_cast<uint8_t>(firstBytes);
  }
  noteSend(nextConn_, nextConn_->postSend(&c.mine, sizeof c.mine));
  transport::RecvSpec spec;
  spec.dst = &c.theirs[c.slot];
  spec.bytes = sizeof(CallMessage);
  sigSeq_ = prevConn_->postRecv(spec);
  sigPending_ = true;
  inlinePending_ = false;
  return inlined;
}

Result<bool> CheckedCall::poll() {
  CallCheck& c = *check_;
  // An earlier call's carried message arrives before this call's (same connection). Those calls
  // received nothing from prev, so their messages must carry no data either.
  if (c.carriedCount > 0) {
    const uint64_t done = prevConn_->recvsDone();
    while (c.carriedCount > 0 && c.carried[c.carriedHead].recv <= done) {
      const CallCheck::Carried k = c.carried[c.carriedHead];
      c.carriedHead = (c.carriedHead + 1) % CallCheck::kMaxCarried;
      --c.carriedCount;
      TUTTI_TRY(verifyCall(k.mine, c.theirs[k.slot].sig, k.seq, rank_, c.prev, /*maxInline=*/0));
    }
  }
  if (!sigPending_ || prevConn_->recvsDone() < sigSeq_) return false;
  sigPending_ = false;
  const CallSignature& theirs = c.theirs[c.slot].sig;
  if (!sameCall(c.mine.sig, theirs) || theirs.inlineBytes > kInlineBytes)
    TUTTI_TRY(verifyCall(c.mine.sig, theirs, seq_, rank_, c.prev));  // names what differs
  inlinePending_ = theirs.inlineBytes > 0;
  return true;
}

Result<const std::byte*> CheckedCall::takeInline(size_t bytes) {
  inlinePending_ = false;
  const CallMessage& m = check_->theirs[check_->slot];
  if (bytes != m.sig.inlineBytes)
    return invalidUsage(
        "{}: rank {} sent its first {} bytes with its call signature, but rank {} expects a "
        "first message of {} bytes from it (do the ranks force different algorithms for this "
        "call?)",
        what(), check_->prev, m.sig.inlineBytes, rank_, bytes);
  return m.data;
}

bool CheckedCall::mayLeave(int peer, bool nothingDeferred) const {
  return lazyOk_ && peer == check_->prev && nothingDeferred &&
         (!sigPending_ || check_->carriedCount < CallCheck::kMaxCarried) &&
         prevConn_->sendsDone() >= lastPrevSend_;
}

Status CheckedCall::finish() {
  CallCheck& c = *check_;
  if (inlinePending_)
    return invalidUsage(
        "{}: rank {} sent {} bytes with its call signature that no receive of rank {} took (do "
        "the ranks force different algorithms for this call?)",
        what(), c.prev, c.theirs[c.slot].sig.inlineBytes, rank_);
  if (!sign_) return Status::ok();
  if (sigPending_) {  // finished before prev's call message came: compared later
    c.carried[(c.carriedHead + c.carriedCount) % CallCheck::kMaxCarried] = {sigSeq_, c.mine.sig,
                                                                           seq_, c.slot};
    ++c.carriedCount;
  }
  c.slot = (c.slot + 1) % (CallCheck::kMaxCarried + 1);
  return Status::ok();
}

std::string CheckedCall::waitingNote() const {
  if (!check_) return {};
  std::string s;
  if (sigPending_) s = fmt::format("; rank {} has not entered this call", check_->prev);
  if (check_->carriedCount > 0)
    s += fmt::format("; rank {} has not entered call #{}", check_->prev,
                     check_->carried[check_->carriedHead].seq);
  return s;
}

}  // namespace tutti
