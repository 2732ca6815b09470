// File: core/device/cuda_stream_ops.cc
// The device executors' CUDA calls: StreamOps (core/device/stream_ops.h) and the peer executor's
// PeerDevice (core/device/peer.h) over the CUDA runtime.
#include "base/config.h"
#include "core/device/peer.h"
#include "core/device/stream_ops.h"

#if TUTTI_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <map>
#include <mutex>

#include "kernels/cuda_program.h"
#include "kernels/peer_cuda.h"
#endif

namespace tutti::device {

#if !TUTTI_HAVE_CUDA

StreamOps* cudaStreamOps() { return nullptr; }
PeerDevice* cudaPeerDevice() { return nullptr; }

#else

namespace {

Status failed(const char* call, cudaError_t e) {
  (void)cudaGetLastError();  // clear it, so that the next launch check does not report it again
  return makeStatus(Code::kUnhandledCudaError, "{} failed: {}", call, cudaGetErrorString(e));
}

// Driver functions reached through the runtime (the driver library is never linked: one binary
// runs with and without a GPU). Null when the driver lacks them.
template <class F>
F driverFunction(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<F>(fn);
}

using StreamValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
using StreamValue64Fn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
using PointerAttrsFn = CUresult (*)(unsigned int, CUpointer_attribute*, void**, CUdeviceptr);

Status driverFailure(const char* call, CUresult r) {
  return makeStatus(Code::kUnhandledCudaError, "{} failed: CUresult {}", call, static_cast<int>(r));
}

Status setCudaDevice(int device) {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == device) return Status::ok();
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return failed("cudaSetDevice", e);
  return Status::ok();
}

class CudaStreamOps final : public StreamOps {
 public:
  Status setDevice(int device) override { return setCudaDevice(device); }
  Result<Event> createEvent() override {
    cudaEvent_t ev = nullptr;
    if (cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); e != cudaSuccess)
      return failed("cudaEventCreateWithFlags", e);
    return static_cast<Event>(ev);
  }
  void destroyEvent(Event e) override { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }
  Status record(Event e, Stream s) override {
    if (cudaError_t r = cudaEventRecord(static_cast<cudaEvent_t>(e), static_cast<cudaStream_t>(s));
        r != cudaSuccess)
      return failed("cudaEventRecord", r);
    return Status::ok();
  }
  Status wait(Stream s, Event e) override {
    if (cudaError_t r =
            cudaStreamWaitEvent(static_cast<cudaStream_t>(s), static_cast<cudaEvent_t>(e), 0);
        r != cudaSuccess)
      return failed("cudaStreamWaitEvent", r);
    return Status::ok();
  }
  bool finished(Event e) override {
    const cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(e));
    if (r == cudaErrorNotReady) return false;
    if (r != cudaSuccess) (void)cudaGetLastError();
    return true;
  }
  Status launch(const kernels::program::Program& p, const kernels::program::Buffers& b,
                Stream s) override {
    return kernels::cuda::launchProgram(p, b, s);
  }
  Result<uint64_t> captureId(Stream s) override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    if (cudaError_t e = cudaStreamGetCaptureInfo(static_cast<cudaStream_t>(s), &status, &id);
        e != cudaSuccess)
      return failed("cudaStreamGetCaptureInfo", e);
    if (status == cudaStreamCaptureStatusInvalidated)
      return makeStatus(Code::kUnhandledCudaError,
                        "the stream's graph capture was invalidated by an earlier error");
    return status == cudaStreamCaptureStatusActive ? static_cast<uint64_t>(id) : uint64_t{0};
  }

  Status writeValue(Stream s, uint32_t* addr, uint32_t value) override {
    static const auto fn = driverFunction<StreamValueFn>("cuStreamWriteValue32");
    if (!fn) return makeStatus(Code::kUnhandledCudaError, "cuStreamWriteValue32 is not available");
    if (CUresult r = fn(static_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(addr), value,
                        CU_STREAM_WRITE_VALUE_DEFAULT);
        r != CUDA_SUCCESS)
      return driverFailure("cuStreamWriteValue32", r);
    return Status::ok();
  }
  Status waitAny(Stream s, uint64_t* addr, uint64_t mask) override {
    static const auto fn = driverFunction<StreamValue64Fn>("cuStreamWaitValue64");
    if (!fn) return makeStatus(Code::kUnhandledCudaError, "cuStreamWaitValue64 is not available");
    if (CUresult r = fn(static_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(addr), mask,
                        CU_STREAM_WAIT_VALUE_AND);
        r != CUDA_SUCCESS)
      return driverFailure("cuStreamWaitValue64", r);
    return Status::ok();
  }
  Result<void*> registerHost(void* p, size_t bytes) override {
    if (cudaError_t e =
            cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
        e != cudaSuccess)
      return failed("cudaHostRegister", e);
    void* dev = nullptr;
    if (cudaError_t e = cudaHostGetDevicePointer(&dev, p, 0); e != cudaSuccess) {
      cudaHostUnregister(p);
      return failed("cudaHostGetDevicePointer", e);
    }
    return dev;
  }
  void unregisterHost(void* p) override {
    if (cudaHostUnregister(p) != cudaSuccess) (void)cudaGetLastError();
  }
  Result<Export> exportBuffer(const void* p) override {
    static const auto attrs = driverFunction<PointerAttrsFn>("cuPointerGetAttributes");
    if (!attrs)
      return makeStatus(Code::kUnhandledCudaError, "cuPointerGetAttributes is not available");
    CUdeviceptr base = 0;
    unsigned long long id = 0;
    int ipc = 0;
    CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                   CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE};
    void* out[] = {&base, &id, &ipc};
    if (CUresult r = attrs(3, which, out, reinterpret_cast<CUdeviceptr>(p)); r != CUDA_SUCCESS)
      return driverFailure("cuPointerGetAttributes", r);
    if (!ipc || base == 0)
      return invalidUsage(
          "buffer {} cannot be shared with another process by CUDA IPC (it is not cudaMalloc'd "
          "device memory: host memory, a stream-ordered pool or a cuMem allocation)",
          p);
    Export e;
    e.offset = reinterpret_cast<uintptr_t>(p) - base;
    e.allocation = id;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = handles_.find({base, id});
    if (it == handles_.end()) {
      cudaIpcMemHandle_t h{};
      if (cudaError_t r = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base)); r != cudaSuccess)
        return failed("cudaIpcGetMemHandle", r);
      std::array<std::byte, 64> bytes{};
      static_assert(sizeof(h) == 64);
      std::memcpy(bytes.data(), &h, sizeof h);
      it = handles_
               .emplace(std::make_pair(static_cast<uint64_t>(base), static_cast<uint64_t>(id)),
                        bytes)
               .first;
    }
    e.handle = it->second;
    return e;
  }
  Result<void*> openBuffer(const std::array<std::byte, 64>& handle) override {
    cudaIpcMemHandle_t h{};
    std::memcpy(&h, handle.data(), sizeof h);
    void* base = nullptr;
    if (cudaError_t e = cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess);
        e != cudaSuccess)
      return failed("cudaIpcOpenMemHandle", e);
    return base;
  }
  void closeBuffer(void* base) override {
    if (cudaIpcCloseMemHandle(base) != cudaSuccess) (void)cudaGetLastError();
  }

 private:
  std::mutex mu_;  // handles_
  // IPC handles already made, by (allocation base, buffer id).
  std::map<std::pair<uint64_t, uint64_t>, std::array<std::byte, 64> > handles_;
};

class CudaPeerDevice final : public PeerDevice {
 public:
  Status setDevice(int device) override { return setCudaDevice(device); }
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
  Status upload(void* dst, const void* src, size_t bytes) override {
    // A stream of its own that does not synchronise with the legacy default stream, waited for
    // alone; in relaxed capture mode, so that a first call inside a graph capture may upload
    // (as NCCL does for its own setup during captures).
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    if (cudaError_t e = cudaThreadExchangeStreamCaptureMode(&mode); e != cudaSuccess)
      return failed("cudaThreadExchangeStreamCaptureMode", e);
    cudaStream_t s = nullptr;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (s != nullptr) cudaStreamDestroy(s);
    cudaThreadExchangeStreamCaptureMode(&mode);
    if (e != cudaSuccess) return failed("uploading a peer program", e);
    return Status::ok();
  }
  Status launch(const kernels::peer::Launch& l, const kernels::peer::ProgramHeader& h,
                Stream s) override {
    return kernels::cuda::launchPeer(l, h, s);
  }
  Result<void*> registerHost(void* p, size_t bytes) override {
    return cudaStreamOps()->registerHost(p, bytes);
  }
  void unregisterHost(void* p) override { cudaStreamOps()->unregisterHost(p); }
  Result<PeerMemoryHandle> exportMemory(void* base) override {
    cudaIpcMemHandle_t h{};
    if (cudaError_t e = cudaIpcGetMemHandle(&h, base); e != cudaSuccess)
      return failed("cudaIpcGetMemHandle", e);
    PeerMemoryHandle out{};
    static_assert(sizeof(h) == sizeof(out));
    std::memcpy(out.data(), &h, sizeof h);
    return out;
  }
  Result<void*> openMemory(const PeerMemoryHandle& handle) override {
    return cudaStreamOps()->openBuffer(handle);
  }
  void closeMemory(void* base) override { cudaStreamOps()->closeBuffer(base); }
  Result<BufferExport> exportBuffer(const void* p) override {
    TUTTI_TRY_ASSIGN(const StreamOps::Export e, cudaStreamOps()->exportBuffer(p));
    BufferExport out;
    std::memcpy(out.handle.data(), e.handle.data(), out.handle.size());
    out.offset = e.offset;
    return out;
  }
  Status synchronize(Stream s) override {
    if (cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(s)); e != cudaSuccess)
      return failed("cudaStreamSynchronize", e);
    return Status::ok();
  }
};

}  // namespace

PeerDevice* cudaPeerDevice() {
  static CudaPeerDevice dev;
  return &dev;
}

StreamOps* cudaStreamOps() {
  static CudaStreamOps ops;
  return &ops;
}

#endif  // TUTTI_HAVE_CUDA

}  // namespace tutti::device
