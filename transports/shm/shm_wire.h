// File: transports/shm/shm_wire.h
// The shm transport's address blob (exchanged through the bootstrap) and its parser (untrusted
// bytes; fuzzed in tests/fuzz): a magic, the ring size, the inline-line size, the single-copy
// (CMA) threshold and the segment's POSIX shm name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "base/status.h"

namespace tutti::transport::shm_wire {

inline constexpr uint64_t kMagic = 0x74757474695f5348ull;  // "tutti_SH"

struct Blob {
  uint64_t magic;
  uint64_t ringBytes;
  uint64_t inlineBytes;
  uint64_t cmaBytes;
  char name[96];
};

/// Exact size and magic, a NUL-terminated name of the form "/tutti-..." with no other '/', and the
/// same ring, inline and single-copy sizes as ours (InvalidUsage naming the variables when they
/// differ: both ends of a message pick its path from its size alone).
inline Result<Blob> parseBlob(std::span<const std::byte> bytes, int peer, uint64_t ringBytes,
                              uint64_t inlineBytes, uint64_t cmaBytes) {
  Blob blob{};
  if (bytes.size() != sizeof blob)
    return invalidArgument("shm: bad address blob from rank {} ({} bytes)", peer, bytes.size());
  std::memcpy(&blob, bytes.data(), sizeof blob);
  const void* nul = std::memchr(blob.name, '\0', sizeof blob.name);
  if (blob.magic != kMagic || !nul || std::strncmp(blob.name, "/tutti-", 7) != 0 ||
      std::strchr(blob.name + 1, '/') != nullptr)
    return invalidArgument("shm: malformed address blob from rank {}", peer);
  if (blob.ringBytes != ringBytes || blob.inlineBytes != inlineBytes)
    return invalidUsage("shm: rank {} uses a different shm layout (ring {} vs {} bytes, inline "
                        "{} vs {} bytes): set the same TUTTI_SHM_RING_BYTES and "
                        "TUTTI_SHM_INLINE_BYTES on every rank",
                        peer, blob.ringBytes, ringBytes, blob.inlineBytes, inlineBytes);
  if (blob.cmaBytes != cmaBytes)
    return invalidUsage("shm: rank {} uses TUTTI_SHM_CMA_BYTES={}, this rank {}: set the same value "
                        "on every rank",
                        peer, blob.cmaBytes, cmaBytes);
  return blob;
}

}  // namespace tutti::transport::shm_wire
