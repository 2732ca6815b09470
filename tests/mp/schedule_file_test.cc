// File: tests/mp/schedule_file_test.cc
// Loadable schedules over real transports: the example ring file gives exact results for every
// count, in and out of place; the deliberately broken file is refused before any data moves,
// with the verifier's message naming rank, round and step.
#include "tests/mp/mp_common.h"

namespace tutti::test {

TEST_CASE("a schedule file runs, and a broken one is refused with the verifier's message",
          "[mp]") {
  const std::string transport = GENERATE("shm", "tcp");
  INFO("transport=" << transport);
  runOnRanks(4, transport, [](Communicator& c) -> int {
    const int r = c.rank(), n = c.size();
    auto name = c.loadSchedule(TUTTI_SOURCE_DIR "/docs/schedules/allreduce_ring4.json");
    if (!name.isOk()) std::fprintf(stderr, "%s\n", name.status().toString().c_str());
    TUTTI_CHILD_CHECK(name.isOk() && name.value() == "ring4_json");
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{5}, size_t{1000003}}) {
      for (bool inPlace : {false, true}) {
        Buffer in(DataType::kFloat32, count), out(DataType::kFloat32, count);
        for (size_t i = 0; i < count; ++i) in.set(i, reductionInput(DataType::kFloat32, RedOp::kSum, r, i));
        out.poison();
        Buffer& dst = inPlace ? in : out;
        Status s = c.allReduce(in.data(), dst.data(), count, DataType::kFloat32, RedOp::kSum);
        if (!s.isOk()) std::fprintf(stderr, "rank %d: %s\n", r, s.toString().c_str());
        TUTTI_CHILD_CHECK(s.isOk());
        TUTTI_CHILD_CHECK(countWrong(dst, 0, count, 0, "ring4_json", r, [&](size_t i) {
                            return reductionExpected(DataType::kFloat32, RedOp::kSum, n, i);
                          }) == 0);
      }
    }
    auto broken = c.loadSchedule(TUTTI_SOURCE_DIR "/docs/schedules/allreduce_ring4_broken.json");
    TUTTI_CHILD_CHECK(broken.isOk());
    std::vector<float> in(100, 1.f), out(100, -1.f);
    Status s = c.allReduce(in.data(), out.data(), in.size(), DataType::kFloat32, RedOp::kSum);
    std::fprintf(stderr, "rank %d: %s\n", r, s.toString().c_str());
    TUTTI_CHILD_CHECK(s.code() == Code::kInvalidUsage);
    TUTTI_CHILD_CHECK(s.message().find("ring4_broken") != std::string::npos);
    TUTTI_CHILD_CHECK(s.message().find("rank 2") != std::string::npos);
    TUTTI_CHILD_CHECK(s.message().find("round 1") != std::string::npos);
    TUTTI_CHILD_CHECK(s.message().find("step 1") != std::string::npos);
    TUTTI_CHILD_CHECK(out[0] == -1.f);  // nothing ran
    // The communicator is still usable with a built-in algorithm.
    TUTTI_CHILD_CHECK(c.setAlgorithm(Coll::kAllReduce, "ring").isOk());
    TUTTI_CHILD_CHECK(c.allReduce(in.data(), out.data(), in.size(), DataType::kFloat32,
                                  RedOp::kSum).isOk());
    TUTTI_CHILD_CHECK(out[99] == static_cast<float>(n));
    return 0;
  });
}

TEST_CASE("a malformed schedule file is rejected naming the JSON path", "[mp]") {
  runOnRanks(1, "shm", [](Communicator& c) -> int {
    const std::string path = "/tmp/tutti_bad_schedule_" + std::to_string(getpid()) + ".json";
    FILE* f = std::fopen(path.c_str(), "w");
    TUTTI_CHILD_CHECK(f != nullptr);
    std::fputs(R"({"format": "tutti-schedule-1", "name": "x", "collective": "allreduce",
                  "nranks": 1, "ranks": [{"rounds": [[{"op": "sned", "peer": 0}]]}]})", f);
    std::fclose(f);
    auto r = c.loadSchedule(path);
    std::remove(path.c_str());
    TUTTI_CHILD_CHECK(!r.isOk());
    std::fprintf(stderr, "%s\n", r.status().toString().c_str());
    TUTTI_CHILD_CHECK(r.status().code() == Code::kInvalidArgument);
    TUTTI_CHILD_CHECK(r.status().message().find("$.ranks[0].rounds[0][0].op") != std::string::npos);
    TUTTI_CHILD_CHECK(r.status().message().find("sned") != std::string::npos);
    return 0;
  });
}

}  // namespace tutti::test
