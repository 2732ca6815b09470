// File: core/device/peer.h
// The peer executor: every rank runs its own kernel (kernels/peer_interp.h) that exchanges data
// with its peers' kernels through FIFOs in each other's arenas, as NCCL does across GPUs. For
// ranks that are threads of one process, on one GPU or on several GPUs that can reach each
// other's memory (ncclCommInitAll over several devices, one thread per GPU), and for ranks that
// are processes (one per GPU, as torchrun starts them; or several on one GPU under MPS): a
// process maps the other processes' arenas with CUDA IPC (its own ranks' are plain pointers),
// and the group's abort flag and failure live in shared memory. Each rank's arena
// (FIFOs, counters, scratch; kernels/peer_program.h) and a program area are allocated on its GPU
// when the communicator is made, and freed when the group's last rank in this process is gone
// (and, across processes, once the others have unmapped them): no CUDA allocation, free or
// synchronisation happens while a kernel may wait. A collective is compiled once per call shape
// (core/device/peer_compile.h), its program copied once to the rank's program area (on a stream
// of its own, waited for alone), and launched on the call's stream; the FIFO counters live in
// device memory across calls, so CUDA graphs replay correctly.
//
// Opt-in (TUTTI_DEVICE_PATH=peer) until it has run on a GPU: the code is compiled and its
// protocol runs in the host emulator in CI, but no GPU has executed it yet (docs/GPU.md).
//
// Errors: a kernel that waits longer than TUTTI_TIMEOUT seconds (when set) for a peer, or that is
// aborted, leaves an ErrorRecord in mapped host memory naming the rank, the op, the peer and what
// it waited for; ncclCommGetAsyncError (pollDevicePath) and the rank's next call return it
// (Timeout, InvalidUsage for an abort), and so does every later call of every rank of the group
// (the FIFO counters are no longer consistent).
// ncclCommAbort on any rank sets the group's abort flag: every waiting kernel of the group
// returns within microseconds.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/batch_op.h"
#include "base/status.h"
#include "core/device/stream_ops.h"
#include "kernels/peer_program.h"

namespace tutti::device {

class Executor;

/// What another process needs to map a rank's arena (a cudaIpcMemHandle_t for CUDA).
using PeerMemoryHandle = std::array<std::byte, 64>;

/// The device operations of the peer executor: CUDA's (cudaPeerDevice) or an emulation on CPU
/// threads (tests/unit/peer_executor_test.cc). Called by the ranks' threads, each for its own
/// device; implementations are thread-safe.
class PeerDevice {
 public:
  virtual ~PeerDevice() = default;
  virtual Status setDevice(int device) = 0;
  virtual Result<int> currentDevice() = 0;
  /// Zeroed device memory of the current device.
  virtual Result<void*> allocDevice(size_t bytes) = 0;
  virtual void freeDevice(void* p) = 0;
  /// Zeroed pinned host memory that every device reads and writes at the same address (mapped,
  /// portable, unified addressing).
  virtual Result<void*> allocMapped(size_t bytes) = 0;
  virtual void freeMapped(void* p) = 0;
  /// Lets the current device reach `peer`'s memory: ok for the same device or when already
  /// enabled; InvalidUsage naming both when the devices cannot reach each other.
  virtual Status enablePeerAccess(int peer) = 0;
  /// Copies `bytes` from pinned host memory to the current device's memory and waits for that
  /// copy alone (on a stream of its own, also while a graph is being captured): every kernel
  /// launched afterwards, on any stream, sees it. Nothing else is waited for.
  virtual Status upload(void* dst, const void* src, size_t bytes) = 0;
  /// Enqueues one rank's program on `s` (kernels/peer_cuda.h's launchPeer).
  virtual Status launch(const kernels::peer::Launch& l, const kernels::peer::ProgramHeader& h,
                        Stream s) = 0;

  // ---- for groups whose ranks are in several processes ----

  /// Makes host memory [p, p + bytes) (page aligned: the group's shared memory) usable by the
  /// current device and returns its device address (cudaHostRegister, mapped and portable).
  virtual Result<void*> registerHost(void* p, size_t bytes) = 0;
  virtual void unregisterHost(void* p) = 0;
  /// What another process passes to openMemory to map `base`, an allocDevice allocation of the
  /// current device (cudaIpcGetMemHandle).
  virtual Result<PeerMemoryHandle> exportMemory(void* base) = 0;
  /// Maps another process's exported allocation for the current device, which reaches it
  /// directly from then on (cudaIpcOpenMemHandle with lazy peer access); returns its base.
  /// Never called for an export of this process.
  virtual Result<void*> openMemory(const PeerMemoryHandle& handle) = 0;
  virtual void closeMemory(void* base) = 0;
  /// What another process passes to openMemory to map the allocation that holds `p` (any device
  /// buffer of the user's), and p's offset in it. InvalidUsage for memory CUDA IPC cannot share
  /// (host memory, a stream-ordered pool, a cuMem allocation).
  struct BufferExport {
    PeerMemoryHandle handle{};
    uint64_t offset = 0;
  };
  virtual Result<BufferExport> exportBuffer(const void* p) = 0;
  /// Waits until the work enqueued on `s` so far has run (cudaStreamSynchronize): used only where
  /// every peer's kernels that this work waits for were enqueued before (a collective call).
  virtual Status synchronize(Stream s) = 0;
};

/// CUDA's PeerDevice (the process-wide instance); nullptr in builds without CUDA.
PeerDevice* cudaPeerDevice();

/// The arena of a group of `nranks`: TUTTI_PEER_CHANNELS channels (default 8), FIFOs of 8 slots
/// of 128 KiB (simple) and 8 slots of 4 KiB of data (low latency), TUTTI_PEER_SCRATCH_BYTES of
/// scratch per channel (default 4 MiB). About nranks * channels * 1.1 MiB + channels * scratch.
kernels::peer::ArenaConfig peerArenaConfig(int nranks);

/// Whether a batch can run on the peer executor: collectives only (sends, receives and tasks take
/// the staged path), on one stream, every buffer the collective uses reachable by the GPU, no
/// premulsum in place. Decided from the batch's operations alone, which every rank of a call
/// shares (as the cliques' checks assume).
bool peerEligible(const std::vector<BatchOp>& ops, int rank, int nranks);

/// The ranks of one communicator (the same `key` on every rank) that are threads of this process:
/// created by the first of them to join; each rank allocates its arena and program area on
/// `device`. `pids` holds every rank's process id; empty when every rank is a thread of this
/// process. After every rank has joined (the caller's barrier), each calls connectPeerGroup. The
/// group lives until its last rank's executor of this process is destroyed. InvalidUsage for
/// nranks outside [1, kMaxRanks], a rank outside [0, nranks), pids of another size, or a group of
/// that key with another size; the device's errors.
class PeerGroup;
Result<std::shared_ptr<PeerGroup>> joinPeerGroup(uint64_t key, int nranks, int rank, int device,
                                                 PeerDevice* dev,
                                                 const kernels::peer::ArenaConfig& config,
                                                 std::vector<int64_t> pids = {});

/// An allgather over every rank of the group: each rank's `bytes` bytes, in rank order.
using PeerAllgather = std::function<Status(const void* mine, void* all, size_t bytes)>;

/// Lets `rank`'s device reach every other rank's arena: peer access where the devices of one
/// process differ; when the group spans processes, rank 0 creates the group's shared memory and
/// every process maps it and the other processes' arenas (CUDA IPC), with two calls of
/// `allgather` (needed only then) that every rank makes even when it failed, so that the
/// outcome is the same on every rank. Collective after joinPeerGroup. InvalidUsage for ranks of
/// one process on several devices in a group that spans processes (their other devices would
/// need peer access to memory mapped for the first); the device's and shared memory's errors,
/// and SystemError naming a rank that failed elsewhere.
Status connectPeerGroup(PeerGroup& group, int rank, const PeerAllgather& allgather = {});

/// Windows (ncclCommWindowRegister) across processes: in a group whose every rank is a process of
/// its own, the ranks exchange each window's CUDA IPC handle and map the others', so that a call
/// whose buffers lie in windows on every rank reads peers' buffers in place (direct messages),
/// as ranks of one process do with any buffer. Collective over the group, in the same order on
/// every rank; before mapping or unmapping, each rank waits for its own kernels launched so far
/// (their peers' kernels were all enqueued before this call on every rank, so they end). A
/// window that any rank cannot share (not cudaMalloc'd memory, more than kernels::peer::
/// kMaxWindows of them) stays local on every rank: calls on it take the FIFO's slots. No-op
/// (ok) for groups of one process or with several ranks in a process; unsharing a buffer that
/// is no shared window of `rank` unmaps nothing of its own (the others' still go). Errors: the
/// allgather's; in unsharing, a failed wait for the rank's kernels (the window is unmapped all
/// the same). Failures to export, wait or map while sharing are agreed on by every rank and leave
/// the window local instead.
Status sharePeerWindow(PeerGroup& group, int rank, void* buff, size_t bytes,
                       const PeerAllgather& allgather);
Status unsharePeerWindow(PeerGroup& group, int rank, void* buff, const PeerAllgather& allgather);

/// The executor of one rank of a group: every collective of a submitted batch is compiled (once
/// per shape), its program uploaded (once) and launched on the operation's stream. The
/// algorithm: TUTTI_ALGO's for the collective, else a latency algorithm up to 64 KiB per rank
/// and a bandwidth one above (docs/GPU.md); the low-latency protocol up to TUTTI_PEER_LL_BYTES
/// (default 64 KiB) of call size; one channel per 512 KiB, up to the arena's; direct messages
/// (peers read a send buffer in place) when every rank is a thread of this process on one device,
/// or when a call's buffers lie in shared windows (sharePeerWindow), unless TUTTI_PEER_DIRECT=0.
std::unique_ptr<Executor> makePeerExecutor(std::shared_ptr<PeerGroup> group, int rank);

}  // namespace tutti::device
