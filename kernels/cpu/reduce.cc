// File: kernels/cpu/reduce.cc
// The public CPU kernel API of kernels/reduce.h: lookups into the kernel table of the active
// instruction set (kernels/cpu/simd_kernels.cc, chosen at run time), and the checked wrappers.
#include "kernels/reduce.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/strings.h"
#include "kernels/cpu/cpu_kernels.h"

namespace tutti::kernels {
namespace {

const cpu::KernelTable& table() {
  static const cpu::KernelTable* const t = cpu::activeTarget().table;
  return *t;
}

// Argument checks shared by the wrappers. Their messages are returned as is (no TUTTI_TRY
// trail): they already name the API and the offending value.
Status checkDtypeAndCount(const char* api, DataType dtype, size_t count) {
  if (!isValid(dtype)) {
    return invalidArgument("{}: dtype is invalid (dtype={})", api, static_cast<int>(dtype));
  }
  if (count > SIZE_MAX / dataTypeBytes(dtype)) {
    return invalidArgument("{}: count is too large for the address space (count={}, dtype={})", api,
                           count, dataTypeName(dtype));
  }
  return Status::ok();
}

Status checkOp(const char* api, RedOp op) {
  if (!isValid(op)) return invalidArgument("{}: op is invalid (op={})", api, static_cast<int>(op));
  return Status::ok();
}

// Checks srcs for reduce/preMulSum: non-empty, no null, none partially overlapping dst.
Status checkSources(const char* api, const void* dst, std::span<const void* const> srcs,
                    size_t count, size_t bytes) {
  if (dst == nullptr) return invalidArgument("{}: dst is null (count={})", api, count);
  for (size_t k = 0; k < srcs.size(); ++k) {
    if (srcs[k] == nullptr) {
      return invalidArgument("{}: srcs[{}] is null (count={}, nsrcs={})", api, k, count,
                             srcs.size());
    }
    if (srcs[k] != dst && bytesOverlap(dst, bytes, srcs[k], bytes)) {
      return invalidArgument("{}: srcs[{}] partially overlaps dst (count={}, nsrcs={})", api, k,
                             count, srcs.size());
    }
  }
  return Status::ok();
}

}  // namespace

Reduce2Fn reduce2Fn(DataType dtype, RedOp op) {
  if (!isValid(dtype) || !isValid(op)) return nullptr;
  return table().reduce2[static_cast<int>(dtype)][static_cast<int>(op)];
}

ReduceNFn reduceNFn(DataType dtype, RedOp op) {
  if (!isValid(dtype) || !isValid(op)) return nullptr;
  return table().reduceN[static_cast<int>(dtype)][static_cast<int>(op)];
}

PreMulSumFn preMulSumFn(DataType dtype) {
  if (!isValid(dtype)) return nullptr;
  return table().preMulSum[static_cast<int>(dtype)];
}

DivideFn divideFn(DataType dtype) {
  if (!isValid(dtype)) return nullptr;
  return table().divide[static_cast<int>(dtype)];
}

ScaleFn scaleFn(DataType dtype) {
  if (!isValid(dtype)) return nullptr;
  return table().scale[static_cast<int>(dtype)];
}

const char* cpuTargetName() { return cpu::activeTarget().name; }

Status reduce2(void* dst, const void* a, const void* b, size_t count, DataType dtype, RedOp op) {
  constexpr const char* kApi = "kernels::reduce2";
  if (Status s = checkDtypeAndCount(kApi, dtype, count); !s) return s;
  if (Status s = checkOp(kApi, op); !s) return s;
  if (count == 0) return Status::ok();
  if (dst == nullptr) return invalidArgument("{}: dst is null (count={})", kApi, count);
  if (a == nullptr) return invalidArgument("{}: a is null (count={})", kApi, count);
  if (b == nullptr) return invalidArgument("{}: b is null (count={})", kApi, count);
  const size_t bytes = count * dataTypeBytes(dtype);
  if (dst != a && bytesOverlap(dst, bytes, a, bytes)) {
    return invalidArgument("{}: a partially overlaps dst (count={}, bytes={})", kApi, count, bytes);
  }
  if (dst != b && bytesOverlap(dst, bytes, b, bytes)) {
    return invalidArgument("{}: b partially overlaps dst (count={}, bytes={})", kApi, count, bytes);
  }
  reduce2Fn(dtype, op)(dst, a, b, count);
  return Status::ok();
}

Status reduce(void* dst, std::span<const void* const> srcs, size_t count, DataType dtype,
              RedOp op) {
  constexpr const char* kApi = "kernels::reduce";
  if (Status s = checkDtypeAndCount(kApi, dtype, count); !s) return s;
  if (Status s = checkOp(kApi, op); !s) return s;
  if (srcs.empty()) return invalidArgument("{}: srcs is empty (count={})", kApi, count);
  if (count == 0) return Status::ok();
  const size_t bytes = count * dataTypeBytes(dtype);
  if (Status s = checkSources(kApi, dst, srcs, count, bytes); !s) return s;
  if (srcs.size() == 1) {
    if (dst != srcs[0]) std::memcpy(dst, srcs[0], bytes);
    return Status::ok();
  }
  reduceNFn(dtype, op)(dst, srcs.data(), srcs.size(), count);
  return Status::ok();
}

Status preMulSum(void* dst, std::span<const void* const> srcs, size_t count, DataType dtype,
                 const void* scalar) {
  constexpr const char* kApi = "kernels::preMulSum";
  if (Status s = checkDtypeAndCount(kApi, dtype, count); !s) return s;
  if (srcs.empty()) return invalidArgument("{}: srcs is empty (count={})", kApi, count);
  if (count == 0) return Status::ok();
  if (scalar == nullptr) return invalidArgument("{}: scalar is null (count={})", kApi, count);
  const size_t bytes = count * dataTypeBytes(dtype);
  if (Status s = checkSources(kApi, dst, srcs, count, bytes); !s) return s;
  preMulSumFn(dtype)(dst, srcs.data(), srcs.size(), count, scalar);
  return Status::ok();
}

Status copy(void* dst, const void* src, size_t count, DataType dtype) {
  constexpr const char* kApi = "kernels::copy";
  if (Status s = checkDtypeAndCount(kApi, dtype, count); !s) return s;
  if (count == 0) return Status::ok();
  if (dst == nullptr) return invalidArgument("{}: dst is null (count={})", kApi, count);
  if (src == nullptr) return invalidArgument("{}: src is null (count={})", kApi, count);
  if (dst != src) std::memmove(dst, src, count * dataTypeBytes(dtype));
  return Status::ok();
}

Status divide(void* buf, size_t count, DataType dtype, int divisor) {
  constexpr const char* kApi = "kernels::divide";
  if (Status s = checkDtypeAndCount(kApi, dtype, count); !s) return s;
  if (divisor < 1) {
    return invalidArgument("{}: divisor must be positive (divisor={})", kApi, divisor);
  }
  if (count == 0) return Status::ok();
  if (buf == nullptr) return invalidArgument("{}: buf is null (count={})", kApi, count);
  divideFn(dtype)(buf, count, divisor);
  return Status::ok();
}

Status scale(void* dst, const void* src, size_t count, DataType dtype, const void* scalar) {
  constexpr const char* kApi = "kernels::scale";
  if (Status s = checkDtypeAndCount(kApi, dtype, count); !s) return s;
  if (count == 0) return Status::ok();
  if (dst == nullptr) return invalidArgument("{}: dst is null (count={})", kApi, count);
  if (src == nullptr) return invalidArgument("{}: src is null (count={})", kApi, count);
  if (scalar == nullptr) return invalidArgument("{}: scalar is null (count={})", kApi, count);
  const size_t bytes = count * dataTypeBytes(dtype);
  if (dst != src && bytesOverlap(dst, bytes, src, bytes)) {
    return invalidArgument("{}: src partially overlaps dst (count={}, bytes={})", kApi, count,
                           bytes);
  }
  scaleFn(dtype)(dst, src, count, scalar);
  return Status::ok();
}

void copyStreaming(void* dstv, const void* srcv, size_t n) {
  auto* dst = static_cast<std::byte*>(dstv);
  const auto* src = static_cast<const std::byte*>(srcv);
#if defined(__SSE2__)
  constexpr size_t kMin = 4096;  // below this, a plain copy (the fence is not free)
  if (n < kMin) {
    std::memcpy(dst, src, n);
    return;
  }
  const size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 64 <= n; i += 64) {
    const auto* s = reinterpret_cast<const __m128i*>(src + i);
    auto* d = reinterpret_cast<__m128i*>(dst + i);
    const __m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1), c = _mm_loadu_si128(s + 2),
                  e = _mm_loadu_si128(s + 3);
    _mm_stream_si128(d, a);
    _mm_stream_si128(d + 1, b);
    _mm_stream_si128(d + 2, c);
    _mm_stream_si128(d + 3, e);
  }
  std::memcpy(dst + i, src + i, n - i);
  _mm_sfence();
#else
  std::memcpy(dst, src, n);
#endif
}

}  // namespace tutti::kernels
