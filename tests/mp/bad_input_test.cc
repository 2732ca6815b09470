// File: tests/mp/bad_input_test.cc
// Bad input through every collective and point-to-point entry point of the C++ API (blocking and
// asynchronous), on 3 forked ranks over shm: null buffers the call would touch on this rank,
// overflowing and "negative" counts, invalid dtypes, ops, roots and peers, partial overlaps of
// send and recv, an empty (moved-from) or aborted communicator, and wrong UniqueIds. Each must
// return InvalidArgument / InvalidUsage with a message naming the API, the argument and its value,
// leave both buffers byte-for-byte as they were, and leave the communicator usable: after every
// rejected call all ranks run a correct allreduce and check its result. The valid neighbours of
// these cases run too and are checked: count 0 with null buffers, null buffers a rank does not use
// (non-root broadcast/scatter send, non-root reduce/gather recv), and the exact in-place forms.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/bootstrap.h"
#include "tests/mp/mp_common.h"

namespace tutti::test {
namespace {

constexpr int kRanks = 3;
constexpr size_t kCount = 4;  // elements per rank block
constexpr size_t kArena = 4 * kRanks * kCount;

enum class Kind { kColl, kSend, kRecv, kSendRecv };

struct Entry {
  const char* api;  // as the error messages name it
  Coll coll;
  Kind kind;
  bool async;
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = {
      {"allReduce", Coll::kAllReduce, Kind::kColl, false},
      {"allGather", Coll::kAllGather, Kind::kColl, false},
      {"reduceScatter", Coll::kReduceScatter, Kind::kColl, false},
      {"broadcast", Coll::kBroadcast, Kind::kColl, false},
      {"reduce", Coll::kReduce, Kind::kColl, false},
      {"allToAll", Coll::kAllToAll, Kind::kColl, false},
      {"gather", Coll::kGather, Kind::kColl, false},
      {"scatter", Coll::kScatter, Kind::kColl, false},
      {"allReduceAsync", Coll::kAllReduce, Kind::kColl, true},
      {"allGatherAsync", Coll::kAllGather, Kind::kColl, true},
      {"reduceScatterAsync", Coll::kReduceScatter, Kind::kColl, true},
      {"broadcastAsync", Coll::kBroadcast, Kind::kColl, true},
      {"reduceAsync", Coll::kReduce, Kind::kColl, true},
      {"allToAllAsync", Coll::kAllToAll, Kind::kColl, true},
      {"gatherAsync", Coll::kGather, Kind::kColl, true},
      {"scatterAsync", Coll::kScatter, Kind::kColl, true},
      {"send", Coll::kSendRecv, Kind::kSend, false},
      {"recv", Coll::kSendRecv, Kind::kRecv, false},
      {"sendRecv", Coll::kSendRecv, Kind::kSendRecv, false},
  };
  return e;
}

bool reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce;
}
bool rooted(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather || c == Coll::kScatter;
}
// Which buffers a collective touches on `rank` (NCCL's rules).
bool usesSend(Coll c, int rank, int root) {
  return !((c == Coll::kBroadcast || c == Coll::kScatter) && rank != root);
}
bool usesRecv(Coll c, int rank, int root) {
  return !((c == Coll::kReduce || c == Coll::kGather) && rank != root);
}

// Arguments of one call. `peer` is the root of a rooted collective or the peer of send/recv;
// sendRecv uses peer and peer2.
struct Args {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = kCount;
  DataType dtype = DataType::kInt32;
  RedOp op = RedOp::kSum;
  int peer = 0;
  int peer2 = 0;
};

Status waitFor(Result<Work> w) { return w.isOk() ? w->wait() : w.status(); }

Status call(Communicator& c, const Entry& e, const Args& a) {
  if (e.kind == Kind::kSend) return c.send(a.send, a.count, a.dtype, a.peer);
  if (e.kind == Kind::kRecv) return c.recv(a.recv, a.count, a.dtype, a.peer);
  if (e.kind == Kind::kSendRecv)
    return c.sendRecv(a.send, a.peer, a.recv, a.peer2, a.count, a.dtype);
  switch (e.coll) {
    case Coll::kAllReduce:
      return e.async ? waitFor(c.allReduceAsync(a.send, a.recv, a.count, a.dtype, a.op))
                     : c.allReduce(a.send, a.recv, a.count, a.dtype, a.op);
    case Coll::kAllGather:
      return e.async ? waitFor(c.allGatherAsync(a.send, a.recv, a.count, a.dtype))
                     : c.allGather(a.send, a.recv, a.count, a.dtype);
    case Coll::kReduceScatter:
      return e.async ? waitFor(c.reduceScatterAsync(a.send, a.recv, a.count, a.dtype, a.op))
                     : c.reduceScatter(a.send, a.recv, a.count, a.dtype, a.op);
    case Coll::kBroadcast:
      return e.async ? waitFor(c.broadcastAsync(a.send, a.recv, a.count, a.dtype, a.peer))
                     : c.broadcast(a.send, a.recv, a.count, a.dtype, a.peer);
    case Coll::kReduce:
      return e.async ? waitFor(c.reduceAsync(a.send, a.recv, a.count, a.dtype, a.op, a.peer))
                     : c.reduce(a.send, a.recv, a.count, a.dtype, a.op, a.peer);
    case Coll::kAllToAll:
      return e.async ? waitFor(c.allToAllAsync(a.send, a.recv, a.count, a.dtype))
                     : c.allToAll(a.send, a.recv, a.count, a.dtype);
    case Coll::kGather:
      return e.async ? waitFor(c.gatherAsync(a.send, a.recv, a.count, a.dtype, a.peer))
                     : c.gather(a.send, a.recv, a.count, a.dtype, a.peer);
    case Coll::kScatter:
      return e.async ? waitFor(c.scatterAsync(a.send, a.recv, a.count, a.dtype, a.peer))
                     : c.scatter(a.send, a.recv, a.count, a.dtype, a.peer);
    default:
      return Status(Code::kInternalError, "test: unexpected entry");
  }
}

// One rank's run: counts failures, prints each with the case's name.
class Checker {
 public:
  Checker(Communicator& c) : c_(c), rank_(c.rank()) {
    send_.resize(kArena);
    recv_.resize(kArena);
  }

  // Fills both arenas with canaries and returns pointers into them.
  int32_t* send(size_t offset = 0) { return send_.data() + offset; }
  int32_t* recv(size_t offset = 0) { return recv_.data() + offset; }

  // Expects `s` to fail with `code` and to mention every needle; then the arenas must be
  // unchanged and a correct allreduce on all ranks must still work. Every rank calls verify()
  // the same number of times (the healthy allreduce is collective).
  void expectBad(const std::string& what, Code code, const std::vector<std::string>& needles,
                 const std::function<Status()>& badCall) {
    fillCanary();
    const Status s = badCall();
    if (s.code() != code)
      fail(what, "returned " + s.toString() + ", expected " + std::string(codeName(code)));
    for (const auto& n : needles)
      if (s.message().find(n) == std::string::npos)
        fail(what, "message does not mention '" + n + "': " + s.message());
    if (!canaryIntact()) fail(what, "a buffer was written by the rejected call");
    ++rejected_;
  }

  // A call that must succeed (collectively when it communicates).
  void expectOk(const std::string& what, const Status& s) {
    if (!s.isOk()) fail(what, "returned " + s.toString());
  }

  // A correct allreduce on every rank; its result must be exact.
  void healthy(const std::string& after) {
    ++round_;
    std::vector<int32_t> in(kCount), out(kCount, -1);
    for (size_t i = 0; i < kCount; ++i)
      in[i] = static_cast<int32_t>((rank_ + 1) * (i + 1) + round_);
    Status s = c_.allReduce(in.data(), out.data(), kCount, DataType::kInt32, RedOp::kSum);
    if (!s.isOk()) {
      fail("allreduce after " + after, s.toString());
      return;
    }
    for (size_t i = 0; i < kCount; ++i) {
      const int32_t want =
          static_cast<int32_t>((i + 1) * kRanks * (kRanks + 1) / 2 + kRanks * round_);
      if (out[i] != want) {
        fail("allreduce after " + after, "element " + std::to_string(i) + " is " +
                                             std::to_string(out[i]) + ", expected " +
                                             std::to_string(want));
        return;
      }
    }
  }

  void fail(const std::string& what, const std::string& why) {
    ++failures_;
    if (failures_ <= 40)
      std::fprintf(stderr, "rank %d: %s: %s\n", rank_, what.c_str(), why.c_str());
  }

  int failures() const { return failures_; }
  int rejected() const { return rejected_; }

 private:
  void fillCanary() {
    for (size_t i = 0; i < kArena; ++i) {
      send_[i] = static_cast<int32_t>(0x5EED0000 + i);
      recv_[i] = static_cast<int32_t>(0x0CA40000 + i);
    }
  }
  bool canaryIntact() const {
    for (size_t i = 0; i < kArena; ++i)
      if (send_[i] != static_cast<int32_t>(0x5EED0000 + i) ||
          recv_[i] != static_cast<int32_t>(0x0CA40000 + i))
        return false;
    return true;
  }

  Communicator& c_;
  int rank_;
  std::vector<int32_t> send_, recv_;
  int failures_ = 0, rejected_ = 0, round_ = 0;
};

std::string str(long long v) { return std::to_string(v); }

// Every invalid argument of one entry point, on this rank. Cases that are invalid only on some
// ranks (a null sendbuff of a broadcast is invalid on the root only) are issued on those ranks
// alone: a rejected call communicates nothing, so the others need not take part.
void badArguments(Checker& k, Communicator& c, const Entry& e) {
  const int rank = c.rank(), n = c.size();
  const std::string api = e.api;
  const bool isColl = e.kind == Kind::kColl;
  const int root = 1;
  auto base = [&] {
    Args a;
    a.send = k.send();
    a.recv = k.recv();
    a.peer = isColl ? root : (rank + 1) % n;
    a.peer2 = (rank + n - 1) % n;
    return a;
  };
  // Issues the bad call where `here` holds; the check allreduce runs on every rank.
  auto bad = [&](const std::string& what, Code code, std::vector<std::string> needles,
                 const Args& a, bool here = true) {
    needles.insert(needles.begin(), api + ":");
    if (here) k.expectBad(api + ": " + what, code, needles, [&] { return call(c, e, a); });
    k.healthy(api + ": " + what);
  };
  const bool sends = e.kind == Kind::kSend || e.kind == Kind::kSendRecv ||
                     (isColl && usesSend(e.coll, rank, root));
  const bool receives = e.kind == Kind::kRecv || e.kind == Kind::kSendRecv ||
                        (isColl && usesRecv(e.coll, rank, root));

  // Null buffers with count > 0, where this rank would touch them.
  {
    Args a = base();
    a.send = nullptr;
    bad("null sendbuff", Code::kInvalidArgument, {"sendbuff is NULL", "count=4"}, a, sends);
    a = base();
    a.recv = nullptr;
    bad("null recvbuff", Code::kInvalidArgument, {"recvbuff is NULL", "count=4"}, a, receives);
  }
  // Counts whose byte size overflows (a negative count cast to size_t among them).
  for (size_t count : {SIZE_MAX, SIZE_MAX / 2, SIZE_MAX / 4 + 1, SIZE_MAX / 4 / n + 1}) {
    Args a = base();
    a.count = count;
    bad("count " + std::to_string(count), Code::kInvalidArgument,
        {"count " + std::to_string(count), "too large"}, a);
  }
  // Invalid dtypes (also with count 0: the dtype is checked first, as in NCCL).
  for (int dt : {kNumDataTypes, -1, 255}) {
    Args a = base();
    a.dtype = static_cast<DataType>(dt);
    bad("dtype " + str(dt), Code::kInvalidArgument, {"dtype=" + str(dt)}, a);
    a.count = 0;
    bad("dtype " + str(dt) + " count 0", Code::kInvalidArgument, {"dtype=" + str(dt)}, a);
  }
  // Invalid ops of reductions.
  if (isColl && reduces(e.coll)) {
    for (int op : {kNumRedOps, -1, 1000}) {
      Args a = base();
      a.op = static_cast<RedOp>(op);
      bad("op " + str(op), Code::kInvalidArgument, {"op=" + str(op)}, a);
    }
  }
  // Invalid roots.
  if (isColl && rooted(e.coll)) {
    for (int r : {-1, n, n + 7, INT32_MIN}) {
      Args a = base();
      a.peer = r;
      bad("root " + str(r), Code::kInvalidArgument, {"root " + str(r), "root=" + str(r)}, a);
    }
  }
  // Invalid peers.
  if (!isColl) {
    const char* first = e.kind == Kind::kSendRecv ? "sendPeer" : "peer";
    for (int p : {-1, n, INT32_MIN}) {
      Args a = base();
      a.peer = p;
      bad(std::string(first) + " " + str(p), Code::kInvalidArgument,
          {std::string(first) + " " + str(p), std::string(first) + "=" + str(p)}, a);
      if (e.kind == Kind::kSendRecv) {
        a = base();
        a.peer2 = p;
        bad("recvPeer " + str(p), Code::kInvalidArgument,
            {"recvPeer " + str(p), "recvPeer=" + str(p)}, a);
      }
    }
    if (e.kind != Kind::kSendRecv) {  // to self: only sendRecv pairs it
      Args a = base();
      a.peer = rank;
      bad("peer self", Code::kInvalidUsage, {"paired"}, a);
    }
  }
  // Partial overlaps of send and recv (exact in-place forms are run as valid calls elsewhere).
  {
    Args a = base();
    const size_t blk = static_cast<size_t>(rank) * kCount;
    bool applies = true;
    switch (e.coll) {
      case Coll::kAllReduce:
        a.send = k.recv(1);
        break;
      case Coll::kBroadcast:  // send is read on the root only
        a.send = k.recv(1);
        applies = rank == root;
        break;
      case Coll::kReduce:  // recv is written on the root only
        a.send = k.recv(1);
        applies = rank == root;
        break;
      case Coll::kAllGather:
        a.send = k.recv(blk + 1);
        break;
      case Coll::kReduceScatter:
        a.send = k.recv(0);
        a.recv = k.recv(blk + 1);
        break;
      case Coll::kAllToAll:
        a.send = k.recv(0);  // no in-place form at all
        break;
      case Coll::kGather:   // recv is written on the root only
      case Coll::kScatter:  // send is read on the root only
        a.send = k.recv(0);
        applies = rank == root;
        break;
      case Coll::kSendRecv:
        a.send = k.recv(1);
        applies = e.kind == Kind::kSendRecv;
        break;
      default:
        applies = false;
    }
    bad("partial overlap", Code::kInvalidArgument, {"overlap", "sendbuff=0x"}, a, applies);
  }
}

// Calls that look odd but are valid, run by every rank together; results checked.
void validNeighbours(Checker& k, Communicator& c) {
  const int rank = c.rank(), n = c.size();
  // Count 0 is a no-op on every entry point, null buffers included (local: no communication).
  for (const Entry& e : entries()) {
    Args a;
    a.count = 0;
    a.peer = e.kind == Kind::kColl ? 0 : (rank + 1) % n;
    a.peer2 = (rank + n - 1) % n;
    k.expectOk(std::string(e.api) + ": count 0 with null buffers", call(c, e, a));
  }
  k.healthy("count 0 calls");
  const int root = 2;
  auto check = [&](const std::string& what, const std::vector<int32_t>& got,
                   const std::function<int32_t(size_t)>& want, size_t count) {
    for (size_t i = 0; i < count; ++i)
      if (got[i] != want(i)) {
        k.fail(what, "element " + std::to_string(i) + " is " + std::to_string(got[i]) +
                         ", expected " + std::to_string(want(i)));
        return;
      }
  };
  auto value = [](int r, size_t i) { return static_cast<int32_t>(100 * r + i + 1); };
  std::vector<int32_t> buf(kRanks * kCount), out(kRanks * kCount);
  // Null buffers a rank does not use.
  for (size_t i = 0; i < kCount; ++i) buf[i] = value(rank, i);
  std::fill(out.begin(), out.end(), -1);
  k.expectOk(
      "broadcast: null sendbuff off the root",
      c.broadcast(rank == root ? buf.data() : nullptr, out.data(), kCount, DataType::kInt32, root));
  check(
      "broadcast: null sendbuff off the root", out, [&](size_t i) { return value(root, i); },
      kCount);
  std::fill(out.begin(), out.end(), -1);
  k.expectOk("reduce: null recvbuff off the root",
             c.reduce(buf.data(), rank == root ? out.data() : nullptr, kCount, DataType::kInt32,
                      RedOp::kMax, root));
  if (rank == root)
    check(
        "reduce: null recvbuff off the root", out, [&](size_t i) { return value(n - 1, i); },
        kCount);
  std::fill(out.begin(), out.end(), -1);
  k.expectOk(
      "gather: null recvbuff off the root",
      c.gather(buf.data(), rank == root ? out.data() : nullptr, kCount, DataType::kInt32, root));
  if (rank == root)
    check(
        "gather: null recvbuff off the root", out,
        [&](size_t i) { return value(static_cast<int>(i / kCount), i % kCount); }, kRanks * kCount);
  for (size_t i = 0; i < kRanks * kCount; ++i) buf[i] = value(static_cast<int>(i / kCount), i);
  std::fill(out.begin(), out.end(), -1);
  k.expectOk(
      "scatter: null sendbuff off the root",
      c.scatter(rank == root ? buf.data() : nullptr, out.data(), kCount, DataType::kInt32, root));
  check(
      "scatter: null sendbuff off the root", out,
      [&](size_t i) { return value(rank, rank * kCount + i); }, kCount);
  // The exact in-place forms.
  for (size_t i = 0; i < kCount; ++i) buf[i] = value(rank, i);
  k.expectOk("allReduce in place",
             c.allReduce(buf.data(), buf.data(), kCount, DataType::kInt32, RedOp::kSum));
  check(
      "allReduce in place", buf,
      [&](size_t i) { return static_cast<int32_t>(100 * (0 + 1 + 2) + 3 * (i + 1)); }, kCount);
  for (size_t i = 0; i < kCount; ++i) buf[i] = value(rank, i);
  k.expectOk("broadcast in place",
             c.broadcast(buf.data(), buf.data(), kCount, DataType::kInt32, root));
  check(
      "broadcast in place", buf, [&](size_t i) { return value(root, i); }, kCount);
  for (size_t i = 0; i < kCount; ++i) buf[i] = value(rank, i);
  k.expectOk("reduce in place",
             c.reduce(buf.data(), buf.data(), kCount, DataType::kInt32, RedOp::kMin, root));
  if (rank == root)
    check(
        "reduce in place", buf, [&](size_t i) { return value(0, i); }, kCount);
  std::fill(buf.begin(), buf.end(), -1);
  for (size_t i = 0; i < kCount; ++i) buf[rank * kCount + i] = value(rank, i);
  k.expectOk("allGather in place",
             c.allGather(buf.data() + rank * kCount, buf.data(), kCount, DataType::kInt32));
  check(
      "allGather in place", buf,
      [&](size_t i) { return value(static_cast<int>(i / kCount), i % kCount); }, kRanks * kCount);
  for (size_t i = 0; i < kRanks * kCount; ++i) buf[i] = value(rank, i);
  k.expectOk("reduceScatter in place", c.reduceScatter(buf.data(), buf.data() + rank * kCount,
                                                       kCount, DataType::kInt32, RedOp::kSum));
  std::vector<int32_t> mine(buf.begin() + rank * kCount, buf.begin() + (rank + 1) * kCount);
  check(
      "reduceScatter in place", mine,
      [&](size_t i) { return static_cast<int32_t>(300 + 3 * (rank * kCount + i + 1)); }, kCount);
  k.healthy("valid neighbours");
}

TEST_CASE("bad input through every entry point is rejected by name, with no effect", "[mp]") {
  runOnRanks(kRanks, "shm", [](Communicator& c) -> int {
    Checker k(c);
    for (const Entry& e : entries()) badArguments(k, c, e);
    validNeighbours(k, c);
    std::fprintf(stderr, "rank %d: %d calls rejected, %d failures\n", c.rank(), k.rejected(),
                 k.failures());
    if (k.rejected() < 150) k.fail("coverage", "only " + std::to_string(k.rejected()) + " cases");
    return k.failures() == 0 ? 0 : 1;
  });
}

TEST_CASE("an empty or aborted communicator rejects every entry point", "[mp]") {
  runOnRanks(kRanks, "shm", [](Communicator& c) -> int {
    Checker k(c);
    Communicator moved = std::move(c);  // `c` is now empty
    Args a;
    a.send = k.send();
    a.recv = k.recv();
    for (const Entry& e : entries()) {
      k.expectBad(std::string(e.api) + " on a moved-from communicator", Code::kInvalidUsage,
                  {std::string(e.api) + ":", "empty"}, [&] { return call(c, e, a); });
    }
    k.expectBad("barrier on a moved-from communicator", Code::kInvalidUsage, {"empty"},
                [&] { return c.barrier(); });
    k.expectBad("barrierAsync on a moved-from communicator", Code::kInvalidUsage, {"empty"},
                [&] { return waitFor(c.barrierAsync()); });
    // The communicator it moved to works.
    Checker k2(moved);
    k2.healthy("the move");
    // Abort: every later call fails, nothing is written.
    moved.abort();
    for (const Entry& e : entries()) {
      Args b = a;
      b.peer = e.kind == Kind::kColl ? 0 : (moved.rank() + 1) % kRanks;
      b.peer2 = (moved.rank() + kRanks - 1) % kRanks;
      k2.expectBad(std::string(e.api) + " after abort", Code::kInvalidUsage, {"aborted"},
                   [&] { return call(moved, e, b); });
    }
    return k.failures() + k2.failures() == 0 ? 0 : 1;
  });
}

TEST_CASE("a wrong UniqueId is refused by name", "[mp]") {
  runOnRanks(1, "shm", [](Communicator&) -> int {
    // Garbage bytes.
    UniqueId junk;
    for (size_t i = 0; i < junk.bytes.size(); ++i) junk.bytes[i] = static_cast<char>(i * 37 + 11);
    auto r = Communicator::create(junk, 0, 1);
    TUTTI_CHILD_CHECK(!r.isOk());
    std::fprintf(stderr, "garbage id: %s\n", r.status().toString().c_str());
    TUTTI_CHILD_CHECK(r.status().code() == Code::kInvalidArgument);
    TUTTI_CHILD_CHECK(r.status().message().find("not a tutti id") != std::string::npos);
    // A well-formed id whose secret is not the root's: the root says so.
    auto id = createUniqueId();
    TUTTI_CHILD_CHECK(id.isOk());
    auto data = bootstrap::decodeId(id.value());
    TUTTI_CHILD_CHECK(data.isOk());
    bootstrap::IdData wrong = data.value();
    wrong.secret ^= 0x5a5a5a5a5a5a5a5aull;
    auto w = Communicator::create(bootstrap::encodeId(wrong), 0, 1);
    TUTTI_CHILD_CHECK(!w.isOk());
    std::fprintf(stderr, "wrong secret: %s\n", w.status().toString().c_str());
    TUTTI_CHILD_CHECK(w.status().code() == Code::kInvalidUsage);
    TUTTI_CHILD_CHECK(w.status().message().find("another secret") != std::string::npos);
    // The right id still works afterwards.
    auto ok = Communicator::create(id.value(), 0, 1);
    TUTTI_CHILD_CHECK(ok.isOk());
    int32_t x = 7, y = 0;
    TUTTI_CHILD_CHECK(ok->allReduce(&x, &y, 1, DataType::kInt32, RedOp::kSum).isOk());
    TUTTI_CHILD_CHECK(y == 7);
    return 0;
  });
}

}  // namespace
}  // namespace tutti::test
