// File: core/device/cuda_peer_device.cc
// The peer executor's device operations over the CUDA runtime (core/device/peer.h).
#include "base/config.h"
#include "core/device/peer.h"

#if TUTTI_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <cstring>

#include "kernels/peer_cuda.h"
#endif

namespace tutti::device {

#if !TUTTI_HAVE_CUDA

PeerDevice* cudaPeerDevice() { return nullptr; }

#else

namespace {

Status failed(const char* call, cudaError_t e) {
  (void)cudaGetLastError();  // clear it, so that the next launch check does not report it again
  return makeStatus(Code::kUnhandledCudaError, "{} failed: {}", call, cudaGetErrorString(e));
}

class CudaPeerDevice final : public PeerDevice {
 public:
  Status setDevice(int device) override {
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current == device) return Status::ok();
    if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return failed("cudaSetDevice", e);
    return Status::ok();
  }
  Result<int> currentDevice() override {
    int d = -1;
    if (cudaError_t e = cudaGetDevice(&d); e != cudaSuccess) return failed("cudaGetDevice", e);
    return d;
  }
  Result<void*> allocDevice(size_t bytes) override {
    void* p = nullptr;
    if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) return failed("cudaMalloc", e);
    // Zeroed on a stream of its own that does not synchronise with the legacy default stream,
    // and waited for alone: kernels of other communicators may be waiting for their peers.
    cudaStream_t s = nullptr;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaMemsetAsync(p, 0, bytes, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (s != nullptr) cudaStreamDestroy(s);
    if (e != cudaSuccess) {
      cudaFree(p);
      return failed("zeroing the peer arena", e);
    }
    return p;
  }
  void freeDevice(void* p) override { cudaFree(p); }
  Result<void*> allocMapped(size_t bytes) override {
    void* p = nullptr;
    if (cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
        e != cudaSuccess)
      return failed("cudaHostAlloc", e);
    std::memset(p, 0, bytes);
    void* dev = nullptr;
    if (cudaError_t e = cudaHostGetDevicePointer(&dev, p, 0); e != cudaSuccess || dev != p) {
      cudaFreeHost(p);
      if (e != cudaSuccess) return failed("cudaHostGetDevicePointer", e);
      return invalidUsage(
          "peer executor: mapped host memory has another address on the device "
          "(no unified addressing)");
    }
    return p;
  }
  void freeMapped(void* p) override { cudaFreeHost(p); }
  Status enablePeerAccess(int peer) override {
    int current = -1;
    if (cudaError_t e = cudaGetDevice(&current); e != cudaSuccess)
      return failed("cudaGetDevice", e);
    if (peer == current) return Status::ok();
    int can = 0;
    if (cudaError_t e = cudaDeviceCanAccessPeer(&can, current, peer); e != cudaSuccess)
      return failed("cudaDeviceCanAccessPeer", e);
    if (!can)
      return invalidUsage("peer executor: device {} cannot access device {}'s memory (no P2P)",
                          current, peer);
    const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();
      return Status::ok();
    }
    if (e != cudaSuccess) return failed("cudaDeviceEnablePeerAccess", e);
    return Status::ok();
  }
  Status upload(void* dst, const void* src, size_t bytes, Stream s) override {
    if (cudaError_t e =
            cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(s));
        e != cudaSuccess)
      return failed("cudaMemcpyAsync", e);
    return Status::ok();
  }
  Status launch(const kernels::peer::Launch& l, const kernels::peer::ProgramHeader& h,
                Stream s) override {
    return kernels::cuda::launchPeer(l, h, s);
  }
};

}  // namespace

PeerDevice* cudaPeerDevice() {
  static CudaPeerDevice dev;
  return &dev;
}

#endif  // TUTTI_HAVE_CUDA

}  // namespace tutti::device
