// File: transports/ib/verbs.h
// The only door to libibverbs. libibverbs.so.1 is opened with dlopen on first use, so tutti runs
// where it is absent (the ib transport is then not offered). This header names no verbs type:
// devices, completion queues, queue pairs and memory regions are small RAII classes over opaque
// pointers, and everything else is plain data. verbs.cc is the only file that includes
// <infiniband/verbs.h>. The data-path calls (ibv_post_send, ibv_post_recv, ibv_poll_cq,
// ibv_req_notify_cq) are static inline in verbs.h and dispatch through context->ops, so they
// need no symbol from the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "transports/ib/device_select.h"
#include "transports/ib/fifo_channel.h"

namespace tutti::transport::ib::verbs {

/// Opens libibverbs.so.1 and resolves the functions used (once per process; thread-safe).
/// SystemError with dlerror's text when the library or a required symbol is missing.
Status load();

/// Every RDMA device and its ports (each device is opened and closed). Requires load().
Result<std::vector<DeviceInfo>> listDevices();

struct MemoryRegion {
  void* handle = nullptr;  ///< ibv_mr*
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

/// An opened device and one protection domain on it. Shared by every queue pair of a transport.
class Device {
 public:
  static Result<std::shared_ptr<Device>> open(const std::string& name);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& name() const { return name_; }
  Result<PortInfo> queryPort(int port) const;
  /// The non-empty GID table entries of `port` with their types.
  Result<std::vector<GidEntry>> queryGids(int port, int tableLen) const;
  /// ibv_reg_mr. remoteWrite adds IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE; without it
  /// the region is only read by the NIC (access 0, so read-only user memory registers too).
  Result<MemoryRegion> registerMemory(void* addr, size_t bytes, bool remoteWrite);
  /// ibv_dereg_mr; a failure is logged (nothing else can be done about it).
  void deregister(const MemoryRegion& mr);

  void* context() const { return context_; }
  void* pd() const { return pd_; }

 private:
  Device() = default;
  std::string name_;
  void* context_ = nullptr;  // ibv_context*
  void* pd_ = nullptr;       // ibv_pd*
};

/// A completion queue with its own completion channel (a pollable file descriptor).
class CompletionQueue {
 public:
  static Result<std::unique_ptr<CompletionQueue>> create(std::shared_ptr<Device> dev, int depth);
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  /// ibv_poll_cq into `out`; the number of completions taken.
  Result<size_t> poll(std::span<WireCompletion> out);
  /// The completion channel's file descriptor (non-blocking; readable after arm() and a CQE).
  int fd() const;
  /// ibv_req_notify_cq(cq, 0): the next completion makes fd() readable.
  Status arm();
  /// Reads and acknowledges the events pending on fd() without blocking; how many were read.
  int consumeEvents();
  void* handle() const { return cq_; }

 private:
  CompletionQueue() = default;
  std::shared_ptr<Device> dev_;
  void* channel_ = nullptr;  // ibv_comp_channel*
  void* cq_ = nullptr;       // ibv_cq*
};

/// Where a queue pair's peer is and how to reach it.
struct RemoteAddress {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  Gid gid;
};
struct PathParams {
  int port = 1;
  int gidIndex = 0;
  bool useGrh = false;
  uint8_t mtu = 0;       ///< enum ibv_mtu of the path: min of both ports' active MTU
  int timeout = 20;      ///< NCCL_IB_TIMEOUT: 4.096 us * 2^timeout per try
  int retryCnt = 7;      ///< NCCL_IB_RETRY_CNT
  int serviceLevel = 0;  ///< NCCL_IB_SL
  int trafficClass = 0;  ///< NCCL_IB_TC
};

/// A reliable-connected queue pair whose send and receive queues complete on one CQ.
class QueuePair {
 public:
  static Result<std::unique_ptr<QueuePair>> createRc(std::shared_ptr<Device> dev,
                                                     CompletionQueue& cq, uint32_t sendDepth,
                                                     uint32_t recvDepth);
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  uint32_t qpn() const { return qpn_; }
  /// RESET -> INIT on `port`, remote write allowed.
  Status toInit(int port);
  /// INIT -> RTR towards `remote`; then RTR -> RTS with our `localPsn`.
  Status connect(const RemoteAddress& remote, uint32_t localPsn, const PathParams& path);
  /// ibv_post_send of one signaled RDMA_WRITE_WITH_IMM (imm in host order; sent big-endian).
  Status postWrite(uint64_t wrId, const void* src, uint32_t bytes, uint32_t lkey,
                   uint64_t remoteAddr, uint32_t rkey, uint32_t imm);
  /// ibv_post_send of one signaled zero-byte RDMA_WRITE (no immediate: the peer sees nothing).
  Status postProbe(uint64_t wrId, uint64_t remoteAddr, uint32_t rkey);
  /// ibv_post_recv of one receive without scatter entries.
  Status postRecv(uint64_t wrId);

 private:
  QueuePair() = default;
  std::shared_ptr<Device> dev_;
  void* qp_ = nullptr;  // ibv_qp*
  uint32_t qpn_ = 0;
};

}  // namespace tutti::transport::ib::verbs
