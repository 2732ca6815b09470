// File: core/device/compile.cc
// The clique compiler (see compile.h). Pipeline: build every rank's schedule; algo::dataflow
// gives, per piece of every output, the reduction tree and the input index it reads; pieces are
// split at every input boundary their tree has anywhere, so that equal (tree, input range) pairs
// line up, and grouped into ops with one destination per output that needs them; in place,
// destinations that already hold their value are dropped and the ops are layered (an op that
// reads a location runs in an earlier launch than the op that overwrites it); each tree becomes
// postfix code in Sethi-Ullman order; the ops of a layer are packed into Programs within the
// kernel's fixed limits.
#include "core/device/compile.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "algorithms/verifier.h"
#include "base/collectives.h"

namespace tutti::device {
namespace {

namespace prog = kernels::program;
using algo::CollShape;
using algo::Dataflow;

// An element location: a buffer number (prog::inputBuffer / outputBuffer) and an element offset.
struct Loc {
  int buf = 0;
  uint64_t offset = 0;
  bool operator==(const Loc&) const = default;
};

// One op before packing: outputs `dsts` get tree `expr` over inputs[index, +count).
struct Draft {
  uint32_t expr = 0;
  uint64_t index = 0, count = 0;
  std::vector<Loc> dsts;
  std::vector<int> leaves;  // ranks, in first-use order of the code
  std::vector<uint8_t> code;
  int layer = 0;
};

bool reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce;
}

// Where the memory of a logical location lives. In place, one buffer of a rank lies inside the
// other (NCCL's in-place forms); the executor passes the user's pointers, so a leaf and a
// destination can be the same memory. Out of place every buffer is its own.
class Memory {
 public:
  explicit Memory(const CollShape& s) : shape_(s) {}
  Loc phys(Loc l) const {
    if (!shape_.inPlace) return l;
    const int r = l.buf / 2;
    const bool input = l.buf % 2 == 0;
    const uint64_t rc = static_cast<uint64_t>(r) * shape_.count;
    // An in-place alltoall (send == recv), which the API refuses, is taken as such here so that
    // compile() can say why it has no launch order.
    const InPlaceForm form =
        shape_.coll == Coll::kAllToAll ? InPlaceForm::kSame : collInfo(shape_.coll).inPlace;
    switch (form) {
      case InPlaceForm::kSame:
        if (input && outputCount(r) > 0) return {prog::outputBuffer(r), l.offset};
        break;
      case InPlaceForm::kSendInRecv:
        if (input) return {prog::outputBuffer(r), rc + l.offset};
        break;
      case InPlaceForm::kRecvInSend:
        if (!input) return {prog::inputBuffer(r), rc + l.offset};
        break;
      case InPlaceForm::kNone:
        break;
    }
    return l;
  }

 private:
  uint64_t outputCount(int r) const {
    CollShape s = shape_;
    s.rank = r;
    return algo::bufferCount(s, algo::Buf::kOutput);
  }
  const CollShape& shape_;
};

std::string describe(const Draft& d) {
  const Loc& l = d.dsts.front();
  return fmt::format("the op writing rank {}'s {} [{},+{})", l.buf / 2,
                     l.buf % 2 == 0 ? "input" : "output", l.offset, d.count);
}

// Splits every piece at the input boundaries that its tree has in any piece, then groups equal
// (tree, input index) sub-pieces: after the split they have equal counts too. Ops come out in
// the order of their first destination (rank, offset): deterministic.
std::vector<Draft> group(const Dataflow& flow) {
  std::unordered_map<uint32_t, std::vector<uint64_t>> cuts;
  for (const auto& pieces : flow.outputs)
    for (const Dataflow::Piece& p : pieces) {
      cuts[p.expr].push_back(p.index);
      cuts[p.expr].push_back(p.index + p.count);
    }
  for (auto& [expr, v] : cuts) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  std::vector<Draft> drafts;
  std::map<std::pair<uint32_t, uint64_t>, size_t> byKey;
  for (size_t r = 0; r < flow.outputs.size(); ++r) {
    for (const Dataflow::Piece& p : flow.outputs[r]) {
      const std::vector<uint64_t>& v = cuts[p.expr];
      auto next = std::upper_bound(v.begin(), v.end(), p.index);
      for (uint64_t at = p.index, end = p.index + p.count; at < end; ++next) {
        const uint64_t to = *next;  // exists: end itself is a cut
        auto [it, added] = byKey.emplace(std::make_pair(p.expr, at), drafts.size());
        if (added) drafts.push_back({.expr = p.expr, .index = at, .count = to - at});
        drafts[it->second].dsts.push_back(
            {prog::outputBuffer(static_cast<int>(r)), p.offset + (at - p.index)});
        at = to;
      }
    }
  }
  return drafts;
}

// Postfix code of a tree: at every node the child whose evaluation needs the deeper stack goes
// first (Sethi-Ullman), so a tree of L leaves never holds more than floor(log2 L) + 1 values
// (5 for 16 leaves: kMaxDepth). Reordering children is allowed because the ops commute.
class CodeGen {
 public:
  explicit CodeGen(const std::vector<Dataflow::Node>& nodes) : nodes_(nodes), need_(nodes.size()) {
    for (size_t i = 0; i < nodes.size(); ++i) {  // children have smaller ids
      const Dataflow::Node& n = nodes[i];
      if (n.rank >= 0) {
        need_[i] = 1;
      } else {
        const int a = need_[n.a], b = need_[n.b];
        need_[i] = a == b ? a + 1 : std::max(a, b);
      }
    }
  }
  int need(uint32_t expr) const { return need_[expr]; }
  void emit(uint32_t expr, Draft& d) const {
    const Dataflow::Node& n = nodes_[expr];
    if (n.rank >= 0) {
      auto it = std::find(d.leaves.begin(), d.leaves.end(), n.rank);
      const size_t k = static_cast<size_t>(it - d.leaves.begin());
      if (it == d.leaves.end()) d.leaves.push_back(n.rank);
      d.code.push_back(static_cast<uint8_t>(k));
      return;
    }
    const bool aFirst = need_[n.a] >= need_[n.b];
    emit(aFirst ? n.a : n.b, d);
    emit(aFirst ? n.b : n.a, d);
    d.code.push_back(prog::kApply);
  }

 private:
  const std::vector<Dataflow::Node>& nodes_;
  std::vector<int> need_;
};

// One access of an op to memory, for the hazard sweep.
struct Access {
  Loc at;  // physical
  uint64_t end;
  size_t op;
  bool write;
};

// Orders the ops into layers: an op that reads memory another op writes runs in an earlier
// layer than the writer. InvalidUsage when the ops form a cycle; InternalError when two
// destinations overlap (every output element has one value, so that would be a compiler bug).
// With NCCL's in-place forms the registered algorithms give one layer or a cycle: a reducing op
// reads every rank's input, so two different trees over one element each overwrite an input the
// other reads (one_shot allreduce in place, nranks >= 3), and in-place alltoall swaps blocks.
Status layer(std::vector<Draft>& drafts, const Memory& mem, const std::string& what) {
  std::vector<Access> acc;
  for (size_t i = 0; i < drafts.size(); ++i) {
    const Draft& d = drafts[i];
    for (int q : d.leaves) {
      const Loc p = mem.phys({prog::inputBuffer(q), d.index});
      acc.push_back({p, p.offset + d.count, i, false});
    }
    for (const Loc& l : d.dsts) {
      const Loc p = mem.phys(l);
      acc.push_back({p, p.offset + d.count, i, true});
    }
  }
  std::sort(acc.begin(), acc.end(), [](const Access& a, const Access& b) {
    return std::tie(a.at.buf, a.at.offset) < std::tie(b.at.buf, b.at.offset);
  });
  std::vector<std::pair<size_t, size_t>> edges;  // (reader, writer): the reader runs first
  for (size_t i = 0; i < acc.size(); ++i) {
    for (size_t j = i + 1;
         j < acc.size() && acc[j].at.buf == acc[i].at.buf && acc[j].at.offset < acc[i].end; ++j) {
      const Access &x = acc[i], &y = acc[j];
      if (!x.write && !y.write) continue;
      if (x.write && y.write)
        return internalError("compile: {}: {} and {} write overlapping memory (buffer {}, {})",
                             what, describe(drafts[x.op]), describe(drafts[y.op]), x.at.buf,
                             y.at.offset);
      if (x.op == y.op) {
        // An op reads every leaf element before it writes that element of its destinations, so
        // only a destination that is its own leaf at the same element is safe.
        if (x.at.offset == y.at.offset) continue;
        return invalidUsage(
            "compile: {}: in place, {} overwrites its own input at another element (buffer {}, "
            "elements {} and {}); no kernel order makes that safe",
            what, describe(drafts[x.op]), x.at.buf, x.at.offset, y.at.offset);
      }
      edges.push_back(x.write ? std::make_pair(y.op, x.op) : std::make_pair(x.op, y.op));
    }
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  // Longest path from the sources (Kahn): a writer goes one layer after its last reader.
  const size_t n = drafts.size();
  std::vector<size_t> indegree(n, 0), first(n + 1, 0);
  for (const auto& [from, to] : edges) ++indegree[to], ++first[from + 1];
  for (size_t i = 0; i < n; ++i) first[i + 1] += first[i];  // edges are sorted by `from`
  std::vector<size_t> ready;
  for (size_t i = 0; i < n; ++i)
    if (indegree[i] == 0) ready.push_back(i);
  size_t done = 0;
  while (!ready.empty()) {
    const size_t u = ready.back();
    ready.pop_back();
    ++done;
    for (size_t e = first[u]; e < first[u + 1]; ++e) {
      Draft& w = drafts[edges[e].second];
      w.layer = std::max(w.layer, drafts[u].layer + 1);
      if (--indegree[edges[e].second] == 0) ready.push_back(edges[e].second);
    }
  }
  if (done == n) return Status::ok();
  // Walk edges among the ops left over until one repeats: that is a cycle.
  size_t u = 0;
  while (indegree[u] == 0) ++u;
  std::vector<size_t> path;
  std::vector<int> seen(n, -1);
  while (seen[u] < 0) {
    seen[u] = static_cast<int>(path.size());
    path.push_back(u);
    for (size_t e = first[u]; e < first[u + 1]; ++e)
      if (indegree[edges[e].second] > 0) {
        u = edges[e].second;
        break;
      }
  }
  std::string cycle;
  for (size_t k = static_cast<size_t>(seen[u]); k < path.size(); ++k)
    cycle += describe(drafts[path[k]]) + " reads what ";
  cycle += describe(drafts[u]) + " overwrites";
  return invalidUsage(
      "compile: {}: in place, the ops form a cycle ({}), so no order of launches computes the "
      "result",
      what, cycle);
}

prog::Program emptyProgram(const CollShape& shape, bool preMul, const std::byte* scalar) {
  prog::Program p;
  p.dtype = shape.dtype;
  p.op = shape.op == RedOp::kAvg ? RedOp::kSum : shape.op;
  p.divisor = shape.op == RedOp::kAvg ? shape.nranks : 1;
  p.preMul = preMul ? 1 : 0;
  if (preMul) std::memcpy(p.scalar, scalar, dataTypeBytes(shape.dtype));
  return p;
}

Status checkColl(const CollShape& shape) {
  const std::string_view coll = collName(shape.coll);
  if (shape.coll == Coll::kSendRecv || shape.coll == Coll::kBarrier)
    return invalidUsage(
        "compile: {} is not compiled here (coll={}; grouped send/recv is compiled "
        "by the executor, a barrier moves no data)",
        coll, coll);
  return Status::ok();
}

Status checkShape(const CollShape& shape, const algo::AlgorithmInfo& algo,
                  const std::byte* preMulScalar) {
  const std::string_view coll = collName(shape.coll);
  TUTTI_TRY(checkColl(shape));
  if (algo.coll != shape.coll)
    return invalidUsage("compile: algorithm {} is for {}, not {} (algorithm={})", algo.name,
                        collName(algo.coll), coll, algo.name);
  if (shape.nranks < 1 || shape.nranks > prog::kMaxRanks)
    return invalidUsage("compile: {} {}: nranks {} is outside [1, {}] (nranks={})", coll, algo.name,
                        shape.nranks, prog::kMaxRanks, shape.nranks);
  if (shape.root < 0 || shape.root >= shape.nranks)
    return invalidUsage("compile: {} {}: root {} is outside [0, {}) (root={})", coll, algo.name,
                        shape.root, shape.nranks, shape.root);
  if (!isValid(shape.dtype))
    return invalidArgument("compile: invalid dtype (dtype={})", static_cast<int>(shape.dtype));
  if (!isValid(shape.op))
    return invalidArgument("compile: invalid reduction op (op={})", static_cast<int>(shape.op));
  if (preMulScalar && (shape.op != RedOp::kSum || !reduces(shape.coll)))
    return invalidArgument(
        "compile: {}: a premulsum scalar needs a reducing collective and op sum (coll={}, op={})",
        coll, coll, redOpName(shape.op));
  if (shape.inPlace && (shape.coll == Coll::kGather || shape.coll == Coll::kScatter))
    return invalidUsage("compile: {} has no in-place form (coll={}, inPlace=true)", coll, coll);
  // Refs hold 56-bit element offsets; the largest buffer has nranks * count elements.
  const uint64_t maxCount = (uint64_t{1} << 56) / static_cast<uint64_t>(shape.nranks);
  if (shape.count >= maxCount)
    return invalidUsage("compile: {} {}: count {} is too large (count={}, nranks={})", coll,
                        algo.name, shape.count, shape.count, shape.nranks);
  return Status::ok();
}

}  // namespace

Result<CompiledCall> compile(const CollShape& shape, const algo::AlgorithmInfo& algo,
                             const std::byte* preMulScalar) {
  TUTTI_TRY(checkShape(shape, algo, preMulScalar));
  const int n = shape.nranks;
  const bool preMul = preMulScalar != nullptr;
  const std::string what =
      fmt::format("{} {} (nranks={}, count={}, {})", collName(shape.coll), algo.name, n,
                  shape.count, shape.inPlace ? "in place" : "out of place");
  // The engine scales a premulsum input into staging and runs the out-of-place schedule.
  CollShape flowShape = shape;
  if (preMul) flowShape.inPlace = false;
  std::vector<algo::Schedule> perRank(n);
  for (int r = 0; r < n; ++r) {
    CollShape s = flowShape;
    s.rank = r;
    if (algo.supports && !algo.supports(s))
      return invalidUsage("compile: {}: the algorithm declines rank {}", what, r);
    auto built = algo.build(s);
    if (!built.isOk())
      return Status(built.status().code(), fmt::format("compile: {}: rank {} fails to build: {}",
                                                       what, r, built.status().message()));
    perRank[r] = std::move(built).value();
  }
  TUTTI_TRY_ASSIGN(Dataflow flow, algo::dataflow(flowShape, perRank));

  std::vector<Draft> drafts = group(flow);
  const CodeGen gen(flow.nodes);
  const Memory mem(shape);
  const bool divide = shape.op == RedOp::kAvg && n > 1 && reduces(shape.coll);
  for (Draft& d : drafts) {
    if (gen.need(d.expr) > prog::kMaxDepth)
      return invalidUsage("compile: {}: a reduction tree needs a stack of {} (kMaxDepth {})", what,
                          gen.need(d.expr), prog::kMaxDepth);
    gen.emit(d.expr, d);
    if (d.leaves.size() > static_cast<size_t>(prog::kMaxLeaves))
      return invalidUsage("compile: {}: a reduction tree has {} leaves (kMaxLeaves {}, nranks={})",
                          what, d.leaves.size(), prog::kMaxLeaves, n);
    // In place an output may already hold its value: the op's only leaf, unscaled.
    if (d.leaves.size() == 1 && !preMul && !divide) {
      const Loc leaf = mem.phys({prog::inputBuffer(d.leaves[0]), d.index});
      std::erase_if(d.dsts, [&](const Loc& l) { return mem.phys(l) == leaf; });
    }
  }
  std::erase_if(drafts, [](const Draft& d) { return d.dsts.empty(); });
  // An op holds at most 255 destinations and its refs fit one Program: more become several ops
  // (each reading the leaves again), before the hazard check so that it sees them.
  for (size_t i = 0; i < drafts.size(); ++i) {
    const size_t perOp = std::min<size_t>(255, prog::kMaxRefs - drafts[i].leaves.size());
    if (drafts[i].dsts.size() <= perOp) continue;
    Draft rest = drafts[i];
    rest.dsts.erase(rest.dsts.begin(), rest.dsts.begin() + static_cast<ptrdiff_t>(perOp));
    drafts[i].dsts.resize(perOp);
    drafts.insert(drafts.begin() + static_cast<ptrdiff_t>(i) + 1, std::move(rest));
  }
  if (shape.inPlace) TUTTI_TRY(layer(drafts, mem, what));

  CompiledCall out;
  out.algorithm = std::string(algo.name);
  const uint64_t elem = dataTypeBytes(shape.dtype);
  int layers = 0;
  for (const Draft& d : drafts) layers = std::max(layers, d.layer + 1);
  for (int l = 0; l < layers; ++l) {
    const size_t firstOfLayer = out.launches.size();
    for (const Draft& d : drafts) {
      if (d.layer != l) continue;
      const size_t nleaves = d.leaves.size(), ndsts = d.dsts.size();
      prog::Program* p = out.launches.size() > firstOfLayer ? &out.launches.back() : nullptr;
      if (!p || p->nops == prog::kMaxOps || p->nrefs + nleaves + ndsts > prog::kMaxRefs ||
          p->ncode + d.code.size() > prog::kMaxCode) {
        out.launches.push_back(emptyProgram(shape, preMul, preMulScalar));
        p = &out.launches.back();
      }
      prog::Op& op = p->ops[p->nops++];
      op.count = d.count;
      op.flags = divide ? prog::kDivide : 0;
      op.nleaves = static_cast<uint8_t>(nleaves);
      op.leaves = p->nrefs;
      for (int q : d.leaves) p->refs[p->nrefs++] = prog::Ref::make(prog::inputBuffer(q), d.index);
      op.ndsts = static_cast<uint8_t>(ndsts);
      op.dsts = p->nrefs;
      for (const Loc& l : d.dsts) p->refs[p->nrefs++] = prog::Ref::make(l.buf, l.offset);
      op.code = p->ncode;
      op.ncode = static_cast<uint8_t>(d.code.size());
      for (uint8_t c : d.code) p->code[p->ncode++] = c;
      out.bytesRead += d.count * elem * nleaves;
      out.bytesWritten += d.count * elem * ndsts;
    }
  }
  return out;
}

Result<CompiledCall> compileBest(const CollShape& shape, std::string_view requested,
                                 const std::byte* preMulScalar) {
  TUTTI_TRY(checkColl(shape));
  if (!requested.empty()) {
    const algo::AlgorithmInfo* info = algo::find(shape.coll, requested);
    if (!info)
      return invalidArgument("compileBest: no algorithm '{}' for {} (requested={})", requested,
                             collName(shape.coll), requested);
    TUTTI_TRY_ASSIGN(CompiledCall call, compile(shape, *info, preMulScalar));
    call.reason = fmt::format("{} {}: requested", collName(shape.coll), call.algorithm);
    return call;
  }
  auto total = [](const CompiledCall& c) { return c.bytesRead + c.bytesWritten; };
  auto nops = [](const CompiledCall& c) {
    size_t k = 0;
    for (const auto& p : c.launches) k += p.nops;
    return k;
  };
  auto better = [&](const CompiledCall& a, const CompiledCall& b) {
    return std::make_tuple(total(a), a.launches.size(), nops(a), a.algorithm) <
           std::make_tuple(total(b), b.launches.size(), nops(b), b.algorithm);
  };
  std::vector<CompiledCall> ok;
  Status firstError;
  int candidates = 0;
  CollShape s0 = shape;
  s0.rank = 0;
  for (const algo::AlgorithmInfo& info : algo::registry()) {
    if (info.coll != shape.coll || (info.supports && !info.supports(s0))) continue;
    ++candidates;
    auto call = compile(shape, info, preMulScalar);
    if (call.isOk()) {
      ok.push_back(std::move(call).value());
    } else if (firstError.isOk()) {
      firstError = call.status();
    }
  }
  if (ok.empty()) {
    if (candidates == 0)
      return invalidUsage("compileBest: no registered {} algorithm supports nranks={} count={}",
                          collName(shape.coll), shape.nranks, shape.count);
    return Status(firstError.code(),
                  fmt::format("compileBest: none of the {} {} algorithms compiles; the first "
                              "error: {}",
                              candidates, collName(shape.coll), firstError.message()));
  }
  std::sort(ok.begin(), ok.end(), better);
  CompiledCall& best = ok.front();
  best.reason =
      fmt::format("{} {}: {} bytes read + written in {} launch(es), {} op(s)", collName(shape.coll),
                  best.algorithm, total(best), best.launches.size(), nops(best));
  if (ok.size() > 1) {
    const CompiledCall& second = ok[1];
    const double ratio =
        total(best) == 0 ? 1.0
                         : static_cast<double>(total(second)) / static_cast<double>(total(best));
    best.reason += fmt::format("; runner-up {}: {:.2f}x the bytes, {} launch(es)", second.algorithm,
                               ratio, second.launches.size());
  }
  best.reason += fmt::format("; {} of {} candidate(s) compiled", ok.size(), candidates);
  return std::move(best);
}

}  // namespace tutti::device
