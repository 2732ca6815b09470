// File: tests/unit/schedule_json_test.cc
// The JSON schedule format: parsing, errors that name the JSON path, the round trip through
// toJson, and chunk ranges turned into element ranges for counts chunks does not divide.
#include <catch2/catch.hpp>

#include "algorithms/schedule_json.h"

namespace tutti::algo {
namespace {

void requireParseError(const std::string& json, const char* needle) {
  auto r = parseSchedule(json, "test");
  REQUIRE_FALSE(r.isOk());
  INFO(r.status().message());
  REQUIRE(r.status().code() == Code::kInvalidArgument);
  REQUIRE_THAT(r.status().message(), Catch::Contains(needle));
}

}  // namespace

TEST_CASE("the example schedule parses and round-trips", "[schedule_json]") {
  auto s = loadScheduleFile(TUTTI_SOURCE_DIR "/docs/schedules/allreduce_ring4.json");
  REQUIRE(s.isOk());
  CHECK(s->name == "ring4_json");
  CHECK(s->coll == Coll::kAllReduce);
  CHECK(s->nranks == 4);
  CHECK(s->chunks == 4);
  REQUIRE(s->ranks.size() == 4);
  CHECK(s->ranks[0].size() == 6);  // 3 reduce-scatter + 3 allgather rounds
  auto again = parseSchedule(toJson(s.value()), "round trip");
  REQUIRE(again.isOk());
  CHECK(toJson(again.value()) == toJson(s.value()));
}

TEST_CASE("chunks become element ranges for any count", "[schedule_json]") {
  auto s = loadScheduleFile(TUTTI_SOURCE_DIR "/docs/schedules/allreduce_ring4.json");
  REQUIRE(s.isOk());
  // count 10 over 4 chunks: 3, 3, 2, 2 elements at offsets 0, 3, 6, 8.
  CollShape shape{Coll::kAllReduce, 1, 4, 10, DataType::kFloat32, RedOp::kSum, 0, false};
  auto sched = s->build(shape);
  REQUIRE(sched.isOk());
  const Step& send = sched->rounds[0][0];  // rank 1 round 0 sends chunk 1 from input
  CHECK(send.op == Op::kSend);
  CHECK(send.srcOffset == 3);
  CHECK(send.count == 3);
  const Step& rr = sched->rounds[0][1];  // receives chunk 0 and reduces it with input chunk 0
  CHECK(rr.op == Op::kRecvReduce);
  CHECK(rr.dstOffset == 0);
  CHECK(rr.count == 3);
  shape.nranks = 3;
  auto wrongSize = s->build(shape);
  REQUIRE_FALSE(wrongSize.isOk());
  CHECK_THAT(wrongSize.status().message(), Catch::Contains("4 ranks"));
}

TEST_CASE("malformed files are rejected naming the JSON path", "[schedule_json]") {
  requireParseError("{", "not valid JSON");
  requireParseError(R"({"format": "other", "name": "x", "collective": "allreduce", "nranks": 1,
                        "ranks": [{"rounds": []}]})",
                    "$.format");
  requireParseError(R"({"name": "x", "collective": "allreduce", "nranks": 2,
                        "ranks": [{"rounds": []}]})",
                    "$.ranks: must be an array of 2 ranks");
  requireParseError(R"({"name": "x", "collective": "allgatherv", "nranks": 1,
                        "ranks": [{"rounds": []}]})",
                    "$.collective");
  requireParseError(R"({"name": "x", "collective": "allreduce", "nranks": 2,
                        "ranks": [{"rounds": [[{"op": "send", "peer": 5, "src": "input",
                                                "src_chunk": 0}]]}, {"rounds": []}]})",
                    "$.ranks[0].rounds[0][0].peer: rank 5 outside [0, 2)");
  requireParseError(R"({"name": "x", "collective": "allreduce", "nranks": 1,
                        "ranks": [{"rounds": [[{"op": "copy", "src": "inbox", "src_chunk": 0,
                                                "dst": "output", "dst_chunk": 0}]]}]})",
                    "'inbox' is not input, output or scratch");
  requireParseError(R"({"name": "x", "collective": "allreduce", "nranks": 1,
                        "ranks": [{"rounds": [[{"op": "copy", "src": "input",
                                                "dst": "output", "dst_chunk": 0}]]}]})",
                    "src_chunk: missing");
}

TEST_CASE("mismatched chunk sizes are reported by rank, round and step", "[schedule_json]") {
  auto s = parseSchedule(R"({"name": "x", "collective": "allreduce", "nranks": 1, "chunks": 2,
      "ranks": [{"rounds": [[{"op": "copy", "src": "input", "src_chunk": 0,
                              "dst": "output", "dst_chunk": 1}]]}]})",
                         "test");
  REQUIRE(s.isOk());
  CollShape shape{Coll::kAllReduce, 0, 1, 5, DataType::kFloat32, RedOp::kSum, 0, false};
  auto sched = s->build(shape);  // chunks of 3 and 2 elements
  REQUIRE_FALSE(sched.isOk());
  CHECK_THAT(sched.status().message(), Catch::Contains("rank 0 round 0 step 0"));
  shape.count = 4;  // 2 and 2: fine
  CHECK(s->build(shape).isOk());
}

}  // namespace tutti::algo
