// File: transports/tcp/tcp_wire.cc
#include "transports/tcp/tcp_wire.h"

#include <netinet/in.h>

#include <cstring>

namespace tutti::transport::tcp_wire {

Result<AddrBlob> parseAddrBlob(std::span<const std::byte> bytes, int rank, int peer) {
  AddrBlob blob{};
  if (bytes.size() == sizeof(AddrBlob)) std::memcpy(&blob, bytes.data(), sizeof(AddrBlob));
  const auto family = blob.addr.ss_family;
  const bool okAddr = (blob.addrLen == sizeof(sockaddr_in) && family == AF_INET) ||
                      (blob.addrLen == sizeof(sockaddr_in6) && family == AF_INET6);
  const bool okStreams = blob.nstreams >= 1 && blob.nstreams <= kMaxStreams;
  if (bytes.size() != sizeof(AddrBlob) || blob.magic != kBlobMagic || !okAddr || !okStreams) {
    return invalidArgument("tcp: malformed address blob from peer (rank={}, peer={}, bytes={})",
                           rank, peer, bytes.size());
  }
  return blob;
}

Status checkHello(std::span<const std::byte> bytes, uint64_t secret, int rank, int nranks) {
  Hello h{};
  if (bytes.size() != sizeof h)
    return invalidArgument("handshake of {} bytes (expected {})", bytes.size(), sizeof h);
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.magic != kHelloMagic) return invalidArgument("bad handshake magic {:#x}", h.magic);
  if ((h.secret ^ secret) != 0)
    return invalidArgument("wrong secret, not from this job (claimed peer={})", h.srcRank);
  if (h.dstRank != rank || h.srcRank < 0 || h.srcRank >= rank || rank >= nranks)
    return invalidArgument("handshake from rank {} to rank {} is not expected here (nranks={})",
                           h.srcRank, h.dstRank, nranks);
  if (h.nstreams < 1 || h.nstreams > kMaxStreams || h.stream < 0 || h.stream >= h.nstreams)
    return invalidArgument("handshake for socket {} of {} (at most {} per peer)", h.stream,
                           h.nstreams, kMaxStreams);
  return Status::ok();
}

}  // namespace tutti::transport::tcp_wire
