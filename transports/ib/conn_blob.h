// File: transports/ib/conn_blob.h
// The ib transport's setup blob: what a rank publishes through the bootstrap allgather so that
// every peer can bring its queue pair to RTR/RTS and write into our FIFO. One blob per rank: the
// port's address (LID, GID, MTU, link layer) once, then one endpoint (QPN, PSN, FIFO address and
// rkey) per peer this rank made a queue pair for. Fixed little-endian layout, versioned; the
// parser rejects anything truncated, oversized or inconsistent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "transports/ib/device_select.h"

namespace tutti::transport::ib {

/// What a rank offers one peer: its queue pair and the FIFO the peer writes into.
struct Endpoint {
  int32_t peer = -1;      ///< the rank this endpoint is meant for
  uint32_t qpn = 0;       ///< 24-bit queue pair number
  uint32_t psn = 0;       ///< 24-bit initial packet sequence number
  uint64_t fifoAddr = 0;  ///< virtual address of slot 0 of the FIFO (slots * slotBytes bytes)
  uint32_t fifoRkey = 0;
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

struct ConnBlob {
  int32_t rank = -1;
  std::string device;  ///< e.g. "mlx5_0" (for messages; at most 64 bytes)
  uint8_t port = 1;
  LinkLayer linkLayer = LinkLayer::kInfiniBand;
  uint16_t lid = 0;
  uint8_t mtu = 0;  ///< enum ibv_mtu: 1 = 256 bytes .. 5 = 4096 bytes
  uint16_t gidIndex = 0;
  Gid gid;
  uint32_t slotBytes = 0;  ///< FIFO slot size; the same on every rank
  uint32_t slots = 0;      ///< FIFO slots per peer
  std::vector<Endpoint> endpoints;

  /// The endpoint this blob's rank made for `peer`, or nullptr.
  const Endpoint* endpointFor(int peer) const;
  friend bool operator==(const ConnBlob&, const ConnBlob&) = default;
};

inline constexpr uint32_t kBlobMagic = 0x31626974u;  // "tib1" little-endian
inline constexpr uint16_t kBlobVersion = 1;
inline constexpr size_t kMaxDeviceNameBytes = 64;
inline constexpr uint32_t kMaxFifoSlots = 4096;
inline constexpr uint32_t kMinSlotBytes = 4096;
inline constexpr uint32_t kMaxSlotBytes =
    1u << 30;  // the immediate carries a chunk's bytes in 31 bits

/// Encodes a blob. Pure; the caller keeps the fields in range (device name <= 64 bytes).
std::vector<std::byte> serializeBlob(const ConnBlob& blob);

/// Decodes a blob from peer `fromRank` (for messages). InvalidArgument naming the rank, the
/// length and what is wrong when the bytes are truncated, have trailing garbage, a wrong magic or
/// version, or out-of-range fields (MTU not 1..5, link layer, slot size not a power of two in
/// 4 KiB..1 GiB, slots not 1..4096, QPN/PSN over 24 bits, an endpoint peer < 0, duplicate
/// endpoint peers). Pure.
Result<ConnBlob> parseBlob(std::span<const std::byte> bytes, int fromRank);

/// Bytes of an MTU enum value (1 -> 256 ... 5 -> 4096); 0 when out of range.
uint32_t mtuBytes(uint8_t mtu);

}  // namespace tutti::transport::ib
