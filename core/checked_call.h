// File: core/checked_call.h
// One call's part in the call-mismatch check (core/call_check.h), as the engine sees it. The
// engine posts and drives a plan's rounds; this class says which steps of round 0 wait for the
// call messages, posts ours (with the inline data of our first small send to `next`), compares
// prev's when it arrives, and carries it to a later call when this one may finish without it.
// Inactive when the communicator runs no check: then the engine never calls it on a hot path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "algorithms/schedule.h"
#include "base/status.h"
#include "core/call_check.h"
#include "transports/transport.h"

namespace tutti {

class CheckedCall {
 public:
  /// Begins a call: `check` null leaves this inactive. `conns` by peer rank; `coll` and `seq`
  /// name the call in messages ("allreduce #12"); `rank` is this rank.
  void start(CallCheck* check, const algo::Schedule& schedule,
             std::span<transport::Connection* const> conns, Coll coll, uint64_t seq, int rank);

  bool active() const { return check_ != nullptr; }
  /// The call exchanges call messages (round 0 then runs even for an empty schedule).
  bool signs() const { return sign_; }
  int next() const { return check_->next; }
  int prev() const { return check_->prev; }

  /// Round 0 of a signed call: whether step `st` waits. Sends to `next` go after our call
  /// message; receives from `prev` wait until prev's has arrived and matched.
  bool defers(const algo::Step& st) const {
    return (st.op == algo::Op::kSend && st.peer == check_->next) ||
           (algo::receives(st.op) && st.peer == check_->prev);
  }
  /// Posts our call message to `next` and the receive of prev's. `first` (`firstBytes`) is the
  /// data of this call's first send to `next` in round 0, or null: when it fits kInlineBytes it
  /// rides along, and the return is true (the caller then does not post that send).
  bool postMessages(const std::byte* first, size_t firstBytes);
  /// Called on every progress pass: compares carried messages that have arrived, and returns
  /// true once, when prev's message of this call has arrived and matched (the deferred receives
  /// may be posted). InvalidUsage naming both ranks and the values that differ.
  Result<bool> poll();
  /// The next receive from `prev` takes its data from the call message.
  bool inlinePending() const { return inlinePending_; }
  /// The inline data for a first receive of `bytes` from prev (consumed). InvalidUsage when prev
  /// sent a different size (the ranks run different algorithms).
  Result<const std::byte*> takeInline(size_t bytes);
  /// A send was posted on `c` with sequence number `seq` (ending lazily needs those to prev).
  void noteSend(const transport::Connection* c, uint64_t seq) {
    if (c == prevConn_) lastPrevSend_ = seq;
  }
  /// Whether a round may end although `peer` is not idle: the call receives no data from prev,
  /// so its outstanding receives from prev are call messages only (carried ones, and its own when
  /// signed, with room to carry it), `nothingDeferred`, and every send to prev is done. Later
  /// rounds do not need prev's message; at the end of the call it is carried.
  bool mayLeave(int peer, bool nothingDeferred) const;
  /// The call ends: InvalidUsage when prev's inline bytes found no receive; prev's message, when
  /// it has not come, is carried to a later call.
  Status finish();
  /// For a hang report: "; rank 3 has not entered this call" (and the oldest carried call).
  std::string waitingNote() const;

 private:
  std::string what() const;

  CallCheck* check_ = nullptr;
  Coll coll_ = Coll::kAllReduce;
  uint64_t seq_ = 0;
  int rank_ = 0;
  transport::Connection* prevConn_ = nullptr;
  transport::Connection* nextConn_ = nullptr;
  uint64_t sigSeq_ = 0;  // receive sequence number of prev's call message
  bool sign_ = false;
  bool sigPending_ = false;
  bool inlinePending_ = false;  // prev's inline bytes await their receive step
  bool lazyOk_ = false;         // nothing to receive from prev: may finish without its messages
  uint64_t lastPrevSend_ = 0;   // sequence number of the last send posted to prev
};

}  // namespace tutti
