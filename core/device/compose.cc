// File: core/device/compose.cc
// The checks and launches both device cliques share (core/device/compose.h).
#include "core/device/compose.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "algorithms/selector.h"
#include "base/arg_check.h"
#include "base/env.h"
#include "base/log.h"

namespace tutti::device {

namespace {

namespace prog = kernels::program;

bool sameShape(const Call& a, const Call& b) {
  return a.coll == b.coll && a.count == b.count && a.dtype == b.dtype && a.op == b.op &&
         a.root == b.root && a.preMul == b.preMul && (!a.preMul || a.scalar == b.scalar);
}

// NCCL's in-place form of collective `c` on `rank` (base/arg_check.h).
bool inPlaceOn(const Call& c, int rank, int nranks) {
  return detail::inPlaceOf(c.callArgs(), rank, nranks);
}

std::vector<const Call*> collectives(const std::vector<Call>& batch) {
  std::vector<const Call*> out;
  for (const Call& c : batch)
    if (c.kind == Call::Kind::kColl) out.push_back(&c);
  return out;
}

// The index-th collective of a batch (it exists: the batches were checked).
const Call& collective(const std::vector<Call>& batch, size_t index) {
  for (const Call& c : batch)
    if (c.kind == Call::Kind::kColl && index-- == 0) return c;
  return batch.front();
}

bool hasPointToPoint(std::span<const std::vector<Call>> calls) {
  for (const auto& batch : calls)
    for (const Call& c : batch)
      if (c.kind != Call::Kind::kColl) return true;
  return false;
}

struct Pair {
  const Call* send;
  const Call* recv;
};

// Every send paired with its peer's receive in issue order per (sender, receiver), as the host
// path pairs them; zero-byte pairs are left out.
Result<std::vector<Pair>> pairUp(std::span<const std::vector<Call>> calls, int nranks) {
  std::vector<Pair> pairs;
  if (!hasPointToPoint(calls)) return pairs;
  for (int a = 0; a < nranks; ++a) {
    for (int b = 0; b < nranks; ++b) {
      std::vector<const Call*> sends, recvs;
      for (const Call& c : calls[a])
        if (c.kind == Call::Kind::kSend && c.peer == b) sends.push_back(&c);
      for (const Call& c : calls[b])
        if (c.kind == Call::Kind::kRecv && c.peer == a) recvs.push_back(&c);
      for (size_t i = 0; i < std::max(sends.size(), recvs.size()); ++i) {
        const Call* snd = i < sends.size() ? sends[i] : nullptr;
        const Call* rcv = i < recvs.size() ? recvs[i] : nullptr;
        if (!snd || !rcv)
          return invalidUsage(
              "{}: rank {}'s send #{} to rank {} has no matching receive on rank {} in the same "
              "step ({} sends, {} receives)",
              (snd ? snd : rcv)->api, a, i, b, b, sends.size(), recvs.size());
        const size_t sb = snd->count * dataTypeBytes(snd->dtype);
        const size_t rb = rcv->count * dataTypeBytes(rcv->dtype);
        if (sb != rb)
          return invalidUsage(
              "{}: rank {} sends {} bytes to rank {} but rank {} receives {} bytes (send #{} of "
              "the pair)",
              snd->api, a, sb, b, b, rb, i);
        if (sb > 0) pairs.push_back({snd, rcv});
      }
    }
  }
  return pairs;
}

}  // namespace

std::string requestedAlgorithm(Coll coll) {
  static const algo::AlgoOverrides overrides = [] {
    for (const char* var : {"TUTTI_ALGO", "NCCL_ALGO"}) {
      const auto text = env::get({var});
      if (!text || text->empty()) continue;
      auto parsed = algo::parseAlgoOverrides(*text, var, /*strict=*/false);
      if (parsed.isOk()) return parsed.value();
    }
    return algo::AlgoOverrides{};
  }();
  auto it = overrides.find(coll);
  if (it == overrides.end() || it->second.exclude || it->second.names.size() != 1) return "";
  return it->second.names.front();
}

std::string describeCall(const Call& c) {
  const bool reduces =
      c.coll == Coll::kAllReduce || c.coll == Coll::kReduce || c.coll == Coll::kReduceScatter;
  std::string out = fmt::format("{} of {} {}", collName(c.coll), c.count, dataTypeName(c.dtype));
  if (reduces) out += fmt::format(" {}", c.preMul ? "premulsum" : redOpName(c.op));
  if (c.coll == Coll::kBroadcast || c.coll == Coll::kReduce || c.coll == Coll::kGather ||
      c.coll == Coll::kScatter)
    out += fmt::format(" root {}", c.root);
  return out;
}

Result<BatchStreams> batchStreams(const std::vector<Call>& calls, int rank) {
  BatchStreams b;
  for (const Call& c : calls) {
    if (std::find(b.at.begin(), b.at.begin() + b.count, c.stream) != b.at.begin() + b.count)
      continue;
    if (b.count == kMaxStreams)
      return invalidUsage("{}: rank {} uses more than {} streams in one group on the device path",
                          c.api, rank, kMaxStreams);
    b.at[b.count++] = c.stream;
  }
  return b;
}

void bufferCounts(const Call& c, int rank, int nranks, size_t* in, size_t* out) {
  algo::CollShape s{c.coll, rank, nranks, c.count, c.dtype, c.op, c.root, false};
  *in = algo::bufferCount(s, algo::Buf::kInput);
  *out = algo::bufferCount(s, algo::Buf::kOutput);
}

Status Composer::check(std::span<const std::vector<Call>> calls) const {
  // The common step, one collective per rank and nothing else, without allocating.
  bool single = true;
  for (int r = 0; r < nranks_ && single; ++r)
    single = calls[r].size() == 1 && calls[r][0].kind == Call::Kind::kColl &&
             sameShape(calls[r][0], calls[0][0]);
  if (single) return Status::ok();
  const auto ref = collectives(calls[0]);
  for (int r = 1; r < nranks_; ++r) {
    const auto mine = collectives(calls[r]);
    for (size_t i = 0; i < std::max(ref.size(), mine.size()); ++i) {
      const Call* a = i < ref.size() ? ref[i] : nullptr;
      const Call* b = i < mine.size() ? mine[i] : nullptr;
      if (a && b && sameShape(*a, *b)) continue;
      return invalidUsage(
          "{}: the ranks' calls differ: collective #{} of this step is {} on rank 0 but {} on "
          "rank {}",
          (a ? a : b)->api, i, a ? describeCall(*a) : "nothing", b ? describeCall(*b) : "nothing",
          r);
    }
  }
  return pairUp(calls, nranks_).status();
}

Status Composer::enqueue(std::span<const std::vector<Call>> calls, StreamOps& ops, Stream stream) {
  size_t n = 0;
  for (const Call& c : calls[0]) n += c.kind == Call::Kind::kColl;
  for (size_t i = 0; i < n; ++i) TUTTI_TRY(enqueueCollective(calls, i, ops, stream));
  return enqueuePointToPoint(calls, ops, stream);
}

Result<const CompiledCall*> Composer::compiled(const algo::CollShape& shape, const Call& c) {
  int64_t scalar = 0;  // the scalar's bytes (a dtype element is at most 8 bytes)
  if (c.preMul) std::memcpy(&scalar, c.scalar.data(), sizeof scalar);
  const Key key{static_cast<int>(shape.coll),
                shape.count,
                static_cast<int>(shape.dtype),
                static_cast<int>(shape.op),
                shape.root,
                shape.inPlace,
                c.preMul,
                scalar};
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = cache_.find(key); it != cache_.end()) return &it->second;
  TUTTI_TRY_ASSIGN(CompiledCall call, compileBest(shape, requestedAlgorithm(shape.coll),
                                                  c.preMul ? c.scalar.data() : nullptr));
  TUTTI_LOG_INFO(Subsys::kTuning,
                 "device clique {:#x}: {} nranks={}{}: {} ({} launches, {} bytes read, {} "
                 "written) {}",
                 key_, describeCall(c), nranks_, shape.inPlace ? " in place" : "", call.algorithm,
                 call.launches.size(), call.bytesRead, call.bytesWritten, call.reason);
  return &cache_.emplace(key, std::move(call)).first->second;
}

Status Composer::enqueueCollective(std::span<const std::vector<Call>> calls, size_t index,
                                   StreamOps& ops, Stream stream) {
  std::array<const Call*, prog::kMaxRanks> call{};
  for (int r = 0; r < nranks_; ++r) call[r] = &collective(calls[r], index);
  const Call& c0 = *call[0];
  if (c0.count == 0) return Status::ok();
  // In place is a property of the whole call: every rank that has both buffers must agree.
  const bool rooted = c0.coll == Coll::kBroadcast || c0.coll == Coll::kReduce;
  const int judge = rooted ? c0.root : 0;
  const bool inPlace = inPlaceOn(*call[judge], judge, nranks_);
  prog::Buffers bufs;
  for (int r = 0; r < nranks_; ++r) {
    const Call& c = *call[r];
    if (!rooted && inPlaceOn(c, r, nranks_) != inPlace)
      return invalidUsage(
          "{}: rank {} calls {} {} but rank {} {}: on the device path every rank must use the "
          "in-place form, or none",
          c.api, judge, describeCall(c0), inPlace ? "in place" : "out of place", r,
          inPlace ? "does not" : "does");
    size_t in = 0, out = 0;
    bufferCounts(c, r, nranks_, &in, &out);
    const bool badSend = in > 0 && !c.sendReachable, badRecv = out > 0 && !c.recvReachable;
    if (badSend || badRecv)
      return invalidUsage(
          "{}: rank {}'s {} ({}) is not memory the GPU can reach (device, managed or pinned host "
          "memory): the device path cannot use it",
          c.api, r, badSend ? "sendbuff" : "recvbuff",
          badSend ? c.send : static_cast<const void*>(c.recv));
    bufs.ptr[prog::inputBuffer(r)] = in > 0 ? const_cast<void*>(c.send) : nullptr;
    bufs.ptr[prog::outputBuffer(r)] = out > 0 ? c.recv : nullptr;
  }
  algo::CollShape shape{c0.coll, 0, nranks_, c0.count, c0.dtype, c0.op, c0.root, inPlace};
  TUTTI_TRY_ASSIGN(const CompiledCall* compiledCall, compiled(shape, c0));
  for (const prog::Program& p : compiledCall->launches) TUTTI_TRY(ops.launch(p, bufs, stream));
  return Status::ok();
}

// Each send/recv pair is a one-leaf copy op over bytes; two buffers per op, so at most
// kMaxBuffers / 2 ops per program.
Status Composer::enqueuePointToPoint(std::span<const std::vector<Call>> calls, StreamOps& ops,
                                     Stream stream) {
  TUTTI_TRY_ASSIGN(const std::vector<Pair> pairs, pairUp(calls, nranks_));
  for (const Pair& pr : pairs) {
    if (!pr.send->sendReachable || !pr.recv->recvReachable)
      return invalidUsage(
          "{}: a {} ({}) is not memory the GPU can reach (device, managed or pinned host "
          "memory): the device path cannot use it",
          pr.send->api, pr.send->sendReachable ? "recvbuff" : "sendbuff",
          pr.send->sendReachable ? static_cast<const void*>(pr.recv->recv) : pr.send->send);
  }
  constexpr size_t kPerProgram = std::min<size_t>(prog::kMaxOps, prog::kMaxBuffers / 2);
  for (size_t first = 0; first < pairs.size(); first += kPerProgram) {
    prog::Program p;
    p.dtype = DataType::kUint8;
    prog::Buffers bufs;
    const size_t n = std::min(kPerProgram, pairs.size() - first);
    for (size_t i = 0; i < n; ++i) {
      const Pair& pr = pairs[first + i];
      const int src = static_cast<int>(2 * i), dst = src + 1;
      bufs.ptr[src] = const_cast<void*>(pr.send->send);
      bufs.ptr[dst] = pr.recv->recv;
      prog::Op& op = p.ops[i];
      op.count = pr.send->count * dataTypeBytes(pr.send->dtype);
      op.leaves = static_cast<uint16_t>(src);
      op.nleaves = 1;
      op.dsts = static_cast<uint16_t>(dst);
      op.ndsts = 1;
      op.code = static_cast<uint16_t>(i);
      op.ncode = 1;
      p.refs[src] = prog::Ref::make(src, 0);
      p.refs[dst] = prog::Ref::make(dst, 0);
      p.code[i] = 0;
    }
    p.nops = static_cast<uint16_t>(n);
    p.nrefs = static_cast<uint16_t>(2 * n);
    p.ncode = static_cast<uint16_t>(n);
    TUTTI_TRY(ops.launch(p, bufs, stream));
  }
  return Status::ok();
}

std::chrono::milliseconds waitLimit() {
  static const std::chrono::milliseconds limit = [] {
    const auto text = env::get({"TUTTI_TIMEOUT"});
    const auto v = text ? env::parseInt(*text) : std::nullopt;
    return std::chrono::milliseconds(v && *v > 0 ? *v * 1000 : 0);
  }();
  return limit;
}

Status waitUntil(const std::function<bool()>& ready,
                 const std::function<Status(std::chrono::milliseconds)>& poll) {
  const auto start = std::chrono::steady_clock::now();
  auto lastPoll = start;
  for (uint64_t spins = 0;; ++spins) {
    if (ready()) return Status::ok();
    if (spins < 4096) continue;
    if (spins < 8192) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    if ((spins & 63) != 0) continue;
    const auto now = std::chrono::steady_clock::now();
    if (now - lastPoll < std::chrono::milliseconds(5)) continue;
    lastPoll = now;
    TUTTI_TRY(poll(std::chrono::duration_cast<std::chrono::milliseconds>(now - start)));
  }
}

}  // namespace tutti::device
