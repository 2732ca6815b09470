// File: tests/mp/tcp_streams_test.cc
// The tcp transport with several sockets per pair of ranks (TUTTI_SOCKET_NSOCKS=3) and a small
// striping threshold, so that the engine's slices go round-robin over the sockets and complete out
// of order: every collective must still return exact results (float32 sums of small integers,
// data movement of distinct values), in place and out of place, for counts that make one slice,
// many slices and a ragged last slice.
#include <cstdlib>

#include "tests/mp/mp_common.h"

namespace tutti::test {
namespace {

float input(int rank, size_t i) { return static_cast<float>((rank * 7 + i) % 13); }

int streamsBody(Communicator& comm, size_t count) {
  const int n = comm.size(), r = comm.rank();
  int wrong = 0;
  auto expectEq = [&](const char* what, size_t i, float got, float want) {
    if (got != want) {
      if (wrong < 5)
        std::fprintf(stderr, "rank %d: %s count=%zu element %zu: %g, expected %g\n", r, what,
                     count, i, got, want);
      ++wrong;
    }
  };
  const DataType F = DataType::kFloat32;
  std::vector<float> in(count * n), out(count * n);
  for (size_t i = 0; i < in.size(); ++i) in[i] = input(r, i);
  auto sumAt = [&](size_t i) {
    float s = 0;
    for (int q = 0; q < n; ++q) s += input(q, i);
    return s;
  };

  for (int rep = 0; rep < 3; ++rep) {  // repeated calls reuse the connection state
    if (!comm.allReduce(in.data(), out.data(), count, F, RedOp::kSum).isOk()) return 1;
    for (size_t i = 0; i < count; ++i) expectEq("allReduce", i, out[i], sumAt(i));
  }
  std::vector<float> inplace(in.begin(), in.begin() + count);
  if (!comm.allReduce(inplace.data(), inplace.data(), count, F, RedOp::kSum).isOk()) return 1;
  for (size_t i = 0; i < count; ++i) expectEq("allReduce in place", i, inplace[i], sumAt(i));

  if (!comm.allGather(in.data(), out.data(), count, F).isOk()) return 1;
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < count; ++i) expectEq("allGather", q * count + i, out[q * count + i], input(q, i));

  if (!comm.reduceScatter(in.data(), out.data(), count, F, RedOp::kSum).isOk()) return 1;
  for (size_t i = 0; i < count; ++i) expectEq("reduceScatter", i, out[i], sumAt(r * count + i));

  std::vector<float> b(count);
  for (size_t i = 0; i < count; ++i) b[i] = r == 1 ? input(1, i) : -1.0f;
  if (!comm.broadcast(b.data(), b.data(), count, F, 1).isOk()) return 1;
  for (size_t i = 0; i < count; ++i) expectEq("broadcast", i, b[i], input(1, i));

  if (!comm.allToAll(in.data(), out.data(), count, F).isOk()) return 1;
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < count; ++i)
      expectEq("allToAll", q * count + i, out[q * count + i], input(q, r * count + i));
  return wrong == 0 ? 0 : 1;
}

TEST_CASE("tcp with several sockets per peer: collectives stay exact", "[mp][tcp]") {
  ::setenv("TUTTI_SOCKET_NSOCKS", "3", 1);
  ::setenv("TUTTI_SOCKET_STRIPE_BYTES", "4096", 1);
  for (int n : {2, 3}) {
    for (size_t count : {size_t{1}, size_t{1500}, size_t{100003}, size_t{300000}}) {
      INFO("nranks=" << n << " count=" << count);
      runOnRanks(n, "tcp", [&](Communicator& comm) { return streamsBody(comm, count); });
    }
  }
  ::unsetenv("TUTTI_SOCKET_NSOCKS");
  ::unsetenv("TUTTI_SOCKET_STRIPE_BYTES");
}

}  // namespace
}  // namespace tutti::test
