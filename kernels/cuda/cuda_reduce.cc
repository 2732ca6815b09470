// File: kernels/cuda/cuda_reduce.cc
// Host side of kernels/cuda_reduce.h: argument checks, the device's compute capability and SM
// count (cached per device), launch geometry, passes of kMaxSourcesPerLaunch sources, and the
// translation of CUDA errors into Status. Compiled as C++ against the CUDA runtime API.
#include "kernels/cuda_reduce.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "base/strings.h"
#include "kernels/cuda/launch.h"

namespace tutti::kernels::cuda {
namespace {

static_assert(detail::kSourcesPerLaunch == kMaxSourcesPerLaunch);
using detail::DevOp;
using detail::ReduceLaunch;

constexpr int kThreads = 512;
constexpr int kBlocksPerSm = 2048 / kThreads;  // a full SM: 2048 resident threads on sm_80/90

Status cudaFailure(const char* api, const char* call, int err) {
  const auto e = static_cast<cudaError_t>(err);
  return makeStatus(Code::kUnhandledCudaError, "{}: {} failed: {} ({})", api, call,
                    cudaGetErrorString(e), err);
}

struct DeviceInfo {
  int device = -1;
  int major = 0;
  int minor = 0;
  int sms = 1;
};

// The current device's properties, queried once per device.
Result<DeviceInfo> currentDevice(const char* api) {
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) {
    return cudaFailure(api, "cudaGetDevice", e);
  }
  static std::mutex mu;
  static std::vector<DeviceInfo> cache;
  std::lock_guard<std::mutex> lock(mu);
  for (const DeviceInfo& d : cache) {
    if (d.device == dev) return d;
  }
  DeviceInfo d;
  d.device = dev;
  cudaError_t e = cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d.minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev);
  if (e != cudaSuccess) return cudaFailure(api, "cudaDeviceGetAttribute", e);
  cache.push_back(d);
  return d;
}

bool isFp8(DataType t) { return t == DataType::kFp8E4M3 || t == DataType::kFp8E5M2; }

Status checkDtype(const char* api, DataType dtype, size_t count) {
  if (!isValid(dtype)) {
    return invalidArgument("{}: dtype is invalid (dtype={})", api, static_cast<int>(dtype));
  }
  if (count > SIZE_MAX / dataTypeBytes(dtype)) {
    return invalidArgument("{}: count is too large for the address space (count={}, dtype={})", api,
                           count, dataTypeName(dtype));
  }
  return Status::ok();
}

Status checkPointer(const char* api, const char* name, const void* p, DataType dtype,
                    size_t count) {
  if (p == nullptr) return invalidArgument("{}: {} is null (count={})", api, name, count);
  if (reinterpret_cast<uintptr_t>(p) % dataTypeBytes(dtype) != 0) {
    return invalidArgument("{}: {} is not aligned to its {}-byte elements ({}={}, dtype={})", api,
                           name, dataTypeBytes(dtype), name, p, dataTypeName(dtype));
  }
  return Status::ok();
}

// NCCL's rule and wording: "FP8 reduction support begins with sm90 capable devices."
Status checkFp8(const char* api, DataType dtype, const DeviceInfo& d) {
  if (isFp8(dtype) && d.major < 9) {
    return invalidArgument(
        "{}: FP8 reduction support begins with sm90 capable devices (dtype={}, device {} is "
        "sm_{}{})",
        api, dataTypeName(dtype), d.device, d.major, d.minor);
  }
  return Status::ok();
}

int launchReduce(DataType dtype, const ReduceLaunch& l) {
  switch (dtype) {
    case DataType::kFloat32:
    case DataType::kFloat64:
      return detail::launchReduceFloat(dtype, l);
    case DataType::kFloat16:
    case DataType::kBfloat16:
    case DataType::kFp8E4M3:
    case DataType::kFp8E5M2:
      return detail::launchReduceNarrow(dtype, l);
    default:
      return detail::launchReduceInt(dtype, l);
  }
}

int blocksFor(size_t work, const DeviceInfo& d) {
  const size_t want = (work + kThreads - 1) / kThreads;
  const size_t cap = static_cast<size_t>(d.sms) * kBlocksPerSm;
  return static_cast<int>(std::max<size_t>(1, std::min(want, cap)));
}

// Shared by reduce, preMulSum and scale: checks, then one launch per kMaxSourcesPerLaunch
// sources (later passes fold dst in as their first, already accumulated, source).
Status run(const char* api, void* dst, std::span<const void* const> srcs, size_t count,
           DataType dtype, DevOp op, const void* scalar, void* stream) {
  if (Status s = checkDtype(api, dtype, count); !s) return s;
  if (srcs.empty()) return invalidArgument("{}: srcs is empty (count={})", api, count);
  if (count == 0) return Status::ok();
  if (Status s = checkPointer(api, "dst", dst, dtype, count); !s) return s;
  const size_t bytes = count * dataTypeBytes(dtype);
  for (size_t k = 0; k < srcs.size(); ++k) {
    const std::string name = "srcs[" + std::to_string(k) + "]";
    if (Status s = checkPointer(api, name.c_str(), srcs[k], dtype, count); !s) return s;
    if (srcs[k] != dst && bytesOverlap(dst, bytes, srcs[k], bytes)) {
      return invalidArgument("{}: {} partially overlaps dst (count={}, nsrcs={})", api, name, count,
                             srcs.size());
    }
    if (k >= kMaxSourcesPerLaunch && srcs[k] == dst) {
      return invalidArgument("{}: {} is dst, but with more than {} sources only the first {} may "
                             "alias dst (nsrcs={})",
                             api, name, kMaxSourcesPerLaunch, kMaxSourcesPerLaunch, srcs.size());
    }
  }
  if (op == DevOp::kPreMulSum && scalar == nullptr) {
    return invalidArgument("{}: scalar is null (count={})", api, count);
  }
  TUTTI_TRY_ASSIGN(const DeviceInfo dev, currentDevice(api));
  const bool isCopy = srcs.size() == 1 && op != DevOp::kPreMulSum;
  if (!isCopy) {
    if (Status s = checkFp8(api, dtype, dev); !s) return s;
  }
  if (isCopy) {
    if (dst == srcs[0]) return Status::ok();
    const cudaError_t e = cudaMemcpyAsync(dst, srcs[0], bytes, cudaMemcpyDeviceToDevice,
                                          static_cast<cudaStream_t>(stream));
    return e == cudaSuccess ? Status::ok() : cudaFailure(api, "cudaMemcpyAsync", e);
  }
  ReduceLaunch l{};
  l.dst = dst;
  l.count = count;
  l.op = op;
  l.threads = kThreads;
  l.stream = stream;
  if (scalar != nullptr) std::memcpy(l.scalar, scalar, dataTypeBytes(dtype));
  size_t next = 0;
  while (next < srcs.size()) {
    int n = 0;
    if (next > 0) {
      l.srcs[n++] = dst;  // a later pass: dst holds the partial result
      l.firstAccumulated = true;
    }
    while (n < static_cast<int>(kMaxSourcesPerLaunch) && next < srcs.size()) {
      l.srcs[n++] = srcs[next++];
    }
    l.nsrcs = n;
    // The 16-byte path needs every pointer at the same offset from a 16-byte boundary.
    const auto misalign = reinterpret_cast<uintptr_t>(dst) % 16;
    bool same = true;
    for (int k = 0; k < n; ++k) same = same && reinterpret_cast<uintptr_t>(l.srcs[k]) % 16 == misalign;
    l.head = same ? static_cast<long>((16 - misalign) % 16 / dataTypeBytes(dtype)) : -1;
    const size_t work = same ? count / (16 / dataTypeBytes(dtype)) + 16 : count;
    l.blocks = blocksFor(work, dev);
    if (const int e = launchReduce(dtype, l); e != 0) return cudaFailure(api, "kernel launch", e);
  }
  return Status::ok();
}

}  // namespace

Status reduce(void* dst, std::span<const void* const> srcs, size_t count, DataType dtype,
              RedOp op, void* stream) {
  constexpr const char* kApi = "kernels::cuda::reduce";
  if (!isValid(op)) return invalidArgument("{}: op is invalid (op={})", kApi, static_cast<int>(op));
  const DevOp dev = op == RedOp::kAvg ? DevOp::kSum : static_cast<DevOp>(static_cast<int>(op));
  return run(kApi, dst, srcs, count, dtype, dev, nullptr, stream);
}

Status preMulSum(void* dst, std::span<const void* const> srcs, size_t count, DataType dtype,
                 const void* scalar, void* stream) {
  return run("kernels::cuda::preMulSum", dst, srcs, count, dtype, DevOp::kPreMulSum, scalar,
             stream);
}

Status scale(void* dst, const void* src, size_t count, DataType dtype, const void* scalar,
             void* stream) {
  const void* srcs[1] = {src};
  return run("kernels::cuda::scale", dst, srcs, count, dtype, DevOp::kPreMulSum, scalar, stream);
}

Status divide(void* buf, size_t count, DataType dtype, int divisor, void* stream) {
  constexpr const char* kApi = "kernels::cuda::divide";
  if (Status s = checkDtype(kApi, dtype, count); !s) return s;
  if (divisor < 1) {
    return invalidArgument("{}: divisor must be positive (divisor={})", kApi, divisor);
  }
  if (count == 0) return Status::ok();
  if (Status s = checkPointer(kApi, "buf", buf, dtype, count); !s) return s;
  TUTTI_TRY_ASSIGN(const DeviceInfo dev, currentDevice(kApi));
  if (Status s = checkFp8(kApi, dtype, dev); !s) return s;  // avg of an fp8 reduction
  const int e =
      detail::launchDivide(dtype, buf, count, divisor, blocksFor(count, dev), kThreads, stream);
  return e == 0 ? Status::ok() : cudaFailure(kApi, "kernel launch", e);
}

Status copy(void* dst, const void* src, size_t count, DataType dtype, void* stream) {
  constexpr const char* kApi = "kernels::cuda::copy";
  if (Status s = checkDtype(kApi, dtype, count); !s) return s;
  if (count == 0) return Status::ok();
  if (dst == nullptr) return invalidArgument("{}: dst is null (count={})", kApi, count);
  if (src == nullptr) return invalidArgument("{}: src is null (count={})", kApi, count);
  const size_t bytes = count * dataTypeBytes(dtype);
  if (dst == src) return Status::ok();
  if (bytesOverlap(dst, bytes, src, bytes)) {
    return invalidArgument("{}: src partially overlaps dst (count={}, bytes={})", kApi, count,
                           bytes);
  }
  const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                                        static_cast<cudaStream_t>(stream));
  return e == cudaSuccess ? Status::ok() : cudaFailure(kApi, "cudaMemcpyAsync", e);
}

Status waitFlag(const volatile uint32_t* flag, void* stream) {
  constexpr const char* kApi = "kernels::cuda::waitFlag";
  if (flag == nullptr) return invalidArgument("{}: flag is null", kApi);
  const int e = detail::launchProxyWait(flag, stream);
  return e == 0 ? Status::ok() : cudaFailure(kApi, "kernel launch", e);
}

}  // namespace tutti::kernels::cuda
