// File: transports/tcp/tcp_transport.h
// The tcp transport: TUTTI_SOCKET_NSOCKS non-blocking TCP sockets per pair of ranks (large
// messages go round-robin over them), dialled by the lower rank and
// accepted by the higher one, carrying an ordered byte stream with no per-message header. The
// listening interface follows NCCL_SOCKET_IFNAME syntax (TUTTI_SOCKET_IFNAME read first).
#pragma once

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "transports/transport.h"

namespace tutti::transport {

/// See transport.h for the contract of every method. setup() binds a non-blocking listener (port
/// 0) on 127.0.0.1 when ctx.loopbackOnly, else on the selected interface. connect() dials peers
/// with a higher rank (retrying until ctx.connectTimeoutMs) and accepts from lower ranks, which
/// identify themselves with a handshake carrying ctx.secret. Not thread-safe.
class TcpTransport final : public Transport {
 public:
  TcpTransport();
  ~TcpTransport() override;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  std::string_view name() const override { return "tcp"; }
  Result<std::vector<std::byte>> setup(const Context& ctx) override;
  bool canConnect(const Context& ctx, int peer) const override;
  Result<std::unique_ptr<Connection>> connect(const Context& ctx, int peer,
                                              std::span<const std::byte> peerBlob) override;
  void finishSetup() override;

 private:
  struct State;  // listener, half-read handshakes and connections stashed by rank
  std::unique_ptr<State> state_;
};

}  // namespace tutti::transport
