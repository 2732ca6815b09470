// File: nccl/device_clique.cc
// The NCCL layer's side of the device clique (core/device/clique.h): at init, which ranks share
// this process and GPU; at a call or a group's end, the batches of device operations handed to
// the clique.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <random>

#include "base/config.h"
#include "base/env.h"
#include "base/host_id.h"
#include "base/log.h"
#include "core/device/clique.h"
#include "core/device/process_clique.h"
#include "nccl/device.h"

#if TUTTI_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tutti::nccl {

namespace {

TUTTI_PARAM_STRING(kDevicePath, "TUTTI_DEVICE_PATH", nullptr, "NCCL", "auto",
                   "device memory with ranks that are threads of one process on one GPU: auto "
                   "(one kernel per collective for all of them) or staged (through pinned host "
                   "memory and the host engine)");

// What each rank tells the others at init. Plain bytes: exchanged with an allgather of uint8.
struct DeviceInfo {
  uint64_t host = 0;  // hash of the host identity
  int64_t pid = 0;
  std::array<uint8_t, 16> uuid{};  // the GPU's
  int32_t device = -1;             // -1: no GPU
  int32_t staged = 0;              // TUTTI_DEVICE_PATH=staged on this rank
  uint64_t key = 0;                // rank 0's is the clique key
};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

device::Call toCall(const PendingOp& op) {
  device::Call c;
  c.kind = op.kind == PendingOp::Kind::kSend   ? device::Call::Kind::kSend
           : op.kind == PendingOp::Kind::kRecv ? device::Call::Kind::kRecv
                                               : device::Call::Kind::kColl;
  c.coll = op.coll;
  c.send = op.send;
  c.recv = op.recv;
  c.count = op.count;
  c.dtype = op.dtype;
  c.op = op.op;
  c.preMul = op.preMul;
  c.scalar = op.scalar;
  c.root = op.root;
  c.peer = op.peer;
  c.stream = op.stream;
  c.sendReachable = op.sendReachable;
  c.recvReachable = op.recvReachable;
  c.api = op.api;
  return c;
}

}  // namespace

Status initDevicePath(CommState& s) {
  if (s.nranks == 1) return Status::ok();  // one rank: device copies (nccl/device.cc)
  DeviceInfo mine;
  mine.host = fnv1a(hostId());
  mine.pid = static_cast<int64_t>(getpid());
  mine.staged = kDevicePath.get() == "staged" ? 1 : 0;
#if TUTTI_HAVE_CUDA
  if (cudaDevicePresent() && s.cudaDev >= 0) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, s.cudaDev) == cudaSuccess) {
      mine.device = s.cudaDev;
      std::memcpy(mine.uuid.data(), prop.uuid.bytes, mine.uuid.size());
    } else {
      (void)cudaGetLastError();
    }
  }
#endif
  if (s.rank == 0) mine.key = std::random_device{}() * 0x100000001ull ^ std::random_device{}();
  std::vector<DeviceInfo> all(s.nranks);
  TUTTI_TRY(s.comm.allGather(&mine, all.data(), sizeof(DeviceInfo), DataType::kUint8));
  bool oneGpu = true, oneProcess = true, ownProcesses = true;
  for (int r = 0; r < s.nranks; ++r) {
    const DeviceInfo& o = all[r];
    oneGpu = oneGpu && o.device >= 0 && !o.staged && o.host == all[0].host && o.uuid == all[0].uuid;
    oneProcess = oneProcess && o.pid == all[0].pid;
    for (int q = 0; q < r; ++q) ownProcesses = ownProcesses && all[q].pid != o.pid;
  }
  if (!oneGpu || (!oneProcess && !ownProcesses)) return Status::ok();
  // A clique that cannot be formed leaves device memory to the staged path.
  auto staged = [&](const char* what, const Status& why) {
    TUTTI_LOG_WARN(Subsys::kInit,
                   "rank {}: ranks are {} on one GPU, but their device clique could not be "
                   "formed ({}); device memory takes the staged path",
                   s.rank, what, why.message());
    return Status::ok();
  };
  if (oneProcess) {
    auto c = device::Clique::join(all[0].key, s.nranks, s.rank, mine.device,
                                  device::cudaStreamOps());
    if (!c.isOk()) return staged("threads of one process", c.status());
    s.clique = std::move(c).value();
    return Status::ok();
  }
  std::vector<int64_t> pids;
  for (const DeviceInfo& o : all) pids.push_back(o.pid);
  auto allgather = [&s](const void* in, void* out, size_t bytes) {
    return s.comm.allGather(in, out, bytes, DataType::kUint8);
  };
  auto c = device::ProcessClique::create(all[0].key, s.nranks, s.rank, mine.device,
                                         std::move(pids), device::cudaStreamOps(), allgather);
  if (!c.isOk()) return staged("processes", c.status());
  s.procClique = std::move(c).value();
  return Status::ok();
}

Status submitToClique(
    std::span<std::pair<std::shared_ptr<CommState>, std::vector<PendingOp>>> batches) {
  std::vector<std::vector<device::Call>> calls(batches.size());
  std::vector<device::Clique::RankBatch> ranks(batches.size());
  for (size_t i = 0; i < batches.size(); ++i) {
    CommState& s = *batches[i].first;
    for (const PendingOp& op : batches[i].second) calls[i].push_back(toCall(op));
    ranks[i] = {s.rank, &calls[i], &s.aborted};
  }
  device::Clique& clique = *batches.front().first->clique;
  Status st = clique.submit(ranks);
  if (!st.isOk()) {
    for (auto& [comm, ops] : batches) comm->recordAsync(st);
  }
  return st;
}

Status submitToProcessClique(CommState& s, const std::vector<PendingOp>& ops) {
  std::vector<device::Call> calls;
  for (const PendingOp& op : ops) calls.push_back(toCall(op));
  Status st = s.procClique->submit(calls, &s.aborted);
  if (!st.isOk()) s.recordAsync(st);
  return st;
}

}  // namespace tutti::nccl
