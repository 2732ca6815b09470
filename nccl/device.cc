// File: nccl/device.cc
// Staged, stream-ordered operations on device memory (nccl/device.h): the pinned staging pool of
// a communicator, the jobs, and the host functions the streams call.
#include "nccl/device.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>

#include "base/config.h"
#include "base/log.h"

#if TUTTI_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/cuda_reduce.h"
#endif

namespace tutti::nccl {

#if !TUTTI_HAVE_CUDA

MemoryKind memoryKind(const void*) { return {}; }

Status enqueueDevice(const std::shared_ptr<CommState>&, std::vector<PendingOp> ops) {
  return invalidUsage("{}: device memory needs a tutti built with CUDA", ops.front().api);
}

#else

MemoryKind memoryKind(const void* p) {
  if (!p || !cudaDevicePresent()) return {};
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // unknown to CUDA: plain host memory
    return {};
  }
  MemoryKind k;
  k.device = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
  k.reachable = k.device || (attr.type == cudaMemoryTypeHost && attr.devicePointer == p);
  return k;
}

namespace {

constexpr uint32_t kPending = 0, kDone = 1, kFailed = 2;

// Staging blocks are powers of two from 64 KiB, so that a pool serves calls of varying sizes.
constexpr size_t kMinBlock = 64 << 10;
// Flags: one 64-byte line each, carved from 64 KiB of mapped pinned memory at a time.
constexpr size_t kFlagSlab = 64 << 10, kFlagStride = 64;

Status cudaFailure(const char* api, const char* call, cudaError_t e) {
  (void)cudaGetLastError();  // reset, so that the next launch check does not report this one
  return makeStatus(Code::kUnhandledCudaError, "{}: {} failed: {}", api, call,
                    cudaGetErrorString(e));
}

// Allocations made while a stream of this thread is being captured: relaxed mode allows them in
// every capture mode (NCCL does the same around its own).
class RelaxedCapture {
 public:
  RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

}  // namespace

class DeviceQueue;

namespace {

struct Block {
  std::byte* host = nullptr;
  size_t bytes = 0;
};

// One staged batch. Eager jobs are deleted by the retire host function once their stream has
// copied the results back; captured ones live as long as the communicator (their graph may be
// replayed at any time).
struct Job {
  DeviceQueue* queue = nullptr;
  CommState* comm = nullptr;  // for replays: a communicator outlives the graphs that use it
  std::vector<PendingOp> ops;
  std::vector<Block> blocks;
  uint32_t* flag = nullptr;  // host address; the kernel reads flagDev
  uint32_t* flagDev = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  bool armed = false;  // the stream has copied the inputs in (eager jobs)
};

void setFlag(Job& j, uint32_t v) {
  std::atomic_ref<uint32_t>(*j.flag).store(v, std::memory_order_release);
}

// Runs the batch on the host engine and releases the stream. The job may be freed as soon as
// the flag is written: nothing of it is touched afterwards.
void runJob(CommState& comm, Job& j) {
  Status st = runBatch(comm, j.ops, fusionBytes());
  if (!st.isOk()) {
    fail(st, &comm);
    comm.recordAsync(st);
  }
  setFlag(j, st.isOk() ? kDone : kFailed);
}

}  // namespace

/// A communicator's pinned staging memory and its jobs in flight.
class DeviceQueue {
 public:
  ~DeviceQueue() {
    for (auto& j : captured_) delete j;
    for (void* p : allocations_) cudaFreeHost(p);
  }

  /// Waits (at most `limit`) until every eager job has retired. False: some still hold memory.
  bool drain(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return inflight_ == 0; });
  }

  Result<Block> acquire(size_t bytes, const char* api) {
    size_t size = kMinBlock;
    while (size < bytes) size <<= 1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(size);
      if (it != free_.end()) {
        Block b{it->second, size};
        free_.erase(it);
        return b;
      }
    }
    void* p = nullptr;
    {
      RelaxedCapture relaxed;
      const cudaError_t e = cudaHostAlloc(&p, size, cudaHostAllocPortable | cudaHostAllocMapped);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return systemError("{}: cannot allocate {} bytes of pinned staging memory: {}", api, size,
                           cudaGetErrorString(e));
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    allocations_.push_back(p);
    return Block{static_cast<std::byte*>(p), size};
  }

  Status acquireFlag(Job& j, const char* api) {
    std::lock_guard<std::mutex> lock(mu_);
    if (freeFlags_.empty()) {
      void* p = nullptr;
      RelaxedCapture relaxed;
      cudaError_t e = cudaHostAlloc(&p, kFlagSlab, cudaHostAllocPortable | cudaHostAllocMapped);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return systemError("{}: cannot allocate {} bytes of mapped pinned memory: {}", api,
                           kFlagSlab, cudaGetErrorString(e));
      }
      std::memset(p, 0, kFlagSlab);
      allocations_.push_back(p);
      for (size_t off = 0; off < kFlagSlab; off += kFlagStride)
        freeFlags_.push_back(reinterpret_cast<uint32_t*>(static_cast<std::byte*>(p) + off));
    }
    uint32_t* flag = freeFlags_.back();
    void* dev = nullptr;
    const cudaError_t e = cudaHostGetDevicePointer(&dev, flag, 0);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return cudaFailure(api, "cudaHostGetDevicePointer", e);
    }
    freeFlags_.pop_back();
    j.flag = flag;
    j.flagDev = static_cast<uint32_t*>(dev);
    return Status::ok();
  }

  /// Returns a job's memory to the pool and deletes it (a job not yet enqueued, or retired).
  void recycle(Job* j) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Block& b : j->blocks) free_.emplace(b.bytes, b.host);
    if (j->flag) freeFlags_.push_back(j->flag);
    delete j;
  }

  void addInflight() {
    std::lock_guard<std::mutex> lock(mu_);
    ++inflight_;
  }

  void addCaptured(Job* j) {
    std::lock_guard<std::mutex> lock(mu_);
    captured_.push_back(j);
  }

  /// Host function at the end of an eager job's stream work.
  static void CUDART_CB retire(void* p) {
    Job* j = static_cast<Job*>(p);
    DeviceQueue* q = j->queue;
    std::lock_guard<std::mutex> lock(q->mu_);
    for (const Block& b : j->blocks) q->free_.emplace(b.bytes, b.host);
    q->freeFlags_.push_back(j->flag);
    delete j;
    --q->inflight_;
    q->cv_.notify_all();  // under the lock: the queue cannot be freed before this returns
  }

  /// Events that join a group's other streams to the job's stream (one pair is enough: an
  /// event can be recorded again once the waits on it are enqueued).
  Result<std::pair<cudaEvent_t, cudaEvent_t>> joinEvents(const char* api) {
    if (!events_[0]) {
      for (auto& ev : events_) {
        const cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
        if (e != cudaSuccess) return cudaFailure(api, "cudaEventCreateWithFlags", e);
      }
    }
    return std::make_pair(events_[0], events_[1]);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int inflight_ = 0;
  std::multimap<size_t, std::byte*> free_;
  std::vector<uint32_t*> freeFlags_;
  std::vector<void*> allocations_;
  std::vector<Job*> captured_;
  cudaEvent_t events_[2] = {nullptr, nullptr};
};

namespace {

void CUDART_CB armJob(void* p) {
  Job* j = static_cast<Job*>(p);
  std::lock_guard<std::mutex> lock(j->mu);
  j->armed = true;
  j->cv.notify_all();
}

// Host function of a captured job, at each replay: the inputs are in; run it on the proxy.
void CUDART_CB postJob(void* p) {
  Job* j = static_cast<Job*>(p);
  setFlag(*j, kPending);
  j->comm->worker.submit([j] { runJob(*j->comm, *j); });
}

DeviceQueue& queueOf(CommState& s) {
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.device) {
    // A queue whose eager jobs do not retire in time (a stream that never reaches them) is left
    // allocated: its host functions may still run.
    s.device = std::shared_ptr<DeviceQueue>(new DeviceQueue, [](DeviceQueue* q) {
      if (q->drain(std::chrono::seconds(10))) {
        delete q;
      } else {
        TUTTI_LOG_WARN(Subsys::kInit,
                       "device staging: jobs still in flight at communicator destruction; "
                       "their pinned memory is not freed");
      }
    });
  }
  return *s.device;
}

// One rank: every collective's output is its input (avg divides by 1), so a batch of plain
// collectives on one stream is a device copy per out-of-place call, in issue order, and sends to
// self are copies into the matching receives. False (nothing enqueued): the batch needs the
// staged path (premulsum, communicator tasks, several streams, an init still running, unpaired
// sends), which also reports its errors.
bool enqueueSingleRank(CommState& s, const std::vector<PendingOp>& ops, Status* st) {
  if (s.nranks != 1 || !s.ready.load()) return false;
  const cudaStream_t stream = ops.front().stream;
  std::vector<const PendingOp*> sends, recvs;
  for (const PendingOp& op : ops) {
    if (op.kind == PendingOp::Kind::kTask || op.preMul || op.stream != stream) return false;
    if (op.kind == PendingOp::Kind::kSend) sends.push_back(&op);
    if (op.kind == PendingOp::Kind::kRecv) recvs.push_back(&op);
  }
  if (sends.size() != recvs.size()) return false;
  for (size_t k = 0; k < sends.size(); ++k)
    if (sends[k]->count * dataTypeBytes(sends[k]->dtype) !=
        recvs[k]->count * dataTypeBytes(recvs[k]->dtype))
      return false;
  auto copy = [&](void* dst, const void* src, size_t bytes, const char* api) {
    if (bytes == 0 || dst == src || !st->isOk()) return;
    const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream);
    if (e != cudaSuccess) *st = cudaFailure(api, "cudaMemcpyAsync", e);
  };
  for (const PendingOp& op : ops) {
    if (op.kind != PendingOp::Kind::kColl) continue;
    size_t in = 0, out = 0;
    ioBytes(op, 0, 1, &in, &out);
    copy(op.recv, op.send, std::min(in, out), op.api);
  }
  for (size_t k = 0; k < sends.size(); ++k)
    copy(recvs[k]->recv, sends[k]->send, recvs[k]->count * dataTypeBytes(recvs[k]->dtype),
         recvs[k]->api);
  return true;
}

}  // namespace

Status enqueueDevice(const std::shared_ptr<CommState>& comm, std::vector<PendingOp> ops) {
  CommState& s = *comm;
  if (Status st; enqueueSingleRank(s, ops, &st)) return st;
  // The job runs on the stream of the first device operation (tasks have none); the batch's
  // other streams join it.
  const auto lead =
      std::find_if(ops.begin(), ops.end(), [](const PendingOp& o) { return o.device(); });
  const char* api = lead->api;
  const cudaStream_t stream = lead->stream;
  std::vector<cudaStream_t> others;
  for (const PendingOp& op : ops)
    if (op.kind != PendingOp::Kind::kTask && op.stream != stream &&
        std::find(others.begin(), others.end(), op.stream) == others.end())
      others.push_back(op.stream);

  // Device ranges read and written, and the staging that mirrors them.
  std::vector<Span> all, ins, outs;
  for (const PendingOp& op : ops) {
    if (!op.device()) continue;
    size_t in = 0, out = 0;
    ioBytes(op, s.rank, s.nranks, &in, &out);
    const auto send = reinterpret_cast<uintptr_t>(op.send);
    const auto recv = reinterpret_cast<uintptr_t>(op.recv);
    if (op.sendDevice) {
      ins.push_back({send, send + in});
      all.push_back(ins.back());
    }
    if (op.recvDevice) {
      outs.push_back({recv, recv + out});
      all.push_back(outs.back());
    }
  }
  all = mergeSpans(std::move(all));
  ins = mergeSpans(std::move(ins));
  outs = mergeSpans(std::move(outs));

  DeviceQueue& q = queueOf(s);
  auto* job = new Job;
  job->queue = &q;
  job->comm = &s;
  for (const Span& sp : all) {
    auto b = q.acquire(sp.end - sp.begin, api);
    if (!b.isOk()) {
      q.recycle(job);
      return b.status();
    }
    job->blocks.push_back(*b);
  }
  if (Status f = q.acquireFlag(*job, api); !f.isOk()) {
    q.recycle(job);
    return f;
  }
  setFlag(*job, kPending);
  auto host = [&](uintptr_t dev) -> std::byte* {
    for (size_t k = 0; k < all.size(); ++k)
      if (dev >= all[k].begin && dev < all[k].end)
        return job->blocks[k].host + (dev - all[k].begin);
    return nullptr;
  };
  for (PendingOp& op : ops) {
    if (op.sendDevice) op.send = host(reinterpret_cast<uintptr_t>(op.send));
    if (op.recvDevice) op.recv = host(reinterpret_cast<uintptr_t>(op.recv));
    op.stream = nullptr;  // the proxy must not wait on the stream that waits on it
  }
  job->ops = std::move(ops);

  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaError_t e = cudaStreamIsCapturing(stream, &capture); e != cudaSuccess) {
    q.recycle(job);
    return cudaFailure(api, "cudaStreamIsCapturing", e);
  }
  const bool captured = capture == cudaStreamCaptureStatusActive;

  // Before the host function, a failure leaves nothing behind that matters: copies into staging.
  std::pair<cudaEvent_t, cudaEvent_t> ev{};
  if (!others.empty()) {
    auto e = q.joinEvents(api);
    if (!e.isOk()) {
      q.recycle(job);
      return e.status();
    }
    ev = *e;
    for (cudaStream_t o : others) {
      cudaError_t r = cudaEventRecord(ev.first, o);
      if (r == cudaSuccess) r = cudaStreamWaitEvent(stream, ev.first, 0);
      if (r != cudaSuccess) {
        q.recycle(job);
        return cudaFailure(api, "joining the group's streams", r);
      }
    }
  }
  for (const Span& sp : ins) {
    const cudaError_t e =
        cudaMemcpyAsync(host(sp.begin), reinterpret_cast<const void*>(sp.begin),
                        sp.end - sp.begin, cudaMemcpyDeviceToHost, stream);
    if (e != cudaSuccess) {
      q.recycle(job);
      return cudaFailure(api, "cudaMemcpyAsync (device to host)", e);
    }
  }
  if (cudaError_t e = cudaLaunchHostFunc(stream, captured ? postJob : armJob, job);
      e != cudaSuccess) {
    q.recycle(job);
    return cudaFailure(api, "cudaLaunchHostFunc", e);
  }

  // From here the stream holds the job: it is run (or failed) by the proxy in every case.
  if (captured) {
    q.addCaptured(job);
  } else {
    q.addInflight();
    std::shared_ptr<CommState> keep = comm;
    s.worker.submit([keep, job] {
      bool armed = false;
      {
        std::unique_lock<std::mutex> lock(job->mu);
        while (!job->armed && !keep->aborted.load())
          job->cv.wait_for(lock, std::chrono::milliseconds(10));
        armed = job->armed;
      }
      if (armed) {
        runJob(*keep, *job);
      } else {
        keep->recordAsync(invalidUsage("{}: the communicator was aborted before its stream "
                                       "reached the operation",
                                       job->ops.front().api));
        setFlag(*job, kFailed);
      }
    });
  }
  Status st = kernels::cuda::waitFlag(job->flagDev, stream);
  for (const Span& sp : outs) {
    if (!st.isOk()) break;
    const cudaError_t e =
        cudaMemcpyAsync(reinterpret_cast<void*>(sp.begin), host(sp.begin), sp.end - sp.begin,
                        cudaMemcpyHostToDevice, stream);
    if (e != cudaSuccess) st = cudaFailure(api, "cudaMemcpyAsync (host to device)", e);
  }
  if (st.isOk() && !captured)
    if (cudaError_t e = cudaLaunchHostFunc(stream, DeviceQueue::retire, job); e != cudaSuccess)
      st = cudaFailure(api, "cudaLaunchHostFunc", e);
  if (st.isOk()) {
    for (cudaStream_t o : others) {
      cudaError_t r = cudaEventRecord(ev.second, stream);
      if (r == cudaSuccess) r = cudaStreamWaitEvent(o, ev.second, 0);
      if (r != cudaSuccess) {
        st = cudaFailure(api, "joining the group's streams", r);
        break;
      }
    }
  }
  return st;
}

#endif  // TUTTI_HAVE_CUDA

}  // namespace tutti::nccl
