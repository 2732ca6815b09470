// File: algorithms/verifier.cc
// Symbolic execution of every rank's schedule (see verifier.h). A buffer is a run-length interval
// map: each segment holds one Content = {interned set of contributing ranks, interned reduction
// tree, the source index of its first element (growing by one per element), the step that last
// wrote it}. Correct schedules only ever reduce equal source indices, so (rank set, index)
// describes an element's multiset of (rank, index) contributions exactly; reducing different
// indices, or a rank twice, is rejected where it happens. The tree (dataflow()) is the order in
// which the engine combines them, which the results depend on (floating-point sums are not
// associative). Whole ranges move as O(segments) operations, so a count of 1<<20 costs what a
// count of 1 costs. Steps of a round are concurrent: all reads see the state at the start of the
// round (a write that overlaps another step's access is a hazard), except that a forwarding step
// sends what it has just received.
#include "algorithms/verifier.h"

#include "algorithms/verifier_state.h"
#include "base/collectives.h"

#include <algorithm>
#include <map>
#include <span>
#include <string>
#include <unordered_map>

// Like TUTTI_TRY without the file:line trail: the first violation is the report, verbatim.
#define TUTTI_VERIFY_TRY(expr)                     \
  do {                                             \
    if (Status s_ = (expr); !s_.isOk()) return s_; \
  } while (0)

namespace tutti::algo {
namespace {

using namespace verify_state;  // algorithms/verifier_state.h

// Where a schedule buffer lives: in-place calls alias input and output (NCCL's layout).
struct View {
  int phys = 0;
  uint64_t offset = 0, count = 0;
};

bool inBounds(uint64_t off, uint64_t n, uint64_t size) { return off <= size && n <= size - off; }

// One message of a round: a send, or the send half of a forwarding step.
struct Msg {
  int src, dst, step;
  uint64_t order;  // the engine's wire order: plain sends in step order, then forwards
  uint64_t count;
  int want = -1;                      // index of the matching receive in wants_
  size_t dataBegin = 0, dataLen = 0;  // its pieces in Verifier::pool_
  std::vector<uint64_t> knows;        // barrier: the ranks the sender has heard from
};
// One buffer access of a step, for the hazard check.
struct Access {
  int phys;
  uint64_t begin, end;
  int step;
  bool write;
};
struct Want {
  int src, dst, step;
  int msg = -1;
  bool done = false;
};

class Verifier {
 public:
  Verifier(const CollShape& shape, const std::vector<Schedule>& perRank)
      : shape_(shape),
        n_(shape.nranks),
        sched_(perRank),
        sets_(shape.nranks),
        exprs_(shape.nranks),
        barrier_(shape.coll == Coll::kBarrier) {}

  Status run() {
    setUp();
    size_t rounds = 0;
    for (const Schedule& s : sched_) rounds = std::max(rounds, s.rounds.size());
    for (size_t k = 0; k < rounds; ++k) {
      round_ = k;
      TUTTI_VERIFY_TRY(checkStatic());
      TUTTI_VERIFY_TRY(checkHazards());
      TUTTI_VERIFY_TRY(match());
      TUTTI_VERIFY_TRY(execute());
    }
    return barrier_ ? checkBarrier() : checkOutputs();
  }

  // After run() succeeded: what every rank's output view holds, as maximal pieces.
  Dataflow dataflow() const {
    Dataflow out{exprs_.nodes(), std::vector<std::vector<Dataflow::Piece>>(n_)};
    std::vector<Piece> got;
    for (int r = 0; r < n_; ++r) {
      const View& v = ranks_[r].view[1];
      ranks_[r].phys[v.phys].read(v.offset, v.count, got);
      uint64_t pos = 0;
      for (const Piece& p : got) {
        std::vector<Dataflow::Piece>& out_r = out.outputs[r];
        const Dataflow::Piece* last = out_r.empty() ? nullptr : &out_r.back();
        if (p.c.set != 0 && last && last->offset + last->count == pos && last->expr == p.c.expr &&
            last->index + last->count == p.c.index)
          out_r.back().count += p.count;
        else if (p.c.set != 0)
          out_r.push_back({pos, p.count, p.c.expr, p.c.index});
        pos += p.count;
      }
    }
    return out;
  }

 private:
  struct Rank {
    SegBuffer phys[3];
    View view[3];
    std::vector<uint64_t> knows;
  };

  void setUp() {
    ranks_.resize(n_);
    const int words = (n_ + 63) / 64;
    for (int r = 0; r < n_; ++r) {
      Rank& st = ranks_[r];
      CollShape rs = shape_;
      rs.rank = r;
      const uint64_t in = bufferCount(rs, Buf::kInput), out = bufferCount(rs, Buf::kOutput);
      const uint64_t rc = static_cast<uint64_t>(r) * shape_.count;
      st.view[0] = {0, 0, in};
      st.view[1] = {1, 0, out};
      st.view[2] = {2, 0, sched_[r].scratchCount};
      uint64_t physIn = in, physOut = out;
      if (shape_.inPlace) {
        switch (collInfo(shape_.coll).inPlace) {
          case InPlaceForm::kSame:
            if (out > 0) st.view[0] = {1, 0, in}, physIn = 0;
            break;
          case InPlaceForm::kSendInRecv:
            st.view[0] = {1, rc, in}, physIn = 0;
            break;
          case InPlaceForm::kRecvInSend:
            st.view[1] = {0, rc, out}, physOut = 0;
            break;
          case InPlaceForm::kNone:
            break;
        }
      }
      st.phys[0].reset(physIn);
      st.phys[1].reset(physOut);
      st.phys[2].reset(sched_[r].scratchCount);
      if (in > 0)
        st.phys[st.view[0].phys].write(
            st.view[0].offset,
            {{in, Content{sets_.single(r), kInitial, 0, 0, static_cast<uint32_t>(r)}}});
      st.knows.assign(words, 0);
      st.knows[r / 64] |= uint64_t{1} << (r % 64);
    }
  }

  const std::vector<Step>& steps(int r) const {
    static const std::vector<Step> kNone;
    const auto& rounds = sched_[r].rounds;
    return round_ < rounds.size() ? rounds[round_] : kNone;
  }

  template <typename... Args>
  Status fail(int r, int s, uint64_t off, uint64_t count, fmt::format_string<Args...> f,
              Args&&... args) const {
    const Step& st = steps(r)[s];
    std::string op = fmt::format("op {}", opName(st.op));
    if (st.op != Op::kCopy && st.op != Op::kReduce) op += fmt::format(", peer {}", st.peer);
    if (forwards(st.op)) op += fmt::format(", sendPeer {}", st.sendPeer);
    return invalidUsage("verify: rank {} round {} step {} ({}): {} (range [{},+{}))", r, round_, s,
                        op, fmt::format(f, std::forward<Args>(args)...), off, count);
  }

  // Peers, bounds, writes to the input, forwards that would interleave.
  Status checkStatic() {
    for (int r = 0; r < n_; ++r) {
      const auto& ss = steps(r);
      for (size_t i = 0; i < ss.size(); ++i) {
        const Step& st = ss[i];
        const int s = static_cast<int>(i);
        const bool comm = st.op != Op::kCopy && st.op != Op::kReduce;
        if (comm && (st.peer < 0 || st.peer >= n_ || st.peer == r))
          return fail(r, s, st.dstOffset, st.count, "invalid peer {} (nranks {})", st.peer, n_);
        if (forwards(st.op) && (st.sendPeer < 0 || st.sendPeer >= n_ || st.sendPeer == r))
          return fail(r, s, st.dstOffset, st.count, "invalid sendPeer {} (nranks {})", st.sendPeer,
                      n_);
        if (st.count == 0) continue;
        const Rank& rk = ranks_[r];
        if (readsSrc(st.op) &&
            !inBounds(st.srcOffset, st.count, rk.view[static_cast<int>(st.src)].count))
          return fail(r, s, st.srcOffset, st.count, "reads {} out of bounds (size {})",
                      bufName(st.src), rk.view[static_cast<int>(st.src)].count);
        if (writesDst(st.op) && st.dst == Buf::kInput)
          return fail(r, s, st.dstOffset, st.count, "writes the input buffer");
        if (writesDst(st.op) &&
            !inBounds(st.dstOffset, st.count, rk.view[static_cast<int>(st.dst)].count))
          return fail(r, s, st.dstOffset, st.count, "writes {} out of bounds (size {})",
                      bufName(st.dst), rk.view[static_cast<int>(st.dst)].count);
        if (readsSrc(st.op) && st.op != Op::kSend && st.op != Op::kCopy) {
          const auto [sp, so] = where(r, st.src, st.srcOffset);
          const auto [dp, d] = where(r, st.dst, st.dstOffset);
          if (sp == dp && so != d && so < d + st.count && d < so + st.count)
            return fail(r, s, st.dstOffset, st.count,
                        "{} source {}[{},+{}) partially overlaps its destination", opName(st.op),
                        bufName(st.src), st.srcOffset, st.count);
        }
        if (forwards(st.op)) {
          for (size_t j = 0; j < i; ++j) {
            const Step& o = ss[j];
            if (o.count > 0 && forwards(o.op) && o.sendPeer == st.sendPeer && o.peer != st.peer)
              return fail(r, s, st.dstOffset, st.count,
                          "forwards to rank {} like step {}, which receives from another rank: "
                          "their slices would interleave",
                          st.sendPeer, j);
          }
        }
      }
    }
    return Status::ok();
  }

  // Physical (buffer, offset) of a schedule buffer position.
  std::pair<int, uint64_t> where(int r, Buf b, uint64_t off) const {
    const View& v = ranks_[r].view[static_cast<int>(b)];
    return {v.phys, v.offset + off};
  }
  bool selfCopy(int r, const Step& st) const {
    return st.op == Op::kCopy && where(r, st.src, st.srcOffset) == where(r, st.dst, st.dstOffset);
  }

  // Steps of a round run concurrently: a write must not overlap another step's access.
  Status checkHazards() {
    std::vector<Access>& acc = accesses_;
    for (int r = 0; r < n_; ++r) {
      const auto& ss = steps(r);
      if (ss.size() < 2) continue;
      acc.clear();
      for (size_t i = 0; i < ss.size(); ++i) {
        const Step& st = ss[i];
        if (st.count == 0 || selfCopy(r, st)) continue;
        if (readsSrc(st.op)) {
          const auto [p, o] = where(r, st.src, st.srcOffset);
          acc.push_back({p, o, o + st.count, static_cast<int>(i), false});
        }
        if (writesDst(st.op)) {
          const auto [p, o] = where(r, st.dst, st.dstOffset);
          acc.push_back({p, o, o + st.count, static_cast<int>(i), true});
        }
      }
      std::sort(acc.begin(), acc.end(), [](const Access& a, const Access& b) {
        return a.phys != b.phys ? a.phys < b.phys : a.begin < b.begin;
      });
      for (size_t i = 0; i < acc.size(); ++i) {
        for (size_t j = i + 1;
             j < acc.size() && acc[j].phys == acc[i].phys && acc[j].begin < acc[i].end; ++j) {
          if (acc[i].step == acc[j].step || !(acc[i].write || acc[j].write)) continue;
          const Access& late = acc[i].step > acc[j].step ? acc[i] : acc[j];
          const Access& early = acc[i].step > acc[j].step ? acc[j] : acc[i];
          const Step& st = ss[late.step];
          const uint64_t lo = std::max(late.begin, early.begin);
          const uint64_t hi = std::min(late.end, early.end);
          const uint64_t base = late.write ? where(r, st.dst, st.dstOffset).second
                                           : where(r, st.src, st.srcOffset).second;
          const uint64_t off = (late.write ? st.dstOffset : st.srcOffset) + (lo - base);
          return fail(r, late.step, off, hi - lo,
                      "{} {} that step {} of the same round {} (the steps of a round run "
                      "concurrently)",
                      late.write ? "writes" : "reads", bufName(late.write ? st.dst : st.src),
                      early.step, early.write ? "writes" : "reads");
        }
      }
    }
    return Status::ok();
  }

  // Pairs messages with receives per (src, dst) in wire order; sizes must agree.
  Status match() {
    msgs_.clear();
    wants_.clear();
    stepBase_.assign(n_ + 1, 0);
    for (int r = 0; r < n_; ++r) stepBase_[r + 1] = stepBase_[r] + steps(r).size();
    wantOfStep_.assign(stepBase_[n_], -1);
    fwdOfStep_.assign(stepBase_[n_], -1);
    for (int r = 0; r < n_; ++r) {
      const auto& ss = steps(r);
      for (size_t i = 0; i < ss.size(); ++i) {
        const Step& st = ss[i];
        if (st.count == 0) continue;
        const int s = static_cast<int>(i);
        if (st.op == Op::kSend) msgs_.push_back({r, st.peer, s, i, st.count});
        if (forwards(st.op)) msgs_.push_back({r, st.sendPeer, s, (1ull << 32) + i, st.count});
        if (receives(st.op)) {
          wantOfStep_[stepBase_[r] + i] = static_cast<int>(wants_.size());
          wants_.push_back({st.peer, r, s});
        }
      }
    }
    std::sort(msgs_.begin(), msgs_.end(), [](const Msg& a, const Msg& b) {
      return std::tie(a.src, a.dst, a.order) < std::tie(b.src, b.dst, b.order);
    });
    for (size_t m = 0; m < msgs_.size(); ++m)
      if (msgs_[m].order >= (1ull << 32))
        fwdOfStep_[stepBase_[msgs_[m].src] + msgs_[m].step] = static_cast<int>(m);
    // wants_ is in (dst, step) order; pair per (src, dst) by walking a sorted index.
    std::vector<int>& idx = order_;
    idx.resize(wants_.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i);
    std::sort(idx.begin(), idx.end(), [&](int a, int b) {  // receiver's step order per pair
      return std::tie(wants_[a].src, wants_[a].dst, a) < std::tie(wants_[b].src, wants_[b].dst, b);
    });
    size_t m = 0;
    for (int w : idx) {
      Want& want = wants_[w];
      auto key = [](int s, int d) { return std::make_pair(s, d); };
      while (m < msgs_.size() && key(msgs_[m].src, msgs_[m].dst) < key(want.src, want.dst)) ++m;
      if (m < msgs_.size() && msgs_[m].src == want.src && msgs_[m].dst == want.dst) {
        want.msg = static_cast<int>(m);
        msgs_[m].want = w;
        ++m;
      }
    }
    for (const Want& w : wants_) {  // receiver order
      const Step& st = steps(w.dst)[w.step];
      if (w.msg < 0)
        return fail(w.dst, w.step, st.dstOffset, st.count,
                    "no matching send from rank {} in round {}: the receive never completes", w.src,
                    round_);
      const Msg& msg = msgs_[w.msg];
      if (msg.count != st.count)
        return fail(w.dst, w.step, st.dstOffset, st.count,
                    "receives {} elements but the matching message from rank {} (its step {}) "
                    "carries {}",
                    st.count, msg.src, msg.step, msg.count);
    }
    for (const Msg& msg : msgs_) {
      if (msg.want >= 0) continue;
      const Step& st = steps(msg.src)[msg.step];
      return fail(msg.src, msg.step, forwards(st.op) ? st.dstOffset : st.srcOffset, st.count,
                  "rank {} does not receive this message in round {} (a message must be "
                  "received in the round it is sent)",
                  msg.dst, round_);
    }
    return Status::ok();
  }

  // Combines dst/src contents (a) with incoming/src contents (b) element-wise into out.
  Status combine(int r, int s, Buf aBuf, uint64_t aOff, Buf bBuf, uint64_t bOff,
                 std::span<const Piece> a, std::span<const Piece> b, bool bIncoming,
                 std::vector<Piece>& out) {
    out.clear();
    size_t i = 0, j = 0;
    uint64_t ui = 0, uj = 0, pos = 0;  // used parts of a[i], b[j]
    while (i < a.size() && j < b.size()) {
      const uint64_t len = std::min(a[i].count - ui, b[j].count - uj);
      const Content x = advance(a[i].c, ui), y = advance(b[j].c, uj);
      if (!barrier_) {
        if (x.set == 0)
          return fail(r, s, aOff + pos, len, "reads {} that nothing wrote", bufName(aBuf));
        if (y.set == 0)
          return fail(r, s, bOff + pos, len, "reads {} that nothing wrote", bufName(bBuf));
      }
      Content c{0, static_cast<uint32_t>(round_), static_cast<uint32_t>(s), x.index};
      if (x.set != 0 && y.set != 0) {
        if (x.index != y.index)
          return fail(r, s, aOff + pos, len,
                      "reduces source index {} with {} index {}: different elements", x.index,
                      bIncoming ? "incoming" : bufName(bBuf), y.index);
        int common = -1;
        c.set = sets_.join(x.set, y.set, common);
        if (common >= 0)
          return fail(r, s, aOff + pos, len,
                      "double contribution: rank {}'s data is in both {} and the {} operand",
                      common, bufName(aBuf), bIncoming ? "incoming" : bufName(bBuf));
        if (!barrier_) c.expr = exprs_.combine(x.expr, y.expr);
      } else {
        c.set = x.set ? x.set : y.set;
        c.index = x.set ? x.index : y.index;
        c.expr = x.set ? x.expr : y.expr;
      }
      out.push_back({len, c});
      pos += len;
      ui += len;
      uj += len;
      if (ui == a[i].count) ++i, ui = 0;
      if (uj == b[j].count) ++j, uj = 0;
    }
    return Status::ok();
  }

  Status readChecked(int r, int s, Buf b, uint64_t off, uint64_t count, std::vector<Piece>& out) {
    const auto [p, o] = where(r, b, off);
    ranks_[r].phys[p].read(o, count, out);
    if (barrier_) return Status::ok();
    uint64_t pos = 0;
    for (const Piece& pc : out) {
      if (pc.c.set == 0)
        return fail(r, s, off + pos, pc.count, "reads {} that nothing wrote", bufName(b));
      pos += pc.count;
    }
    return Status::ok();
  }

  void store(int r, int s, Buf b, uint64_t off, std::vector<Piece>& pieces) {
    for (Piece& pc : pieces) pc.c.round = static_cast<uint32_t>(round_), pc.c.step = s;
    const auto [p, o] = where(r, b, off);
    ranks_[r].phys[p].write(o, pieces);
  }

  // Sends, copies and reductions first (they read the state at the start of the round), then
  // receives as their messages become available; what is left waits on a forwarding cycle.
  Status execute() {
    for (int r = 0; r < n_; ++r) {
      const auto& ss = steps(r);
      for (size_t i = 0; i < ss.size(); ++i) {
        const Step& st = ss[i];
        const int s = static_cast<int>(i);
        if (st.count == 0 || receives(st.op) || selfCopy(r, st)) continue;
        if (st.op == Op::kSend) continue;  // below, with its message
        TUTTI_VERIFY_TRY(readChecked(r, s, st.src, st.srcOffset, st.count, tmpA_));
        if (st.op == Op::kReduce) {
          TUTTI_VERIFY_TRY(readChecked(r, s, st.dst, st.dstOffset, st.count, tmpB_));
          TUTTI_VERIFY_TRY(combine(r, s, st.dst, st.dstOffset, st.src, st.srcOffset, tmpB_, tmpA_,
                                   false, tmpC_));
          std::swap(tmpA_, tmpC_);
        }
        store(r, s, st.dst, st.dstOffset, tmpA_);
      }
    }
    if (barrier_) roundStart_.clear();
    for (int r = 0; barrier_ && r < n_; ++r) roundStart_.push_back(ranks_[r].knows);
    std::vector<int>& ready = order_;
    ready.clear();
    pool_.clear();
    for (size_t m = 0; m < msgs_.size(); ++m) {
      Msg& msg = msgs_[m];
      const Step& st = steps(msg.src)[msg.step];
      if (st.op != Op::kSend) continue;
      TUTTI_VERIFY_TRY(readChecked(msg.src, msg.step, st.src, st.srcOffset, st.count, tmpA_));
      keep(msg, tmpA_);
      if (barrier_) msg.knows = ranks_[msg.src].knows;
      ready.push_back(msg.want);
    }
    while (!ready.empty()) {
      Want& w = wants_[ready.back()];
      ready.pop_back();
      TUTTI_VERIFY_TRY(receive(w, ready));
    }
    for (const Want& w : wants_) {
      if (w.done) continue;
      const Step& st = steps(w.dst)[w.step];
      return fail(w.dst, w.step, st.dstOffset, st.count, "deadlock: {}", cycle(w));
    }
    return Status::ok();
  }

  void keep(Msg& msg, const std::vector<Piece>& data) {
    msg.dataBegin = pool_.size();
    msg.dataLen = data.size();
    pool_.insert(pool_.end(), data.begin(), data.end());
  }

  Status receive(Want& w, std::vector<int>& ready) {
    const int r = w.dst, s = w.step;
    const Step& st = steps(r)[s];
    const Msg& in = msgs_[w.msg];
    const std::span<const Piece> data(pool_.data() + in.dataBegin, in.dataLen);
    if (st.op == Op::kRecvReduce || st.op == Op::kRecvReduceSend) {
      TUTTI_VERIFY_TRY(readChecked(r, s, st.src, st.srcOffset, st.count, tmpA_));
      TUTTI_VERIFY_TRY(
          combine(r, s, st.src, st.srcOffset, st.dst, st.dstOffset, tmpA_, data, true, tmpC_));
    } else {
      tmpC_.assign(data.begin(), data.end());
    }
    store(r, s, st.dst, st.dstOffset, tmpC_);
    w.done = true;
    if (barrier_)
      for (size_t i = 0; i < in.knows.size(); ++i) ranks_[r].knows[i] |= in.knows[i];
    if (forwards(st.op)) {
      Msg& out = msgs_[fwdOfStep_[stepBase_[r] + s]];
      const auto [p, o] = where(r, st.dst, st.dstOffset);
      ranks_[r].phys[p].read(o, st.count, tmpA_);
      keep(out, tmpA_);
      if (barrier_) {
        out.knows = roundStart_[r];
        for (size_t i = 0; i < in.knows.size(); ++i) out.knows[i] |= in.knows[i];
      }
      ready.push_back(out.want);
    }
    return Status::ok();
  }

  // "rank 1 step 0 waits for rank 2 step 0, which waits for rank 1 step 0".
  std::string cycle(const Want& start) const {
    std::string out = fmt::format("rank {} step {}", start.dst, start.step);
    const Want* w = &start;
    for (int hops = 0; hops <= n_ && w->msg >= 0; ++hops) {
      const Msg& m = msgs_[w->msg];
      out += fmt::format(" waits for the message forwarded by rank {} step {}", m.src, m.step);
      const int nextIdx = wantOfStep_[stepBase_[m.src] + m.step];
      const Want* next = nextIdx >= 0 ? &wants_[nextIdx] : nullptr;
      if (!next || next == &start) break;
      w = next;
      out += ", which";
    }
    return out + " (a forwarding cycle)";
  }

  std::string describe(const Content& c, uint64_t count) const {
    if (c.set == 0) return "nothing (never written)";
    if (sets_.singleton(c.set))
      return fmt::format("rank {}'s input [{},+{})", sets_.firstIn(c.set), c.index, count);
    return fmt::format("the reduction of ranks {} at input [{},+{})", sets_.describe(c.set),
                       c.index, count);
  }

  // The output rank r must end with, as pieces; false where nothing is required.
  bool expected(int r, std::vector<Piece>& out) const {
    out.clear();
    const Coll k = shape_.coll;
    const uint64_t c = shape_.count, rc = static_cast<uint64_t>(r) * c;
    if ((k == Coll::kReduce || k == Coll::kGather) && r != shape_.root) return false;
    if (k == Coll::kAllReduce || k == Coll::kReduce || k == Coll::kReduceScatter) {
      out.push_back({c, Content{sets_.full(), 0, 0, k == Coll::kReduceScatter ? rc : 0}});
    } else if (k == Coll::kAllGather || k == Coll::kAllToAll || k == Coll::kGather) {
      for (int q = 0; q < n_; ++q)
        out.push_back({c, Content{sets_.single(q), 0, 0, k == Coll::kAllToAll ? rc : 0}});
    } else if (k == Coll::kBroadcast || k == Coll::kScatter) {
      out.push_back({c, Content{sets_.single(shape_.root), 0, 0, k == Coll::kScatter ? rc : 0}});
    } else {
      return false;  // sendrecv: not verified
    }
    return true;
  }

  Status checkOutputs() {
    std::vector<Piece> want, got;
    for (int r = 0; r < n_; ++r) {
      if (!expected(r, want)) continue;
      const View& v = ranks_[r].view[1];
      ranks_[r].phys[v.phys].read(v.offset, v.count, got);
      size_t i = 0, j = 0;
      uint64_t ui = 0, uj = 0, pos = 0;
      while (i < got.size() && j < want.size()) {
        const uint64_t len = std::min(got[i].count - ui, want[j].count - uj);
        const Content g = advance(got[i].c, ui), e = advance(want[j].c, uj);
        if (g.set != e.set || g.index != e.index) {
          std::string what = fmt::format("leaves output holding {} where {} is required",
                                         describe(g, len), describe(e, len));
          if (g.set != 0 && g.index == e.index) {
            if (std::string m = sets_.describe(e.set, g.set); !m.empty())
              what += fmt::format(" (missing ranks {})", m);
            if (std::string x = sets_.describe(g.set, e.set); !x.empty())
              what += fmt::format(" (extra ranks {})", x);
          }
          if (g.round == kInitial)
            return invalidUsage("verify: rank {}: {} (range [{},+{}))", r,
                                g.set == 0 ? "output is never written: " + what
                                           : "output still holds its input: " + what,
                                pos, len);
          round_ = g.round;
          return fail(r, static_cast<int>(g.step), pos, len, "{}", what);
        }
        pos += len;
        ui += len;
        uj += len;
        if (ui == got[i].count) ++i, ui = 0;
        if (uj == want[j].count) ++j, uj = 0;
      }
    }
    return Status::ok();
  }

  // Every rank must have heard (transitively) from every other rank by its last round.
  Status checkBarrier() const {
    for (int r = 0; r < n_; ++r)
      for (int q = 0; q < n_; ++q)
        if (!((ranks_[r].knows[q / 64] >> (q % 64)) & 1)) {
          const size_t rounds = sched_[r].rounds.size();
          return invalidUsage(
              "verify: rank {} round {}: finishes the barrier without having heard from rank {}, "
              "directly or through other ranks",
              r, rounds == 0 ? std::string("none") : std::to_string(rounds - 1), q);
        }
    return Status::ok();
  }

  CollShape shape_;
  int n_;
  const std::vector<Schedule>& sched_;
  RankSets sets_;
  Exprs exprs_;
  bool barrier_;
  size_t round_ = 0;
  std::vector<Rank> ranks_;
  std::vector<Msg> msgs_;
  std::vector<Want> wants_;
  std::vector<int> order_;
  std::vector<size_t> stepBase_;             // flat (rank, step) index of this round
  std::vector<int> wantOfStep_, fwdOfStep_;  // by flat step: its receive, its forwarded message
  std::vector<std::vector<uint64_t>> roundStart_;
  std::vector<Piece> tmpA_, tmpB_, tmpC_, pool_;
  std::vector<Access> accesses_;
};

Status checkArgs(const char* api, const CollShape& shape, const std::vector<Schedule>& perRank) {
  if (shape.nranks < 1 || perRank.size() != static_cast<size_t>(shape.nranks))
    return invalidUsage("{}: {} schedules for nranks {}", api, perRank.size(), shape.nranks);
  if (shape.root < 0 || shape.root >= shape.nranks)
    return invalidUsage("{}: root {} out of range (nranks {})", api, shape.root, shape.nranks);
  return Status::ok();
}

}  // namespace

Status verify(const CollShape& shape, const std::vector<Schedule>& perRank) {
  TUTTI_VERIFY_TRY(checkArgs("verify", shape, perRank));
  Verifier v(shape, perRank);
  return v.run();
}

Result<Dataflow> dataflow(const CollShape& shape, const std::vector<Schedule>& perRank) {
  if (shape.coll == Coll::kBarrier)
    return invalidUsage("dataflow: a barrier moves no data (coll=barrier, nranks {})",
                        shape.nranks);
  TUTTI_VERIFY_TRY(checkArgs("dataflow", shape, perRank));
  Verifier v(shape, perRank);
  TUTTI_VERIFY_TRY(v.run());
  return v.dataflow();
}

Status verifyAlgorithm(const AlgorithmInfo& algo, const CollShape& shape) {
  if (algo.coll != shape.coll)
    return invalidUsage("verify: algorithm {} is for {}, not {}", algo.name, collName(algo.coll),
                        collName(shape.coll));
  if (shape.nranks < 1) return invalidUsage("verify: nranks {} < 1", shape.nranks);
  CollShape s = shape;
  s.rank = 0;
  if (algo.supports && !algo.supports(s)) return Status::ok();
  std::vector<Schedule> perRank(shape.nranks);
  for (int r = 0; r < shape.nranks; ++r) {
    s.rank = r;
    if (algo.supports && !algo.supports(s))
      return invalidUsage(
          "verify: {} {} supports rank 0 but declines rank {} (nranks {}, count {})",
          collName(algo.coll), algo.name, r, shape.nranks, shape.count);
    auto built = algo.build(s);
    if (!built.isOk())
      return Status(built.status().code(),
                    fmt::format("verify: {} {} fails to build rank {}: {}", collName(algo.coll),
                                algo.name, r, built.status().message()));
    perRank[r] = std::move(built).value();
  }
  return verify(shape, perRank);
}

}  // namespace tutti::algo
