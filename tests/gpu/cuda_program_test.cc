// File: tests/gpu/cuda_program_test.cc
// The CUDA Program kernels (kernels/cuda_program.h) on device 0 against the CPU emulator
// (kernels/program_host.h's runOnHost) on host copies of the same buffers, bit for bit (NaN:
// both NaN), every buffer compared whole: random programs over every dtype x {sum, prod, max,
// min} with and without premultiplication and kDivide, trees of 1..16 leaves, in place, many
// ops; refs at the same offset modulo 16 (head + 16-byte packs + tail) and at different offsets
// (element path); counts from 0 to several MiB; copy-only programs (the copy kernels) at byte
// offsets; every case on both kernel families (cuda::detail::launchProgramOn: the grid kernels,
// and the small kernels whenever the compact form holds the program), tiny counts on every path;
// programs captured into a CUDA graph and replayed three times with new inputs; argument errors
// with nothing enqueued (their throughput and latency: cuda_program_perf_test.cc). Skipped (77)
// without a GPU by gpu_main.cc.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "kernels/cuda_program.h"
#include "kernels/program.h"
#include "kernels/program_host.h"
#include "tests/gpu/program_test_util.h"
#include "tests/unit/program_fixtures.h"
#include "tests/unit/kernel_reference.h"

namespace tutti::kernels::program {
namespace {

using cuda::detail::ProgramPath;

constexpr RedOp kProgramOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin};


// ---- random programs ----

// Where an op's refs sit: all at the same offset modulo 16 bytes (the 16-byte path, with a head
// when that offset is not 0), at independent element offsets (mostly the element path), or
// either, op by op.
enum class Placement { kAligned, kMisaligned, kMixed };

struct GenOptions {
  int maxOps = 4;
  int maxLeaves = kMaxLeaves;
  int maxDsts = 4;  // before an in-place destination
  uint64_t maxCount = 300;
  uint64_t largeCount = 0;  // when > 0: op 0 has this count
  Placement placement = Placement::kMixed;
  bool copyOnly = false;  // one leaf, no premul, no divide
  bool byteOffsets = false;  // copy-only: buffers at odd byte addresses too
};

// Buffers 0..15 hold leaves, 16..27 destinations, 28..31 in-place locations. Op o owns
// elements [o * slot, (o + 1) * slot) of every buffer: no op reads what another writes.
constexpr int kLeafBuffers = 16;
constexpr int kDstBuffers = 12;
constexpr int kFirstDstBuffer = 16;
constexpr int kFirstInPlaceBuffer = 28;

std::vector<uint8_t> randomCode(int n, std::mt19937_64& rng) {
  const int shape = static_cast<int>(rng() % 3);
  std::vector<uint8_t> code;
  if (shape == 0) {  // chain
    code.push_back(0);
    for (int k = 1; k < n; ++k) {
      code.push_back(static_cast<uint8_t>(k));
      code.push_back(kApply);
    }
  } else if (shape == 1) {  // balanced
    auto rec = [&](auto&& self, int first, int m) -> void {
      if (m == 1) {
        code.push_back(static_cast<uint8_t>(first));
        return;
      }
      const int left = (m + 1) / 2;
      self(self, first, left);
      self(self, first + left, m - left);
      code.push_back(kApply);
    };
    rec(rec, 0, n);
  } else {  // random, depth <= kMaxDepth
    int pushes = 0, depth = 0;
    while (pushes < n || depth > 1) {
      const bool canPush = pushes < n && depth < kMaxDepth;
      if (canPush && (depth < 2 || rng() % 2 == 0)) {
        code.push_back(static_cast<uint8_t>(pushes++));
        ++depth;
      } else {
        code.push_back(kApply);
        --depth;
      }
    }
  }
  std::vector<uint8_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (uint8_t& b : code) {
    if (b != kApply) b = perm[b];
  }
  return code;
}

struct Case {
  Program prog;
  uint64_t slot = 0;       // elements per op per buffer
  size_t bufferBytes = 0;  // bytes per buffer (slot * nops * elemBytes + byte shift)
  size_t byteShift[kMaxBuffers] = {};  // copy-only byte-offset programs: buffer start shift
};

template <typename T>
Case makeCase(RedOp op, const GenOptions& g, std::mt19937_64& rng) {
  Case c;
  Program& p = c.prog;
  constexpr uint64_t kPerPack = 16 / sizeof(T);
  p.dtype = test::dataTypeOf<T>();
  p.op = op;
  p.divisor = 1 + static_cast<int32_t>(rng() % 16);
  p.preMul = !g.copyOnly && rng() % 3 == 0;
  T scalar;
  test::fillRandom<T>(reinterpret_cast<unsigned char*>(&scalar), 1, rng);
  std::memcpy(p.scalar, &scalar, sizeof(T));
  const int nops = 1 + static_cast<int>(rng() % g.maxOps);
  std::vector<uint64_t> counts(nops);
  for (uint64_t& n : counts) {
    const uint64_t r = rng() % 8;
    n = r == 0 ? 0 : r == 1 ? 1 : rng() % (g.maxCount + 1);
  }
  if (g.largeCount > 0) counts[0] = g.largeCount;
  // A multiple of 16 elements, so that op slots start on 16-byte boundaries.
  c.slot = (*std::max_element(counts.begin(), counts.end()) + 16 + 15) / 16 * 16;
  for (int k = 0; k < nops; ++k) {
    const int nleaves = g.copyOnly ? 1 : 1 + static_cast<int>(rng() % g.maxLeaves);
    int ndsts = 1 + static_cast<int>(rng() % g.maxDsts);
    if (p.nrefs + nleaves + ndsts + 1 > kMaxRefs || p.ncode + 2 * nleaves - 1 > kMaxCode) break;
    Op& o = p.ops[p.nops];
    const uint64_t base = static_cast<uint64_t>(p.nops) * c.slot;
    const bool aligned = g.placement == Placement::kAligned ||
                         (g.placement == Placement::kMixed && rng() % 2 == 0);
    const uint64_t common = rng() % kPerPack;
    auto offset = [&] { return base + (aligned ? common : rng() % 16); };
    o.count = counts[k];
    o.flags = !g.copyOnly && rng() % 3 == 0 ? kDivide : 0;
    o.nleaves = static_cast<uint8_t>(nleaves);
    o.leaves = p.nrefs;
    for (int l = 0; l < nleaves; ++l) {
      p.refs[p.nrefs++] = Ref::make(static_cast<int>(rng() % kLeafBuffers), offset());
    }
    const bool inPlace = rng() % 3 == 0;
    const int inPlaceLeaf = static_cast<int>(rng() % nleaves);
    if (inPlace) {
      p.refs[o.leaves + inPlaceLeaf] = Ref::make(kFirstInPlaceBuffer + p.nops % 4, offset());
    }
    o.dsts = p.nrefs;
    std::vector<int> dstBufs(kDstBuffers);
    std::iota(dstBufs.begin(), dstBufs.end(), kFirstDstBuffer);
    std::shuffle(dstBufs.begin(), dstBufs.end(), rng);
    for (int d = 0; d < ndsts; ++d) p.refs[p.nrefs++] = Ref::make(dstBufs[d], offset());
    if (inPlace) {
      const int at = static_cast<int>(rng() % (ndsts + 1));
      if (at == ndsts) {
        p.refs[p.nrefs++] = p.refs[o.leaves + inPlaceLeaf];
        ++ndsts;
      } else {
        p.refs[o.dsts + at] = p.refs[o.leaves + inPlaceLeaf];
      }
    }
    o.ndsts = static_cast<uint8_t>(ndsts);
    const std::vector<uint8_t> code = randomCode(nleaves, rng);
    o.code = p.ncode;
    o.ncode = static_cast<uint8_t>(code.size());
    for (uint8_t b : code) p.code[p.ncode++] = b;
    ++p.nops;
  }
  if (g.byteOffsets) {
    for (size_t& s : c.byteShift) s = rng() % 16;
  }
  c.bufferBytes = static_cast<size_t>(p.nops) * c.slot * sizeof(T);
  return c;
}

// ---- running a case on both sides ----

std::string summary(const Program& p) {
  std::string out = std::string(dataTypeName(p.dtype)) + " " + std::string(redOpName(p.op)) +
                    " preMul=" + std::to_string(p.preMul) + " divisor=" +
                    std::to_string(p.divisor) + " copyOnly=" + std::to_string(copyOnly(p));
  for (int o = 0; o < p.nops; ++o) {
    const Op& op = p.ops[o];
    out += "\n  op " + std::to_string(o) + ": count=" + std::to_string(op.count) +
           " nleaves=" + std::to_string(op.nleaves) + " ndsts=" + std::to_string(op.ndsts) +
           " divide=" + std::to_string(op.flags & kDivide) + " refs:";
    for (int k = 0; k < op.nleaves + op.ndsts; ++k) {
      const Ref r = p.refs[k < op.nleaves ? op.leaves + k : op.dsts + (k - op.nleaves)];
      out += " " + std::to_string(r.buf()) + "@" + std::to_string(r.offset());
    }
  }
  return out;
}

// Host buffers for every buffer number a ref names, filled at random (floating types: some
// inf, NaN, zeros and extremes).
template <typename T>
std::vector<std::vector<unsigned char>> randomHostBuffers(const Case& c, std::mt19937_64& rng) {
  std::vector<std::vector<unsigned char>> host(kMaxBuffers);
  std::vector<bool> used(kMaxBuffers, false);
  for (int r = 0; r < c.prog.nrefs; ++r) used[c.prog.refs[r].buf()] = true;
  for (int b = 0; b < kMaxBuffers; ++b) {
    if (!used[b]) continue;
    host[b].resize(c.bufferBytes);
    const size_t n = c.bufferBytes / sizeof(T);
    test::fillRandom<T>(host[b].data(), n, rng);
    if constexpr (!std::is_integral_v<T>) {
      for (size_t i = 0; i < n; ++i) {
        if (rng() % 32 == 0) test::fillRandom<T>(host[b].data() + i * sizeof(T), 1, rng, true);
      }
    }
  }
  return host;
}

// "" when every element of every buffer is the same (or both NaN), else the first difference.
template <typename T>
std::string compareBuffers(const std::vector<std::vector<unsigned char>>& got,
                           const std::vector<std::vector<unsigned char>>& want) {
  for (int b = 0; b < kMaxBuffers; ++b) {
    const size_t n = want[b].size() / sizeof(T);
    for (size_t i = 0; i < n; ++i) {
      T g, w;
      std::memcpy(&g, got[b].data() + i * sizeof(T), sizeof(T));
      std::memcpy(&w, want[b].data() + i * sizeof(T), sizeof(T));
      if (!test::sameResult(g, w)) {
        return "buffer " + std::to_string(b) + " element " + std::to_string(i) + ": got " +
               std::to_string(loadAsDouble(test::dataTypeOf<T>(), &g, 0)) + ", want " +
               std::to_string(loadAsDouble(test::dataTypeOf<T>(), &w, 0));
      }
    }
  }
  return "";
}

// Device buffers for a case: one allocation per used buffer number, the buffer starting
// byteShift bytes into it.
struct DeviceBuffers {
  std::vector<std::unique_ptr<DeviceMemory>> mem;
  Buffers bufs;
  DeviceBuffers(const Case& c, const std::vector<std::vector<unsigned char>>& host)
      : mem(kMaxBuffers) {
    for (int b = 0; b < kMaxBuffers; ++b) {
      if (host[b].empty()) continue;
      mem[b] = std::make_unique<DeviceMemory>(c.bufferBytes + 16);
      bufs.ptr[b] = static_cast<unsigned char*>(mem[b]->p) + c.byteShift[b];
    }
  }
  void upload(const std::vector<std::vector<unsigned char>>& host) const {
    for (int b = 0; b < kMaxBuffers; ++b) {
      if (host[b].empty()) continue;
      CUDA_REQUIRE(cudaMemcpy(bufs.ptr[b], host[b].data(), host[b].size(),
                              cudaMemcpyHostToDevice));
    }
  }
  std::vector<std::vector<unsigned char>> download(
      const std::vector<std::vector<unsigned char>>& like) const {
    std::vector<std::vector<unsigned char>> out(kMaxBuffers);
    for (int b = 0; b < kMaxBuffers; ++b) {
      if (like[b].empty()) continue;
      out[b].resize(like[b].size());
      CUDA_REQUIRE(cudaMemcpy(out[b].data(), bufs.ptr[b], out[b].size(),
                              cudaMemcpyDeviceToHost));
    }
    return out;
  }
};

Buffers hostBuffers(std::vector<std::vector<unsigned char>>& host) {
  Buffers bufs;
  for (int b = 0; b < kMaxBuffers; ++b) {
    if (!host[b].empty()) bufs.ptr[b] = host[b].data();
  }
  return bufs;
}

// One case on `path`: the device result against runOnHost. `taken` is false when the forced
// path could not take the program (nothing ran); `failure` is "" or what went wrong.
struct RunResult {
  bool taken = true;
  std::string failure;
};

template <typename T>
RunResult runCase(const Case& c, std::mt19937_64& rng, ProgramPath path = ProgramPath::kAuto) {
  std::vector<std::vector<unsigned char>> host = randomHostBuffers<T>(c, rng);
  DeviceBuffers dev(c, host);
  dev.upload(host);
  const Result<bool> taken = cuda::detail::launchProgramOn(path, c.prog, dev.bufs, nullptr);
  if (!taken.isOk()) return {true, "launchProgram: " + taken.status().toString()};
  if (!taken.value()) return {false, ""};
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    return {true, std::string("kernel: ") + cudaGetErrorString(e)};
  }
  const std::vector<std::vector<unsigned char>> got = dev.download(host);
  const Status hs = runOnHost(c.prog, hostBuffers(host));
  if (!hs.isOk()) return {true, "runOnHost: " + hs.toString()};
  return {true, compareBuffers<T>(got, host)};
}

// A case on the grid kernels, then on the small kernels when their compact form holds it (and
// on launchProgram's own choice when `withAuto`). Returns how many ran on the small kernels.
template <typename T>
int runOnEveryPath(const Case& c, std::mt19937_64& rng, bool withAuto = false) {
  int small = 0;
  for (const ProgramPath path : {ProgramPath::kGrid, ProgramPath::kSmall, ProgramPath::kAuto}) {
    if (path == ProgramPath::kAuto && !withAuto) continue;
    CAPTURE(pathName(path));
    const RunResult r = runCase<T>(c, rng, path);
    INFO(summary(c.prog));
    INFO(r.failure);
    REQUIRE(r.failure.empty());
    REQUIRE((r.taken || path == ProgramPath::kSmall));
    if (path == ProgramPath::kSmall && r.taken) ++small;
  }
  return small;
}

void forEachDtype(DataType dtype, auto&& fn) { REQUIRE(detail::withElementType(dtype, fn)); }

TEST_CASE("launchProgram matches runOnHost: dtype x op x placement, small counts") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  const RedOp op = GENERATE(from_range(std::begin(kProgramOps), std::end(kProgramOps)));
  CAPTURE(dataTypeName(dtype), redOpName(op));
  std::mt19937_64 rng(31 * static_cast<int>(dtype) + static_cast<int>(op));
  forEachDtype(dtype, [&]<typename T>(T) {
    int small = 0;
    for (int iter = 0; iter < 24; ++iter) {
      GenOptions g;
      g.placement = static_cast<Placement>(iter % 3);
      if (iter % 8 == 7) g.maxOps = kMaxOps;           // many small ops
      if (iter % 6 == 5) g.maxCount = 5000;           // several rounds per thread (grid)
      const Case c = makeCase<T>(op, g, rng);
      small += runOnEveryPath<T>(c, rng);
    }
    CHECK(small >= 12);  // most programs of at most 4 ops fit the compact form
  });
}

TEST_CASE("launchProgram matches runOnHost on multi-megabyte ops, both paths") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  const RedOp op = GENERATE(from_range(std::begin(kProgramOps), std::end(kProgramOps)));
  CAPTURE(dataTypeName(dtype), redOpName(op));
  std::mt19937_64 rng(7 + 31 * static_cast<int>(dtype) + static_cast<int>(op));
  forEachDtype(dtype, [&]<typename T>(T) {
    GenOptions g;
    g.maxOps = 1;
    // sum and max on the 16-byte path, prod and min on the element path.
    g.placement = op == RedOp::kSum || op == RedOp::kMax ? Placement::kAligned
                                                         : Placement::kMisaligned;
    g.largeCount = (size_t{2} << 20) / sizeof(T) + 5;  // 2 MiB and a tail per ref
    const Case c = makeCase<T>(op, g, rng);
    // launchProgram's choice (the grid kernels: more than a wave), then, for sum (16-byte path)
    // and min (element path), the small kernels over hundreds of blocks.
    const RunResult r = runCase<T>(c, rng);
    INFO(summary(c.prog));
    INFO(r.failure);
    REQUIRE(r.failure.empty());
    if (op == RedOp::kSum || op == RedOp::kMin) {
      const RunResult s = runCase<T>(c, rng, ProgramPath::kSmall);
      INFO(s.failure);
      REQUIRE(s.taken);
      REQUIRE(s.failure.empty());
    }
  });
}

TEST_CASE("launchProgram: copy-only programs at any byte offset (the copy kernel)") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  CAPTURE(dataTypeName(dtype));
  std::mt19937_64 rng(99 + static_cast<int>(dtype));
  forEachDtype(dtype, [&]<typename T>(T) {
    for (int iter = 0; iter < 12; ++iter) {
      GenOptions g;
      g.copyOnly = true;
      g.placement = static_cast<Placement>(iter % 3);
      g.byteOffsets = iter % 2 == 1;
      if (iter == 11) g.largeCount = (size_t{2} << 20) / sizeof(T) + 3;
      const Case c = makeCase<T>(RedOp::kSum, g, rng);
      REQUIRE(copyOnly(c.prog));
      runOnEveryPath<T>(c, rng, /*withAuto=*/true);
    }
  });
}

// The shapes whose latency matters (a few bytes: allreduce, allgather, broadcast, sendrecv of one
// element or a handful) on launchProgram's choice, on the grid kernels and on the small kernels,
// which must take every one of them: counts 0 to 40 elements, 1 to 16 leaves, 1 to 4 ops (up to
// 16 copy ops of 1 leaf), every placement and byte offsets for copies.
TEST_CASE("launchProgram: tiny counts on every path, typed and copy-only") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  const RedOp op = GENERATE(from_range(std::begin(kProgramOps), std::end(kProgramOps)));
  CAPTURE(dataTypeName(dtype), redOpName(op));
  std::mt19937_64 rng(555 + 31 * static_cast<int>(dtype) + static_cast<int>(op));
  forEachDtype(dtype, [&]<typename T>(T) {
    for (int iter = 0; iter < 16; ++iter) {
      GenOptions g;
      g.placement = static_cast<Placement>(iter % 3);
      g.maxCount = iter % 4 == 0 ? 3 : 40;
      if (iter % 2 == 1) {  // copy-only: up to 16 ops of at most 5 destinations fill the form
        g.copyOnly = true;
        g.byteOffsets = iter % 4 == 1;
        g.maxOps = iter % 8 == 3 ? 16 : 4;
      }
      const Case c = makeCase<T>(op, g, rng);
      REQUIRE(runOnEveryPath<T>(c, rng, /*withAuto=*/true) == 1);
    }
  });
}


// The allreduce shapes of the latency test, bit for bit on both families: n = 1 to 16 ranks (one
// op of n leaves and min(n, 12) destinations, avg's divide on odd counts) of 1 to 9 float32 or
// bfloat16 elements.
TEST_CASE("launchProgram: allreduce-shaped ops of a few elements on both kernel families") {
  std::mt19937_64 rng(8);
  for (const DataType dtype : {DataType::kFloat32, DataType::kBfloat16}) {
    forEachDtype(dtype, [&]<typename T>(T) {
      for (const int n : {1, 2, 3, 4, 8, 16}) {
        for (const uint64_t count : {1, 2, 5, 9}) {
          CAPTURE(dataTypeName(dtype), n, count);
          Case c;
          Program& p = c.prog;
          p.dtype = dtype;
          p.op = RedOp::kSum;
          p.divisor = n;
          p.nops = 1;
          Op& op = p.ops[0];
          op.count = count;
          op.flags = count % 2 == 1 ? kDivide : 0;
          op.nleaves = static_cast<uint8_t>(n);
          op.leaves = 0;
          for (int k = 0; k < n; ++k) p.refs[p.nrefs++] = Ref::make(k, 0);
          op.ndsts = static_cast<uint8_t>(std::min(n, kDstBuffers));
          op.dsts = p.nrefs;
          for (int d = 0; d < op.ndsts; ++d) p.refs[p.nrefs++] = Ref::make(kFirstDstBuffer + d, 0);
          appendChain(p, op);
          c.slot = 16;
          c.bufferBytes = c.slot * sizeof(T);
          REQUIRE(runOnEveryPath<T>(c, rng, /*withAuto=*/true) == 1);
        }
      }
    });
  }
}

TEST_CASE("launchProgram under stream capture: one graph, three replays with new inputs") {
  // The grid kernels (6 ops of up to 100000 elements), then the small kernels (a few bytes).
  const ProgramPath path = GENERATE(ProgramPath::kGrid, ProgramPath::kSmall);
  CAPTURE(pathName(path));
  std::mt19937_64 rng(2025);
  GenOptions g;
  g.maxOps = path == ProgramPath::kGrid ? 6 : 3;
  g.maxLeaves = path == ProgramPath::kGrid ? kMaxLeaves : 8;
  g.maxCount = path == ProgramPath::kGrid ? 100000 : 20;
  if (path == ProgramPath::kSmall) g.largeCount = 7;  // op 0 has work: one node
  g.placement = Placement::kMixed;
  const Case c = makeCase<float>(RedOp::kSum, g, rng);
  INFO(summary(c.prog));
  std::vector<std::vector<unsigned char>> host = randomHostBuffers<float>(c, rng);
  DeviceBuffers dev(c, host);
  cudaStream_t stream = nullptr;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  CUDA_REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const Result<bool> taken = cuda::detail::launchProgramOn(path, c.prog, dev.bufs, stream);
  CUDA_REQUIRE(cudaStreamEndCapture(stream, &graph));
  REQUIRE(taken.isOk());
  REQUIRE(taken.value());
  size_t nodes = 0;
  CUDA_REQUIRE(cudaGraphGetNodes(graph, nullptr, &nodes));
  CHECK(nodes == 1);
  cudaGraphExec_t exec = nullptr;
  CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    CAPTURE(replay);
    host = randomHostBuffers<float>(c, rng);
    dev.upload(host);
    CUDA_REQUIRE(cudaGraphLaunch(exec, stream));
    CUDA_REQUIRE(cudaStreamSynchronize(stream));
    const auto got = dev.download(host);
    REQUIRE(runOnHost(c.prog, hostBuffers(host)).isOk());
    const std::string failure = compareBuffers<float>(got, host);
    INFO(failure);
    REQUIRE(failure.empty());
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST_CASE("launchProgram errors: InvalidArgument before anything is enqueued") {
  DeviceMemory mem(4096);
  auto* base = static_cast<unsigned char*>(mem.p);
  Program p = validProgram(16);
  Buffers bufs;
  bufs.ptr[0] = base;
  bufs.ptr[1] = base + 1024;
  bufs.ptr[2] = base + 2048;

  cudaStream_t stream = nullptr;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Each call is captured: a refused call, like an empty program, must leave an empty graph.
  auto nodesOf = [&](auto&& call) {
    cudaGraph_t graph = nullptr;
    REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
    const Status s = call();
    REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
    size_t nodes = 0;
    REQUIRE(cudaGraphGetNodes(graph, nullptr, &nodes) == cudaSuccess);
    cudaGraphDestroy(graph);
    return std::make_pair(s, nodes);
  };

  auto [ok, okNodes] = nodesOf([&] { return cuda::launchProgram(p, bufs, stream); });
  REQUIRE(ok.isOk());
  CHECK(okNodes == 1);

  Program bad = p;
  bad.ops[0].ndsts = 0;
  auto [s1, n1] = nodesOf([&] { return cuda::launchProgram(bad, bufs, stream); });
  CHECK(s1.code() == Code::kInvalidArgument);
  CHECK_THAT(s1.message(), Catch::Contains("ndsts=0"));
  CHECK(n1 == 0);
  for (const ProgramPath path : {ProgramPath::kGrid, ProgramPath::kSmall}) {
    CAPTURE(pathName(path));
    auto [sp, np] =
        nodesOf([&] { return cuda::detail::launchProgramOn(path, bad, bufs, stream).status(); });
    CHECK(sp.code() == Code::kInvalidArgument);
    CHECK(np == 0);
    auto [okp, okn] =
        nodesOf([&] { return cuda::detail::launchProgramOn(path, p, bufs, stream).status(); });
    CHECK(okp.isOk());
    CHECK(okn == 1);
  }

  Buffers nullDst = bufs;
  nullDst.ptr[1] = nullptr;
  auto [s2, n2] = nodesOf([&] { return cuda::launchProgram(p, nullDst, stream); });
  CHECK(s2.code() == Code::kInvalidArgument);
  CHECK_THAT(s2.message(), Catch::Contains("buffer 1 is null"));
  CHECK(n2 == 0);

  Buffers misaligned = bufs;
  misaligned.ptr[2] = base + 2050;
  auto [s3, n3] = nodesOf([&] { return cuda::launchProgram(p, misaligned, stream); });
  CHECK(s3.code() == Code::kInvalidArgument);
  CHECK_THAT(s3.message(), Catch::Contains("buffer 2 is not aligned to its 4-byte elements"));
  CHECK(n3 == 0);

  Program empty;
  auto [s4, n4] = nodesOf([&] { return cuda::launchProgram(empty, Buffers{}, stream); });
  CHECK(s4.isOk());
  CHECK(n4 == 0);

  Program zero = p;
  zero.ops[0].count = 0;
  auto [s5, n5] = nodesOf([&] { return cuda::launchProgram(zero, Buffers{}, stream); });
  CHECK(s5.isOk());
  CHECK(n5 == 0);

  // A copy-only program takes any alignment.
  Program copy = p;
  copy.ops[0].nleaves = 1;
  copy.ops[0].ncode = 1;
  copy.ops[0].dsts = 1;
  copy.refs[1] = Ref::make(1, 0);
  REQUIRE(copyOnly(copy));
  auto [s6, n6] = nodesOf([&] { return cuda::launchProgram(copy, misaligned, stream); });
  CHECK(s6.isOk());
  CHECK(n6 == 1);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace tutti::kernels::program
