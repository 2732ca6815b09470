// File: base/strings.h
// Small text and range helpers shared by the parsers of environment variables, override lists and
// command lines, and by the argument checks.
#pragma once

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tutti {

/// `s` in lower case (ASCII).
inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// `s` without leading and trailing white space.
inline std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

/// The fields of `s` between separators, empty ones included ("a,,b" -> "a", "", "b"; "" -> "").
inline std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    const size_t end = s.find(sep, pos);
    out.emplace_back(s.substr(pos, end == std::string_view::npos ? s.npos : end - pos));
    if (end == std::string_view::npos) return out;
    pos = end + 1;
  }
}

/// Whether the byte ranges [a, a+an) and [b, b+bn) share a byte (empty or null ranges share none).
inline bool bytesOverlap(const void* a, size_t an, const void* b, size_t bn) {
  if (!a || !b || an == 0 || bn == 0) return false;
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bn && y < x + an;
}

}  // namespace tutti
