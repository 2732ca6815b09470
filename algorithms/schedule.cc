// File: algorithms/schedule.cc
// Schedule IR helpers, the ScheduleBuilder's validation and the algorithm registry.
#include <algorithm>
#include <iterator>
#include <map>

#include "algorithms/algorithm.h"
#include "base/collectives.h"

namespace tutti::algo {

const char* opName(Op op) {
  switch (op) {
    case Op::kSend: return "send";
    case Op::kRecv: return "recv";
    case Op::kRecvReduce: return "recvReduce";
    case Op::kRecvReduceSend: return "recvReduceSend";
    case Op::kRecvCopySend: return "recvCopySend";
    case Op::kCopy: return "copy";
    case Op::kReduce: return "reduce";
  }
  return "?";
}

const char* bufName(Buf b) {
  switch (b) {
    case Buf::kInput: return "input";
    case Buf::kOutput: return "output";
    case Buf::kScratch: return "scratch";
  }
  return "?";
}

size_t bufferCount(const CollShape& s, Buf buf) {
  const CollInfo& info = collInfo(s.coll);
  return extentCount(buf == Buf::kInput ? info.input : info.output, s.count, s.nranks,
                     s.rank == s.root);
}

namespace {

// Union of half-open element ranges [first, second), kept merged: start -> end.
class RangeSet {
 public:
  bool overlaps(size_t begin, size_t end) const {
    auto it = ranges_.upper_bound(begin);  // first range starting after begin
    if (it != ranges_.end() && it->first < end) return true;
    return it != ranges_.begin() && std::prev(it)->second > begin;
  }
  void add(size_t begin, size_t end) {
    if (begin >= end) return;
    auto it = ranges_.upper_bound(begin);
    if (it != ranges_.begin() && std::prev(it)->second >= begin) {
      --it;
      begin = it->first;
    }
    while (it != ranges_.end() && it->first <= end) {
      end = std::max(end, it->second);
      it = ranges_.erase(it);
    }
    ranges_.emplace(begin, end);
  }

 private:
  std::map<size_t, size_t> ranges_;
};

}  // namespace

std::vector<std::vector<uint8_t>> lastTouchWrites(const Schedule& s, bool inPlace, bool receives) {
  std::vector<std::vector<uint8_t>> out(s.rounds.size());
  RangeSet later[3];       // by Buf: ranges touched by the rounds after the current one
  bool userLater = false;  // in place: a later step touched input or output
  for (size_t r = s.rounds.size(); r-- > 0;) {
    const auto& round = s.rounds[r];
    out[r].assign(round.size(), 0);
    for (size_t i = 0; i < round.size(); ++i) {
      const Step& st = round[i];
      if (!(st.op == Op::kCopy || (receives && st.op == Op::kRecv)) || st.count == 0) continue;
      const bool user = st.dst != Buf::kScratch;
      const bool touchedLater =
          later[static_cast<int>(st.dst)].overlaps(st.dstOffset, st.dstOffset + st.count);
      out[r][i] = !touchedLater && !(inPlace && user && userLater);
    }
    for (const Step& st : round) {
      if (st.count == 0) continue;
      const bool reads = readsSrc(st.op), writes = writesDst(st.op);
      if (reads) later[static_cast<int>(st.src)].add(st.srcOffset, st.srcOffset + st.count);
      if (writes) later[static_cast<int>(st.dst)].add(st.dstOffset, st.dstOffset + st.count);
      if ((reads && st.src != Buf::kScratch) || (writes && st.dst != Buf::kScratch))
        userLater = true;
    }
  }
  return out;
}

std::string toString(const Schedule& s) {
  std::string out;
  for (size_t r = 0; r < s.rounds.size(); ++r) {
    for (const Step& st : s.rounds[r]) {
      const bool reads = readsSrc(st.op), writes = writesDst(st.op);
      out += fmt::format("round {}: {}", r, opName(st.op));
      if (st.op != Op::kCopy && st.op != Op::kReduce) out += fmt::format(" peer={}", st.peer);
      if (forwards(st.op)) out += fmt::format(" sendPeer={}", st.sendPeer);
      if (reads) out += fmt::format(" {}[{},+{})", bufName(st.src), st.srcOffset, st.count);
      if (writes)
        out += fmt::format(" {}{}[{},+{})", reads ? "-> " : "", bufName(st.dst), st.dstOffset,
                           st.count);
      out += '\n';
    }
  }
  return out;
}

// ---- registry ----

namespace {
std::deque<AlgorithmInfo>& mutableRegistry() {
  static std::deque<AlgorithmInfo> r;
  return r;
}
}  // namespace

Registrar::Registrar(const AlgorithmInfo& info) { mutableRegistry().push_back(info); }

Status registerAlgorithm(AlgorithmInfo info) {
  if (find(info.coll, info.name))
    return invalidArgument("an algorithm named '{}' already exists for {}", info.name,
                           collName(info.coll));
  mutableRegistry().push_back(std::move(info));
  return Status::ok();
}

const std::deque<AlgorithmInfo>& registry() { return mutableRegistry(); }

const AlgorithmInfo* find(Coll coll, std::string_view name) {
  for (const auto& a : registry())
    if (a.coll == coll && a.name == name) return &a;
  return nullptr;
}

// ---- builder ----

ScheduleBuilder::ScheduleBuilder(const CollShape& shape) : shape_(shape) {}

ScheduleBuilder& ScheduleBuilder::add(const Step& step) {
  current_.push_back(step);
  return *this;
}

ScheduleBuilder& ScheduleBuilder::send(int peer, Buf src, size_t srcOffset, size_t count) {
  return add({.op = Op::kSend, .peer = peer, .src = src, .srcOffset = srcOffset, .count = count});
}
ScheduleBuilder& ScheduleBuilder::recv(int peer, Buf dst, size_t dstOffset, size_t count) {
  return add({.op = Op::kRecv, .peer = peer, .dst = dst, .dstOffset = dstOffset, .count = count});
}
ScheduleBuilder& ScheduleBuilder::recvReduce(int peer, Buf src, size_t srcOffset, Buf dst,
                                             size_t dstOffset, size_t count) {
  return add({.op = Op::kRecvReduce, .peer = peer, .src = src, .srcOffset = srcOffset, .dst = dst,
              .dstOffset = dstOffset, .count = count});
}
ScheduleBuilder& ScheduleBuilder::recvReduceSend(int peer, int sendPeer, Buf src, size_t srcOffset,
                                                 Buf dst, size_t dstOffset, size_t count) {
  return add({.op = Op::kRecvReduceSend, .peer = peer, .sendPeer = sendPeer, .src = src,
              .srcOffset = srcOffset, .dst = dst, .dstOffset = dstOffset, .count = count});
}
ScheduleBuilder& ScheduleBuilder::recvCopySend(int peer, int sendPeer, Buf dst, size_t dstOffset,
                                               size_t count) {
  return add({.op = Op::kRecvCopySend, .peer = peer, .sendPeer = sendPeer, .dst = dst,
              .dstOffset = dstOffset, .count = count});
}
ScheduleBuilder& ScheduleBuilder::copy(Buf src, size_t srcOffset, Buf dst, size_t dstOffset,
                                       size_t count) {
  return add({.op = Op::kCopy, .src = src, .srcOffset = srcOffset, .dst = dst,
              .dstOffset = dstOffset, .count = count});
}
ScheduleBuilder& ScheduleBuilder::reduce(Buf src, size_t srcOffset, Buf dst, size_t dstOffset,
                                         size_t count) {
  return add({.op = Op::kReduce, .src = src, .srcOffset = srcOffset, .dst = dst,
              .dstOffset = dstOffset, .count = count});
}
ScheduleBuilder& ScheduleBuilder::nextRound() {
  sched_.rounds.push_back(std::move(current_));
  current_.clear();
  return *this;
}
size_t ScheduleBuilder::scratch(size_t count) {
  size_t off = sched_.scratchCount;
  sched_.scratchCount += count;
  return off;
}

Result<Schedule> ScheduleBuilder::finish() {
  if (!current_.empty()) nextRound();
  const auto limit = [&](Buf b) {
    return b == Buf::kScratch ? sched_.scratchCount : bufferCount(shape_, b);
  };
  for (size_t r = 0; r < sched_.rounds.size(); ++r) {
    for (const Step& st : sched_.rounds[r]) {
      const bool comm = st.op != Op::kCopy && st.op != Op::kReduce;
      const bool reads = readsSrc(st.op), writes = writesDst(st.op);
      const bool forwarding = forwards(st.op);
      auto where = [&] {
        return fmt::format("(rank={}/{}, round={}, op={}, count={})", shape_.rank, shape_.nranks,
                           r, opName(st.op), st.count);
      };
      if (comm && (st.peer < 0 || st.peer >= shape_.nranks || st.peer == shape_.rank))
        return internalError("schedule: invalid peer {} {}", st.peer, where());
      if (forwarding && (st.sendPeer < 0 || st.sendPeer >= shape_.nranks ||
                       st.sendPeer == shape_.rank))
        return internalError("schedule: invalid sendPeer {} {}", st.sendPeer, where());
      if (st.count == 0) continue;
      if (reads && st.srcOffset + st.count > limit(st.src))
        return internalError("schedule: {}[{},+{}) out of bounds (size {}) {}", bufName(st.src),
                             st.srcOffset, st.count, limit(st.src), where());
      if (writes && st.dst == Buf::kInput)
        return internalError("schedule: writes the input buffer {}", where());
      if (writes && st.dstOffset + st.count > limit(st.dst))
        return internalError("schedule: {}[{},+{}) out of bounds (size {}) {}", bufName(st.dst),
                             st.dstOffset, st.count, limit(st.dst), where());
    }
  }
  return std::move(sched_);
}

}  // namespace tutti::algo
