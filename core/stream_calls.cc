// File: core/stream_calls.cc
// The C++ API's stream-ordered calls (Communicator's overloads taking a stream): host memory runs
// after the stream's earlier work; device memory is a job of the staged device executor
// (core/device/staged.h) whose host work runs on the communicator's progress thread, in issue
// order with its asynchronous calls.
#include <cstdint>

#include "base/arg_check.h"
#include "core/comm.h"
#include "core/device/staged.h"

namespace tutti::detail {

Status CommImpl::runOnStream(const CallArgs& a, void* stream) {
  if (!healthy()) TUTTI_TRY(failed());
  bool inPlace = false;
  TUTTI_TRY(check(a, &inPlace));
  const device::MemoryKind in = device::memoryKind(a.send), out = device::memoryKind(a.recv);
  if (!in.device && !out.device) {
    TUTTI_TRY(device::syncStream(stream, a.api));
    return runChecked(a);
  }
  if (a.count == 0) return Status::ok();
  const auto [inBytes, outBytes] = bufferBytes(a, rank_, nranks_);
  device::StagedJob job;
  job.api = a.api;
  job.stream = stream;
  const auto send = reinterpret_cast<uintptr_t>(a.send);
  const auto recv = reinterpret_cast<uintptr_t>(a.recv);
  if (in.device && inBytes > 0) job.inputs.push_back({send, send + inBytes});
  if (out.device && outBytes > 0) job.outputs.push_back({recv, recv + outBytes});
  // The host work: the call on the staging (an in-place call's two pointers land on one block),
  // executed on the progress thread like an asynchronous call.
  job.bind = [this, a, inPlace, in, out](const std::function<std::byte*(uintptr_t)>& host) {
    CallArgs h = a;
    if (in.device && h.send) h.send = host(reinterpret_cast<uintptr_t>(a.send));
    if (out.device && h.recv) h.recv = host(reinterpret_cast<uintptr_t>(a.recv));
    return std::function<Status()>([this, h, inPlace] {
      std::lock_guard<std::mutex> lock(execMu_);
      return execute(h, inPlace);
    });
  };
  job.post = [this, a](std::function<void()> task) { queueTask(a, std::move(task)); };
  job.onFailure = [this](const Status& s) { recordError(s); };
  job.aborted = [this] { return abort_.load() || closing_.load(); };
  if (!staged_) staged_ = device::makeStagedQueue();
  return staged_->enqueue(std::move(job));
}

}  // namespace tutti::detail
