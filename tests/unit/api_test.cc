// File: tests/unit/api_test.cc
// The public API on a one-rank communicator: results, bad input (InvalidArgument naming the
// argument and value, no side effects, communicator still usable), UniqueId checks, names.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <vector>

#include <tutti/tutti.hpp>

namespace tutti {
namespace {

Communicator oneRank() {
  auto id = createUniqueId();
  REQUIRE(id.isOk());
  auto c = Communicator::create(id.value(), 0, 1);
  REQUIRE(c.isOk());
  return std::move(c).value();
}

void requireError(const Status& s, Code code, const char* needle) {
  INFO(s.toString());
  REQUIRE(s.code() == code);
  REQUIRE_THAT(s.message(), Catch::Contains(needle));
}

}  // namespace

TEST_CASE("a one-rank communicator runs every collective", "[api]") {
  Communicator c = oneRank();
  REQUIRE(c.rank() == 0);
  REQUIRE(c.size() == 1);
  REQUIRE(c.transportTo(0) == "self");
  std::vector<float> in = {1, 2, 3}, out(3, 0);
  REQUIRE(c.allReduce(in.data(), out.data(), 3, DataType::kFloat32, RedOp::kSum).isOk());
  REQUIRE(out == in);
  std::fill(out.begin(), out.end(), 0.f);
  REQUIRE(c.allReduce(in.data(), out.data(), 3, DataType::kFloat32, RedOp::kAvg).isOk());
  REQUIRE(out == in);
  REQUIRE(c.allGather(in.data(), out.data(), 3, DataType::kFloat32).isOk());
  REQUIRE(c.reduceScatter(in.data(), out.data(), 3, DataType::kFloat32, RedOp::kMax).isOk());
  REQUIRE(c.broadcast(in.data(), out.data(), 3, DataType::kFloat32, 0).isOk());
  REQUIRE(c.reduce(in.data(), out.data(), 3, DataType::kFloat32, RedOp::kMin, 0).isOk());
  REQUIRE(c.allToAll(in.data(), out.data(), 3, DataType::kFloat32).isOk());
  REQUIRE(c.gather(in.data(), out.data(), 3, DataType::kFloat32, 0).isOk());
  REQUIRE(c.scatter(in.data(), out.data(), 3, DataType::kFloat32, 0).isOk());
  REQUIRE(out == in);
  std::fill(out.begin(), out.end(), 0.f);
  REQUIRE(c.sendRecv(in.data(), 0, out.data(), 0, 3, DataType::kFloat32).isOk());
  REQUIRE(out == in);
  REQUIRE(c.barrier().isOk());
  auto w = c.allReduceAsync(in.data(), out.data(), 3, DataType::kFloat32, RedOp::kSum);
  REQUIRE(w.isOk());
  REQUIRE(w->wait().isOk());
  REQUIRE(w->test());
}

TEST_CASE("bad arguments are rejected by name, with no side effect", "[api]") {
  Communicator c = oneRank();
  std::vector<int32_t> in = {1, 2, 3, 4}, out = {9, 9, 9, 9};
  const auto untouched = out;
  requireError(c.allReduce(nullptr, out.data(), 4, DataType::kInt32, RedOp::kSum),
               Code::kInvalidArgument, "sendbuff is NULL");
  requireError(c.allReduce(in.data(), nullptr, 4, DataType::kInt32, RedOp::kSum),
               Code::kInvalidArgument, "recvbuff is NULL");
  requireError(c.allReduce(in.data(), out.data(), 4, static_cast<DataType>(42), RedOp::kSum),
               Code::kInvalidArgument, "dtype=42");
  requireError(c.allReduce(in.data(), out.data(), 4, DataType::kInt32, static_cast<RedOp>(-1)),
               Code::kInvalidArgument, "op=-1");
  requireError(c.broadcast(in.data(), out.data(), 4, DataType::kInt32, 1), Code::kInvalidArgument,
               "root 1");
  requireError(c.reduce(in.data(), out.data(), 4, DataType::kInt32, RedOp::kSum, -1),
               Code::kInvalidArgument, "root -1");
  requireError(c.allReduce(in.data(), in.data() + 1, 3, DataType::kInt32, RedOp::kSum),
               Code::kInvalidArgument, "overlap");
  requireError(c.allToAll(in.data(), in.data(), 4, DataType::kInt32), Code::kInvalidArgument,
               "overlap");
  requireError(c.allReduce(in.data(), out.data(), SIZE_MAX / 2, DataType::kInt32, RedOp::kSum),
               Code::kInvalidArgument, "too large");
  requireError(c.send(in.data(), 4, DataType::kInt32, 0), Code::kInvalidUsage, "paired");
  requireError(c.send(in.data(), 4, DataType::kInt32, 3), Code::kInvalidArgument, "peer 3");
  requireError(c.setAlgorithm(Coll::kAllReduce, "nonexistent"), Code::kInvalidArgument,
               "nonexistent");
  REQUIRE(out == untouched);
  // Count 0 is a valid no-op, null buffers included.
  REQUIRE(c.allReduce(nullptr, nullptr, 0, DataType::kInt32, RedOp::kSum).isOk());
  // The communicator is still usable after every rejection.
  REQUIRE(c.allReduce(in.data(), out.data(), 4, DataType::kInt32, RedOp::kSum).isOk());
  REQUIRE(out == in);
}

TEST_CASE("an empty communicator reports InvalidUsage", "[api]") {
  Communicator c;
  REQUIRE_FALSE(c.valid());
  requireError(c.barrier(), Code::kInvalidUsage, "empty");
  Communicator d = oneRank();
  Communicator e = std::move(d);
  requireError(d.barrier(), Code::kInvalidUsage, "empty");  // NOLINT(use-after-move): on purpose
  REQUIRE(e.barrier().isOk());
}

TEST_CASE("an aborted communicator fails every later call", "[api]") {
  Communicator c = oneRank();
  c.abort();
  int32_t x = 1, y = 0;
  requireError(c.allReduce(&x, &y, 1, DataType::kInt32, RedOp::kSum), Code::kInvalidUsage,
               "aborted");
  REQUIRE_FALSE(c.asyncError().isOk());
}

TEST_CASE("UniqueId and create validate their input", "[api]") {
  UniqueId junk;
  std::memset(junk.bytes.data(), 0x11, junk.bytes.size());
  auto r = Communicator::create(junk, 0, 1);
  REQUIRE_FALSE(r.isOk());
  requireError(r.status(), Code::kInvalidArgument, "not a tutti id");
  auto id = createUniqueId();
  REQUIRE(id.isOk());
  requireError(Communicator::create(id.value(), 2, 2).status(), Code::kInvalidArgument, "rank 2");
  requireError(Communicator::create(id.value(), 0, 0).status(), Code::kInvalidArgument,
               "nranks must be >= 1");
}

TEST_CASE("createFreshUniqueId binds a fresh root while TUTTI_COMM_ID names the job's", "[api]") {
  // An address no interface of this machine has (TEST-NET-1): createUniqueId, which binds
  // TUTTI_COMM_ID, fails; createFreshUniqueId ignores it and binds a fresh port.
  ::setenv("TUTTI_COMM_ID", "192.0.2.1:29999", 1);
  auto fixed = createUniqueId();
  auto fresh = createFreshUniqueId();
  auto fresh2 = createFreshUniqueId();
  ::unsetenv("TUTTI_COMM_ID");
  REQUIRE_FALSE(fixed.isOk());
  REQUIRE(fresh.isOk());
  REQUIRE(fresh2.isOk());
  REQUIRE(fresh->bytes != fresh2->bytes);
  auto c = Communicator::create(fresh.value(), 0, 1);
  REQUIRE(c.isOk());
  float x = 2;
  REQUIRE(c->allReduce(&x, &x, 1, DataType::kFloat32, RedOp::kSum).isOk());
  REQUIRE(x == 2);
}

TEST_CASE("names of dtypes, ops and collectives round-trip", "[api]") {
  for (int i = 0; i < kNumDataTypes; ++i) {
    auto t = static_cast<DataType>(i);
    REQUIRE(parseDataType(dataTypeName(t)) == t);
  }
  REQUIRE(dataTypeName(DataType::kFloat16) == "half");
  REQUIRE(parseDataType("bf16") == DataType::kBfloat16);
  REQUIRE_FALSE(parseDataType("float128").has_value());
  for (int i = 0; i < kNumRedOps; ++i) {
    auto op = static_cast<RedOp>(i);
    REQUIRE(parseRedOp(redOpName(op)) == op);
  }
  for (int i = 0; i < kNumColls; ++i) {
    auto c = static_cast<Coll>(i);
    REQUIRE(parseColl(collName(c)) == c);
  }
  REQUIRE(parseColl("all_reduce") == Coll::kAllReduce);
  REQUIRE(codeName(Code::kRemoteError) == "RemoteError");
  REQUIRE(Status(Code::kTimeout, "x").toString() == "Timeout: x");
}

}  // namespace tutti
