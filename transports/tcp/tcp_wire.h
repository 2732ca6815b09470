// File: transports/tcp/tcp_wire.h
// The tcp transport's setup messages and their parsers (untrusted bytes: any length, any content;
// fuzzed in tests/fuzz): the address blob exchanged through the bootstrap, and the 24-byte hello
// a dialling rank writes first on a new socket.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "core/status.h"

namespace tutti::transport::tcp_wire {

inline constexpr uint64_t kHelloMagic = 0x7475747469746370ull;  // "tuttitcp"
inline constexpr uint32_t kBlobMagic = 0x74637031u;             // "tcp1"

/// The first bytes a dialling rank writes on a new socket.
struct Hello {
  uint64_t magic;
  uint64_t secret;
  int32_t srcRank;
  int32_t dstRank;
};
static_assert(sizeof(Hello) == 24 && std::is_trivially_copyable_v<Hello>);

/// The address blob exchanged through the bootstrap: a POD copied with memcpy.
struct AddrBlob {
  uint32_t magic;
  uint32_t addrLen;
  sockaddr_storage addr;
};
static_assert(std::is_trivially_copyable_v<AddrBlob>);

/// Exact size, magic, and an IPv4/IPv6 address whose family matches its length. InvalidArgument
/// naming rank and peer otherwise.
Result<AddrBlob> parseAddrBlob(std::span<const std::byte> bytes, int rank, int peer);

/// A hello that may be admitted on `rank` of `nranks` with `secret`: the reason it may not
/// ("bad handshake magic 0x..", "wrong secret, not from this job", "handshake from rank 5 to rank 2
/// is not expected here"), or ok. Only lower ranks dial a rank.
Status checkHello(std::span<const std::byte> bytes, uint64_t secret, int rank, int nranks);

}  // namespace tutti::transport::tcp_wire
