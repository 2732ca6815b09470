// File: include/tutti/tutti.hpp
// The tutti C++ API: create a communicator (from a UniqueId or from the launcher's environment)
// and run collectives on host memory across processes. Every call returns a Status or Result;
// nothing throws. Needs only the standard library.
//
// Buffer conventions follow NCCL (counts are ELEMENTS, never bytes):
//   allReduce      send: count            recv: count
//   allGather      send: count (per rank) recv: nranks*count; in place: send == recv + rank*count
//   reduceScatter  send: nranks*count     recv: count (per rank); in place: recv == send + rank*count
//   broadcast      send: count (root)     recv: count; in place: send == recv
//   reduce         send: count            recv: count (root only; ignored elsewhere)
//   allToAll       send: nranks*count     recv: nranks*count (block j of send goes to rank j)
//   gather         send: count            recv: nranks*count (root only)
//   scatter        send: nranks*count (root only)   recv: count
// Any other overlap between send and recv is InvalidArgument. A count of 0 is a valid no-op and
// null buffers are then allowed; a null buffer that the call would touch on this rank is
// InvalidArgument.
//
// Thread safety: a Communicator may be used by one thread at a time (like an ncclComm_t); calls
// on different communicators may run concurrently. Work objects may be waited on from any thread.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <tutti/status.hpp>
#include <tutti/types.hpp>

namespace tutti {

/// "0.1.0".
TUTTI_API const char* versionString();

/// 128 opaque bytes, layout-compatible with ncclUniqueId: the root's socket address and a random
/// 64-bit secret that every bootstrap connection must present. Exchange it out of band (MPI_Bcast,
/// a file, a key-value store) from the rank that created it to all others.
struct UniqueId {
  std::array<char, 128> bytes{};
};

/// Creates a UniqueId and starts the rendezvous root in a background thread of this process (it
/// lives until every rank of that id has joined, or until the bootstrap timeout). The root binds
/// TUTTI_COMM_ID / NCCL_COMM_ID ("host:port") when set, else 127.0.0.1 on an ephemeral port when
/// TUTTI_SOCKET_IFNAME is unset and the job is local, else the first non-loopback interface.
/// SystemError if the socket cannot be bound.
TUTTI_API Result<UniqueId> createUniqueId();

/// createUniqueId() for a second communicator of a job (a sub-group, a process group of a
/// framework): the root binds an ephemeral port whatever TUTTI_COMM_ID / NCCL_COMM_ID say (they
/// name the job's one fixed root, which a second root cannot bind): on the interface
/// TUTTI_SOCKET_IFNAME / NCCL_SOCKET_IFNAME names, else on 127.0.0.1. Errors as
/// createUniqueId.
TUTTI_API Result<UniqueId> createFreshUniqueId();

/// Options of a communicator. Zero means "from the environment / default".
struct Options {
  /// Collective timeout: a call that waits longer fails with Timeout naming the collective and the
  /// peers waited for; the communicator is then in an error state. 0: TUTTI_TIMEOUT (seconds), whose
  /// default 0 means no timeout (dead peers are still detected).
  std::chrono::milliseconds timeout{0};
  /// Bootstrap timeout (TUTTI_BOOTSTRAP_TIMEOUT seconds, default 120).
  std::chrono::milliseconds bootstrapTimeout{0};
  /// Comma-separated transports allowed, in tutti's priority order ("shm,tcp"); empty means
  /// TUTTI_TRANSPORTS or all. "self" is always allowed for a rank talking to itself.
  std::string transports;
  /// Call-mismatch detection (docs/errors.md): 1 on, 0 off, -1 (default) TUTTI_CHECK_CALLS.
  /// When on, ranks whose calls differ (collective, count, dtype, op, root) get InvalidUsage naming
  /// the ranks and values instead of wrong data or a hang.
  int checkCalls = -1;
};

/// Counters of one (collective, algorithm) pair on one communicator, since its creation or the last
/// resetStats(). Only calls that completed successfully are counted; count-0 calls are not.
struct CollStats {
  Coll coll = Coll::kAllReduce;
  std::string algorithm;   ///< "ring", "p2p" (send/recv), ...
  uint64_t calls = 0;
  /// Sum of the calls' message sizes as nccl-tests reports them: count x dtype size, times nranks
  /// for allGather, reduceScatter, allToAll, gather and scatter (whose count is per rank).
  uint64_t bytes = 0;
  uint64_t wireBytes = 0;  ///< bytes this rank sent plus received through its transports
  /// Wall time spent executing these calls on this rank. A call shape (collective, count, dtype,
  /// ...) whose last timed call took under about 1-4 us is timed once every 16 calls, and each
  /// call in between counts that duration: reading the clock twice would cost about 6% of such
  /// a call.
  double seconds = 0;
};

class Work;
namespace detail {
class CommImpl;
class WorkState;
struct CommAccess;  // core's own way in (core/comm.h)
}  // namespace detail

/// A group of `size()` ranks in (usually) different processes. Movable, not copyable; the
/// destructor releases transports and shared memory (without synchronising with peers).
class TUTTI_API Communicator {
 public:
  Communicator() = default;
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  ~Communicator();

  /// Joins the rendezvous of `id` as `rank` of `nranks`. Blocks until all ranks joined and every
  /// peer connection is up. InvalidArgument for nranks < 1 or rank outside [0, nranks);
  /// Timeout naming the ranks that did not arrive; SystemError on socket failures; InvalidUsage
  /// when the id's secret is wrong. Collective: every rank must call it.
  static Result<Communicator> create(const UniqueId& id, int rank, int nranks,
                                     const Options& options = {});

  /// Reads rank and size from the launcher, in this order: TUTTI_RANK/TUTTI_NRANKS (tutti-run),
  /// torchrun (RANK/WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_RANK/SIZE), PMI (PMI_RANK/PMI_SIZE),
  /// Slurm (SLURM_PROCID/SLURM_NTASKS), and the root address from TUTTI_COMM_ID or NCCL_COMM_ID,
  /// else MASTER_ADDR (port MASTER_PORT+1), else derived from the launcher's job (rank 0 hosts
  /// the root). InvalidUsage naming the variables looked for when no launcher is found.
  static Result<Communicator> fromEnvironment(const Options& options = {});

  bool valid() const { return impl_ != nullptr; }
  int rank() const;
  int size() const;
  /// The transport used to reach `peer` ("self", "shm", "tcp"); "" for a bad peer.
  std::string transportTo(int peer) const;

  // ---- blocking collectives: return when this rank's part is complete and buffers reusable ----
  // Errors (all calls): InvalidArgument naming the bad argument and value (null buffer with
  // count > 0, invalid dtype/op, root or peer out of range, illegal overlap); InvalidUsage on a
  // moved-from/destroyed communicator; RemoteError naming a peer that died or closed; Timeout;
  // and, after any of the last two, the same error again (the communicator stays failed).
  Status allReduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op);
  Status allGather(const void* send, void* recv, size_t count, DataType dtype);
  Status reduceScatter(const void* send, void* recv, size_t count, DataType dtype, RedOp op);
  Status broadcast(const void* send, void* recv, size_t count, DataType dtype, int root);
  Status reduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op, int root);
  Status allToAll(const void* send, void* recv, size_t count, DataType dtype);
  Status gather(const void* send, void* recv, size_t count, DataType dtype, int root);
  Status scatter(const void* send, void* recv, size_t count, DataType dtype, int root);
  /// Point to point, matched in call order per (sender, receiver) pair. A send to self must be
  /// paired by a recv in the same rank through sendRecv.
  Status send(const void* buf, size_t count, DataType dtype, int peer);
  Status recv(void* buf, size_t count, DataType dtype, int peer);
  /// Receives one message of `count` elements of `dtype` into `buf` from whichever rank of
  /// `peers` began sending first, and returns that rank (MPI_Recv with MPI_ANY_SOURCE; what
  /// torch.distributed's recv without src asks for). The sender uses send() (or a send of
  /// sendRecvGroup) with the same count and dtype; messages from one rank still arrive in their
  /// order. The probe looks at the next bytes each peer sent this rank, whatever call sent them:
  /// on a communicator that also runs collectives, a peer already inside a later collective
  /// would be taken for the sender, so receive from any source on a communicator that carries
  /// only send/recv (the torch backend keeps one of its own for them). Errors: InvalidArgument
  /// for an empty `peers`, a peer outside [0, size()) or equal to this rank (naming its index),
  /// a message of 0 bytes (nothing arrives that could be seen), or a bad buf or dtype, nothing
  /// received; InvalidUsage when a peer is reached over a transport that cannot probe (shm and
  /// tcp can); RemoteError naming a peer that died; Timeout naming the ranks waited for.
  Result<int> recvAny(void* buf, size_t count, DataType dtype, std::span<const int> peers);
  /// Sends `send` to sendPeer and receives into `recv` from recvPeer concurrently (no deadlock in a
  /// ring exchange).
  Status sendRecv(const void* send, int sendPeer, void* recv, int recvPeer, size_t count,
                  DataType dtype);
  /// Returns when every rank has entered the barrier.
  Status barrier();

  /// One allreduce of `count` elements per buffer (send -> recv, in place when send == recv).
  struct ReduceBuffer {
    const void* send = nullptr;
    void* recv = nullptr;
    size_t count = 0;
  };
  /// Allreduces every buffer of `buffers` (all of one dtype and op) as one batch: runs of
  /// consecutive buffers of together at most TUTTI_FUSION_BYTES (default 64 KiB) fuse into one
  /// plan made of exactly the steps the separate allReduce calls would run, so each result is
  /// bit-identical to a separate call's while the rounds' latency is paid once for the run
  /// (gradient buckets, NCCL's group fusion). Larger buffers run as separate calls, in order.
  /// Every buffer is checked before anything runs: InvalidArgument naming the buffer's index
  /// ("allReduceFused: buffers[2]: ..."), nothing changed. A buffer may not read what an earlier
  /// one writes unless they are separated by a buffer that does not fuse. Other errors as
  /// allReduce.
  Status allReduceFused(std::span<const ReduceBuffer> buffers, DataType dtype, RedOp op);

  /// One message of sendRecvGroup: `count` elements of `dtype` sent from `buf` to `peer` (`send`
  /// true; `buf` is only read) or received from `peer` into `buf`.
  struct PeerTransfer {
    bool send = true;
    void* buf = nullptr;
    size_t count = 0;
    DataType dtype = DataType::kUint8;
    int peer = -1;
  };
  /// Runs every send and receive of `ops` together, as one NCCL group of ncclSend/ncclRecv does:
  /// all are posted at once and progressed together, so ranks that each send before they
  /// receive (two ranks exchanging large buffers, a pipeline's forward and backward messages)
  /// do not wait for each other, which separate blocking send() and recv() calls would. Messages
  /// between one pair of ranks match in list order, as separate calls do; the peer's group (or
  /// its separate calls) must post the matching ones. A message to this rank itself needs a
  /// receive of the same size from itself in the same group. Returns when every message is
  /// complete. Every message is checked before anything runs: InvalidArgument naming its index
  /// ("sendRecvGroup: ops[1]: peer 7 is outside [0, 4) ..."), nothing sent. Other errors as
  /// send() and recv().
  Status sendRecvGroup(std::span<const PeerTransfer> ops);

  // ---- stream-ordered versions: device or host memory, as the NCCL ABI takes them ----
  // `stream` is a cudaStream_t (nullptr: the legacy default stream), passed as void* so that this
  // header needs no CUDA. Buffers in CUDA device or managed memory: the call is enqueued on the
  // stream and returns at once; it runs after the stream's earlier work, and the stream's later
  // work sees its result. Today it runs staged: the stream copies the device inputs to pinned
  // host memory, the host engine runs the collective on the communicator's progress thread
  // (every algorithm and transport of the host path), and the stream copies the outputs back
  // (docs/GPU.md: bound by the host copies). Host memory: the call waits for the stream's
  // earlier work and then runs as the blocking call. Errors: argument errors as the blocking
  // calls, returned at once with nothing enqueued; UnhandledCudaError or SystemError when the
  // enqueue fails; an error of the execution itself (a dead peer, a timeout) fails the job on
  // the stream (its outputs undefined, the stream never hangs) and becomes asyncError(), which
  // later calls return. InvalidUsage on device memory in a build without CUDA. Captured in a
  // CUDA graph, the collective runs at each replay.
  Status allReduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                   void* stream);
  Status allGather(const void* send, void* recv, size_t count, DataType dtype, void* stream);
  Status reduceScatter(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                       void* stream);
  Status broadcast(const void* send, void* recv, size_t count, DataType dtype, int root,
                   void* stream);
  Status reduce(const void* send, void* recv, size_t count, DataType dtype, RedOp op, int root,
                void* stream);
  Status allToAll(const void* send, void* recv, size_t count, DataType dtype, void* stream);
  Status gather(const void* send, void* recv, size_t count, DataType dtype, int root,
                void* stream);
  Status scatter(const void* send, void* recv, size_t count, DataType dtype, int root,
                 void* stream);
  Status send(const void* buf, size_t count, DataType dtype, int peer, void* stream);
  Status recv(void* buf, size_t count, DataType dtype, int peer, void* stream);

  // ---- asynchronous versions: run in issue order on the communicator's progress thread ----
  // Argument errors are returned immediately (nothing is queued); communication errors come
  // from Work::wait(). Buffers must stay valid and untouched until the Work completes.
  Result<Work> allReduceAsync(const void* send, void* recv, size_t count, DataType dtype,
                              RedOp op);
  Result<Work> allGatherAsync(const void* send, void* recv, size_t count, DataType dtype);
  Result<Work> reduceScatterAsync(const void* send, void* recv, size_t count, DataType dtype,
                                  RedOp op);
  Result<Work> broadcastAsync(const void* send, void* recv, size_t count, DataType dtype,
                              int root);
  Result<Work> reduceAsync(const void* send, void* recv, size_t count, DataType dtype, RedOp op,
                           int root);
  Result<Work> allToAllAsync(const void* send, void* recv, size_t count, DataType dtype);
  Result<Work> gatherAsync(const void* send, void* recv, size_t count, DataType dtype, int root);
  Result<Work> scatterAsync(const void* send, void* recv, size_t count, DataType dtype, int root);
  Result<Work> barrierAsync();

  /// Makes every pending and future call fail with InvalidUsage("aborted") within about 1 s.
  /// Safe to call from any thread while another thread is inside a call.
  void abort();

  /// The first asynchronous error seen (RemoteError, Timeout, ...), or ok.
  Status asyncError() const;

  /// Chooses the algorithm for a collective by name ("ring", "chain", ...), or "" for automatic.
  /// InvalidArgument when no algorithm of that name exists for that collective.
  Status setAlgorithm(Coll coll, const std::string& name);
  /// Names of the registered algorithms for a collective.
  static std::vector<std::string> algorithms(Coll coll);

  /// The algorithm a call of this shape runs with on this communicator, as the selector chose it
  /// (docs/TOPOLOGY.md): its name, the simulator's predicted time in microseconds (-1 when it
  /// could not be predicted) and why it won ("model", "forced by setAlgorithm ...", an override).
  /// `count` as the collective's own call takes it (elements; per rank where the call says so).
  /// Local and cheap after the first call of a shape (decisions are cached); no communication.
  /// InvalidArgument for count 0, a root outside [0, size()) or an invalid dtype/op;
  /// InvalidUsage on a moved-from communicator.
  struct AlgorithmChoice {
    std::string algorithm;
    double predictedUs = -1;
    std::string reason;
  };
  Result<AlgorithmChoice> algorithmFor(Coll coll, size_t count, DataType dtype,
                                       RedOp op = RedOp::kSum, int root = 0,
                                       bool inPlace = false) const;

  /// Loads a JSON schedule file (docs/SCHEDULES.md), registers it as an algorithm of its
  /// collective (once per process and path) and selects it on this communicator. Returns the
  /// algorithm's name. The schedule is verified for this communicator's size and each count
  /// before first use; a call whose schedule fails verification returns InvalidUsage with the
  /// verifier's message (rank, round, step). InvalidArgument for an unreadable or malformed file
  /// (naming the JSON path of the problem) or a name already taken. Also done at creation for
  /// every path in TUTTI_SCHEDULE_FILE (comma-separated).
  Result<std::string> loadSchedule(const std::string& path);

  /// Statistics per (collective, algorithm), in first-use order; empty for an empty communicator.
  /// Thread-safe: may be called while another thread runs collectives.
  std::vector<CollStats> stats() const;
  void resetStats();

  /// Writes this communicator's hang report now: one line per pending operation (sequence number,
  /// collective, round, peers waited on, bytes moved), or one line saying nothing is pending, to
  /// the log (or stderr when TUTTI_DEBUG=NONE). Safe from any thread; returns within about 1 s.
  /// SIGUSR1 does the same for every communicator of the process when TUTTI_HANG_SIGNAL=1.
  void writeHangReport() const;


 private:
  friend struct detail::CommAccess;
  explicit Communicator(std::shared_ptr<detail::CommImpl> impl);
  std::shared_ptr<detail::CommImpl> impl_;
};

/// Handle of an asynchronous collective. Copyable (shared state); thread-safe.
class TUTTI_API Work {
 public:
  Work() = default;
  /// Blocks until the operation finished; returns its Status. Returns immediately for an empty
  /// Work (ok).
  Status wait() const;
  /// Non-blocking: true when finished (then wait() returns at once).
  bool test() const;
  /// The operation's Status once finished; kInProgress before.
  Status error() const;

 private:
  friend class detail::CommImpl;
  explicit Work(std::shared_ptr<detail::WorkState> s) : state_(std::move(s)) {}
  std::shared_ptr<detail::WorkState> state_;
};

}  // namespace tutti
