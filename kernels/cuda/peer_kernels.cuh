// File: kernels/cuda/peer_kernels.cuh
// The peer interpreter on the GPU: the device memory policy of kernels/peer_interp.h and the
// kernel template, one CTA per channel. Counters are read with ld.acquire.sys and written after
// __threadfence_system() with st.release.sys (a peer GPU, or the host, reads them); a
// low-latency line is one 16-byte volatile store and load (st/ld.volatile.v2.u64: NCCL's LL
// access), so flag and data arrive together. Every wait is bounded by %globaltimer and polls the
// abort flag (kernels/peer_interp.h's idle()), so a kernel whose peer never comes returns and
// leaves {rank, op, peer, expected, seen} in the rank's ErrorRecord. Instantiated per dtype
// family by peer_int.cu, peer_float.cu and peer_narrow.cu; built with -fmad=false as the
// program kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/peer_launch.h"
#include "kernels/peer_interp.h"

namespace tutti::kernels::cuda::peer_dev {

using peer::Launch;

/// Threads per CTA (one channel).
inline constexpr int kThreads = 512;

// Every member is __host__ __device__ so that the interpreter's TUTTI_HD code compiles for
// both sides; only the device side ever runs.
class DevicePolicy {
 public:
  __device__ explicit DevicePolicy(uint64_t* shared) : shared_(shared) {}

  TUTTI_HD int lane() const {
#if defined(__CUDA_ARCH__)
    return static_cast<int>(threadIdx.x);
#else
    return 0;
#endif
  }
  TUTTI_HD int lanes() const {
#if defined(__CUDA_ARCH__)
    return static_cast<int>(blockDim.x);
#else
    return 1;
#endif
  }
  TUTTI_HD void sync() {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
  TUTTI_HD uint64_t uniform(uint64_t v) {
#if defined(__CUDA_ARCH__)
    __syncthreads();  // every lane has read the previous value
    if (threadIdx.x == 0) *shared_ = v;
    __syncthreads();
    return *shared_;
#else
    return v;
#endif
  }
  TUTTI_HD bool any(bool v) {
#if defined(__CUDA_ARCH__)
    return __syncthreads_or(v ? 1 : 0) != 0;
#else
    return v;
#endif
  }
  TUTTI_HD uint64_t loadAcquire(const uint64_t* p) {
    uint64_t v = 0;
#if defined(__CUDA_ARCH__)
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
#else
    v = *p;
#endif
    return v;
  }
  TUTTI_HD void publish(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
    __threadfence_system();  // the CTA's writes (ordered before by the caller's barrier)
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
    *p = v;
#endif
  }
  TUTTI_HD void llStore(uint64_t* line, uint64_t w0, uint64_t w1) {
#if defined(__CUDA_ARCH__)
    asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(line), "l"(w0), "l"(w1)
                 : "memory");
#else
    line[0] = w0;
    line[1] = w1;
#endif
  }
  TUTTI_HD void llLoad(const uint64_t* line, uint64_t& w0, uint64_t& w1) {
#if defined(__CUDA_ARCH__)
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];"
                 : "=l"(w0), "=l"(w1)
                 : "l"(line)
                 : "memory");
#else
    w0 = line[0];
    w1 = line[1];
#endif
  }
  // All lanes together: 16-byte units when both addresses allow, else 4-byte, else bytes.
  TUTTI_HD void copy(void* dst, const void* src, uint64_t bytes) {
    if (dst == src || bytes == 0) return;
    const uint64_t d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
    const uint64_t step = static_cast<uint64_t>(lanes());
    uint64_t done = 0;
    if (((d | s) & 15) == 0) {
      const uint64_t n = bytes / 16;
      for (uint64_t i = lane(); i < n; i += step)
        reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
      done = n * 16;
    } else if (((d | s) & 3) == 0) {
      const uint64_t n = bytes / 4;
      for (uint64_t i = lane(); i < n; i += step)
        reinterpret_cast<uint32_t*>(dst)[i] = reinterpret_cast<const uint32_t*>(src)[i];
      done = n * 4;
    }
    for (uint64_t i = done + lane(); i < bytes; i += step)
      static_cast<unsigned char*>(dst)[i] = static_cast<const unsigned char*>(src)[i];
  }
  TUTTI_HD uint64_t nowNs() {
    uint64_t t = 0;
#if defined(__CUDA_ARCH__)
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
#endif
    return t;
  }
  TUTTI_HD bool aborted(const uint32_t* flag) {
    return flag != nullptr && *reinterpret_cast<const volatile uint32_t*>(flag) != 0;
  }
  TUTTI_HD void backoff(uint32_t idlePasses) {
#if defined(__CUDA_ARCH__)
    if (idlePasses > 64) __nanosleep(200);  // a long wait leaves the memory system alone
#else
    (void)idlePasses;
#endif
  }
  TUTTI_HD void shake() {}
  TUTTI_HD bool claim(uint32_t* word) {
#if defined(__CUDA_ARCH__)
    return atomicCAS(word, 0u, 1u) == 0u;
#else
    return *word == 0 ? (*word = 1, true) : false;
#endif
  }
  TUTTI_HD void release32(uint32_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
    __threadfence_system();
#endif
    *reinterpret_cast<volatile uint32_t*>(p) = v;
  }
  TUTTI_HD uint32_t acquire32(const uint32_t* p) {
    const uint32_t v = *reinterpret_cast<const volatile uint32_t*>(p);
#if defined(__CUDA_ARCH__)
    __threadfence_system();
#endif
    return v;
  }

 private:
  uint64_t* shared_;
};

}  // namespace tutti::kernels::cuda::peer_dev

// Global namespace, with NCCL's prefix (DESIGN section 8): one CTA per channel.
template <typename T, tutti::RedOp R>
__global__ void __launch_bounds__(tutti::kernels::cuda::peer_dev::kThreads)
    ncclDevKernel_Peer(tutti::kernels::peer::Launch launch) {
  __shared__ uint64_t broadcast;
  tutti::kernels::cuda::peer_dev::DevicePolicy policy(&broadcast);
  tutti::kernels::peer::Interp<T, R, tutti::kernels::cuda::peer_dev::DevicePolicy>(
      launch, static_cast<int>(blockIdx.x), policy)
      .run();
}

namespace tutti::kernels::cuda::peer_dev {

template <typename T, RedOp R>
int launchWith(const Launch& l, int blocks, void* stream) {
  ncclDevKernel_Peer<T, R><<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(l);
  return static_cast<int>(cudaGetLastError());
}

/// The op's kernel for element type T; programs without arithmetic take the sum kernel.
template <typename T>
int launchTyped(const Launch& l, RedOp op, int blocks, void* stream) {
  switch (op) {
    case RedOp::kProd:
      return launchWith<T, RedOp::kProd>(l, blocks, stream);
    case RedOp::kMax:
      return launchWith<T, RedOp::kMax>(l, blocks, stream);
    case RedOp::kMin:
      return launchWith<T, RedOp::kMin>(l, blocks, stream);
    default:
      return launchWith<T, RedOp::kSum>(l, blocks, stream);
  }
}

}  // namespace tutti::kernels::cuda::peer_dev
