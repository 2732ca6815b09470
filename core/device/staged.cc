// File: core/device/staged.cc
// The staged device executor (core/device/staged.h): the pinned staging pool, the jobs, and the
// host functions the streams call.
#include "core/device/staged.h"

#include <algorithm>
#include <atomic>
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

namespace tutti::device {

std::vector<Span> mergeSpans(std::vector<Span> v) {
  std::sort(v.begin(), v.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  std::vector<Span> out;
  for (const Span& s : v) {
    if (!out.empty() && s.begin < out.back().end)
      out.back().end = std::max(out.back().end, s.end);
    else
      out.push_back(s);
  }
  return out;
}

bool cudaDevicePresent() {
#if TUTTI_HAVE_CUDA
  static const bool present = [] {
    int n = 0;
    const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return ok;
  }();
  return present;
#else
  return false;
#endif
}

Status syncStream(void* stream, const char* api) {
#if TUTTI_HAVE_CUDA
  if (!stream || !cudaDevicePresent()) return Status::ok();
  cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess)
    return makeStatus(Code::kUnhandledCudaError, "{}: cudaStreamSynchronize failed: {}", api,
                      cudaGetErrorString(e));
#else
  (void)stream;
  (void)api;
#endif
  return Status::ok();
}

#if !TUTTI_HAVE_CUDA

MemoryKind memoryKind(const void*) { return {}; }

class StagedQueue::Impl {};
StagedQueue::StagedQueue() = default;
StagedQueue::~StagedQueue() = default;
Status StagedQueue::enqueue(StagedJob job) {
  return invalidUsage("{}: device memory needs a tutti built with CUDA", job.api);
}
bool StagedQueue::drain(std::chrono::milliseconds) { return true; }

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

struct Block {
  std::byte* host = nullptr;
  size_t bytes = 0;
};

// One job. Eager jobs are deleted by the retire host function once their stream has copied the
// results back; captured ones live as long as the queue (their graph may be replayed at any
// time).
struct Job {
  StagedQueue::Impl* queue = nullptr;
  const char* api = "";
  std::function<Status()> work;  // the host work on the staging blocks
  std::function<void(std::function<void()>)> post;
  std::function<void(const Status&)> onFailure;
  std::function<bool()> aborted;
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

// Runs the host work and releases the stream. An eager job may be freed as soon as the flag is
// written: nothing of it is touched afterwards.
void runJob(Job& j) {
  Status st = j.work();
  if (!st.isOk() && j.onFailure) j.onFailure(st);
  setFlag(j, st.isOk() ? kDone : kFailed);
}

}  // namespace

class StagedQueue::Impl {
 public:
  ~Impl() {
    for (auto& j : captured_) delete j;
    for (void* p : allocations_) cudaFreeHost(p);
  }

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
    Impl* q = j->queue;
    std::lock_guard<std::mutex> lock(q->mu_);
    for (const Block& b : j->blocks) q->free_.emplace(b.bytes, b.host);
    q->freeFlags_.push_back(j->flag);
    delete j;
    --q->inflight_;
    q->cv_.notify_all();  // under the lock: the queue cannot be freed before this returns
  }

  /// Events that join a batch's other streams to the job's stream (one pair is enough: an event
  /// can be recorded again once the waits on it are enqueued).
  Result<std::pair<cudaEvent_t, cudaEvent_t>> joinEvents(const char* api) {
    if (!events_[0]) {
      for (auto& ev : events_) {
        const cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
        if (e != cudaSuccess) return cudaFailure(api, "cudaEventCreateWithFlags", e);
      }
    }
    return std::make_pair(events_[0], events_[1]);
  }

  Status enqueue(StagedJob spec);

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
  j->post([j] { runJob(*j); });
}

}  // namespace

Status StagedQueue::Impl::enqueue(StagedJob spec) {
  const char* api = spec.api;
  const auto stream = static_cast<cudaStream_t>(spec.stream);
  std::vector<Span> all = spec.inputs;
  all.insert(all.end(), spec.outputs.begin(), spec.outputs.end());
  all = mergeSpans(std::move(all));
  const std::vector<Span> ins = mergeSpans(std::move(spec.inputs));
  const std::vector<Span> outs = mergeSpans(std::move(spec.outputs));

  auto* job = new Job;
  job->queue = this;
  job->api = api;
  job->post = std::move(spec.post);
  job->onFailure = std::move(spec.onFailure);
  job->aborted = std::move(spec.aborted);
  for (const Span& sp : all) {
    auto b = acquire(sp.end - sp.begin, api);
    if (!b.isOk()) {
      recycle(job);
      return b.status();
    }
    job->blocks.push_back(*b);
  }
  if (Status f = acquireFlag(*job, api); !f.isOk()) {
    recycle(job);
    return f;
  }
  setFlag(*job, kPending);
  auto host = [&all, job](uintptr_t dev) -> std::byte* {
    for (size_t k = 0; k < all.size(); ++k)
      if (dev >= all[k].begin && dev < all[k].end)
        return job->blocks[k].host + (dev - all[k].begin);
    return nullptr;
  };
  job->work = spec.bind(host);

  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaError_t e = cudaStreamIsCapturing(stream, &capture); e != cudaSuccess) {
    recycle(job);
    return cudaFailure(api, "cudaStreamIsCapturing", e);
  }
  const bool captured = capture == cudaStreamCaptureStatusActive;

  // Before the host function, a failure leaves nothing behind that matters: copies into staging.
  std::pair<cudaEvent_t, cudaEvent_t> ev{};
  if (!spec.joinStreams.empty()) {
    auto e = joinEvents(api);
    if (!e.isOk()) {
      recycle(job);
      return e.status();
    }
    ev = *e;
    for (void* o : spec.joinStreams) {
      cudaError_t r = cudaEventRecord(ev.first, static_cast<cudaStream_t>(o));
      if (r == cudaSuccess) r = cudaStreamWaitEvent(stream, ev.first, 0);
      if (r != cudaSuccess) {
        recycle(job);
        return cudaFailure(api, "joining the group's streams", r);
      }
    }
  }
  for (const Span& sp : ins) {
    const cudaError_t e =
        cudaMemcpyAsync(host(sp.begin), reinterpret_cast<const void*>(sp.begin),
                        sp.end - sp.begin, cudaMemcpyDeviceToHost, stream);
    if (e != cudaSuccess) {
      recycle(job);
      return cudaFailure(api, "cudaMemcpyAsync (device to host)", e);
    }
  }
  if (cudaError_t e = cudaLaunchHostFunc(stream, captured ? postJob : armJob, job);
      e != cudaSuccess) {
    recycle(job);
    return cudaFailure(api, "cudaLaunchHostFunc", e);
  }

  // From here the stream holds the job: it is run (or failed) by the proxy in every case.
  if (captured) {
    addCaptured(job);
  } else {
    addInflight();
    job->post([job, keep = std::move(spec.keepAlive)] {
      bool armed = false;
      {
        std::unique_lock<std::mutex> lock(job->mu);
        while (!job->armed && !(job->aborted && job->aborted()))
          job->cv.wait_for(lock, std::chrono::milliseconds(10));
        armed = job->armed;
      }
      if (armed) {
        runJob(*job);
      } else {
        if (job->onFailure)
          job->onFailure(invalidUsage("{}: the communicator was aborted before its stream "
                                      "reached the operation",
                                      job->api));
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
    if (cudaError_t e = cudaLaunchHostFunc(stream, Impl::retire, job); e != cudaSuccess)
      st = cudaFailure(api, "cudaLaunchHostFunc", e);
  if (st.isOk()) {
    for (void* o : spec.joinStreams) {
      cudaError_t r = cudaEventRecord(ev.second, stream);
      if (r == cudaSuccess) r = cudaStreamWaitEvent(static_cast<cudaStream_t>(o), ev.second, 0);
      if (r != cudaSuccess) {
        st = cudaFailure(api, "joining the group's streams", r);
        break;
      }
    }
  }
  return st;
}

StagedQueue::StagedQueue() : impl_(std::make_unique<Impl>()) {}
StagedQueue::~StagedQueue() = default;
Status StagedQueue::enqueue(StagedJob job) { return impl_->enqueue(std::move(job)); }
bool StagedQueue::drain(std::chrono::milliseconds limit) { return impl_->drain(limit); }

#endif  // TUTTI_HAVE_CUDA

std::shared_ptr<StagedQueue> makeStagedQueue() {
  return std::shared_ptr<StagedQueue>(new StagedQueue, [](StagedQueue* q) {
    if (q->drain(std::chrono::seconds(10))) {
      delete q;
    } else {
      TUTTI_LOG_WARN(Subsys::kInit,
                     "device staging: jobs still in flight at communicator destruction; their "
                     "pinned memory is not freed");
    }
  });
}

}  // namespace tutti::device
