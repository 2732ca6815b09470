// File: algorithms/simulator.cc
// Event-driven alpha-beta-gamma replay of all ranks' schedules (model: algorithms/simulator.h).
// First every round's messages are matched per (src, dst) pair in schedule order, which rejects
// mismatched schedules before anything runs; then a priority queue of timed events (round starts,
// messages becoming ready, transmissions ending, data arriving, compute starting and ending)
// drives per-rank ports and compute units until every rank has finished its last round.
#include "algorithms/simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <utility>

namespace tutti::algo {

const char* linkClassName(LinkClass c) {
  switch (c) {
    case LinkClass::kSelf:
      return "self";
    case LinkClass::kShm:
      return "shm";
    case LinkClass::kTcp:
      return "tcp";
    case LinkClass::kNvlink:
      return "nvlink";
    case LinkClass::kPcie:
      return "pcie";
    case LinkClass::kIb:
      return "ib";
  }
  return "?";
}

LinkClass LinkModel::linkClass(int src, int dst) const {
  const LinkClass fallback = src == dst ? LinkClass::kSelf : LinkClass::kShm;
  if (!classOf) return fallback;
  const LinkClass c = classOf(src, dst);
  const int i = static_cast<int>(c);
  return i >= 0 && i < kNumLinkClasses ? c : fallback;
}

const LinkParams& LinkModel::link(int src, int dst) const {
  return links[static_cast<int>(linkClass(src, dst))];
}

double LinkParams::bandwidthFor(size_t bytes) const {
  if (bandwidthCurve.empty()) return bandwidthGBps;
  const double b = static_cast<double>(std::max<size_t>(bytes, 1));
  if (b <= bandwidthCurve.front().first) return bandwidthCurve.front().second;
  for (size_t i = 1; i < bandwidthCurve.size(); ++i) {
    const auto [x1, y1] = bandwidthCurve[i];
    if (b > x1) continue;
    const auto [x0, y0] = bandwidthCurve[i - 1];
    const double t = (std::log2(b) - std::log2(x0)) / (std::log2(x1) - std::log2(x0));
    return y0 + t * (y1 - y0);
  }
  return bandwidthCurve.back().second;
}

LinkModel LinkModel::defaults() {
  LinkModel m;
  m.links[static_cast<int>(LinkClass::kSelf)] = {0.05, 20.0};
  m.links[static_cast<int>(LinkClass::kShm)] = {0.5, 5.0};
  m.links[static_cast<int>(LinkClass::kTcp)] = {10.0, 2.5};
  m.links[static_cast<int>(LinkClass::kNvlink)] = {2.0, 150.0};
  m.links[static_cast<int>(LinkClass::kPcie)] = {3.0, 20.0};
  m.links[static_cast<int>(LinkClass::kIb)] = {2.0, 20.0};
  m.reduceGBps = 10.0;
  m.copyGBps = 10.0;
  m.sliceBytes = 128 << 10;
  m.classOf = [](int src, int dst) { return src == dst ? LinkClass::kSelf : LinkClass::kShm; };
  return m;
}

namespace {

// 1 GB/s moves 1e3 bytes per microsecond.
double usFor(size_t bytes, double gbps) { return static_cast<double>(bytes) / (gbps * 1e3); }

bool sends(Op op) {
  return op == Op::kSend || op == Op::kRecvCopySend || op == Op::kRecvReduceSend;
}
bool reducesIncoming(Op op) { return op == Op::kRecvReduce || op == Op::kRecvReduceSend; }
int destinationOf(const Step& st) { return st.op == Op::kSend ? st.peer : st.sendPeer; }

// Where (buffer, offset) of rank s.rank really lives when the call is in place (NCCL's layout:
// input at output + rank*count for allgather, output at input + rank*count for reducescatter,
// input == output for allreduce, broadcast and reduce where both exist).
// Collectives whose in-place form puts input and output in one buffer.
bool aliasesInPlace(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kAllGather || c == Coll::kReduceScatter ||
         c == Coll::kBroadcast || c == Coll::kReduce;
}

std::pair<int, size_t> resolve(const CollShape& s, Buf b, size_t offset) {
  if (!s.inPlace || !aliasesInPlace(s.coll) || b == Buf::kScratch)
    return {static_cast<int>(b), offset};
  const size_t rankOffset = static_cast<size_t>(s.rank) * s.count;
  if (s.coll == Coll::kReduceScatter)
    return {static_cast<int>(Buf::kInput), b == Buf::kOutput ? offset + rankOffset : offset};
  if (bufferCount(s, Buf::kInput) == 0 || bufferCount(s, Buf::kOutput) == 0)
    return {static_cast<int>(b), offset};  // non-root broadcast/reduce: nothing is aliased
  if (b == Buf::kInput)
    return {static_cast<int>(Buf::kOutput), offset + (s.coll == Coll::kAllGather ? rankOffset : 0)};
  return {static_cast<int>(b), offset};
}

struct StepState {
  const Step* step = nullptr;
  int rank = 0;
  size_t index = 0;  // position in its round, for messages
  size_t bytes = 0;
  int outMsg = -1;      // the message this step sends or forwards
  size_t bytesIn = 0;   // received (and reduced) so far
  size_t bytesOut = 0;  // forwarded so far (requested)
  size_t slicesOut = 0, slicesOutDone = 0;
  bool done = false;
};

struct Message {
  int src = 0, dst = 0;
  size_t round = 0;
  size_t bytes = 0;
  int srcStep = -1, dstStep = -1;
  int outPort = 0, inPort = 0;  // rank * kNumLinkClasses + class
  int pair = 0;                 // index of the directed (src, dst) link
  double latencyUs = 0, bandwidthGBps = 1, overheadUs = 0;
  bool cpuCopied = false;  // a memoryBound class: both ranks' CPUs move it (no overlap with compute)
  size_t nextSlice = 0;  // forwarding receiver: next slice whose arrival is not yet known
  double lastAvail = 0;  // forwarding receiver: slices become available in order
};

enum class Ev : uint8_t {
  kRoundStart,
  kTxReady,
  kTxEnd,
  kArrive,
  kComputeReady,
  kComputeEnd,
  kWake,  // ports become usable for a waiting message
};

struct Event {
  double t = 0;
  uint64_t seq = 0;
  Ev kind = Ev::kRoundStart;
  int id = 0;         // rank (kRoundStart), message (kTx*), step (kArrive, kCompute*)
  size_t offset = 0;  // kTxReady: byte offset of the piece inside its message
  size_t bytes = 0;
  double durUs = 0;   // kComputeReady
  bool unit = false;  // kCompute*: reduction of a received unit (else a local copy/reduce)
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// A message (or forwarded slice) that is ready but has not started. Served in order of ready
// time, then shift (dst - src) mod n, then schedule order (seq).
struct Pending {
  int msg;
  size_t offset, bytes;
  double readyUs;
  int shift;
  uint64_t seq;
  double wakeUs = -1;  // a wake-up event is queued for this time
  bool operator<(const Pending& o) const {
    if (readyUs != o.readyUs) return readyUs < o.readyUs;
    return shift != o.shift ? shift < o.shift : seq < o.seq;
  }
};

struct RankState {
  size_t round = 0;
  bool started = false, finished = false;
  size_t open = 0;  // steps of the current round not done yet
  double computeFree = 0, finishUs = 0;
  double copyingUntil = 0;  // end of the last cpuCopied message it sends or receives
  std::vector<size_t> roundBase;  // index of the round's first step in Sim::steps_
};

class Sim {
 public:
  Sim(const CollShape& shape, const std::vector<Schedule>& perRank, const LinkModel& model)
      : shape_(shape), perRank_(perRank), model_(model), n_(shape.nranks) {
    elemBytes_ = shape.coll == Coll::kBarrier ? 1 : dataTypeBytes(shape.dtype);
    memoryFactor_ = memoryFactor();
  }

  Result<double> run() {
    TUTTI_TRY(checkModel());
    TUTTI_TRY(match());
    outFree_.assign(ports_.size(), 0.0);
    inFree_ = outFree_;
    issueFree_.assign(n_, 0.0);
    pairFree_.assign(pairs_.size(), 0.0);
    for (int r = 0; r < n_; ++r) push({.kind = Ev::kRoundStart, .id = r});
    while (!queue_.empty()) {
      const Event e = queue_.top();
      queue_.pop();
      now_ = e.t;
      handle(e);
      if (queue_.empty() || queue_.top().t > now_) dispatch();
    }
    double end = 0;
    for (int r = 0; r < n_; ++r) {
      if (!ranks_[r].finished) return stuck(r);
      end = std::max(end, ranks_[r].finishUs);
    }
    return end;
  }

 private:
  Status checkModel() const {
    if (n_ < 1 || perRank_.size() != static_cast<size_t>(n_))
      return invalidArgument("simulate: {} schedules for nranks={}", perRank_.size(), n_);
    if (elemBytes_ == 0)
      return invalidArgument("simulate: invalid dtype {}", static_cast<int>(shape_.dtype));
    for (int c = 0; c < kNumLinkClasses; ++c) {
      const LinkParams& p = model_.links[c];
      if (!(p.latencyUs >= 0) || !(p.bandwidthGBps > 0) || !(p.overheadUs >= 0) ||
          !(p.streamFactor > 0 && p.streamFactor <= 1))
        return invalidArgument(
            "simulate: link class {} needs latencyUs >= 0, bandwidthGBps > 0, overheadUs >= 0 "
            "and 0 < streamFactor <= 1 (latencyUs={}, bandwidthGBps={}, overheadUs={}, "
            "streamFactor={})",
            linkClassName(static_cast<LinkClass>(c)), p.latencyUs, p.bandwidthGBps, p.overheadUs,
            p.streamFactor);
    }
    for (int c = 0; c < kNumLinkClasses; ++c) {
      const auto& curve = model_.links[c].bandwidthCurve;
      for (size_t i = 0; i < curve.size(); ++i)
        if (!(curve[i].first >= 1) || !(curve[i].second > 0) ||
            (i > 0 && !(curve[i].first > curve[i - 1].first)))
          return invalidArgument(
              "simulate: link class {}: bandwidthCurve point {} ({} B, {} GB/s) needs bytes >= 1, "
              "above the previous point's, and GB/s > 0",
              linkClassName(static_cast<LinkClass>(c)), i, curve[i].first, curve[i].second);
    }
    if (!(model_.footprintStreamFactor > 0 && model_.footprintStreamFactor <= 1))
      return invalidArgument("simulate: footprintStreamFactor must be in (0, 1] (got {})",
                             model_.footprintStreamFactor);
    if (!(model_.reduceGBps > 0) || !(model_.copyGBps > 0))
      return invalidArgument(
          "simulate: reduceGBps and copyGBps must be > 0 (reduceGBps={}, "
          "copyGBps={})",
          model_.reduceGBps, model_.copyGBps);
    return Status::ok();
  }

  // The memory term's rate multiplier for this call (simulator.h "Memory"): 1 when a rank's
  // input and output fit in footprintCacheBytes.
  double memoryFactor() const {
    const size_t c = model_.footprintCacheBytes;
    const double f = model_.footprintStreamFactor;
    if (c == 0 || !(f > 0 && f < 1) || elemBytes_ == 0) return 1.0;
    // The root's buffers (rank 0's without a root): the same on every rank, which must all
    // predict the same times to pick the same algorithm.
    CollShape s = shape_;
    s.rank = shape_.root;
    const size_t in = bufferCount(s, Buf::kInput) * elemBytes_;
    const size_t out = bufferCount(s, Buf::kOutput) * elemBytes_;
    const bool aliased = shape_.inPlace && aliasesInPlace(shape_.coll);
    const double F = static_cast<double>(aliased ? std::max(in, out) : in + out);
    if (F <= static_cast<double>(c)) return 1.0;
    return F / (static_cast<double>(c) + (F - static_cast<double>(c)) / f);
  }

  // Rates of local work under the memory term.
  double copyUs(size_t bytes) const { return usFor(bytes, model_.copyGBps * memoryFactor_); }
  double reduceUs(size_t bytes) const { return usFor(bytes, model_.reduceGBps * memoryFactor_); }

  // Flattens the steps and pairs every round's messages per (src, dst) in schedule order.
  Status match() {
    ranks_.resize(n_);
    size_t nrounds = 0;
    for (int r = 0; r < n_; ++r) {
      const Schedule& s = perRank_[r];
      nrounds = std::max(nrounds, s.rounds.size());
      for (size_t k = 0; k < s.rounds.size(); ++k) {
        ranks_[r].roundBase.push_back(steps_.size());
        for (size_t i = 0; i < s.rounds[k].size(); ++i) {
          const Step& st = s.rounds[k][i];
          auto bad = [&](int p) { return p < 0 || p >= n_; };
          if ((st.op != Op::kCopy && st.op != Op::kReduce && bad(st.peer)) ||
              (forwards(st.op) && bad(st.sendPeer)))
            return internalError(
                "simulate: rank {} round {} step {} ({}): peer {} / sendPeer {} "
                "outside [0, {})",
                r, k, i, opName(st.op), st.peer, st.sendPeer, n_);
          steps_.push_back({.step = &st, .rank = r, .index = i, .bytes = st.count * elemBytes_});
        }
      }
      ranks_[r].roundBase.push_back(steps_.size());
    }
    for (size_t k = 0; k < nrounds; ++k) {
      // (src, dst) -> step ids in schedule order; zero-count steps move nothing (engine).
      std::map<std::pair<int, int>, std::vector<int>> out, in;
      for (int r = 0; r < n_; ++r) {
        if (k >= perRank_[r].rounds.size()) continue;
        for (size_t id = ranks_[r].roundBase[k]; id < ranks_[r].roundBase[k + 1]; ++id) {
          const Step& st = *steps_[id].step;
          if (st.count == 0) continue;
          if (sends(st.op)) out[{r, destinationOf(st)}].push_back(static_cast<int>(id));
          if (receives(st.op)) in[{st.peer, r}].push_back(static_cast<int>(id));
        }
      }
      for (const auto& [pair, list] : in)
        if (!out.count(pair)) return unmatched(k, pair.first, pair.second, 0, list.size());
      // Distinct peers each rank sends to and receives from in this round (CPU sharing).
      std::vector<int> outFan(n_), inFan(n_);
      for (const auto& entry : out) ++outFan[entry.first.first];
      for (const auto& entry : in) ++inFan[entry.first.second];
      for (const auto& [pair, senders] : out) {
        auto it = in.find(pair);
        const size_t nin = it == in.end() ? 0 : it->second.size();
        if (nin != senders.size())
          return unmatched(k, pair.first, pair.second, senders.size(), nin);
        for (size_t m = 0; m < nin; ++m) {
          StepState& s = steps_[senders[m]];
          StepState& d = steps_[it->second[m]];
          if (s.step->count != d.step->count)
            return internalError(
                "simulate: round {}: message {} from rank {} to rank {}: rank {} "
                "sends {} elements (step {}, {}), rank {} receives {} (step {}, "
                "{})",
                k, m, pair.first, pair.second, pair.first, s.step->count, s.index,
                opName(s.step->op), pair.second, d.step->count, d.index, opName(d.step->op));
          Message msg{.src = pair.first,
                      .dst = pair.second,
                      .round = k,
                      .bytes = s.bytes,
                      .srcStep = senders[m],
                      .dstStep = it->second[m]};
          const LinkClass lc = model_.linkClass(msg.src, msg.dst);
          const int cls = static_cast<int>(lc);
          msg.outPort = portIndex(msg.src, lc);
          msg.inPort = portIndex(msg.dst, lc);
          msg.overheadUs = model_.links[cls].overheadUs;
          msg.pair = pairs_.emplace(pair, static_cast<int>(pairs_.size())).first->second;
          msg.latencyUs = model_.links[cls].latencyUs;
          msg.bandwidthGBps = model_.links[cls].bandwidthFor(s.bytes);
          msg.cpuCopied = model_.links[cls].memoryBound;
          const bool hostMemory = lc == LinkClass::kShm || msg.cpuCopied;  // copied by the CPUs
          if (hostMemory || lc == LinkClass::kSelf) msg.bandwidthGBps *= memoryFactor_;
          const double f = model_.links[cls].streamFactor;
          if (f < 1.0 && s.bytes > model_.cacheBytes) {
            // Harmonic blend: cacheBytes at full speed, the rest at f times it.
            const double b = static_cast<double>(s.bytes);
            const double c = static_cast<double>(model_.cacheBytes);
            msg.bandwidthGBps *= b / (c + (b - c) / f);
          }
          if (model_.cpuLoad > 1.0 && hostMemory) {
            const int fan = std::max(outFan[msg.src], inFan[msg.dst]);
            msg.bandwidthGBps /= std::min<double>(fan, model_.cpuLoad);
          }
          s.outMsg = static_cast<int>(msgs_.size());
          msgs_.push_back(msg);
        }
      }
    }
    return Status::ok();
  }

  // Dense index of (port, class): the rank's own port unless portOf shares one.
  int portIndex(int rank, LinkClass c) {
    const int id = model_.portOf ? model_.portOf(rank, c) : rank;
    return ports_.emplace(std::make_pair(id, static_cast<int>(c)), static_cast<int>(ports_.size()))
        .first->second;
  }

  Status unmatched(size_t round, int src, int dst, size_t nsent, size_t nrecv) const {
    return internalError(
        "simulate: round {}: rank {} sends {} message(s) to rank {}, which "
        "receives {} from rank {} in that round (a receive without its send, or "
        "a send nobody receives)",
        round, src, nsent, dst, nrecv, src);
  }

  Status stuck(int r) const {
    const RankState& rs = ranks_[r];
    for (size_t id = rs.roundBase[rs.round]; id < rs.roundBase[rs.round + 1]; ++id) {
      const StepState& s = steps_[id];
      if (s.done || s.step->count == 0) continue;
      return internalError(
          "simulate: deadlock: rank {} round {} step {} ({} peer={} sendPeer={}, "
          "{} of {} bytes in) never completes (a cycle of forwarding steps?)",
          r, rs.round, s.index, opName(s.step->op), s.step->peer, s.step->sendPeer, s.bytesIn,
          s.bytes);
    }
    return internalError("simulate: deadlock: rank {} stops in round {}", r, rs.round);
  }

  void push(Event e) {
    if (e.t < now_) e.t = now_;
    e.seq = seq_++;
    queue_.push(e);
  }

  void handle(const Event& e) {
    switch (e.kind) {
      case Ev::kRoundStart:
        startRound(e.id);
        break;
      case Ev::kTxReady: {
        // Among messages ready at the same time the shift decides: the contention-free order of
        // pairwise exchanges, so that a round in which every rank sends to every other packs
        // into n-1 conflict-free waves, as concurrent streams sharing the ports would.
        const Message& m = msgs_[e.id];
        const Pending p{e.id, e.offset, e.bytes, e.t, patterns::mod(m.dst - m.src, n_), e.seq};
        pending_.insert(std::upper_bound(pending_.begin(), pending_.end(), p), p);
        break;
      }
      case Ev::kWake:
        break;  // dispatch() runs after every instant
      case Ev::kTxEnd: {
        StepState& s = steps_[msgs_[e.id].srcStep];
        if (forwards(s.step->op))
          ++s.slicesOutDone;
        else
          s.bytesIn = s.bytes;  // a send is done when its message has arrived
        checkDone(s);
        break;
      }
      case Ev::kArrive:  // the receiver is in the step's round: dispatch() waited for it
        received(steps_[e.id], e.bytes);
        break;
      case Ev::kComputeReady: {
        const StepState& s = steps_[e.id];
        RankState& rs = ranks_[s.rank];
        const double start = std::max({now_, rs.computeFree, rs.copyingUntil});
        rs.computeFree = start + e.durUs;
        push({.t = rs.computeFree,
              .kind = Ev::kComputeEnd,
              .id = e.id,
              .bytes = e.bytes,
              .unit = e.unit});
        break;
      }
      case Ev::kComputeEnd: {
        StepState& s = steps_[e.id];
        if (e.unit) {
          handled(s, e.bytes);
        } else {
          s.bytesIn = s.bytes;
          checkDone(s);
        }
        break;
      }
    }
  }

  void startRound(int r) {
    RankState& rs = ranks_[r];
    if (rs.started) ++rs.round;
    rs.started = true;
    const Schedule& sched = perRank_[r];
    if (rs.round >= sched.rounds.size()) {
      rs.finished = true;
      rs.finishUs = now_;
      return;
    }
    const size_t first = rs.roundBase[rs.round], last = rs.roundBase[rs.round + 1];
    rs.open = 0;
    for (size_t id = first; id < last; ++id)
      if (steps_[id].step->count > 0) ++rs.open;
    if (rs.open == 0) {  // an empty round (or only zero-count steps) takes no time
      push({.kind = Ev::kRoundStart, .id = r});
      return;
    }
    // Aliased copies complete right here; the last step to complete starts the next round
    // from checkDone.
    for (size_t id = first; id < last; ++id) {
      StepState& s = steps_[id];
      const Step& st = *s.step;
      if (st.count == 0) continue;
      switch (st.op) {
        case Op::kCopy: {
          CollShape shape = shape_;
          shape.rank = r;
          if (resolve(shape, st.src, st.srcOffset) == resolve(shape, st.dst, st.dstOffset)) {
            s.bytesIn = s.bytes;  // the engine skips a copy onto itself
            checkDone(s);
          } else {
            push({.kind = Ev::kComputeReady,
                  .id = static_cast<int>(id),
                  .durUs = copyUs(s.bytes)});
          }
          break;
        }
        case Op::kReduce:
          push({.kind = Ev::kComputeReady,
                .id = static_cast<int>(id),
                .durUs = reduceUs(s.bytes)});
          break;
        case Op::kSend:
          push({.kind = Ev::kTxReady, .id = s.outMsg, .offset = 0, .bytes = s.bytes});
          break;
        default:  // receives: dispatch() starts their messages now that the round runs
          break;
      }
    }
  }

  // A unit (a message, or a slice for forwarding steps) of step s has arrived and its round runs.
  void received(StepState& s, size_t bytes) {
    if (reducesIncoming(s.step->op)) {
      // reduceOnReceive: the receive's own copy is in the link's time; only the excess remains.
      const bool fused = model_.link(s.step->peer, s.rank).reduceOnReceive;
      const double us = fused ? std::max(0.0, reduceUs(bytes) - copyUs(bytes)) : reduceUs(bytes);
      push({.kind = Ev::kComputeReady,
            .id = static_cast<int>(&s - steps_.data()),
            .bytes = bytes,
            .durUs = us,
            .unit = true});
    } else
      handled(s, bytes);
  }

  // The unit is in place (and reduced): forward it if the step forwards.
  void handled(StepState& s, size_t bytes) {
    s.bytesIn += bytes;
    if (forwards(s.step->op)) {
      push({.kind = Ev::kTxReady, .id = s.outMsg, .offset = s.bytesOut, .bytes = bytes});
      s.bytesOut += bytes;
      ++s.slicesOut;
    }
    checkDone(s);
  }

  void checkDone(StepState& s) {
    if (s.done || s.bytesIn < s.bytes) return;
    if (forwards(s.step->op) && s.slicesOutDone < s.slicesOut) return;
    s.done = true;
    RankState& rs = ranks_[s.rank];
    if (--rs.open == 0) push({.kind = Ev::kRoundStart, .id = s.rank});
  }

  // Starts every waiting message whose receiver has reached the message's round, whose pair
  // link is free and whose ports are free once its latency has passed; first come first served.
  // A message that waits only for its ports is woken when they will be usable.
  void dispatch() {
    size_t keep = 0;
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending p = pending_[i];
      Message& m = msgs_[p.msg];
      const RankState& to = ranks_[m.dst];
      if (!to.started || to.round < m.round || pairFree_[m.pair] > now_) {
        pending_[keep++] = p;
        continue;
      }
      if (issueFree_[m.src] > now_) {  // the sender is still issuing an earlier message
        if (p.wakeUs != issueFree_[m.src]) {
          p.wakeUs = issueFree_[m.src];
          push({.t = p.wakeUs, .kind = Ev::kWake});
        }
        pending_[keep++] = p;
        continue;
      }
      double portsFree = std::max(outFree_[m.outPort], inFree_[m.inPort]);
      if (m.cpuCopied)  // the CPUs that copy it must be done computing
        portsFree = std::max({portsFree, ranks_[m.src].computeFree, ranks_[m.dst].computeFree});
      const double dataStart = std::max(now_ + m.overheadUs + m.latencyUs, portsFree);
      // (A relative slack keeps rounding in now_ + latency from waking us again and again.)
      if (dataStart - (now_ + m.overheadUs + m.latencyUs) > 1e-12 * std::max(1.0, dataStart)) {
        const double wake = dataStart - m.latencyUs - m.overheadUs;
        if (p.wakeUs != wake) {
          p.wakeUs = wake;
          push({.t = wake, .kind = Ev::kWake});
        }
        pending_[keep++] = p;
        continue;
      }
      const double end = dataStart + usFor(p.bytes, m.bandwidthGBps);
      pairFree_[m.pair] = outFree_[m.outPort] = inFree_[m.inPort] = end;
      if (m.cpuCopied) {
        ranks_[m.src].copyingUntil = std::max(ranks_[m.src].copyingUntil, end);
        ranks_[m.dst].copyingUntil = std::max(ranks_[m.dst].copyingUntil, end);
      }
      issueFree_[m.src] = now_ + m.overheadUs;
      push({.t = end, .kind = Ev::kTxEnd, .id = p.msg, .bytes = p.bytes});
      announce(m, p, dataStart);
    }
    pending_.resize(keep);
  }

  // Tells the receiver when the piece's data arrives: a plain receive takes the whole piece at
  // its end; a forwarding step takes sliceBytes slices as their last byte streams in.
  void announce(Message& m, const Pending& p, double dataStart) {
    StepState& d = steps_[m.dstStep];
    const size_t pieceEnd = p.offset + p.bytes;
    if (!forwards(d.step->op)) {
      push({.t = dataStart + usFor(p.bytes, m.bandwidthGBps),
            .kind = Ev::kArrive,
            .id = m.dstStep,
            .bytes = p.bytes});
      return;
    }
    const size_t slice = model_.sliceBytes > 0 ? model_.sliceBytes : m.bytes;
    for (;;) {
      const size_t begin = m.nextSlice * slice;
      if (begin >= m.bytes) break;
      const size_t end = std::min(begin + slice, m.bytes);
      if (end > pieceEnd) break;
      const double avail =
          std::max(m.lastAvail, dataStart + usFor(end - p.offset, m.bandwidthGBps));
      m.lastAvail = avail;
      ++m.nextSlice;
      push({.t = avail, .kind = Ev::kArrive, .id = m.dstStep, .bytes = end - begin});
    }
  }

  const CollShape& shape_;
  const std::vector<Schedule>& perRank_;
  const LinkModel& model_;
  const int n_;
  size_t elemBytes_ = 1;
  double memoryFactor_ = 1.0;
  std::vector<StepState> steps_;
  std::vector<Message> msgs_;
  std::vector<RankState> ranks_;
  std::vector<double> outFree_, inFree_;      // ports: by portIndex()
  std::map<std::pair<int, int>, int> ports_;  // (port id, class) -> index
  std::vector<double> issueFree_;             // by rank: when it may issue its next message
  std::map<std::pair<int, int>, int> pairs_;  // directed links in use -> index
  std::vector<double> pairFree_;              // by pair index
  std::vector<Pending> pending_;              // ready, not started; in ready order
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  double now_ = 0;
  uint64_t seq_ = 0;
};

}  // namespace

Result<double> simulate(const CollShape& shape, const std::vector<Schedule>& perRank,
                        const LinkModel& model) {
  Sim sim(shape, perRank, model);
  return sim.run();
}

Result<double> predict(const AlgorithmInfo& algo, const CollShape& shape, const LinkModel& model) {
  if (shape.nranks < 1 || shape.rank < 0 || shape.rank >= shape.nranks)
    return invalidArgument("predict: {}:{}: invalid nranks={} rank={}", collName(algo.coll),
                           algo.name, shape.nranks, shape.rank);
  if (!algo.build)
    return invalidArgument("predict: {}:{} has no build function", collName(algo.coll), algo.name);
  std::vector<Schedule> perRank;
  perRank.reserve(shape.nranks);
  for (int r = 0; r < shape.nranks; ++r) {
    CollShape s = shape;
    s.rank = r;
    if (algo.supports && !algo.supports(s))
      return invalidArgument("predict: {}:{} declines the shape (rank={}/{}, count={}, root={})",
                             collName(algo.coll), algo.name, r, shape.nranks, shape.count,
                             shape.root);
    TUTTI_TRY_ASSIGN(Schedule sched, algo.build(s));
    perRank.push_back(std::move(sched));
  }
  return simulate(shape, perRank, model);
}

}  // namespace tutti::algo
