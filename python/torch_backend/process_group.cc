// File: python/torch_backend/process_group.cc
// ProcessGroupTutti: bootstrap through the c10d Store, the worker thread, and every c10d method.
// Each method checks its arguments on the caller's thread (raising before anything is queued,
// so nothing changes), then queues a body that stages the tensors and calls tutti. See
// process_group.h.
#include "python/torch_backend/process_group.h"

#include <Python.h>
#include <c10/util/Exception.h>

#include <cstring>

#include "python/torch_backend/tensors.h"

namespace tutti::torch_backend {

namespace {

constexpr const char* kUidKey = "tutti_unique_id";
constexpr const char* kP2pUidKey = "tutti_p2p_unique_id";

c10::DistBackendError backendError(std::string msg) {
  return c10::DistBackendError(c10::SourceLocation{__func__, __FILE__, __LINE__}, std::move(msg));
}

// The rank's tensors as one list (what a Work's result() and Future hold).
std::vector<at::Tensor> flatten(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  return out;
}

std::string argName(const char* base, size_t i) {
  return std::string(base) + "[" + std::to_string(i) + "]";
}

size_t nbytes(const at::Tensor& t) { return t.numel() * t.element_size(); }

// The tensor list of a gather (its outputs) or a scatter (its inputs): on the root, one list of
// `size` tensors like `tensor`; on every other rank, empty.
void checkRootList(const char* api, const char* rootArg, int root, int rank, int size,
                   const char* listArg, const std::vector<std::vector<at::Tensor>>& lists,
                   const at::Tensor& tensor) {
  if (rank == root) {
    checkCount(api, listArg, lists.size(), 1);
    checkCount(api, listArg, lists[0].size(), size);
    for (size_t j = 0; j < lists[0].size(); ++j)
      checkLike(api, argName(listArg, j), lists[0][j], "tensor", tensor);
  } else {
    TORCH_CHECK_VALUE(lists.empty() || lists[0].empty(), "tutti ", api, ": '", listArg,
                      "' must be empty on ranks other than ", rootArg, " ", root,
                      " (this is rank ", rank, ")");
  }
}

// One communicator of the group: rank 0 creates a fresh UniqueId and publishes it under `key`,
// the others read it, every rank joins. `what` names it in errors.
Communicator joinGroup(c10d::Store& store, const char* key, int rank, int size,
                       const tutti::Options& options, const char* what) {
  UniqueId id;
  if (rank == 0) {
    // A fresh root: every group's rank 0 binding the launcher's TUTTI_COMM_ID would collide.
    Result<UniqueId> r = createFreshUniqueId();
    if (!r)
      throw backendError(c10::str("tutti: creating the group's ", what, " UniqueId failed: ",
                                  r.status().message()));
    id = r.value();
    store.set(key, std::vector<uint8_t>(id.bytes.begin(), id.bytes.end()));
  } else {
    std::vector<uint8_t> b = store.get(key);
    if (b.size() != id.bytes.size())
      throw backendError(c10::str("tutti: the store's ", key, " has ", b.size(),
                                  " bytes, expected ", id.bytes.size()));
    std::memcpy(id.bytes.data(), b.data(), b.size());
  }
  Result<Communicator> c = Communicator::create(id, rank, size, options);
  if (!c)
    throw backendError(c10::str("tutti: joining the process group's ", what,
                                " communicator failed (rank ", rank, " of ", size,
                                "): ", c.status().message()));
  return std::move(c.value());
}

}  // namespace

// ---- TuttiWork ----

TuttiWork::TuttiWork(int rank, c10d::OpType type, const char* opName, uint64_t seq,
                     std::vector<at::Tensor> outputs, std::chrono::milliseconds defaultTimeout,
                     std::function<void()> onTimeout)
    : c10d::Work(rank, type),
      opName_(opName),
      seq_(seq),
      outputs_(std::move(outputs)),
      defaultTimeout_(defaultTimeout),
      onTimeout_(std::move(onTimeout)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

bool TuttiWork::wait(std::chrono::milliseconds timeout) {
  const auto limit = timeout.count() > 0 ? timeout : defaultTimeout_;
  std::unique_lock<std::mutex> lock(mutex_);
  if (limit.count() > 0) {
    if (!cv_.wait_for(lock, limit, [&] { return completed_; })) {
      lock.unlock();
      if (onTimeout_) onTimeout_();
      throw backendError(c10::str("tutti ", opName_, " (sequence number ", seq_, ", rank ", rank_,
                                  ") did not complete within ", limit.count(),
                                  " ms; the process group was aborted"));
    }
  } else {
    cv_.wait(lock, [&] { return completed_; });
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

int TuttiWork::sourceRank() const {
  const int r = sourceRank_.load();
  TORCH_CHECK(r >= 0, "tutti ", opName_, " (sequence number ", seq_,
              "): sourceRank() is known only for a receive that completed");
  return r;
}

void TuttiWork::complete(std::exception_ptr error) {
  finish(error);
  if (error)
    future_->setError(error);
  else
    future_->markCompleted(c10::IValue(outputs_));
}

// ---- ProcessGroupTutti: life cycle and the worker ----

ProcessGroupTutti::ProcessGroupTutti(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                     int size, std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), timeoutMs_(timeout.count() > 0 ? timeout.count() : 0) {
  tutti::Options options;
  options.timeout = std::chrono::milliseconds(timeoutMs_.load());
  comm_ = joinGroup(*store, kUidKey, rank, size, options, "collective");
  p2pComm_ = joinGroup(*store, kP2pUidKey, rank, size, options, "send/recv");
  worker_ = std::thread([this] { workerLoop(); });
}

ProcessGroupTutti::~ProcessGroupTutti() {
  // Python drops the last reference with the GIL held; the worker's calls may be waiting for
  // futures' Python callbacks, which need the GIL.
  PyThreadState* saved = nullptr;
  if (Py_IsInitialized() && PyGILState_Check()) saved = PyEval_SaveThread();
  stop(/*drainFirst=*/true);
  comm_ = Communicator();
  p2pComm_ = Communicator();
  if (saved) PyEval_RestoreThread(saved);
}

void ProcessGroupTutti::setTimeout(std::chrono::milliseconds timeout) {
  timeoutMs_ = timeout.count() > 0 ? timeout.count() : 0;
}

void ProcessGroupTutti::abort() {
  comm_.abort();
  p2pComm_.abort();
  stop(/*drainFirst=*/false);
}

void ProcessGroupTutti::shutdown() { stop(/*drainFirst=*/true); }

void ProcessGroupTutti::stop(bool drainFirst) {
  std::deque<Queued> failed;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopped_) return;
    if (!drainFirst) failed.swap(queue_);
    stopping_ = true;
    cv_.notify_all();
  }
  for (Queued& q : failed)
    q.work->complete(std::make_exception_ptr(
        backendError(c10::str("tutti ", q.work->opName(), " (sequence number ", q.work->seq(),
                              ", rank ", rank_, "): the process group was aborted"))));
  if (worker_.joinable()) worker_.join();
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::enqueue(c10d::OpType type, const char* opName,
                                                          std::vector<at::Tensor> outputs,
                                                          bool async, Body body) {
  auto work = makeWork(type, opName, std::move(outputs));
  submit(work, async, std::move(body));
  return work;
}

c10::intrusive_ptr<TuttiWork> ProcessGroupTutti::makeWork(c10d::OpType type, const char* opName,
                                                          std::vector<at::Tensor> outputs) {
  return c10::make_intrusive<TuttiWork>(rank_, type, opName, ++seq_, std::move(outputs),
                                        std::chrono::milliseconds(timeoutMs_.load()),
                                        [this] {
                                          comm_.abort();
                                          p2pComm_.abort();
                                        });
}

void ProcessGroupTutti::submit(const c10::intrusive_ptr<TuttiWork>& work, bool async, Body body) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(!stopping_, "tutti ", work->opName(),
                ": the process group was shut down or aborted");
    if (async || running_ || !queue_.empty()) {
      queue_.push_back(Queued{work, std::move(body)});
      cv_.notify_one();
      return;
    }
    running_ = true;
  }
  run(*work, body);
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
    // The worker waits for queued calls (from other threads, meanwhile) or for stop(): waking
    // it for nothing costs two context switches per blocking call.
    wake = !queue_.empty() || stopping_;
  }
  if (wake) cv_.notify_all();
}

void ProcessGroupTutti::run(TuttiWork& work, const Body& body) {
  std::exception_ptr error;
  try {
    Status s = body(comm_);
    if (!s.isOk())
      error = std::make_exception_ptr(
          backendError(c10::str("tutti ", work.opName(), " failed (sequence number ", work.seq(),
                                ", rank ", rank_, " of ", size_, "): ", codeName(s.code()), ": ",
                                s.message())));
  } catch (...) {  // a torch error from staging (out of memory, ...)
    error = std::current_exception();
  }
  work.complete(error);
}

void ProcessGroupTutti::workerLoop() {
  for (;;) {
    Queued q;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return (stopping_ && !running_) || (!queue_.empty() && !running_); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      q = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    run(*q.work, q.body);
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = false;
    }
  }
}

// ---- collectives ----

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  const char* api = "broadcast";
  checkCount(api, "tensors", tensors.size(), 1);
  checkCpu(api, "tensors[0]", tensors[0]);
  checkRoot(api, "src", opts.rootRank, size_);
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor t = tensors[0];
  return enqueue(c10d::OpType::BROADCAST, api, tensors, opts.asyncOp, [t, root](Communicator& c) {
    Staged s = Staged::inout(t);
    Status st = c.broadcast(s.data(), s.data(), s.bytes(), DataType::kUint8, root);
    if (st.isOk()) s.writeBack();
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  const char* api = "allreduce";
  checkCount(api, "tensors", tensors.size(), 1);
  checkCpu(api, "tensors[0]", tensors[0]);
  Reduction r = resolveReduction(api, "tensors[0]", tensors[0], opts.reduceOp);
  at::Tensor t = tensors[0];
  return enqueue(c10d::OpType::ALLREDUCE, api, tensors, opts.asyncOp, [t, r](Communicator& c) {
    Staged s = Staged::inout(t);
    Status st = reduceTensor(c, s.buf, r, -1);
    if (st.isOk()) s.writeBack();
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const char* api = "allreduce_coalesced";
  std::vector<Reduction> rs;
  for (size_t i = 0; i < tensors.size(); ++i) {
    checkCpu(api, argName("tensors", i), tensors[i]);
    if (i > 0) {
      TORCH_CHECK_TYPE(tensors[i].scalar_type() == tensors[0].scalar_type(), "tutti ", api,
                       ": 'tensors[", i, "]' has dtype ", tensors[i].scalar_type(),
                       " but 'tensors[0]' has ", tensors[0].scalar_type(),
                       " (one dtype per coalesced allreduce)");
    }
    rs.push_back(resolveReduction(api, argName("tensors", i), tensors[i], opts.reduceOp));
  }
  std::vector<at::Tensor> ts = tensors;
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, api, tensors, opts.asyncOp, [ts, rs](Communicator& c) {
    std::vector<Staged> staged;
    for (const at::Tensor& t : ts) staged.push_back(Staged::inout(t));
    Status st;
    if (!rs.empty() && !rs[0].bitwise && !rs[0].premul) {
      // One fused call: bit-identical to separate allreduces, one round latency per batch.
      std::vector<Communicator::ReduceBuffer> bufs;
      for (const Staged& s : staged)
        bufs.push_back({s.data(), s.data(), static_cast<size_t>(s.buf.numel()) * rs[0].lanes});
      st = c.allReduceFused(bufs, rs[0].dtype, rs[0].op);
    } else {
      for (size_t i = 0; i < staged.size() && st.isOk(); ++i)
        st = reduceTensor(c, staged[i].buf, rs[i], -1);
    }
    if (st.isOk())
      for (Staged& s : staged) s.writeBack();
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  const char* api = "reduce";
  checkCount(api, "tensors", tensors.size(), 1);
  checkCpu(api, "tensors[0]", tensors[0]);
  checkRoot(api, "dst", opts.rootRank, size_);
  Reduction r = resolveReduction(api, "tensors[0]", tensors[0], opts.reduceOp);
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor t = tensors[0];
  return enqueue(c10d::OpType::REDUCE, api, tensors, opts.asyncOp, [t, r, root](Communicator& c) {
    Staged s = Staged::inout(t);
    Status st = reduceTensor(c, s.buf, r, root);
    if (st.isOk() && c.rank() == root) s.writeBack();
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  const char* api = "_allgather_base";
  checkCpu(api, "input", input);
  checkCpu(api, "output", output);
  TORCH_CHECK_TYPE(output.scalar_type() == input.scalar_type(), "tutti ", api,
                   ": 'output' has dtype ", output.scalar_type(), " but 'input' has ",
                   input.scalar_type());
  TORCH_CHECK_VALUE(output.numel() == input.numel() * size_, "tutti ", api, ": 'output' has ",
                    output.numel(), " elements, expected group size ", size_, " x ",
                    input.numel(), " (the input's)");
  at::Tensor in = input, out = output;
  return enqueue(c10d::OpType::_ALLGATHER_BASE, api, {output}, opts.asyncOp, [in, out](Communicator& c) {
    Staged i = Staged::input(in), o = Staged::output(out);
    Status st = c.allGather(i.data(), o.data(), i.bytes(), DataType::kUint8);
    if (st.isOk()) o.writeBack();
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  std::vector<std::vector<at::Tensor>> lists = outputs;
  return allgather_coalesced(lists, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* api = "allgather";
  checkCount(api, "output_tensor_lists", outputLists.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkCpu(api, argName("input_tensors", i), inputs[i]);
    checkCount(api, argName("output_tensor_lists", i), outputLists[i].size(), size_);
    for (size_t j = 0; j < outputLists[i].size(); ++j)
      checkLike(api, argName(argName("output_tensor_lists", i).c_str(), j), outputLists[i][j],
                argName("input_tensors", i), inputs[i]);
  }
  std::vector<at::Tensor> ins = inputs;
  std::vector<std::vector<at::Tensor>> outs = outputLists;
  return enqueue(c10d::OpType::ALLGATHER, api, flatten(outputLists), opts.asyncOp, [ins, outs](Communicator& c) {
    for (size_t i = 0; i < ins.size(); ++i) {
      Staged in = Staged::input(ins[i]);
      const int64_t n = static_cast<int64_t>(outs[i].size());
      at::Tensor all = at::empty({n, in.buf.numel()}, in.buf.options());
      Status st = c.allGather(in.data(), all.data_ptr(), in.bytes(), DataType::kUint8);
      if (!st.isOk()) return st;
      for (int64_t j = 0; j < n; ++j) outs[i][j].view(-1).copy_(all[j]);
    }
    return Status::ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* api = "allgather_into_tensor_coalesced";
  checkCount(api, "outputs", outputs.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkCpu(api, argName("inputs", i), inputs[i]);
    checkCpu(api, argName("outputs", i), outputs[i]);
    TORCH_CHECK_TYPE(outputs[i].scalar_type() == inputs[i].scalar_type(), "tutti ", api, ": '",
                     argName("outputs", i), "' has dtype ", outputs[i].scalar_type(), " but '",
                     argName("inputs", i), "' has ", inputs[i].scalar_type());
    TORCH_CHECK_VALUE(outputs[i].numel() == inputs[i].numel() * size_, "tutti ", api, ": '",
                      argName("outputs", i), "' has ", outputs[i].numel(),
                      " elements, expected group size ", size_, " x ", inputs[i].numel());
  }
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  return enqueue(c10d::OpType::COALESCED, api, outputs, opts.asyncOp, [ins, outs](Communicator& c) {
    for (size_t i = 0; i < ins.size(); ++i) {
      Staged in = Staged::input(ins[i]), out = Staged::output(outs[i]);
      Status st = c.allGather(in.data(), out.data(), in.bytes(), DataType::kUint8);
      if (!st.isOk()) return st;
      out.writeBack();
    }
    return Status::ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const char* api = "gather";
  checkRoot(api, "dst", opts.rootRank, size_);
  checkCount(api, "input_tensors", inputs.size(), 1);
  checkCpu(api, "tensor", inputs[0]);
  const int root = static_cast<int>(opts.rootRank);
  checkRootList(api, "dst", root, rank_, size_, "gather_list", outputs, inputs[0]);
  at::Tensor in = inputs[0];
  std::vector<at::Tensor> outs = outputs.empty() ? std::vector<at::Tensor>{} : outputs[0];
  return enqueue(c10d::OpType::GATHER, api, outs, opts.asyncOp, [in, outs, root](Communicator& c) {
    Staged i = Staged::input(in);
    at::Tensor all;
    if (c.rank() == root) all = at::empty({c.size(), i.buf.numel()}, i.buf.options());
    Status st = c.gather(i.data(), all.defined() ? all.data_ptr() : nullptr, i.bytes(),
                         DataType::kUint8, root);
    if (st.isOk() && c.rank() == root)
      for (size_t j = 0; j < outs.size(); ++j) outs[j].view(-1).copy_(all[j]);
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const char* api = "scatter";
  checkRoot(api, "src", opts.rootRank, size_);
  checkCount(api, "output_tensors", outputs.size(), 1);
  checkCpu(api, "tensor", outputs[0]);
  const int root = static_cast<int>(opts.rootRank);
  checkRootList(api, "src", root, rank_, size_, "scatter_list", inputs, outputs[0]);
  at::Tensor out = outputs[0];
  std::vector<at::Tensor> ins = inputs.empty() ? std::vector<at::Tensor>{} : inputs[0];
  return enqueue(c10d::OpType::SCATTER, api, outputs, opts.asyncOp, [out, ins, root](Communicator& c) {
    Staged o = Staged::output(out);
    at::Tensor all;
    if (c.rank() == root) {
      all = at::empty({c.size(), o.buf.numel()}, o.buf.options());
      for (size_t j = 0; j < ins.size(); ++j) all[j].copy_(ins[j].reshape(-1));
    }
    Status st = c.scatter(all.defined() ? all.data_ptr() : nullptr, o.data(), o.bytes(),
                          DataType::kUint8, root);
    if (st.isOk()) o.writeBack();
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return reduce_scatter_tensor_coalesced(outs, ins, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* api = "reduce_scatter_tensor";
  checkCount(api, "outputs", outputs.size(), inputs.size());
  std::vector<Reduction> rs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkCpu(api, argName("inputs", i), inputs[i]);
    checkCpu(api, argName("outputs", i), outputs[i]);
    TORCH_CHECK_TYPE(outputs[i].scalar_type() == inputs[i].scalar_type(), "tutti ", api, ": '",
                     argName("outputs", i), "' has dtype ", outputs[i].scalar_type(), " but '",
                     argName("inputs", i), "' has ", inputs[i].scalar_type());
    TORCH_CHECK_VALUE(inputs[i].numel() == outputs[i].numel() * size_, "tutti ", api, ": '",
                      argName("inputs", i), "' has ", inputs[i].numel(),
                      " elements, expected group size ", size_, " x ", outputs[i].numel(),
                      " (the output's)");
    rs.push_back(resolveReduction(api, argName("inputs", i), inputs[i], opts.reduceOp));
  }
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, api, outputs, opts.asyncOp,
                 [ins, outs, rs](Communicator& c) {
                   for (size_t i = 0; i < ins.size(); ++i) {
                     const Reduction& r = rs[i];
                     Staged o = Staged::output(outs[i]);
                     if (r.bitwise || r.premul) {
                       // Reduce a copy of the whole input, keep this rank's block.
                       at::Tensor all = ins[i].contiguous().clone();
                       Status st = reduceTensor(c, all, r, -1);
                       if (!st.isOk()) return st;
                       o.buf.view(-1).copy_(all.view(-1).narrow(0, c.rank() * o.buf.numel(),
                                                                o.buf.numel()));
                     } else {
                       Staged in = Staged::input(ins[i]);
                       Status st = c.reduceScatter(in.data(), o.data(),
                                                   o.buf.numel() * r.lanes, r.dtype, r.op);
                       if (!st.isOk()) return st;
                     }
                     o.writeBack();
                   }
                   return Status::ok();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* api = "reduce_scatter";
  checkCount(api, "output", outputs.size(), 1);
  checkCount(api, "input_list", inputs.size(), 1);
  checkCpu(api, "output", outputs[0]);
  checkCount(api, "input_list", inputs[0].size(), size_);
  for (size_t j = 0; j < inputs[0].size(); ++j)
    checkLike(api, argName("input_list", j), inputs[0][j], "output", outputs[0]);
  Reduction r = resolveReduction(api, "output", outputs[0], opts.reduceOp);
  at::Tensor out = outputs[0];
  std::vector<at::Tensor> ins = inputs[0];
  return enqueue(c10d::OpType::REDUCE_SCATTER, api, outputs, opts.asyncOp, [out, ins, r](Communicator& c) {
    Staged o = Staged::output(out);
    at::Tensor all = at::empty({c.size(), o.buf.numel()}, o.buf.options());
    for (size_t j = 0; j < ins.size(); ++j) all[j].copy_(ins[j].reshape(-1));
    Status st;
    if (r.bitwise || r.premul) {
      st = reduceTensor(c, all, r, -1);
      if (st.isOk()) o.buf.view(-1).copy_(all[c.rank()]);
    } else {
      st = c.reduceScatter(all.data_ptr(), o.data(), o.buf.numel() * r.lanes, r.dtype, r.op);
    }
    if (st.isOk()) o.writeBack();
    return st;
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
    std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions& opts) {
  const char* api = "alltoall_base";
  checkCpu(api, "input", input);
  checkCpu(api, "output", output);
  TORCH_CHECK_TYPE(output.scalar_type() == input.scalar_type(), "tutti ", api,
                   ": 'output' has dtype ", output.scalar_type(), " but 'input' has ",
                   input.scalar_type());
  const bool equal = outputSplits.empty() && inputSplits.empty();
  if (equal) {
    TORCH_CHECK_VALUE(input.numel() % size_ == 0, "tutti ", api, ": 'input' has ", input.numel(),
                      " elements, not divisible by the group size ", size_);
    TORCH_CHECK_VALUE(output.numel() == input.numel(), "tutti ", api, ": 'output' has ",
                      output.numel(), " elements but 'input' has ", input.numel());
    at::Tensor in = input, out = output;
    return enqueue(c10d::OpType::ALLTOALL_BASE, api, {output}, opts.asyncOp, [in, out](Communicator& c) {
      Staged i = Staged::input(in), o = Staged::output(out);
      Status st = c.allToAll(i.data(), o.data(), i.bytes() / c.size(), DataType::kUint8);
      if (st.isOk()) o.writeBack();
      return st;
    });
  }
  // Splits count rows (dimension 0); an empty split list means equal rows per rank.
  auto rowsPer = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* arg) {
    const int64_t rows = t.dim() > 0 ? t.size(0) : 1;
    std::vector<int64_t> v = splits;
    if (v.empty()) {
      TORCH_CHECK_VALUE(rows % size_ == 0, "tutti ", api, ": '", arg, "' has ", rows,
                        " rows, not divisible by the group size ", size_, " (no split sizes)");
      v.assign(size_, rows / size_);
    }
    TORCH_CHECK_VALUE(v.size() == static_cast<size_t>(size_), "tutti ", api, ": '", arg,
                      "_split_sizes' has ", v.size(), " entries, expected group size ", size_);
    int64_t sum = 0;
    for (int64_t x : v) {
      TORCH_CHECK_VALUE(x >= 0, "tutti ", api, ": '", arg, "_split_sizes' has a negative entry ",
                        x);
      sum += x;
    }
    TORCH_CHECK_VALUE(sum == rows, "tutti ", api, ": '", arg, "_split_sizes' sums to ", sum,
                      " but '", arg, "' has ", rows, " rows");
    return v;
  };
  std::vector<int64_t> inRows = rowsPer(input, inputSplits, "input");
  std::vector<int64_t> outRows = rowsPer(output, outputSplits, "output");
  const int64_t inRowBytes = input.dim() > 0 && input.size(0) > 0
                                 ? nbytes(input) / input.size(0) : 0;
  const int64_t outRowBytes = output.dim() > 0 && output.size(0) > 0
                                  ? nbytes(output) / output.size(0) : 0;
  TORCH_CHECK_VALUE(inRowBytes == 0 || outRowBytes == 0 || inRowBytes == outRowBytes, "tutti ",
                    api, ": rows of 'input' (", inRowBytes, " bytes) and 'output' (",
                    outRowBytes, " bytes) differ in size");
  at::Tensor in = input, out = output;
  return enqueue(c10d::OpType::ALLTOALL_BASE, api, {output}, opts.asyncOp,
                 [in, out, inRows, outRows, inRowBytes, outRowBytes](Communicator& c) {
                   Staged i = Staged::input(in), o = Staged::output(out);
                   const size_t n = inRows.size();
                   std::vector<const std::byte*> sp(n);
                   std::vector<std::byte*> rp(n);
                   std::vector<size_t> sb(n), rb(n);
                   auto* sbase = static_cast<const std::byte*>(i.data());
                   auto* rbase = static_cast<std::byte*>(o.data());
                   size_t soff = 0, roff = 0;
                   for (size_t j = 0; j < n; ++j) {
                     sb[j] = inRows[j] * inRowBytes;
                     rb[j] = outRows[j] * outRowBytes;
                     sp[j] = sbase + soff;
                     rp[j] = rbase + roff;
                     soff += sb[j];
                     roff += rb[j];
                   }
                   Status st = allToAllBytes(c, sp, sb, rp, rb);
                   if (st.isOk()) o.writeBack();
                   return st;
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions& opts) {
  const char* api = "alltoall";
  checkCount(api, "output_tensor_list", outputs.size(), size_);
  checkCount(api, "input_tensor_list", inputs.size(), size_);
  for (size_t j = 0; j < inputs.size(); ++j) {
    checkCpu(api, argName("input_tensor_list", j), inputs[j]);
    checkCpu(api, argName("output_tensor_list", j), outputs[j]);
    TORCH_CHECK_TYPE(outputs[j].scalar_type() == inputs[0].scalar_type() &&
                         inputs[j].scalar_type() == inputs[0].scalar_type(),
                     "tutti ", api, ": all tensors need one dtype, but 'input_tensor_list[0]' has ",
                     inputs[0].scalar_type(), ", '", argName("input_tensor_list", j), "' ",
                     inputs[j].scalar_type(), " and '", argName("output_tensor_list", j), "' ",
                     outputs[j].scalar_type());
  }
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  return enqueue(c10d::OpType::ALLTOALL, api, outputs, opts.asyncOp, [ins, outs](Communicator& c) {
    const size_t n = ins.size();
    std::vector<Staged> si, so;
    std::vector<const std::byte*> sp(n);
    std::vector<std::byte*> rp(n);
    std::vector<size_t> sb(n), rb(n);
    for (size_t j = 0; j < n; ++j) {
      si.push_back(Staged::input(ins[j]));
      so.push_back(Staged::output(outs[j]));
      sp[j] = static_cast<const std::byte*>(si[j].data());
      rp[j] = static_cast<std::byte*>(so[j].data());
      sb[j] = si[j].bytes();
      rb[j] = so[j].bytes();
    }
    Status st = allToAllBytes(c, sp, sb, rp, rb);
    if (st.isOk())
      for (Staged& s : so) s.writeBack();
    return st;
  });
}

// ---- point to point and barrier ----

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::send(std::vector<at::Tensor>& tensors,
                                                       int dstRank, int /*tag*/) {
  const char* api = "send";
  checkCount(api, "tensors", tensors.size(), 1);
  checkCpu(api, "tensor", tensors[0]);
  checkRoot(api, "dst", dstRank, size_);
  TORCH_CHECK_VALUE(dstRank != rank_, "tutti ", api, ": 'dst' is this rank (", rank_,
                    "); a send to itself is not supported");
  return pointToPoint(/*send=*/true, tensors[0], dstRank);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::recv(std::vector<at::Tensor>& tensors,
                                                       int srcRank, int /*tag*/) {
  const char* api = "recv";
  checkCount(api, "tensors", tensors.size(), 1);
  checkCpu(api, "tensor", tensors[0]);
  checkRoot(api, "src", srcRank, size_);
  TORCH_CHECK_VALUE(srcRank != rank_, "tutti ", api, ": 'src' is this rank (", rank_,
                    "); a receive from itself is not supported");
  return pointToPoint(/*send=*/false, tensors[0], srcRank);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::pointToPoint(bool send, const at::Tensor& t,
                                                               int peer) {
  if (coalescing_) {
    coalescing_->tensors.push_back(t);
    coalescing_->ops.emplace_back(send, peer);
    if (!send) coalescing_->work->addOutput(t);
    return coalescing_->work;
  }
  // The bodies run on p2pComm_, not on the collectives' communicator they are handed.
  if (send)
    return enqueue(c10d::OpType::SEND, "send", {t}, /*async=*/true, [this, t, peer](Communicator&) {
      Staged s = Staged::input(t);
      return p2pComm_.send(s.data(), s.bytes(), DataType::kUint8, peer);
    });
  auto work = makeWork(c10d::OpType::RECV, "recv", {t});
  work->setSourceRank(peer);
  submit(work, /*async=*/true, [this, t, peer](Communicator&) {
    Staged s = Staged::output(t);
    Status st = p2pComm_.recv(s.data(), s.bytes(), DataType::kUint8, peer);
    if (st.isOk()) s.writeBack();
    return st;
  });
  return work;
}

void ProcessGroupTutti::startCoalescing() {
  TORCH_CHECK_VALUE(!coalescing_, "tutti startCoalescing: a coalesced group is already open "
                                  "(call endCoalescing first)");
  coalescing_ = Coalesced{makeWork(c10d::OpType::COALESCED, "coalesced send/recv", {}), {}, {}};
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::endCoalescing() {
  TORCH_CHECK_VALUE(coalescing_.has_value(),
                    "tutti endCoalescing: no coalesced group is open (call startCoalescing first)");
  Coalesced group = std::move(*coalescing_);
  coalescing_.reset();
  submit(group.work, /*async=*/true,
         [this, tensors = std::move(group.tensors), ops = std::move(group.ops)](Communicator&) {
           std::vector<Staged> staged;
           staged.reserve(tensors.size());
           std::vector<Communicator::PeerTransfer> transfers;
           for (size_t i = 0; i < tensors.size(); ++i) {
             const auto [send, peer] = ops[i];
             staged.push_back(send ? Staged::input(tensors[i]) : Staged::output(tensors[i]));
             transfers.push_back({send, staged.back().data(), staged.back().bytes(),
                                  DataType::kUint8, peer});
           }
           Status st = p2pComm_.sendRecvGroup(transfers);
           if (st.isOk())
             for (size_t i = 0; i < staged.size(); ++i)
               if (!ops[i].first) staged[i].writeBack();
           return st;
         });
  return group.work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::recvAnysource(std::vector<at::Tensor>& tensors,
                                                                int /*tag*/) {
  const char* api = "recv";
  checkCount(api, "tensors", tensors.size(), 1);
  checkCpu(api, "tensor", tensors[0]);
  TORCH_CHECK_VALUE(size_ > 1, "tutti ", api, ": src=None in a group of one rank: there is no "
                    "other rank to receive from");
  TORCH_CHECK_VALUE(nbytes(tensors[0]) > 0, "tutti ", api, ": src=None with an empty tensor (",
                    tensors[0].numel(), " elements): a message of no bytes cannot be seen "
                    "arriving; pass src=<rank>");
  TORCH_CHECK_VALUE(!coalescing_, "tutti ", api, ": src=None cannot join a coalesced group "
                    "(batch_isend_irecv needs a peer for every receive)");
  at::Tensor t = tensors[0];
  auto work = makeWork(c10d::OpType::RECVANYSOURCE, "recv (any source)", {t});
  TuttiWork* w = work.get();  // the queue holds the Work until its body has run
  submit(work, /*async=*/true, [this, t, w](Communicator&) {
    std::vector<int> peers;
    for (int q = 0; q < size_; ++q)
      if (q != rank_) peers.push_back(q);
    Staged s = Staged::output(t);
    Result<int> from = p2pComm_.recvAny(s.data(), s.bytes(), DataType::kUint8, peers);
    if (!from) return from.status();
    w->setSourceRank(from.value());
    s.writeBack();
    return Status::ok();
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::barrier(const c10d::BarrierOptions& opts) {
  return enqueue(c10d::OpType::BARRIER, "barrier", {}, opts.asyncOp,
                 [](Communicator& c) { return c.barrier(); });
}

}  // namespace tutti::torch_backend
