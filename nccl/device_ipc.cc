// File: nccl/device_ipc.cc
// The shared-GPU path of nccl/device_ipc.h: the init-time exchange, the staging buffers and
// their mappings, and the per-collective copy-in / barrier / build-output / barrier steps.
#include "nccl/device_ipc.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/config.h"
#include "core/env.h"
#include "core/log.h"
#include "nccl/device.h"

#if TUTTI_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/cuda_reduce.h"
#endif

namespace tutti::nccl {
namespace {

TUTTI_PARAM_INT(kDeviceIpc, "TUTTI_DEVICE_IPC", nullptr, "NCCL", 1,
                "ranks that share one GPU exchange device buffers directly (CUDA IPC) instead of "
                "staging through host memory (0 disables)");
// 64 MiB: a 2-rank allreduce of 128 MiB runs in two chunks; 4 ranks of one GPU hold 256 MiB.
TUTTI_PARAM_INT(kStagingBytes, "TUTTI_DEVICE_STAGING_BYTES", nullptr, "NCCL", 64 << 20,
                "device staging per rank of the shared-GPU path (bytes)");

// What each rank tells the others at init.
struct DeviceInfo {
  unsigned char uuid[16];
  int32_t pid;
  int32_t device;
};

}  // namespace

#if !TUTTI_HAVE_CUDA

Status exchangeDeviceInfo(CommState&) { return Status::ok(); }
bool ipcEligible(const CommState&, const std::vector<PendingOp>&) { return false; }
Status runIpcBatch(CommState&, const std::vector<PendingOp>& ops) {
  return invalidUsage("{}: device memory needs a tutti built with CUDA", ops.front().api);
}

#else

namespace {

Status cudaFailure(const char* api, const char* call, cudaError_t e) {
  (void)cudaGetLastError();
  return makeStatus(Code::kUnhandledCudaError, "{}: {} failed: {}", api, call,
                    cudaGetErrorString(e));
}

#define IPC_CUDA(api, call)                                                   \
  do {                                                                        \
    const cudaError_t e_ = (call);                                            \
    if (e_ != cudaSuccess) return cudaFailure(api, #call, e_);                \
  } while (0)

}  // namespace

/// A communicator's staging buffer, the peers' (mapped), and the worker's stream.
class DeviceIpc {
 public:
  ~DeviceIpc() {
    for (size_t q = 0; q < peers.size(); ++q)
      if (opened[q]) cudaIpcCloseMemHandle(peers[q]);
    if (stream) cudaStreamDestroy(stream);
    if (stage) cudaFree(stage);
  }

  /// Collective, at init: allocate, publish and map. At init because cudaMalloc (and the
  /// mapping calls) may wait for the device, and later a ncclDevKernel_ProxyWait of this very
  /// process may be waiting for the worker that would make the call.
  Status setUp(CommState& s, const char* api) {
    if (s.cudaDev >= 0) IPC_CUDA(api, cudaSetDevice(s.cudaDev));
    const int64_t want = std::max<int64_t>(kStagingBytes.get(), 1 << 20);
    capacity = static_cast<size_t>(want);
    IPC_CUDA(api, cudaMalloc(&stage, capacity));
    IPC_CUDA(api, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    struct Entry {
      cudaIpcMemHandle_t handle;
      uint64_t address;
    } mine{};
    IPC_CUDA(api, cudaIpcGetMemHandle(&mine.handle, stage));
    mine.address = reinterpret_cast<uintptr_t>(stage);
    std::vector<Entry> all(static_cast<size_t>(s.nranks));
    TUTTI_TRY(s.comm.allGather(&mine, all.data(), sizeof(Entry), DataType::kUint8));
    peers.assign(all.size(), nullptr);
    opened.assign(all.size(), false);
    const int32_t pid = static_cast<int32_t>(getpid());
    for (size_t q = 0; q < all.size(); ++q) {
      if (s.devicePids[q] == pid) {  // a thread of this process: the same address space
        peers[q] = reinterpret_cast<void*>(static_cast<uintptr_t>(all[q].address));
        continue;
      }
      IPC_CUDA(api, cudaIpcOpenMemHandle(&peers[q], all[q].handle,
                                         cudaIpcMemLazyEnablePeerAccess));
      opened[q] = true;
    }
    return Status::ok();
  }

  void* stage = nullptr;
  size_t capacity = 0;
  std::vector<void*> peers;
  std::vector<bool> opened;
  cudaStream_t stream = nullptr;
};

Status exchangeDeviceInfo(CommState& s) {
  DeviceInfo mine{};
  mine.pid = static_cast<int32_t>(getpid());
  mine.device = -1;
  if (cudaDevicePresent() && s.cudaDev >= 0) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, s.cudaDev) == cudaSuccess) {
      std::memcpy(mine.uuid, prop.uuid.bytes, sizeof mine.uuid);
      mine.device = s.cudaDev;
    } else {
      (void)cudaGetLastError();
    }
  }
  std::vector<DeviceInfo> all(static_cast<size_t>(s.nranks));
  TUTTI_TRY(s.comm.allGather(&mine, all.data(), sizeof(DeviceInfo), DataType::kUint8));
  bool same = mine.device >= 0;
  for (const DeviceInfo& d : all)
    same = same && d.device >= 0 && std::memcmp(d.uuid, mine.uuid, sizeof mine.uuid) == 0;
  s.devicePids.clear();
  for (const DeviceInfo& d : all) s.devicePids.push_back(d.pid);
  s.deviceLocal = same;
  if (!same || s.nranks < 2 || kDeviceIpc.get() == 0) return Status::ok();
  auto ipc = std::make_shared<DeviceIpc>();
  TUTTI_TRY(ipc->setUp(s, "ncclCommInitRank"));
  s.ipc = std::move(ipc);
  TUTTI_LOG_INFO(Subsys::kInit,
                 "comm {} rank {}: all {} ranks share GPU {}: device buffers move through CUDA "
                 "IPC staging of {} bytes per rank",
                 static_cast<const void*>(&s), s.rank, s.nranks, s.cudaDev, s.ipc->capacity);
  return Status::ok();
}

bool ipcEligible(const CommState& s, const std::vector<PendingOp>& ops) {
  if (!s.ipc) return false;
  return std::all_of(ops.begin(), ops.end(),
                     [](const PendingOp& o) { return o.kind == PendingOp::Kind::kColl; });
}

namespace {

// One collective in chunks. The staging's first half holds the rank's input chunk, or, for
// collectives whose input has one block per rank (reduce-scatter, all-to-all, scatter), block
// b's chunk at b*len. The second half builds outputs that are not device memory (kernels cannot
// write them). The chunk length depends only on the collective, so that every rank cuts the
// same chunks whatever memory it passed.
Status runIpcOp(CommState& s, DeviceIpc& d, const PendingOp& op) {
  const char* api = op.api;
  const size_t P = static_cast<size_t>(s.nranks), me = static_cast<size_t>(s.rank);
  const size_t root = static_cast<size_t>(op.root);
  const size_t e = dataTypeBytes(op.dtype), n = op.count;
  const cudaStream_t st = d.stream;
  const Coll c = op.coll;
  const bool blocks = c == Coll::kReduceScatter || c == Coll::kAllToAll || c == Coll::kScatter;
  const bool pieces = c == Coll::kAllGather || c == Coll::kAllToAll || c == Coll::kGather;
  const bool reduces = c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
  const size_t half = d.capacity / 2;
  const size_t maxLen = std::max<size_t>(1, half / e / (blocks || pieces ? P : 1));
  auto* stage = static_cast<std::byte*>(d.stage);
  std::byte* scratch = stage + half;
  auto* in = static_cast<const std::byte*>(op.send);
  size_t inBytes = 0, outBytes = 0;
  ioBytes(op, s.rank, s.nranks, &inBytes, &outBytes);
  // Output written by kernels must be device memory: otherwise build it in scratch, copy after.
  std::byte* out = static_cast<std::byte*>(op.recv);
  const bool outDevice = outBytes == 0 || isDeviceMemory(op.recv);
  const bool inDevice = inBytes == 0 || isDeviceMemory(op.send);

  // Device-to-device copies are one-source reduce kernels, not cudaMemcpyAsync: CUDA may order a
  // copy within one device behind other streams' work, and the ProxyWait kernel on the caller's
  // stream waits for this very worker.
  auto copy = [&](std::byte* dst, const void* src, size_t len, bool device) -> Status {
    if (device) {
      const void* srcs[1] = {src};
      return kernels::cuda::reduce(dst, srcs, len, op.dtype, RedOp::kSum, st);
    }
    IPC_CUDA(api, cudaMemcpyAsync(dst, src, len * e, cudaMemcpyDefault, st));
    return Status::ok();
  };
  auto copyIn = [&](std::byte* dst, const std::byte* src, size_t len) -> Status {
    if (op.preMul && inDevice)
      return kernels::cuda::scale(dst, src, len, op.dtype, op.scalar.data(), st);
    TUTTI_TRY(copy(dst, src, len, inDevice));
    if (op.preMul) return kernels::cuda::scale(dst, dst, len, op.dtype, op.scalar.data(), st);
    return Status::ok();
  };
  auto reduceInto = [&](std::byte* dst, size_t byteOffset, size_t len) -> Status {
    std::vector<const void*> srcs(P);
    for (size_t q = 0; q < P; ++q) srcs[q] = static_cast<const std::byte*>(d.peers[q]) + byteOffset;
    TUTTI_TRY(kernels::cuda::reduce(dst, srcs, len, op.dtype, op.op, st));
    if (op.op == RedOp::kAvg) TUTTI_TRY(kernels::cuda::divide(dst, len, op.dtype, s.nranks, st));
    return Status::ok();
  };

  for (size_t off = 0; off < n;) {
    const size_t len = std::min(maxLen, n - off);
    // 1. this rank's input chunk into its staging
    const bool sends = !((c == Coll::kBroadcast || c == Coll::kScatter) && me != root);
    if (sends) {
      if (blocks) {
        for (size_t b = 0; b < P; ++b)
          TUTTI_TRY(copyIn(stage + b * len * e, in + (b * n + off) * e, len));
      } else {
        TUTTI_TRY(copyIn(stage, in + off * e, len));
      }
    }
    IPC_CUDA(api, cudaStreamSynchronize(st));
    TUTTI_TRY(s.comm.barrier());
    // 2. this rank's output chunk from every staging (rank order)
    const bool gets = !((c == Coll::kReduce || c == Coll::kGather) && me != root);
    if (gets) {
      std::byte* dst = outDevice ? out : scratch;
      auto at = [&](size_t q) {  // where piece q of this chunk goes
        return outDevice ? out + (q * n + off) * e : dst + q * len * e;
      };
      if (reduces) {
        TUTTI_TRY(reduceInto(outDevice ? out + off * e : dst,
                             c == Coll::kReduceScatter ? me * len * e : 0, len));
      } else if (c == Coll::kBroadcast) {
        TUTTI_TRY(copy(at(0), d.peers[root], len, true));
      } else if (c == Coll::kScatter) {
        TUTTI_TRY(
            copy(at(0), static_cast<const std::byte*>(d.peers[root]) + me * len * e, len, true));
      } else {  // allgather, gather: piece q is rank q's chunk; all-to-all: block me of rank q
        for (size_t q = 0; q < P; ++q)
          TUTTI_TRY(copy(at(q),
                         static_cast<const std::byte*>(d.peers[q]) +
                             (c == Coll::kAllToAll ? me * len * e : 0),
                         len, true));
      }
      if (!outDevice) {
        for (size_t q = 0; q < (pieces ? P : 1); ++q)
          TUTTI_TRY(copy(out + ((pieces ? q * n : 0) + off) * e, dst + q * len * e, len, false));
      }
    }
    IPC_CUDA(api, cudaStreamSynchronize(st));
    TUTTI_TRY(s.comm.barrier());  // every rank has read the staging: it may be refilled
    off += len;
  }
  return Status::ok();
}

}  // namespace

Status runIpcBatch(CommState& s, const std::vector<PendingOp>& ops) {
  if (!s.ipc) return internalError("{}: the shared-GPU staging was not set up", ops.front().api);
  if (s.cudaDev >= 0) IPC_CUDA(ops.front().api, cudaSetDevice(s.cudaDev));
  for (const PendingOp& op : ops) {
    if (op.count == 0) continue;
    TUTTI_TRY(runIpcOp(s, *s.ipc, op));
  }
  return Status::ok();
}

#endif  // TUTTI_HAVE_CUDA

}  // namespace tutti::nccl
