// File: tests/ib/ib_allreduce_test.cc
// Two-process allreduce over the ib transport on a real InfiniBand/RoCE port (ranks pretend to
// be on different hosts with TUTTI_HOSTID, and TUTTI_TRANSPORTS=ib forces the transport). Exits
// 77 (skipped) when no active port exists. Variants: default FIFO, a tiny FIFO (2 slots of 4 KiB:
// credits and chunking on every message), and zero-copy sends through the registration cache.
#include <cstdlib>

#include "tests/ib/ib_test_util.h"

namespace tutti::test {
namespace {

void skipWithoutPort() {
  if (!haveActiveIbPort()) {
    std::fprintf(stderr, "SKIP: no active InfiniBand/RoCE port (libibverbs, device, link)\n");
    std::exit(77);
  }
}

void runAllReduce(std::vector<std::pair<std::string, std::string>> env) {
  env.push_back({"TUTTI_TRANSPORTS", "ib"});
  auto outcomes = runOnHosts(2, env, [](Communicator& c) {
    if (c.transportTo(1 - c.rank()) != "ib") {
      std::fprintf(stderr, "rank %d: transport is '%s', not ib\n", c.rank(),
                   c.transportTo(1 - c.rank()).c_str());
      return 1;
    }
    for (size_t count :
         {size_t{0}, size_t{1}, size_t{2}, size_t{1000}, size_t{65537}, size_t{1000003}}) {
      if (int rc = allReduceCheck(c, count)) return rc;
    }
    return 0;
  });
  requireAllPassed(outcomes);
}

}  // namespace

TEST_CASE("ib: 2-process allreduce") {
  skipWithoutPort();
  runAllReduce({});
}

TEST_CASE("ib: 2-process allreduce through a 2-slot, 4 KiB FIFO") {
  skipWithoutPort();
  runAllReduce({{"TUTTI_IB_SLOTS", "2"}, {"TUTTI_IB_SLOT_BYTES", "4096"}});
}

TEST_CASE("ib: 2-process allreduce with zero-copy sends (registration cache)") {
  skipWithoutPort();
  runAllReduce({{"TUTTI_IB_REG_CACHE", "1"}});
}

}  // namespace tutti::test
