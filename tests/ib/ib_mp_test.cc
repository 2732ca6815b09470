// File: tests/ib/ib_mp_test.cc
// Transport choice between hosts (ranks with different TUTTI_HOSTID), on any machine: ib when an
// active InfiniBand/RoCE port exists, tcp otherwise (with an INFO line saying why ib was not
// offered, and no WARN); NCCL_IB_DISABLE=1 and TUTTI_TRANSPORTS override. Runs everywhere (label
// mp); the data path over a real port is tests/ib/ib_allreduce_test.cc (label ib).
#include "tests/ib/ib_test_util.h"

namespace tutti::test {

TEST_CASE("ib: between hosts, ib is chosen exactly when an active port exists") {
  const bool active = haveActiveIbPort();
  const std::string expected = active ? "ib" : "tcp";
  auto outcomes = runOnHosts(
      2, {{"TUTTI_DEBUG", "INFO"}, {"TUTTI_DEBUG_SUBSYS", "INIT,NET"}}, [&](Communicator& c) {
        const int peer = 1 - c.rank();
        if (c.transportTo(peer) != expected) {
          std::fprintf(stderr, "rank %d: transport to %d is '%s', expected '%s'\n", c.rank(), peer,
                       c.transportTo(peer).c_str(), expected.c_str());
          return 1;
        }
        return allReduceCheck(c, 1000);
      });
  requireAllPassed(outcomes);
  for (const auto& o : outcomes) {
    INFO(o.output);
    if (!active) CHECK_THAT(o.output, Catch::Contains("transport ib not offered"));
    CHECK_THAT(o.output, !Catch::Contains("transport ib unavailable"));  // no WARN
  }
}

TEST_CASE("ib: NCCL_IB_DISABLE=1 and TUTTI_TRANSPORTS=tcp select tcp") {
  for (auto env : std::vector<std::pair<std::string, std::string>>{{"NCCL_IB_DISABLE", "1"},
                                                                   {"TUTTI_TRANSPORTS", "tcp"}}) {
    INFO(env.first << "=" << env.second);
    auto outcomes = runOnHosts(2, {env, {"TUTTI_DEBUG", "INFO"}}, [](Communicator& c) {
      if (c.transportTo(1 - c.rank()) != "tcp") return 1;
      return allReduceCheck(c, 77);
    });
    requireAllPassed(outcomes);
    if (env.first == "NCCL_IB_DISABLE") {
      for (const auto& o : outcomes) CHECK_THAT(o.output, Catch::Contains("NCCL_IB_DISABLE"));
    }
  }
}

TEST_CASE("ib: TUTTI_TRANSPORTS=ib without an active port fails init with a clear error") {
  if (haveActiveIbPort()) {
    auto outcomes = runOnHosts(2, {{"TUTTI_TRANSPORTS", "ib"}}, [](Communicator& c) {
      return c.transportTo(1 - c.rank()) == "ib" ? allReduceCheck(c, 5) : 1;
    });
    requireAllPassed(outcomes);
    return;
  }
  auto outcomes = runOnHosts(2, {{"TUTTI_TRANSPORTS", "ib"}}, [](Communicator&) { return 0; });
  for (const auto& o : outcomes) {
    INFO(o.output);
    CHECK(o.exited);
    CHECK(o.exitCode == 3);
    CHECK_THAT(o.output, Catch::Contains("no allowed transport reaches rank"));
  }
}

}  // namespace tutti::test
