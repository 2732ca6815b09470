// File: core/device/path.cc
// A communicator's device path (core/batch.h): its executors (core/device/executor.h), which ranks
// share this process and GPU (found at init), and the choice of executor per submitted batch.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <random>

#include "base/config.h"
#include "base/env.h"
#include "base/hash.h"
#include "base/host_id.h"
#include "base/log.h"
#include "core/batch.h"
#include "core/device/clique.h"
#include "core/device/executor.h"
#include "core/device/peer.h"
#include "core/device/placement.h"
#include "core/device/process_clique.h"
#include "core/device/staged.h"

#if TUTTI_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tutti {

class DevicePath {
 public:
  explicit DevicePath(DeviceOwner& o) : owner(o), staged(device::makeStagedExecutor()) {}

  DeviceOwner& owner;
  const std::unique_ptr<device::Executor> staged;
  /// Set once by joinDeviceClique, before the owner is ready; null when the ranks are not a
  /// clique. cliqueKey tells the batches of one thread clique apart (submitted together).
  std::unique_ptr<device::Executor> clique;
  const void* cliqueKey = nullptr;
  bool processClique = false;
  /// Set once by joinDeviceClique (TUTTI_DEVICE_PATH=peer): every rank runs its own kernel.
  std::unique_ptr<device::Executor> peer;
  std::shared_ptr<device::PeerGroup> peerGroup;  // the peer executor's (windows)
};

namespace {

TUTTI_PARAM_STRING(kDevicePath, "TUTTI_DEVICE_PATH", nullptr, "NCCL", "auto",
                   "device memory with several ranks: auto (ranks on one GPU: one kernel per "
                   "collective for all of them; otherwise staged), staged (through pinned host "
                   "memory and the host engine), or peer (a kernel per rank exchanging data "
                   "through FIFOs in device memory, for ranks that are threads of one process or "
                   "processes on GPUs of their own, or on one GPU under MPS; not yet run on a "
                   "GPU)");

// What each rank tells the others at init. Plain bytes: exchanged with an allgather of uint8.
struct DeviceInfo {
  uint64_t host = 0;  // hash of the host identity
  int64_t pid = 0;
  std::array<uint8_t, 16> uuid{};  // the GPU's
  int32_t device = -1;             // -1: no GPU
  int32_t staged = 0;              // TUTTI_DEVICE_PATH=staged on this rank
  int32_t peer = 0;                // TUTTI_DEVICE_PATH=peer on this rank
  int32_t mps = 0;                 // MPS's control pipe exists (mpsPresent)
  int32_t pad = 0;                 // key starts at a multiple of 8
  uint64_t key = 0;                // rank 0's is the clique key
};

// Whether this process's kernels run under MPS, as far as can be told without CUDA's help: the
// MPS control daemon's pipe exists in CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps), which
// CUDA clients connect through (NVIDIA's MPS documentation, "Environment variables").
bool mpsPresent() {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string control = std::string(dir && *dir ? dir : "/tmp/nvidia-mps") + "/control";
  return access(control.c_str(), F_OK) == 0;
}

// The communicator's allgather of plain bytes, as the device executors take it.
auto byteAllgather(Communicator& comm) {
  return [&comm](const void* in, void* out, size_t bytes) {
    return comm.allGather(in, out, bytes, DataType::kUint8);
  };
}

bool hasTask(const std::vector<BatchOp>& ops) {
  return std::any_of(ops.begin(), ops.end(),
                     [](const BatchOp& o) { return o.kind == BatchOp::Kind::kTask; });
}

// TUTTI_DEVICE_PATH=peer on every rank: every rank allocates its arena, then (all allocated)
// reaches the others' (CUDA IPC for those in other processes, whose ids are `pids`; empty when
// all are threads of this process); a failure anywhere leaves every rank staged.
Status joinPeer(DevicePath& path, Communicator& comm, int rank, int nranks, int device,
                uint64_t key, std::vector<int64_t> pids) {
  auto agreed = [&](const Status& mine) -> Result<bool> {
    const uint8_t ok = mine.isOk() ? 1 : 0;
    std::vector<uint8_t> oks(nranks);
    TUTTI_TRY(comm.allGather(&ok, oks.data(), 1, DataType::kUint8));
    return std::all_of(oks.begin(), oks.end(), [](uint8_t v) { return v == 1; });
  };
  auto staged = [&](const Status& why) {
    TUTTI_LOG_WARN(Subsys::kInit,
                   "rank {}: TUTTI_DEVICE_PATH=peer, but the peer executor could not be set up "
                   "({}); device memory takes the staged path",
                   rank, why.isOk() ? "another rank failed" : why.message());
    return Status::ok();
  };
  const bool processes = !pids.empty();
  auto group = device::joinPeerGroup(key, nranks, rank, device, device::cudaPeerDevice(),
                                     device::peerArenaConfig(nranks), std::move(pids));
  TUTTI_TRY_ASSIGN(const bool joined, agreed(group.status()));
  if (!joined) return staged(group.status());
  Status connected = device::connectPeerGroup(*group.value(), rank, byteAllgather(comm));
  TUTTI_TRY_ASSIGN(const bool all, agreed(connected));
  if (!all) return staged(connected);
  path.peerGroup = group.value();
  path.peer = device::makePeerExecutor(std::move(group).value(), rank);
  TUTTI_LOG_INFO(Subsys::kInit, "rank {}: peer executor, {} ranks as {}, device {}", rank, nranks,
                 processes ? "processes" : "threads", device);
  return Status::ok();
}

}  // namespace

bool cudaDevicePresent() { return device::cudaDevicePresent(); }

Status syncStream(void* stream, const char* api) { return device::syncStream(stream, api); }

void findMemoryKinds(BatchOp& op, int rank, int nranks) {
  const auto [inBytes, outBytes] = op.ioBytes(rank, nranks);
  if (inBytes > 0) {
    const device::MemoryKind k = device::memoryKind(op.send);
    op.sendDevice = k.device;
    op.sendReachable = k.reachable;
  }
  if (outBytes > 0) {
    const device::MemoryKind k = device::memoryKind(op.recv);
    op.recvDevice = k.device;
    op.recvReachable = k.reachable;
  }
}

DevicePathPtr makeDevicePath(DeviceOwner& owner) { return DevicePathPtr(new DevicePath(owner)); }

void DevicePathDelete::operator()(DevicePath* p) const { delete p; }

Status joinDeviceClique(DevicePath& path, Communicator& comm, int cudaDevice) {
  const int rank = path.owner.deviceRank(), nranks = path.owner.deviceRanks();
  if (nranks == 1) return Status::ok();  // one rank: device copies (the staged executor)
  DeviceInfo mine;
  mine.host = fnv1a(hostId());
  mine.pid = static_cast<int64_t>(getpid());
  mine.staged = kDevicePath.get() == "staged" ? 1 : 0;
  mine.peer = kDevicePath.get() == "peer" ? 1 : 0;
  mine.mps = mine.peer && mpsPresent() ? 1 : 0;
#if TUTTI_HAVE_CUDA
  if (cudaDevicePresent() && cudaDevice >= 0) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, cudaDevice) == cudaSuccess) {
      mine.device = cudaDevice;
      std::memcpy(mine.uuid.data(), prop.uuid.bytes, mine.uuid.size());
    } else {
      (void)cudaGetLastError();
    }
  }
#else
  (void)cudaDevice;
#endif
  if (rank == 0) mine.key = std::random_device{}() * 0x100000001ull ^ std::random_device{}();
  std::vector<DeviceInfo> all(nranks);
  TUTTI_TRY(comm.allGather(&mine, all.data(), sizeof(DeviceInfo), DataType::kUint8));
  std::vector<device::Placement> places;
  std::vector<int64_t> pids;
  for (const DeviceInfo& o : all) {
    places.push_back(
        {o.host, o.pid, o.uuid, o.device >= 0, o.staged != 0, o.peer != 0, o.mps != 0});
    pids.push_back(o.pid);
  }
  const device::PathKind kind = device::choosePath(places);
  if (kind == device::PathKind::kPeerThreads)
    return joinPeer(path, comm, rank, nranks, mine.device, all[0].key, {});
  if (kind == device::PathKind::kPeerProcesses)
    return joinPeer(path, comm, rank, nranks, mine.device, all[0].key, pids);
  const bool allPeer =
      std::all_of(places.begin(), places.end(), [](const device::Placement& p) { return p.peer; });
  if (rank == 0 && allPeer && device::timeSliced(places))
    TUTTI_LOG_WARN(Subsys::kInit,
                   "TUTTI_DEVICE_PATH=peer: ranks of different processes share a GPU without MPS "
                   "(a kernel waiting for another process's kernel could wait a whole time "
                   "slice); the peer executor is not used");
  if (kind == device::PathKind::kStaged) return Status::ok();
  // A clique that cannot be formed leaves device memory to the staged executor.
  auto staged = [&](const char* what, const Status& why) {
    TUTTI_LOG_WARN(Subsys::kInit,
                   "rank {}: ranks are {} on one GPU, but their device clique could not be "
                   "formed ({}); device memory takes the staged path",
                   rank, what, why.message());
    return Status::ok();
  };
  if (kind == device::PathKind::kThreadClique) {
    auto c = device::Clique::join(all[0].key, nranks, rank, mine.device, device::cudaStreamOps());
    if (!c.isOk()) return staged("threads of one process", c.status());
    path.cliqueKey = c.value().get();
    path.clique = device::makeCliqueExecutor(std::move(c).value());
    return Status::ok();
  }
  auto c = device::ProcessClique::create(all[0].key, nranks, rank, mine.device, std::move(pids),
                                         device::cudaStreamOps(), byteAllgather(comm));
  if (!c.isOk()) return staged("processes", c.status());
  path.processClique = true;
  path.clique = device::makeProcessCliqueExecutor(std::move(c).value());
  return Status::ok();
}

Status submitDevice(std::span<DeviceBatch> batches, bool blocking) {
  Status first;
  auto note = [&](const Status& s) {
    if (first.isOk() && !s.isOk()) first = s;
  };
  // Batches of communicators in a clique: their device operations go to the clique, every
  // clique's batches together (one thread driving all ranks launches at once); their host
  // operations stay for the caller.
  struct Cliqued {
    DevicePath* path;
    device::RankBatch batch;
    std::vector<BatchOp> ops;
  };
  std::vector<Cliqued> cliqued;
  std::vector<bool> toClique(batches.size(), false);
  // The peer executor takes whole batches (collectives, sends and receives on one stream); each
  // rank's kernel waits for its peers on the GPU, so no batch waits for another here.
  for (size_t i = 0; i < batches.size(); ++i) {
    DeviceBatch& b = batches[i];
    if (!b.path->peer || !blocking ||
        !device::peerEligible(b.ops, b.path->owner.deviceRank(), b.path->owner.deviceRanks()))
      continue;
    const device::RankBatch rb{&b.path->owner, &b.ops, b.keepAlive};
    note(b.path->peer->submit(std::span(&rb, 1)));
    b.ops.clear();
    toClique[i] = true;  // nothing left for the staged executor
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    DeviceBatch& b = batches[i];
    if (toClique[i] || !b.path->clique || !blocking || hasTask(b.ops)) continue;  // staged below
    toClique[i] = true;
    std::vector<BatchOp> dev, host;
    for (BatchOp& o : b.ops) (o.device() ? dev : host).push_back(std::move(o));
    b.ops = std::move(host);
    cliqued.push_back({b.path, {&b.path->owner, nullptr, b.keepAlive}, std::move(dev)});
  }
  for (Cliqued& c : cliqued) c.batch.ops = &c.ops;
  std::stable_sort(cliqued.begin(), cliqued.end(), [](const Cliqued& x, const Cliqued& y) {
    return std::less<>()(x.path->cliqueKey, y.path->cliqueKey);
  });
  // Process cliques: the batches this process posts as a peer first (they never wait), then
  // those it leads (which wait for their peers, who may be waiting for this group's posts).
  std::stable_partition(cliqued.begin(), cliqued.end(), [](const Cliqued& c) {
    return c.path->processClique && c.path->owner.deviceRank() != 0;
  });
  for (size_t i = 0; i < cliqued.size();) {
    size_t j = i + 1;
    if (!cliqued[i].path->processClique)
      while (j < cliqued.size() && cliqued[j].path->cliqueKey == cliqued[i].path->cliqueKey) ++j;
    std::vector<device::RankBatch> group;
    for (size_t k = i; k < j; ++k) group.push_back(cliqued[k].batch);
    note(cliqued[i].path->clique->submit(group));
    i = j;
  }
  // Every other batch that touches device memory is one staged job on its stream.
  for (size_t i = 0; i < batches.size(); ++i) {
    DeviceBatch& b = batches[i];
    if (toClique[i]) continue;  // its device operations went to the clique above
    if (std::none_of(b.ops.begin(), b.ops.end(), [](const BatchOp& o) { return o.device(); }))
      continue;
    const device::RankBatch rb{&b.path->owner, &b.ops, b.keepAlive};
    note(b.path->staged->submit(std::span(&rb, 1)));
    b.ops.clear();
  }
  return first;
}

bool peerWindows(const DevicePath& path) { return path.peerGroup != nullptr; }

Status shareDeviceWindow(DevicePath& path, Communicator& comm, void* buff, size_t bytes) {
  if (!path.peerGroup) return Status::ok();
  return device::sharePeerWindow(*path.peerGroup, path.owner.deviceRank(), buff, bytes,
                                 byteAllgather(comm));
}

Status unshareDeviceWindow(DevicePath& path, Communicator& comm, void* buff) {
  if (!path.peerGroup) return Status::ok();
  return device::unsharePeerWindow(*path.peerGroup, path.owner.deviceRank(), buff,
                                   byteAllgather(comm));
}

void failDevicePath(DevicePath& path, const Status& why, bool abort) {
  if (path.clique) path.clique->fail(why, abort);
  if (path.peer) path.peer->fail(why, abort);
}

Status pollDevicePath(DevicePath& path) {
  if (!path.peer) return Status::ok();
  Status s = path.peer->poll();
  if (!s.isOk()) path.owner.recordDeviceError(s, false);
  return s;
}

}  // namespace tutti
