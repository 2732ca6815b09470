// File: transports/ib/wc_status.h
// Work-completion status codes (enum ibv_wc_status, numbered as in verbs.h; verbs.cc checks the
// numbers at compile time) mapped to what they mean for this transport and what to try. The
// meanings follow the ibv_poll_cq(3) man page and the InfiniBand specification's completion
// error classes; the hints are ours.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tutti::transport::ib {

struct WcStatusInfo {
  std::string_view name;     ///< "IBV_WC_RETRY_EXC_ERR"
  std::string_view meaning;  ///< "transport retry counter exceeded: ..."
  std::string_view hint;     ///< what to check or set; may be empty
};

/// Description of a status number; unknown numbers get name "IBV_WC_<n>" semantics "unknown".
WcStatusInfo describeWcStatus(int status);

/// Everything a completion-error message names.
struct CompletionError {
  int status = 0;
  uint32_t vendorErr = 0;
  bool isRecv = false;  ///< the failed work request was a receive (else an RDMA write)
  int rank = -1;
  int peer = -1;
  std::string peerHost;
  std::string device;  ///< "mlx5_0:1"
  int timeout = 0;     ///< the NCCL_IB_TIMEOUT in force
  int retryCnt = 0;    ///< the NCCL_IB_RETRY_CNT in force
};

/// One message: "ib: RDMA write to rank 3 (host b) failed with status 12 (IBV_WC_RETRY_EXC_ERR,
/// vendor error 0x81): transport retry counter exceeded: ... Check ...; NCCL_IB_TIMEOUT=20 ...
/// (rank=0, peer=3, device=mlx5_0:1)". Pure.
std::string completionErrorMessage(const CompletionError& e);

/// The minimum ACK timeout of an NCCL_IB_TIMEOUT value in microseconds: 4.096 us * 2^timeout
/// (InfiniBand specification, Local ACK Timeout); 0 means infinite.
double ackTimeoutUs(int timeout);

}  // namespace tutti::transport::ib
