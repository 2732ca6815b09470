// File: transports/tcp/tcp_wire.h
// The tcp transport's setup messages and their parsers (untrusted bytes: any length, any content;
// fuzzed in tests/fuzz): the address blob exchanged through the bootstrap, and the 32-byte hello
// a dialling rank writes first on a new socket.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "base/status.h"

namespace tutti::transport::tcp_wire {

inline constexpr uint64_t kHelloMagic = 0x7475747469746370ull;  // "tuttitcp"
inline constexpr uint32_t kBlobMagic = 0x74637032u;             // "tcp2"

/// The first bytes a dialling rank writes on a new socket.
struct Hello {
  uint64_t magic;
  uint64_t secret;
  int32_t srcRank;
  int32_t dstRank;
  int32_t stream;  ///< which of the pair's sockets this is, in [0, nstreams)
  int32_t nstreams;
};
static_assert(sizeof(Hello) == 32 && std::is_trivially_copyable_v<Hello>);

/// Sockets per peer pair: TUTTI_SOCKET_NSOCKS is clamped to [1, kMaxStreams].
inline constexpr int kMaxStreams = 16;

/// The address blob exchanged through the bootstrap: a POD copied with memcpy.
struct AddrBlob {
  uint32_t magic;
  uint32_t addrLen;
  sockaddr_storage addr;
  uint32_t nstreams;  ///< sockets per peer pair (TUTTI_SOCKET_NSOCKS); must match on both sides
  /// The sender's kernel boot id (bootId()), NUL-padded; all zero when unknown. Equal ids: both
  /// ends run on one machine, and the bytes only move between its processes' memory.
  char bootId[40];
};
static_assert(std::is_trivially_copyable_v<AddrBlob>);

/// Exact size, magic, an IPv4/IPv6 address whose family matches its length, and nstreams in
/// [1, kMaxStreams]. InvalidArgument naming rank and peer otherwise.
Result<AddrBlob> parseAddrBlob(std::span<const std::byte> bytes, int rank, int peer);

/// A hello that may be admitted on `rank` of `nranks` with `secret`: the reason it may not
/// ("bad handshake magic 0x..", "wrong secret, not from this job", "handshake from rank 5 to rank 2
/// is not expected here", "socket 3 of 2"), or ok. Only lower ranks dial a rank. Whether nstreams
/// matches this rank's own is the transport's check (its message names TUTTI_SOCKET_NSOCKS).
Status checkHello(std::span<const std::byte> bytes, uint64_t secret, int rank, int nranks);

}  // namespace tutti::transport::tcp_wire
