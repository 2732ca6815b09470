// File: kernels/cuda/proxy_wait.cu
// The kernel that holds a stream until the host proxy has finished a staged operation
// (core/device/staged.h): one thread polls a word of mapped pinned host memory.
#include <cuda_runtime.h>

#include "kernels/cuda/launch.h"

// Global namespace, so that profilers that classify kernels by the ncclDevKernel_ prefix count
// it as communication (DESIGN section 8). The sleep between reads keeps the polling from
// flooding the PCIe link; 1 us is well below the proxy's own latency.
__global__ void ncclDevKernel_ProxyWait(const volatile unsigned* flag) {
  while (*flag == 0) __nanosleep(1000);
}

namespace tutti::kernels::cuda::detail {

int launchProxyWait(const volatile unsigned* flag, void* stream) {
  ncclDevKernel_ProxyWait<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(flag);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace tutti::kernels::cuda::detail
