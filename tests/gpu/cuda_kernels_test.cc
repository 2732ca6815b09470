// File: tests/gpu/cuda_kernels_test.cc
// The CUDA reduction kernels (kernels/cuda_reduce.h) on device 0: every dtype x op (sum, prod,
// max, min, avg, premulsum) x sources 1..8 x counts x layouts (16-byte vector path with and
// without a scalar head, element path for pointers at different offsets modulo 16, in place),
// bit for bit against the model of tests/unit/kernel_reference.h (NaN: any NaN) and within the
// float64 bound; (1 << 20) + 3 elements for 2 and 8 sources; divide; argument errors; fp8 below
// sm_90 refused. Skipped (77) without a GPU by gpu_main.cc.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "kernels/cuda_reduce.h"
#include "tests/unit/kernel_reference.h"

namespace tutti::kernels {
namespace {

using test::TestOp;

#define CUDA_REQUIRE(call) REQUIRE((call) == cudaSuccess)

// Pointer layouts, in elements from a 256-byte boundary (CUDA needs element alignment).
struct Layout {
  const char* name;
  size_t dstOffset;
  size_t srcOffset[8];
  int dstIsSource;  // -1: separate dst; else the source dst aliases
};
constexpr Layout kLayouts[] = {
    {"aligned (16-byte path)", 0, {0, 0, 0, 0, 0, 0, 0, 0}, -1},
    {"same offset (head + 16-byte path + tail)", 1, {1, 1, 1, 1, 1, 1, 1, 1}, -1},
    {"different offsets (element path)", 0, {1, 2, 3, 0, 1, 2, 3, 0}, -1},
    {"in place on srcs[0]", 3, {3, 3, 3, 3, 3, 3, 3, 3}, 0},
};

int computeMajor() {
  int dev = 0, major = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  return major;
}

bool isFp8(DataType t) { return t == DataType::kFp8E4M3 || t == DataType::kFp8E5M2; }

struct DeviceMemory {
  explicit DeviceMemory(size_t bytes) { CUDA_REQUIRE(cudaMalloc(&p, bytes)); }
  ~DeviceMemory() { cudaFree(p); }
  unsigned char* at(size_t byteOffset) const { return static_cast<unsigned char*>(p) + byteOffset; }
  void* p = nullptr;
};

// One run: random sources on the host, copied to the device at the layout's offsets, reduced
// there, the result copied back and verified.
template <typename T>
test::Verdict runCase(TestOp op, size_t nsrcs, size_t count, const Layout& layout,
                      std::mt19937_64& rng, size_t sampleStride) {
  const size_t bytes = count * sizeof(T);
  const size_t slot = (bytes + 8 * sizeof(T) + 255) / 256 * 256;  // one buffer per slot
  DeviceMemory mem(slot * (nsrcs + 1) + 256);
  std::vector<std::vector<unsigned char>> host(nsrcs, std::vector<unsigned char>(bytes));
  std::vector<const void*> srcs;
  std::vector<const unsigned char*> hostSrcs;
  for (size_t k = 0; k < nsrcs; ++k) {
    test::fillRandom<T>(host[k].data(), count, rng);
    unsigned char* d = mem.at(k * slot + layout.srcOffset[k] * sizeof(T));
    if (bytes > 0) CUDA_REQUIRE(cudaMemcpy(d, host[k].data(), bytes, cudaMemcpyHostToDevice));
    srcs.push_back(d);
    hostSrcs.push_back(host[k].data());
  }
  void* dst = layout.dstIsSource >= 0 ? const_cast<void*>(srcs[0])
                                      : mem.at(nsrcs * slot + layout.dstOffset * sizeof(T));
  const T scalar = test::testScalar<T>();
  const DataType dtype = test::dataTypeOf<T>();
  const Status s = op == TestOp::kPreMulSum
                       ? cuda::preMulSum(dst, srcs, count, dtype, &scalar, nullptr)
                       : cuda::reduce(dst, srcs, count, dtype, test::toRedOp(op), nullptr);
  test::Verdict v;
  if (!s.isOk()) {
    v.modelMismatches = 1;
    v.first = "error: " + s.message();
    return v;
  }
  CUDA_REQUIRE(cudaDeviceSynchronize());
  std::vector<unsigned char> out(bytes);
  if (bytes > 0) CUDA_REQUIRE(cudaMemcpy(out.data(), dst, bytes, cudaMemcpyDeviceToHost));
  return test::verifyReduce<T>(op, hostSrcs, count, out.data(), scalar, sampleStride);
}

void forEachDtype(DataType dtype, auto&& fn) { REQUIRE(detail::withElementType(dtype, fn)); }

TEST_CASE("CUDA reduce and premulsum match the model: dtype x op x sources x count x layout") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  CAPTURE(dataTypeName(dtype));
  if (isFp8(dtype) && computeMajor() < 9) return;  // refused: see the error test below
  std::mt19937_64 rng(2024);
  forEachDtype(dtype, [&]<typename T>(T) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{1003}}) {
      for (const Layout& layout : kLayouts) {
        for (TestOp op : test::kAllTestOps) {
          for (size_t nsrcs = 1; nsrcs <= 8; ++nsrcs) {
            const test::Verdict v = runCase<T>(op, nsrcs, count, layout, rng, 1);
            if (v.ok()) continue;
            INFO(test::testOpName(op) << " nsrcs=" << nsrcs << " count=" << count
                                      << " layout=" << layout.name << ": " << v.first);
            REQUIRE(v.ok());
          }
        }
      }
    }
  });
}

TEST_CASE("CUDA reduce of (1 << 20) + 3 elements, 2 and 8 sources") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  CAPTURE(dataTypeName(dtype));
  if (isFp8(dtype) && computeMajor() < 9) return;
  std::mt19937_64 rng(5);
  forEachDtype(dtype, [&]<typename T>(T) {
    for (TestOp op : test::kAllTestOps) {
      for (size_t nsrcs : {2, 8}) {
        CAPTURE(test::testOpName(op), nsrcs);
        const test::Verdict v = runCase<T>(op, nsrcs, (size_t{1} << 20) + 3, kLayouts[1], rng, 97);
        INFO(v.first);
        REQUIRE(v.ok());
      }
    }
  });
}

TEST_CASE("CUDA divide matches the model") {
  const auto dtype = static_cast<DataType>(GENERATE(range(0, kNumDataTypes)));
  CAPTURE(dataTypeName(dtype));
  if (isFp8(dtype) && computeMajor() < 9) return;
  std::mt19937_64 rng(11);
  forEachDtype(dtype, [&]<typename T>(T) {
    const size_t count = 1003;
    std::vector<unsigned char> in(count * sizeof(T)), out(count * sizeof(T));
    test::fillRandom<T>(in.data(), count, rng);
    DeviceMemory mem(in.size() + 64);
    void* buf = mem.at(sizeof(T));
    for (int divisor : {1, 3, 7}) {
      CAPTURE(divisor);
      CUDA_REQUIRE(cudaMemcpy(buf, in.data(), in.size(), cudaMemcpyHostToDevice));
      REQUIRE(cuda::divide(buf, count, dtype, divisor, nullptr).isOk());
      CUDA_REQUIRE(cudaMemcpy(out.data(), buf, out.size(), cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < count; ++i) {
        T x, got;
        std::memcpy(&x, in.data() + i * sizeof(T), sizeof(T));
        std::memcpy(&got, out.data() + i * sizeof(T), sizeof(T));
        REQUIRE(test::sameResult(got, test::modelDivide(x, divisor)));
      }
    }
  });
}

TEST_CASE("CUDA argument errors: InvalidArgument, nothing enqueued") {
  DeviceMemory mem(4096);
  float* d = reinterpret_cast<float*>(mem.at(0));
  const void* two[] = {mem.at(1024), mem.at(2048)};
  const auto bad = static_cast<DataType>(42);
  CHECK(cuda::reduce(d, two, 4, bad, RedOp::kSum, nullptr).code() == Code::kInvalidArgument);
  CHECK(cuda::reduce(d, two, 4, DataType::kFloat32, static_cast<RedOp>(9), nullptr).code() ==
        Code::kInvalidArgument);
  CHECK(cuda::reduce(d, {}, 4, DataType::kFloat32, RedOp::kSum, nullptr).code() ==
        Code::kInvalidArgument);
  CHECK(cuda::reduce(nullptr, two, 4, DataType::kFloat32, RedOp::kSum, nullptr).code() ==
        Code::kInvalidArgument);
  const void* misaligned[] = {mem.at(1025), mem.at(2048)};
  const Status s = cuda::reduce(d, misaligned, 4, DataType::kFloat32, RedOp::kSum, nullptr);
  CHECK(s.code() == Code::kInvalidArgument);
  CHECK(s.message().find("srcs[0] is not aligned") != std::string::npos);
  const void* partial[] = {mem.at(4), mem.at(2048)};
  CHECK(cuda::reduce(d, partial, 4, DataType::kFloat32, RedOp::kSum, nullptr).code() ==
        Code::kInvalidArgument);
  CHECK(cuda::preMulSum(d, two, 4, DataType::kFloat32, nullptr, nullptr).code() ==
        Code::kInvalidArgument);
  CHECK(cuda::divide(d, 4, DataType::kFloat32, 0, nullptr).code() == Code::kInvalidArgument);
  CHECK(cuda::copy(d, mem.at(8), 4, DataType::kFloat32, nullptr).code() ==
        Code::kInvalidArgument);  // partial overlap
  CHECK(cuda::reduce(nullptr, two, 0, DataType::kFloat32, RedOp::kSum, nullptr).isOk());
  if (computeMajor() < 9) {
    const Status f = cuda::reduce(d, two, 4, DataType::kFp8E4M3, RedOp::kSum, nullptr);
    CHECK(f.code() == Code::kInvalidArgument);
    CHECK(f.message().find("FP8 reduction support begins with sm90") != std::string::npos);
    CHECK(cuda::copy(d, mem.at(1024), 4, DataType::kFp8E4M3, nullptr).isOk());  // copies work
  }
  CUDA_REQUIRE(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace tutti::kernels
