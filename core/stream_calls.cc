// File: core/stream_calls.cc
// The C++ API's stream-ordered calls (Communicator's overloads taking a stream): host memory runs
// after the stream's earlier work; device memory goes to the communicator's device path
// (core/batch.h: the staged executor, whose host work runs on the progress thread in issue order
// with the asynchronous calls), as the NCCL layer's calls do.
#include "base/arg_check.h"
#include "core/comm.h"

namespace tutti::detail {

Status CommImpl::runOnStream(const CallArgs& a, void* stream) {
  if (!healthy()) TUTTI_TRY(failed());
  bool inPlace = false;
  TUTTI_TRY(check(a, &inPlace));
  BatchOp op = BatchOp::of(a, stream);
  findMemoryKinds(op, rank_, nranks_);
  if (!op.device()) {
    TUTTI_TRY(syncStream(stream, a.api));
    return runChecked(a);
  }
  if (!device_) device_ = makeDevicePath(*this);
  DeviceBatch batch{device_.get(), nullptr, {}};
  batch.ops.push_back(std::move(op));
  return submitDevice(std::span(&batch, 1), true);
}

Status CommImpl::runHost(std::vector<BatchOp>& ops) {
  // The calls on the staging (an in-place call's two pointers land on one block, so the in-place
  // form is found again on the host addresses).
  Status first;
  for (const BatchOp& op : ops) {
    const CallArgs h = op.callArgs();
    std::lock_guard<std::mutex> lock(execMu_);
    Status s = execute(h, inPlaceOf(h, rank_, nranks_));
    if (first.isOk() && !s.isOk()) first = s;
  }
  return first;
}

}  // namespace tutti::detail
