// File: base/hash.h
// FNV-1a, 64-bit (Fowler, Noll and Vo; the parameters of http://www.isthe.com/chongo/tech/comp/fnv/):
// a small, stable hash for ids and keys that every process must compute alike. Not for secrets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tutti {

inline constexpr uint64_t kFnvOffsetBasis = 1469598103934665603ull;

/// The hash of `bytes` bytes at `p`, continuing from `h` (so that several pieces hash as one).
inline uint64_t fnv1a(const void* p, size_t bytes, uint64_t h = kFnvOffsetBasis) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

inline uint64_t fnv1a(std::string_view s, uint64_t h = kFnvOffsetBasis) {
  return fnv1a(s.data(), s.size(), h);
}

}  // namespace tutti
