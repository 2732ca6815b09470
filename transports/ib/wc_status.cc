// File: transports/ib/wc_status.cc
// The status table behind completionErrorMessage (see wc_status.h).
#include "transports/ib/wc_status.h"

#include <fmt/format.h>

#include <array>
#include <cmath>

namespace tutti::transport::ib {
namespace {

constexpr std::array<WcStatusInfo, 24> kTable = {{
    {"IBV_WC_SUCCESS", "success", ""},
    {"IBV_WC_LOC_LEN_ERR",
     "local length error: a message exceeded the port's maximum message size, or an incoming "
     "message was longer than the receive buffer",
     "this is a tutti bug if it persists; report it with TUTTI_DEBUG=INFO output"},
    {"IBV_WC_LOC_QP_OP_ERR",
     "local queue pair operation error: a work request was inconsistent with the queue pair's "
     "state or capabilities",
     "this is a tutti bug if it persists; report it with TUTTI_DEBUG=INFO output"},
    {"IBV_WC_LOC_EEC_OP_ERR", "local EE context operation error (reliable datagram only)", ""},
    {"IBV_WC_LOC_PROT_ERR",
     "local protection error: a local buffer is not inside a memory region registered in this "
     "protection domain with the access the operation needs (wrong lkey, or memory freed and "
     "reused while its registration was cached)",
     "if TUTTI_IB_REG_CACHE=1 is set, make sure buffers are not freed while the communicator "
     "lives, or unset it"},
    {"IBV_WC_WR_FLUSH_ERR",
     "work request flushed: the queue pair had already moved to the error state because of an "
     "earlier failure",
     "look for the first completion error logged before this one"},
    {"IBV_WC_MW_BIND_ERR", "memory window bind error", ""},
    {"IBV_WC_BAD_RESP_ERR", "bad response: the responder returned an unexpected transport opcode",
     "check that both hosts run compatible firmware and drivers"},
    {"IBV_WC_LOC_ACCESS_ERR",
     "local access error: an incoming RDMA write with immediate hit a local protection error",
     "this is a tutti bug if it persists"},
    {"IBV_WC_REM_INV_REQ_ERR",
     "remote invalid request: the responder found the request invalid (operation not allowed by "
     "its queue pair, message too long, or no receive for it)",
     "check that both ranks run the same tutti version"},
    {"IBV_WC_REM_ACCESS_ERR",
     "remote access error: the peer rejected the RDMA write (rkey invalid, address outside its "
     "registered FIFO, or remote write not permitted); the peer may have torn its communicator "
     "down",
     "check that the peer is alive and runs the same tutti version"},
    {"IBV_WC_REM_OP_ERR",
     "remote operation error: the responder could not complete the operation (its queue pair "
     "failed)",
     "look at the peer's log for its own completion error"},
    {"IBV_WC_RETRY_EXC_ERR",
     "transport retry counter exceeded: the peer's NIC did not acknowledge the packets in time; "
     "the peer process died or closed its queue pair, a link is down, the fabric cannot route "
     "between the two ports (wrong GID index, VLAN or subnet), or the timeout is too short for "
     "a congested fabric",
     "check the link (ibstat, ibv_devinfo), routing and the GID choice (NCCL_IB_GID_INDEX), and "
     "try a larger NCCL_IB_TIMEOUT"},
    {"IBV_WC_RNR_RETRY_EXC_ERR",
     "receiver-not-ready retry counter exceeded: the peer had no receive posted for an incoming "
     "RDMA write with immediate",
     "this is a tutti flow-control bug if the peer is alive; report it"},
    {"IBV_WC_LOC_RDD_VIOL_ERR", "local RDD violation (reliable datagram only)", ""},
    {"IBV_WC_REM_INV_RD_REQ_ERR", "remote invalid RD request (reliable datagram only)", ""},
    {"IBV_WC_REM_ABORT_ERR", "remote aborted the operation", "look at the peer's log"},
    {"IBV_WC_INV_EECN_ERR", "invalid EE context number (reliable datagram only)", ""},
    {"IBV_WC_INV_EEC_STATE_ERR", "invalid EE context state (reliable datagram only)", ""},
    {"IBV_WC_FATAL_ERR", "fatal transport error in the NIC",
     "check dmesg and the NIC's health (the device may need a reset)"},
    {"IBV_WC_RESP_TIMEOUT_ERR", "response timeout", "try a larger NCCL_IB_TIMEOUT"},
    {"IBV_WC_GENERAL_ERR", "general transport error not covered by another status",
     "check dmesg and the NIC's health"},
    {"IBV_WC_TM_ERR", "tag matching error", ""},
    {"IBV_WC_TM_RNDV_INCOMPLETE", "tag matching rendezvous incomplete", ""},
}};

}  // namespace

WcStatusInfo describeWcStatus(int status) {
  if (status >= 0 && static_cast<size_t>(status) < kTable.size()) return kTable[status];
  return {"IBV_WC_UNKNOWN", "unknown completion status", ""};
}

double ackTimeoutUs(int timeout) { return timeout <= 0 ? 0 : 4.096 * std::ldexp(1.0, timeout); }

std::string completionErrorMessage(const CompletionError& e) {
  const WcStatusInfo info = describeWcStatus(e.status);
  std::string msg =
      fmt::format("ib: {} rank {} (host {}) failed with status {} ({}, vendor error {:#x}): {}",
                  e.isRecv ? "receive from" : "RDMA write to", e.peer, e.peerHost, e.status,
                  info.name, e.vendorErr, info.meaning);
  if (!info.hint.empty()) msg += fmt::format("; {}", info.hint);
  if (e.status == 12 || e.status == 20) {  // IBV_WC_RETRY_EXC_ERR, IBV_WC_RESP_TIMEOUT_ERR
    const double us = ackTimeoutUs(e.timeout);
    msg += fmt::format(
        " (now NCCL_IB_TIMEOUT={}: ACK timeout {:.3g} s per try, NCCL_IB_RETRY_CNT={} retries)",
        e.timeout, us / 1e6, e.retryCnt);
  }
  msg += fmt::format(" (rank={}, peer={}, device={})", e.rank, e.peer, e.device);
  return msg;
}

}  // namespace tutti::transport::ib
