// File: tests/nccl/nccl_suite.h
// The NCCL-API test suite every launcher runs (fork, tutti-run, torchrun-style, mpirun). It uses
// only <nccl.h> (NVIDIA's or tutti's, whichever the build points at) and the C++ standard
// library, so it checks the ABI exactly as an unchanged NCCL program sees it. Every result is
// compared with a reference computed here; each check prints what went wrong and counts a
// failure. Host memory, null streams.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#ifdef TUTTI_TEST_OWN_HEADER
#include <tutti/nccl.h>
#else
#include <nccl.h>
#endif

namespace suite {

struct Ctx {
  ncclComm_t comm = nullptr;
  int rank = 0, nranks = 1;
  int failures = 0;
  bool quick = false;  // launcher tests: collectives only
};

#define SUITE_EXPECT(ctx, cond, ...)                                                             \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      std::fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", (ctx).rank, __FILE__, __LINE__, \
                   #cond);                                                                       \
      std::fprintf(stderr, __VA_ARGS__);                                                         \
      std::fprintf(stderr, "\n");                                                                \
      ++(ctx).failures;                                                                          \
    }                                                                                            \
  } while (0)

#define SUITE_NCCL(ctx, call)                                                                    \
  do {                                                                                           \
    ncclResult_t r_ = (call);                                                                    \
    SUITE_EXPECT(ctx, r_ == ncclSuccess, "%s returned %d (%s): %s", #call, static_cast<int>(r_), \
                 ncclGetErrorString(r_), ncclGetLastError(nullptr));                             \
  } while (0)

template <typename T>
ncclDataType_t typeOf();
template <>
inline ncclDataType_t typeOf<int8_t>() {
  return ncclInt8;
}
template <>
inline ncclDataType_t typeOf<uint8_t>() {
  return ncclUint8;
}
template <>
inline ncclDataType_t typeOf<int32_t>() {
  return ncclInt32;
}
template <>
inline ncclDataType_t typeOf<int64_t>() {
  return ncclInt64;
}
template <>
inline ncclDataType_t typeOf<float>() {
  return ncclFloat32;
}
template <>
inline ncclDataType_t typeOf<double>() {
  return ncclFloat64;
}

// Exact inputs: small integers, so that every reduction order gives the same value.
inline double input(int rank, size_t i, ncclRedOp_t op) {
  if (op == ncclProd) return ((i + rank) % 3 == 0) ? 2.0 : 1.0;
  return static_cast<double>((i * 7 + rank * 3) % 11);
}
inline double reduced(int nranks, size_t i, ncclRedOp_t op) {
  double acc = input(0, i, op);
  for (int r = 1; r < nranks; ++r) {
    double v = input(r, i, op);
    if (op == ncclSum || op == ncclAvg)
      acc += v;
    else if (op == ncclProd)
      acc *= v;
    else if (op == ncclMax)
      acc = std::max(acc, v);
    else if (op == ncclMin)
      acc = std::min(acc, v);
  }
  return acc;
}
template <typename T>
T avgOf(double sum, int n) {
  if (std::is_floating_point<T>::value) return static_cast<T>(sum / n);
  return static_cast<T>(std::trunc(sum / n));
}
inline double movement(int rank, size_t i) { return static_cast<double>((rank * 13 + i) % 100); }

// Compares and reports the first few mismatches.
template <typename T, typename F>
void expectAll(Ctx& c, const std::vector<T>& got, size_t first, size_t n, const char* what,
               F expected) {
  int bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const T e = static_cast<T>(expected(i));
    if (!(got[first + i] == e)) {
      if (bad < 3)
        std::fprintf(stderr, "rank %d: %s: element %zu is %g, expected %g\n", c.rank, what, i,
                     static_cast<double>(got[first + i]), static_cast<double>(e));
      ++bad;
    }
  }
  SUITE_EXPECT(c, bad == 0, "%s: %d wrong elements", what, bad);
}

template <typename T>
void reductions(Ctx& c, size_t count) {
  const ncclDataType_t dt = typeOf<T>();
  const int n = c.nranks, me = c.rank;
  for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg}) {
    std::vector<T> in(count * n), out(count * n, T(0));
    for (size_t i = 0; i < count * n; ++i) in[i] = static_cast<T>(input(me, i, op));
    auto expect = [&](size_t i) -> double {
      double v = reduced(n, i, op);
      return op == ncclAvg ? static_cast<double>(avgOf<T>(v, n)) : v;
    };
    // AllReduce, out of place and in place.
    SUITE_NCCL(c, ncclAllReduce(in.data(), out.data(), count, dt, op, c.comm, nullptr));
    expectAll(c, out, 0, count, "allreduce", expect);
    std::vector<T> inplace(in.begin(), in.begin() + count);
    SUITE_NCCL(c, ncclAllReduce(inplace.data(), inplace.data(), count, dt, op, c.comm, nullptr));
    expectAll(c, inplace, 0, count, "allreduce in place", expect);
    // Reduce to every root.
    for (int root = 0; root < n; ++root) {
      std::fill(out.begin(), out.end(), T(0));
      SUITE_NCCL(c, ncclReduce(in.data(), me == root ? out.data() : nullptr, count, dt, op, root,
                               c.comm, nullptr));
      if (me == root) expectAll(c, out, 0, count, "reduce", expect);
    }
    // ReduceScatter: block `me` of the reduction of everyone's n*count inputs.
    std::fill(out.begin(), out.end(), T(0));
    SUITE_NCCL(c, ncclReduceScatter(in.data(), out.data(), count, dt, op, c.comm, nullptr));
    expectAll(c, out, 0, count, "reducescatter",
              [&](size_t i) { return expect(static_cast<size_t>(me) * count + i); });
    std::vector<T> rs(in);
    SUITE_NCCL(
        c, ncclReduceScatter(rs.data(), rs.data() + me * count, count, dt, op, c.comm, nullptr));
    expectAll(c, rs, me * count, count, "reducescatter in place",
              [&](size_t i) { return expect(static_cast<size_t>(me) * count + i); });
    if (c.quick) break;
  }
}

template <typename T>
void movements(Ctx& c, size_t count) {
  const ncclDataType_t dt = typeOf<T>();
  const int n = c.nranks, me = c.rank;
  std::vector<T> mine(count * n), out(count * n);
  for (size_t i = 0; i < count * n; ++i) mine[i] = static_cast<T>(movement(me, i));
  // AllGather out of place and in place.
  SUITE_NCCL(c, ncclAllGather(mine.data(), out.data(), count, dt, c.comm, nullptr));
  for (int r = 0; r < n; ++r)
    expectAll(c, out, r * count, count, "allgather", [&](size_t i) { return movement(r, i); });
  std::vector<T> ag(count * n);
  std::copy(mine.begin(), mine.begin() + count, ag.begin() + me * count);
  SUITE_NCCL(c, ncclAllGather(ag.data() + me * count, ag.data(), count, dt, c.comm, nullptr));
  for (int r = 0; r < n; ++r)
    expectAll(c, ag, r * count, count, "allgather in place",
              [&](size_t i) { return movement(r, i); });
  for (int root = 0; root < n; ++root) {
    // Broadcast, Bcast.
    std::vector<T> b(count, T(0));
    SUITE_NCCL(c, ncclBroadcast(mine.data(), b.data(), count, dt, root, c.comm, nullptr));
    expectAll(c, b, 0, count, "broadcast", [&](size_t i) { return movement(root, i); });
    std::vector<T> bc(mine.begin(), mine.begin() + count);
    SUITE_NCCL(c, ncclBcast(bc.data(), count, dt, root, c.comm, nullptr));
    expectAll(c, bc, 0, count, "bcast", [&](size_t i) { return movement(root, i); });
    // Gather and Scatter.
    std::vector<T> g(count * n, T(0));
    SUITE_NCCL(c, ncclGather(mine.data(), me == root ? g.data() : nullptr, count, dt, root, c.comm,
                             nullptr));
    if (me == root)
      for (int r = 0; r < n; ++r)
        expectAll(c, g, r * count, count, "gather", [&](size_t i) { return movement(r, i); });
    std::vector<T> s(count, T(0));
    SUITE_NCCL(c, ncclScatter(me == root ? mine.data() : nullptr, s.data(), count, dt, root, c.comm,
                              nullptr));
    expectAll(c, s, 0, count, "scatter",
              [&](size_t i) { return movement(root, static_cast<size_t>(me) * count + i); });
    if (c.quick) break;
  }
  // AlltoAll: block j of rank r goes to rank j's block r.
  std::vector<T> a(count * n, T(0));
  SUITE_NCCL(c, ncclAlltoAll(mine.data(), a.data(), count, dt, c.comm, nullptr));
  for (int r = 0; r < n; ++r)
    expectAll(c, a, r * count, count, "alltoall",
              [&](size_t i) { return movement(r, static_cast<size_t>(me) * count + i); });
}

// Send/recv inside groups: a ring shift, an all-to-all-v with different counts per pair, and a
// message to self.
inline void pointToPoint(Ctx& c) {
  const int n = c.nranks, me = c.rank, next = (me + 1) % n, prev = (me + n - 1) % n;
  std::vector<int32_t> s(1000 + me), r(1000 + prev, -1);
  for (size_t i = 0; i < s.size(); ++i) s[i] = me * 100000 + static_cast<int>(i);
  SUITE_NCCL(c, ncclGroupStart());
  SUITE_NCCL(c, ncclSend(s.data(), s.size(), ncclInt32, next, c.comm, nullptr));
  SUITE_NCCL(c, ncclRecv(r.data(), r.size(), ncclInt32, prev, c.comm, nullptr));
  SUITE_NCCL(c, ncclGroupEnd());
  expectAll(c, r, 0, r.size(), "ring send/recv",
            [&](size_t i) { return prev * 100000 + static_cast<double>(i); });
  // All-to-all-v: rank i sends (i + j + 1) * 10 floats to rank j.
  std::vector<std::vector<float>> out(n), in(n);
  SUITE_NCCL(c, ncclGroupStart());
  for (int j = 0; j < n; ++j) {
    out[j].assign((me + j + 1) * 10, 0.f);
    for (size_t i = 0; i < out[j].size(); ++i) out[j][i] = me * 1000.f + j * 100.f + i;
    in[j].assign((j + me + 1) * 10, -1.f);
    SUITE_NCCL(c, ncclSend(out[j].data(), out[j].size(), ncclFloat, j, c.comm, nullptr));
    SUITE_NCCL(c, ncclRecv(in[j].data(), in[j].size(), ncclFloat, j, c.comm, nullptr));
  }
  SUITE_NCCL(c, ncclGroupEnd());
  for (int j = 0; j < n; ++j)
    expectAll(c, in[j], 0, in[j].size(), "alltoallv send/recv",
              [&](size_t i) { return j * 1000.0 + me * 100.0 + i; });
}

// Groups: nesting, several collectives fused (mixed sizes, ops, premultiplied sums), an
// argument error reported and the group cancelled.
inline void groups(Ctx& c) {
  const int n = c.nranks, me = c.rank;
  const size_t sizes[] = {1, 7, 256, 1000, 4096, 3, 33};
  const int k = sizeof sizes / sizeof sizes[0];
  std::vector<std::vector<float>> in(k), out(k);
  float scalar = static_cast<float>(me + 1);
  ncclRedOp_t premul;
  SUITE_NCCL(
      c, ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat, ncclScalarHostImmediate, c.comm));
  SUITE_NCCL(c, ncclGroupStart());
  SUITE_NCCL(c, ncclGroupStart());  // nested: no effect
  for (int i = 0; i < k; ++i) {
    in[i].assign(sizes[i], 0.f);
    out[i].assign(sizes[i], -1.f);
    for (size_t e = 0; e < sizes[i]; ++e) in[i][e] = static_cast<float>(input(me, e + i, ncclSum));
    SUITE_NCCL(c, ncclAllReduce(in[i].data(), out[i].data(), sizes[i], ncclFloat,
                                i % 3 == 2 ? premul : ncclSum, c.comm, nullptr));
  }
  SUITE_NCCL(c, ncclGroupEnd());
  SUITE_NCCL(c, ncclRedOpDestroy(premul, c.comm));  // allowed right after the last use returned
  SUITE_NCCL(c, ncclGroupEnd());
  for (int i = 0; i < k; ++i)
    expectAll(c, out[i], 0, sizes[i], i % 3 == 2 ? "grouped premulsum" : "grouped allreduce",
              [&](size_t e) {
                double acc = 0;
                for (int r = 0; r < n; ++r)
                  acc += (i % 3 == 2 ? r + 1.0 : 1.0) * input(r, e + i, ncclSum);
                return acc;
              });
  // An argument error inside a group: returned by the call and by ncclGroupEnd.
  std::vector<int> x(4, 1);
  SUITE_NCCL(c, ncclGroupStart());
  ncclResult_t bad = ncclAllReduce(x.data(), x.data(), 4, static_cast<ncclDataType_t>(99), ncclSum,
                                   c.comm, nullptr);
  ncclResult_t end = ncclGroupEnd();
  SUITE_EXPECT(c, bad == ncclInvalidArgument, "bad datatype in a group returned %d", bad);
  SUITE_EXPECT(c, end == ncclInvalidArgument, "ncclGroupEnd after a bad call returned %d", end);
  SUITE_EXPECT(c, std::strlen(ncclGetLastError(c.comm)) > 0, "no last-error text");
  // Simulation: predicted time, nothing run.
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  SUITE_NCCL(c, ncclGroupStart());
  SUITE_NCCL(c, ncclAllReduce(x.data(), x.data(), 4, ncclInt32, ncclSum, c.comm, nullptr));
  SUITE_NCCL(c, ncclGroupSimulateEnd(&sim));
  SUITE_EXPECT(c, sim.estimatedTime > 0, "estimatedTime %g", sim.estimatedTime);
  SUITE_EXPECT(c, x[0] == 1, "a simulated group ran (x[0]=%d)", x[0]);
}

// Fusion changes no bit: inexact float sums (random data), in place and out of place, premulsum
// and avg, grouped (fused when small) and one by one.
inline void fusionIdentity(Ctx& c) {
  const size_t sizes[] = {1024, 5, 1000, 3000, 17, 1024, 256, 999, 64, 4096};
  const int k = sizeof sizes / sizeof sizes[0];
  unsigned seed = 777u + static_cast<unsigned>(c.rank);
  std::vector<std::vector<float>> in(k), one(k), grp(k);
  float scalar = 0.1f * (c.rank + 1);
  ncclRedOp_t premul;
  SUITE_NCCL(
      c, ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat, ncclScalarHostImmediate, c.comm));
  auto opOf = [&](int i) { return i == 3 ? premul : i == 6 ? ncclAvg : ncclSum; };
  for (int i = 0; i < k; ++i) {
    in[i].resize(sizes[i]);
    for (auto& x : in[i]) x = static_cast<float>(rand_r(&seed)) / RAND_MAX * 2.f - 1.f;
    one[i] = in[i];
    grp[i] = in[i];
  }
  // One by one (i % 4 == 1: in place).
  std::vector<std::vector<float>> outOne(k), outGrp(k);
  for (int i = 0; i < k; ++i) {
    outOne[i].assign(sizes[i], 0.f);
    outGrp[i].assign(sizes[i], 0.f);
    float* dst = i % 4 == 1 ? one[i].data() : outOne[i].data();
    SUITE_NCCL(c, ncclAllReduce(one[i].data(), dst, sizes[i], ncclFloat, opOf(i), c.comm, nullptr));
  }
  SUITE_NCCL(c, ncclGroupStart());
  for (int i = 0; i < k; ++i) {
    float* dst = i % 4 == 1 ? grp[i].data() : outGrp[i].data();
    SUITE_NCCL(c, ncclAllReduce(grp[i].data(), dst, sizes[i], ncclFloat, opOf(i), c.comm, nullptr));
  }
  SUITE_NCCL(c, ncclGroupEnd());
  for (int i = 0; i < k; ++i) {
    const auto& a = i % 4 == 1 ? one[i] : outOne[i];
    const auto& b = i % 4 == 1 ? grp[i] : outGrp[i];
    SUITE_EXPECT(c, std::memcmp(a.data(), b.data(), sizes[i] * sizeof(float)) == 0,
                 "grouped allreduce %d (%zu floats) differs from the same call alone", i, sizes[i]);
  }
  SUITE_NCCL(c, ncclRedOpDestroy(premul, c.comm));
}

// Avg and premulsum with integers, premulsum on reduce and reducescatter.
inline void customOps(Ctx& c) {
  const int n = c.nranks, me = c.rank;
  int32_t scalar = me + 2;
  ncclRedOp_t op;
  SUITE_NCCL(c, ncclRedOpCreatePreMulSum(&op, &scalar, ncclInt32, ncclScalarHostImmediate, c.comm));
  std::vector<int32_t> in(10 * n), out(10 * n, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(i + me);
  auto premul = [&](size_t i) {
    double acc = 0;
    for (int r = 0; r < n; ++r) acc += (r + 2.0) * (i + r);
    return acc;
  };
  SUITE_NCCL(c, ncclReduce(in.data(), out.data(), 10, ncclInt32, op, 0, c.comm, nullptr));
  if (me == 0) expectAll(c, out, 0, 10, "premulsum reduce", premul);
  SUITE_NCCL(c, ncclReduceScatter(in.data(), out.data(), 10, ncclInt32, op, c.comm, nullptr));
  expectAll(c, out, 0, 10, "premulsum reducescatter",
            [&](size_t i) { return premul(static_cast<size_t>(me) * 10 + i); });
  ncclResult_t wrongType = ncclAllReduce(in.data(), out.data(), 10, ncclFloat, op, c.comm, nullptr);
  SUITE_EXPECT(c, wrongType == ncclInvalidArgument, "premulsum with another dtype returned %d",
               wrongType);
  SUITE_NCCL(c, ncclRedOpDestroy(op, c.comm));
  SUITE_EXPECT(c, ncclRedOpDestroy(op, c.comm) == ncclInvalidArgument, "double destroy accepted");
  float dev = 1;
  SUITE_EXPECT(
      c,
      ncclRedOpCreatePreMulSum(&op, &dev, ncclFloat, ncclScalarDevice, c.comm) == ncclInvalidUsage,
      "device scalar accepted");
}

// Broadcasts a fresh unique id from rank 0 over `c` (the usual way programs distribute ids).
inline ncclUniqueId shareId(Ctx& c) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (c.rank == 0) SUITE_NCCL(c, ncclGetUniqueId(&id));
  SUITE_NCCL(c, ncclBroadcast(&id, &id, sizeof id, ncclUint8, 0, c.comm, nullptr));
  return id;
}

inline bool pollDone(ncclComm_t comm, ncclResult_t* state) {
  for (int i = 0; i < 60000; ++i) {  // at most 60 s
    if (ncclCommGetAsyncError(comm, state) != ncclSuccess) return false;
    if (*state != ncclInProgress) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

inline void communicators(Ctx& c) {
  const int n = c.nranks, me = c.rank;
  int v = 0;
  SUITE_NCCL(c, ncclCommCount(c.comm, &v));
  SUITE_EXPECT(c, v == n, "ncclCommCount %d", v);
  SUITE_NCCL(c, ncclCommUserRank(c.comm, &v));
  SUITE_EXPECT(c, v == me, "ncclCommUserRank %d", v);
  SUITE_NCCL(c, ncclCommCuDevice(c.comm, &v));

  // Split: even and odd ranks, reversed order by key; the last rank opts out when n > 2.
  const bool out = n > 2 && me == n - 1;
  ncclComm_t half = nullptr;
  SUITE_NCCL(c, ncclCommSplit(c.comm, out ? NCCL_SPLIT_NOCOLOR : me % 2, -me, &half, nullptr));
  if (out) {
    SUITE_EXPECT(c, half == nullptr, "NOCOLOR gave a communicator");
  } else if (half) {
    int hn = 0, hr = 0;
    ncclCommCount(half, &hn);
    ncclCommUserRank(half, &hr);
    std::vector<int> members;
    for (int r = 0; r < n; ++r)
      if (r % 2 == me % 2 && !(n > 2 && r == n - 1)) members.push_back(r);
    SUITE_EXPECT(c, hn == static_cast<int>(members.size()), "split size %d", hn);
    // Keys -rank: the highest parent rank comes first.
    int expectRank = 0;
    for (int r : members) expectRank += r > me;
    SUITE_EXPECT(c, hr == expectRank, "split rank %d, expected %d", hr, expectRank);
    int32_t x = me, sum = 0, ref = 0;
    for (int r : members) ref += r;
    SUITE_NCCL(c, ncclAllReduce(&x, &sum, 1, ncclInt32, ncclSum, half, nullptr));
    SUITE_EXPECT(c, sum == ref, "allreduce on split comm %d, expected %d", sum, ref);
    SUITE_NCCL(c, ncclCommFinalize(half));
    SUITE_NCCL(c, ncclCommDestroy(half));
  }

  // Nonblocking communicator: init and allreduce may return ncclInProgress; poll.
  ncclUniqueId id = shareId(c);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.commName = "nonblocking";
  ncclComm_t nb = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&nb, n, id, me, &cfg);
  SUITE_EXPECT(c, r == ncclSuccess || r == ncclInProgress, "nonblocking init returned %d", r);
  ncclResult_t state = ncclInProgress;
  SUITE_EXPECT(c, nb && pollDone(nb, &state) && state == ncclSuccess, "nonblocking init state %d",
               state);
  if (nb && state == ncclSuccess) {
    std::vector<double> a(1000, me + 0.5), b(1000, 0);
    r = ncclAllReduce(a.data(), b.data(), a.size(), ncclDouble, ncclMax, nb, nullptr);
    SUITE_EXPECT(c, r == ncclSuccess || r == ncclInProgress, "nonblocking allreduce %d", r);
    SUITE_EXPECT(c, pollDone(nb, &state) && state == ncclSuccess, "nonblocking op state %d", state);
    expectAll(c, b, 0, b.size(), "nonblocking allreduce", [&](size_t) { return n - 0.5; });
    r = ncclCommFinalize(nb);
    SUITE_EXPECT(c, r == ncclSuccess || r == ncclInProgress, "nonblocking finalize %d", r);
    SUITE_EXPECT(c, pollDone(nb, &state) && state == ncclSuccess, "finalize state %d", state);
  }
  if (nb) SUITE_NCCL(c, ncclCommDestroy(nb));

  // Shrink: everybody but the last rank.
  if (n > 1) {
    int excluded = n - 1;
    if (me != excluded) {
      ncclComm_t small = nullptr;
      SUITE_NCCL(c, ncclCommShrink(c.comm, &excluded, 1, &small, nullptr, NCCL_SHRINK_DEFAULT));
      if (small) {
        int sn = 0;
        ncclCommCount(small, &sn);
        SUITE_EXPECT(c, sn == n - 1, "shrunk size %d", sn);
        int32_t x = 1, sum = 0;
        SUITE_NCCL(c, ncclAllReduce(&x, &sum, 1, ncclInt32, ncclSum, small, nullptr));
        SUITE_EXPECT(c, sum == n - 1, "allreduce on shrunk comm %d", sum);
        SUITE_NCCL(c, ncclCommDestroy(small));
      }
    }
    int32_t one = 1, all = 0;  // everyone lines up again
    SUITE_NCCL(c, ncclAllReduce(&one, &all, 1, ncclInt32, ncclSum, c.comm, nullptr));
  }
}

// Abort from another thread unblocks rank 0 stuck in an allreduce its peers never join.
inline void abortFromThread(Ctx& c) {
  ncclComm_t dup = nullptr;
  SUITE_NCCL(c, ncclCommSplit(c.comm, 0, c.rank, &dup, nullptr));
  if (!dup) return;
  if (c.rank == 0 && c.nranks > 1) {
    std::vector<float> x(1 << 16, 1.f), y(1 << 16);
    std::thread killer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ncclCommAbort(dup);
    });
    auto t0 = std::chrono::steady_clock::now();
    ncclResult_t r = ncclAllReduce(x.data(), y.data(), x.size(), ncclFloat, ncclSum, dup, nullptr);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    killer.join();
    SUITE_EXPECT(c, r != ncclSuccess, "a stuck allreduce succeeded after abort");
    SUITE_EXPECT(c, s < 5.0, "abort took %.2f s to unblock the call", s);
  }
  int32_t one = 1, all = 0;
  SUITE_NCCL(c, ncclAllReduce(&one, &all, 1, ncclInt32, ncclSum, c.comm, nullptr));
  if (c.rank != 0 || c.nranks == 1) ncclCommAbort(dup);
}

// The window pointer queries of the device API's host side (NCCL 2.30+, declared in NVIDIA's
// nccl_device.h, so looked up at run time): a rank's own window answers, a peer's or a multicast
// address is ncclInvalidUsage naming the function.
inline void windowPointers(Ctx& c) {
  using PeerPtr = ncclResult_t (*)(ncclWindow_t, size_t, int, void**);
  using MultimemPtr = ncclResult_t (*)(ncclWindow_t, size_t, void**);
  auto lsaPtr = reinterpret_cast<PeerPtr>(dlsym(RTLD_DEFAULT, "ncclGetLsaDevicePointer"));
  auto peerPtr = reinterpret_cast<PeerPtr>(dlsym(RTLD_DEFAULT, "ncclGetPeerDevicePointer"));
  auto mmPtr = reinterpret_cast<MultimemPtr>(dlsym(RTLD_DEFAULT, "ncclGetLsaMultimemDevicePointer"));
  SUITE_EXPECT(c, lsaPtr && peerPtr && mmPtr, "window pointer queries not exported");
  if (!lsaPtr || !peerPtr || !mmPtr) return;
  std::vector<char> buf(4096);
  ncclWindow_t win = nullptr;
  SUITE_NCCL(c, ncclCommWindowRegister(c.comm, buf.data(), buf.size(), &win, NCCL_WIN_DEFAULT));
  void* p = nullptr;
  SUITE_NCCL(c, lsaPtr(win, 100, 0, &p));
  SUITE_EXPECT(c, p == buf.data() + 100, "ncclGetLsaDevicePointer gave %p, expected %p", p,
               static_cast<void*>(buf.data() + 100));
  p = nullptr;
  SUITE_NCCL(c, peerPtr(win, 8, c.rank, &p));
  SUITE_EXPECT(c, p == buf.data() + 8, "ncclGetPeerDevicePointer(own rank) gave %p", p);
  SUITE_EXPECT(c, lsaPtr(win, buf.size() + 1, 0, &p) == ncclInvalidArgument,
               "offset beyond the window accepted");
  if (c.nranks > 1) {
    SUITE_EXPECT(c, peerPtr(win, 0, (c.rank + 1) % c.nranks, &p) == ncclInvalidUsage,
                 "a peer's window pointer did not return ncclInvalidUsage");
    SUITE_EXPECT(c, std::strstr(ncclGetLastError(nullptr), "ncclGetPeerDevicePointer") != nullptr,
                 "last error '%s' does not name the function", ncclGetLastError(nullptr));
  }
  SUITE_EXPECT(c, mmPtr(win, 0, &p) == ncclInvalidUsage, "multimem pointer did not fail");
  SUITE_EXPECT(c,
               std::strstr(ncclGetLastError(nullptr),
                           "ncclGetLsaMultimemDevicePointer: not supported by tutti") != nullptr,
               "last error '%s'", ncclGetLastError(nullptr));
  SUITE_NCCL(c, ncclCommWindowDeregister(c.comm, win));
  SUITE_EXPECT(c, lsaPtr(win, 0, 0, &p) == ncclInvalidArgument, "a deregistered window answered");
}

#if NCCL_VERSION_CODE >= 23200
// The per-call configured collectives (NCCL 2.32): the same results as the plain calls, the
// tuning fields ignored, what tutti cannot honour refused with ncclInvalidUsage.
inline void configCollectives(Ctx& c) {
  std::vector<float> in(64, static_cast<float>(c.rank + 1)), out(64, 0.f);
  const float sum = c.nranks * (c.nranks + 1) / 2.f;
  SUITE_NCCL(c, ncclAllReduceConfig(in.data(), out.data(), 64, ncclFloat, ncclSum, c.comm, nullptr,
                                    nullptr));
  SUITE_EXPECT(c, out[63] == sum, "ncclAllReduceConfig(NULL config) gave %g", out[63]);
  ncclCollConfig_t cfg = NCCL_COLLCONFIG_INITIALIZER;
  cfg.maxCTAs = 2;
  cfg.userProfilerTag = 7;
  std::fill(out.begin(), out.end(), 0.f);
  SUITE_NCCL(c, ncclAllReduceConfig(in.data(), out.data(), 64, ncclFloat, ncclSum, c.comm, nullptr,
                                    &cfg));
  SUITE_EXPECT(c, out[0] == sum, "ncclAllReduceConfig gave %g", out[0]);
  std::vector<float> all(64 * c.nranks, 0.f);
  SUITE_NCCL(c, ncclAllGatherConfig(in.data(), all.data(), 64, ncclFloat, c.comm, nullptr, &cfg));
  SUITE_EXPECT(c, all[64 * (c.nranks - 1)] == static_cast<float>(c.nranks),
               "ncclAllGatherConfig gave %g", all[64 * (c.nranks - 1)]);
  // A caller built against an older layout passes a smaller size: still accepted.
  ncclCollConfig_t small = NCCL_COLLCONFIG_INITIALIZER;
  small.size = offsetof(ncclCollConfig_t, ext);
  SUITE_NCCL(c, ncclBroadcastConfig(in.data(), out.data(), 64, ncclFloat, 0, c.comm, nullptr,
                                    &small));
  SUITE_EXPECT(c, out[5] == 1.f, "ncclBroadcastConfig gave %g", out[5]);
  ncclCollConfig_t bad = cfg;
  bad.magic = 0;
  SUITE_EXPECT(c,
               ncclAllReduceConfig(in.data(), out.data(), 64, ncclFloat, ncclSum, c.comm, nullptr,
                                   &bad) == ncclInvalidArgument,
               "a config without NCCL_COLLCONFIG_INITIALIZER accepted");
  ncclCollConfig_t alg = NCCL_COLLCONFIG_INITIALIZER;
  alg.algSelection = "ring";
  SUITE_EXPECT(c,
               ncclAllReduceConfig(in.data(), out.data(), 64, ncclFloat, ncclSum, c.comm, nullptr,
                                   &alg) == ncclInvalidUsage,
               "a forced NCCL algorithm selection accepted");
  SUITE_EXPECT(c, std::strstr(ncclGetLastError(c.comm), "not supported by tutti") != nullptr,
               "last error '%s'", ncclGetLastError(c.comm));
  alg.forceAlgSelection = 0;  // a hint only: tutti chooses
  SUITE_NCCL(c, ncclAllReduceConfig(in.data(), out.data(), 64, ncclFloat, ncclSum, c.comm, nullptr,
                                    &alg));
  ncclEncryptionConfig_t enc = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
  SUITE_NCCL(c, ncclSetEncryption(&enc));
  enc.mode = NCCL_ENCRYPTION_MODE_PSK;
  enc.psk = "secret";
  SUITE_EXPECT(c, ncclSetEncryption(&enc) == ncclInvalidUsage, "PSK encryption accepted");
  SUITE_EXPECT(c, std::strcmp(ncclGetErrorString(ncclTimeout), "timeout") == 0, "timeout string");
}
#endif

inline void memoryAndErrors(Ctx& c) {
  int version = 0;
  SUITE_NCCL(c, ncclGetVersion(&version));
  // tutti reports the release whose exports it covers, whatever header the caller was built with.
  SUITE_EXPECT(c, version == 23203, "ncclGetVersion %d", version);
  SUITE_EXPECT(c,
               std::strcmp(ncclGetErrorString(ncclInvalidUsage),
                           "invalid usage (run with NCCL_DEBUG=WARN for details)") == 0,
               "error string '%s'", ncclGetErrorString(ncclInvalidUsage));
  SUITE_EXPECT(c,
               std::strcmp(ncclGetErrorString(ncclInProgress), "NCCL operation in progress") == 0,
               "error string");
  void* p = nullptr;
  SUITE_NCCL(c, ncclMemAlloc(&p, 1 << 20));
  void* h = nullptr;
  SUITE_NCCL(c, ncclCommRegister(c.comm, p, 1 << 20, &h));
  float* f = static_cast<float*>(p);
  for (int i = 0; i < 1024; ++i) f[i] = static_cast<float>(c.rank);
  SUITE_NCCL(c, ncclAllReduce(f, f, 1024, ncclFloat, ncclSum, c.comm, nullptr));
  SUITE_EXPECT(c, f[1023] == c.nranks * (c.nranks - 1) / 2.f, "allreduce on ncclMemAlloc memory %g",
               f[1023]);
  ncclWindow_t win = nullptr;
  SUITE_NCCL(c, ncclCommWindowRegister(c.comm, p, 1 << 20, &win, NCCL_WIN_COLL_SYMMETRIC));
  SUITE_NCCL(c, ncclCommWindowDeregister(c.comm, win));
  SUITE_NCCL(c, ncclCommDeregister(c.comm, h));
  SUITE_NCCL(c, ncclMemFree(p));
  // Argument errors: no effect, clear code, message.
  int x = 0;
  SUITE_EXPECT(
      c, ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, nullptr, nullptr) == ncclInvalidArgument,
      "NULL comm accepted");
  SUITE_EXPECT(
      c, ncclBroadcast(&x, &x, 1, ncclInt32, c.nranks, c.comm, nullptr) == ncclInvalidArgument,
      "root out of range accepted");
  SUITE_EXPECT(c, std::strstr(ncclGetLastError(c.comm), "root") != nullptr,
               "last error '%s' does not name the root", ncclGetLastError(c.comm));
  SUITE_EXPECT(
      c, ncclAllReduce(nullptr, &x, 1, ncclInt32, ncclSum, c.comm, nullptr) == ncclInvalidArgument,
      "NULL sendbuff accepted");
  SUITE_NCCL(c, ncclAllReduce(nullptr, nullptr, 0, ncclInt32, ncclSum, c.comm, nullptr));
  // The device API is not implemented: a clear error, no crash.
  // (looked up at run time: NVIDIA declares it in nccl_device.h, which needs nvcc).
  using DevCommCreate = ncclResult_t (*)(ncclComm_t, const void*, void*);
  auto devCommCreate = reinterpret_cast<DevCommCreate>(dlsym(RTLD_DEFAULT, "ncclDevCommCreate"));
  SUITE_EXPECT(c, devCommCreate && devCommCreate(c.comm, nullptr, nullptr) == ncclInvalidUsage,
               "ncclDevCommCreate missing or did not return ncclInvalidUsage");
  windowPointers(c);
#if NCCL_VERSION_CODE >= 23200
  configCollectives(c);
#endif
}

// Several ranks of one communicator in this process, driven from one thread.
inline void initAllOneThread(Ctx& c) {
  const int k = 3;
  ncclComm_t comms[k];
  SUITE_NCCL(c, ncclCommInitAll(comms, k, nullptr));
  std::vector<std::vector<int64_t>> in(k), out(k);
  SUITE_NCCL(c, ncclGroupStart());
  for (int i = 0; i < k; ++i) {
    in[i].assign(500, i + 1);
    out[i].assign(500, 0);
    SUITE_NCCL(
        c, ncclAllReduce(in[i].data(), out[i].data(), 500, ncclInt64, ncclSum, comms[i], nullptr));
  }
  SUITE_NCCL(c, ncclGroupEnd());
  for (int i = 0; i < k; ++i)
    expectAll(c, out[i], 0, 500, "initall allreduce", [&](size_t) { return k * (k + 1) / 2.0; });
  // Grouped split of every rank, from this thread.
  ncclComm_t halves[k];
  SUITE_NCCL(c, ncclGroupStart());
  for (int i = 0; i < k; ++i) SUITE_NCCL(c, ncclCommSplit(comms[i], i % 2, i, &halves[i], nullptr));
  SUITE_NCCL(c, ncclGroupEnd());
  int sizes[k];
  for (int i = 0; i < k; ++i) ncclCommCount(halves[i], &sizes[i]);
  SUITE_EXPECT(c, sizes[0] == 2 && sizes[1] == 1 && sizes[2] == 2, "split sizes %d %d %d", sizes[0],
               sizes[1], sizes[2]);
  // Grouped init inside the caller's group, then destroy everything.
  ncclComm_t more[2];
  SUITE_NCCL(c, ncclGroupStart());
  SUITE_NCCL(c, ncclCommInitAll(more, 2, nullptr));
  SUITE_NCCL(c, ncclGroupEnd());
  for (auto* m : more) SUITE_NCCL(c, ncclCommDestroy(m));
  for (int i = 0; i < k; ++i) {
    SUITE_NCCL(c, ncclCommDestroy(halves[i]));
    SUITE_NCCL(c, ncclCommDestroy(comms[i]));
  }
}

/// Runs everything (or, with c.quick, the collectives only) and returns the failure count.
inline int runAll(Ctx& c) {
  memoryAndErrors(c);
  reductions<int32_t>(c, 1000);
  reductions<float>(c, 777);
  if (!c.quick) {
    reductions<double>(c, 100);
    reductions<int64_t>(c, 3);
    reductions<uint8_t>(c, 64);
  }
  movements<float>(c, 513);
  if (!c.quick) {
    movements<int8_t>(c, 100);
    movements<double>(c, 1);
  }
  pointToPoint(c);
  groups(c);
  fusionIdentity(c);
  if (!c.quick) {
    customOps(c);
    communicators(c);
    abortFromThread(c);
    if (c.rank == 0) initAllOneThread(c);
  }
  int32_t one = 1, all = 0;  // line up before teardown
  SUITE_NCCL(c, ncclAllReduce(&one, &all, 1, ncclInt32, ncclSum, c.comm, nullptr));
  SUITE_NCCL(c, ncclCommFinalize(c.comm));
  SUITE_NCCL(c, ncclCommDestroy(c.comm));
  return c.failures;
}

}  // namespace suite
