// File: core/bootstrap_wire.h
// The bytes the bootstrap and the communicator's init exchange, and their parsers. Every parser
// takes untrusted bytes (any length, any content), never reads out of bounds, never allocates more
// than the input's size, and returns a Status naming what is wrong. tests/fuzz runs each of them
// under libFuzzer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/socket.h"
#include "base/status.h"
#include "transports/transport.h"

namespace tutti::bootstrap::wire {

inline constexpr uint64_t kIdMagic = 0x3144495454555431ull;     // "1TUTTID1"
inline constexpr uint64_t kHelloMagic = 0x4f4c4c4548545431ull;  // hello to the root
inline constexpr uint64_t kRingMagic = 0x474e495254545431ull;   // ring handshake
inline constexpr uint32_t kNoticeMagic = 0x544f4e54u;           // "TNOT": failure notice
inline constexpr uint64_t kP2pMagic = 0x5032505454545431ull;    // point-to-point message
inline constexpr uint32_t kMaxP2pBytes = 1u << 16;              // body of one such message
inline constexpr size_t kMaxNoticeBytes = 4096;
/// The largest rank count a hello may announce (bounds the root's table).
inline constexpr int32_t kMaxRanks = 1 << 22;

/// Compact address: family, port (network order), 16 address bytes.
struct PackedAddr {
  uint16_t family = 0;
  uint16_t port = 0;
  uint8_t addr[16] = {};
};
PackedAddr pack(const net::SockAddr& a);
/// A family other than AF_INET/AF_INET6 gives an empty address (len 0).
net::SockAddr unpack(const PackedAddr& p);

struct IdLayout {
  uint64_t magic;
  uint64_t secret;
  PackedAddr root;
};

/// What a rank sends the root first.
struct Hello {
  uint64_t magic;
  uint64_t secret;
  int32_t rank;
  int32_t nranks;
  PackedAddr ringAddr;
};
/// What a rank sends its ring successor first.
struct RingHello {
  uint64_t magic;
  uint64_t secret;
  int32_t rank;
};

/// What precedes a point-to-point message (Bootstrap::sendTo) on a fresh connection to the
/// receiver's bootstrap listener; `bytes` body bytes follow.
struct P2pHello {
  uint64_t magic;
  uint64_t secret;
  uint64_t tag;
  int32_t from;
  uint32_t bytes;
};

/// The id's bytes (128) -> content. InvalidArgument for a wrong magic or address family.
Result<IdLayout> parseId(std::span<const std::byte> bytes);
/// A complete hello: exact size and magic (the secret is compared by the caller); nranks in
/// [1, kMaxRanks], rank in [0, nranks), a valid ring address. InvalidArgument otherwise.
Result<Hello> parseHello(std::span<const std::byte> bytes);
Result<RingHello> parseRingHello(std::span<const std::byte> bytes);
/// A complete P2pHello: exact size and magic, `from` in [0, nranks), at most kMaxP2pBytes body
/// bytes announced (the secret is compared by the caller). InvalidArgument otherwise.
Result<P2pHello> parseP2pHello(std::span<const std::byte> bytes, int nranks);
/// The root's reply: 'T' + nranks packed addresses, or 'E' + an error text (returned as
/// InvalidUsage/Timeout carrying the text). InvalidArgument for anything else.
Result<std::vector<net::SockAddr>> parseAddressTable(std::span<const std::byte> bytes, int nranks);

/// A failure notice sent over the bootstrap ring after init: rank `origin` failed with `code`.
struct Notice {
  Code code = Code::kRemoteError;
  int32_t origin = -1;
  std::string text;
};
std::string encodeNotice(const Notice& n);
Result<Notice> parseNotice(std::span<const std::byte> bytes, int nranks);

/// One rank's "pid<US>hostId<US>hostname" from the init allgather.
std::string encodePeerInfo(int pid, const std::string& hostId, const std::string& hostname);
Result<transport::PeerInfo> parsePeerInfo(std::string_view text, int rank);

/// The per-transport blobs of one rank: (u64 length, bytes) repeated. InvalidArgument for a
/// length past the end.
std::string encodeBlobs(const std::vector<std::string>& blobs);
Result<std::vector<std::string>> parseBlobs(std::string_view bytes);

inline std::span<const std::byte> asBytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace tutti::bootstrap::wire
