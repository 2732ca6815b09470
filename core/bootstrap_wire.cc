// File: core/bootstrap_wire.cc
// Encoders and bounds-checked parsers of the bootstrap's messages (see bootstrap_wire.h).
#include "core/bootstrap_wire.h"

#include <arpa/inet.h>

#include <cstring>

namespace tutti::bootstrap::wire {

namespace {
constexpr char kSep = '\x1f';

template <typename T>
Result<T> podFrom(std::span<const std::byte> bytes, const char* what) {
  T v{};
  if (bytes.size() != sizeof v)
    return invalidArgument("bootstrap: {} of {} bytes (expected {})", what, bytes.size(), sizeof v);
  std::memcpy(&v, bytes.data(), sizeof v);
  return v;
}

bool validFamily(uint16_t f) { return f == AF_INET || f == AF_INET6; }
}  // namespace

PackedAddr pack(const net::SockAddr& a) {
  PackedAddr p;
  p.family = a.storage.ss_family;
  if (p.family == AF_INET) {
    auto* s = reinterpret_cast<const sockaddr_in*>(&a.storage);
    p.port = s->sin_port;
    std::memcpy(p.addr, &s->sin_addr, 4);
  } else if (p.family == AF_INET6) {
    auto* s = reinterpret_cast<const sockaddr_in6*>(&a.storage);
    p.port = s->sin6_port;
    std::memcpy(p.addr, &s->sin6_addr, 16);
  }
  return p;
}

net::SockAddr unpack(const PackedAddr& p) {
  net::SockAddr a;
  if (p.family == AF_INET) {
    auto* s = reinterpret_cast<sockaddr_in*>(&a.storage);
    s->sin_family = AF_INET;
    s->sin_port = p.port;
    std::memcpy(&s->sin_addr, p.addr, 4);
    a.len = sizeof(sockaddr_in);
  } else if (p.family == AF_INET6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.storage);
    s->sin6_family = AF_INET6;
    s->sin6_port = p.port;
    std::memcpy(&s->sin6_addr, p.addr, 16);
    a.len = sizeof(sockaddr_in6);
  }
  return a;
}

Result<IdLayout> parseId(std::span<const std::byte> bytes) {
  IdLayout l{};
  if (bytes.size() < sizeof l)
    return invalidArgument("UniqueId of {} bytes is too short ({} needed)", bytes.size(), sizeof l);
  std::memcpy(&l, bytes.data(), sizeof l);
  if (l.magic != kIdMagic)
    return invalidArgument("UniqueId is not a tutti id (magic={:#x}); pass the bytes produced by "
                           "createUniqueId on the root rank",
                           l.magic);
  if (!validFamily(l.root.family))
    return invalidArgument("UniqueId has an invalid address family ({})", l.root.family);
  return l;
}

Result<Hello> parseHello(std::span<const std::byte> bytes) {
  TUTTI_TRY_ASSIGN(Hello h, podFrom<Hello>(bytes, "hello"));
  if (h.magic != kHelloMagic)
    return invalidArgument("bootstrap: not a tutti hello (magic={:#x})", h.magic);
  if (h.nranks < 1 || h.nranks > kMaxRanks)
    return invalidArgument("bootstrap: hello announces nranks={} (allowed 1..{})", h.nranks,
                           kMaxRanks);
  if (h.rank < 0 || h.rank >= h.nranks)
    return invalidArgument("bootstrap: hello from rank {} outside [0, {})", h.rank, h.nranks);
  if (!validFamily(h.ringAddr.family))
    return invalidArgument("bootstrap: hello from rank {} has address family {}", h.rank,
                           h.ringAddr.family);
  return h;
}

Result<RingHello> parseRingHello(std::span<const std::byte> bytes) {
  TUTTI_TRY_ASSIGN(RingHello h, podFrom<RingHello>(bytes, "ring hello"));
  if (h.magic != kRingMagic)
    return invalidArgument("bootstrap: not a tutti ring hello (magic={:#x})", h.magic);
  return h;
}

Result<P2pHello> parseP2pHello(std::span<const std::byte> bytes, int nranks) {
  TUTTI_TRY_ASSIGN(P2pHello h, podFrom<P2pHello>(bytes, "point-to-point hello"));
  if (h.magic != kP2pMagic)
    return invalidArgument("bootstrap: not a tutti point-to-point hello (magic={:#x})", h.magic);
  if (h.from < 0 || h.from >= nranks)
    return invalidArgument("bootstrap: point-to-point hello from rank {} outside [0, {})", h.from,
                           nranks);
  if (h.bytes > kMaxP2pBytes)
    return invalidArgument("bootstrap: point-to-point hello announces {} bytes (at most {})",
                           h.bytes, kMaxP2pBytes);
  return h;
}

Result<std::vector<net::SockAddr>> parseAddressTable(std::span<const std::byte> bytes,
                                                     int nranks) {
  if (bytes.empty()) return invalidArgument("bootstrap: empty reply from the root");
  const char kind = static_cast<char>(bytes[0]);
  if (kind == 'E') {
    std::string text(reinterpret_cast<const char*>(bytes.data()) + 1, bytes.size() - 1);
    if (text.empty()) text = "unknown error";
    return text.find("timed out") != std::string::npos ? timeoutError("{}", text)
                                                       : invalidUsage("{}", text);
  }
  if (kind != 'T' || nranks < 1 ||
      bytes.size() != 1 + sizeof(PackedAddr) * static_cast<size_t>(nranks))
    return invalidArgument("bootstrap: malformed address table from the root ({} bytes for {} "
                           "ranks)",
                           bytes.size(), nranks);
  std::vector<net::SockAddr> table(nranks);
  for (int r = 0; r < nranks; ++r) {
    PackedAddr p;
    std::memcpy(&p, bytes.data() + 1 + sizeof(PackedAddr) * r, sizeof p);
    if (!validFamily(p.family))
      return invalidArgument("bootstrap: address of rank {} has family {}", r, p.family);
    table[r] = unpack(p);
  }
  return table;
}

std::string encodeNotice(const Notice& n) {
  std::string s(12, '\0');
  const uint32_t magic = kNoticeMagic, code = static_cast<uint32_t>(n.code);
  std::memcpy(s.data(), &magic, 4);
  std::memcpy(s.data() + 4, &code, 4);
  std::memcpy(s.data() + 8, &n.origin, 4);
  s += n.text.substr(0, kMaxNoticeBytes - 12);
  return s;
}

Result<Notice> parseNotice(std::span<const std::byte> bytes, int nranks) {
  if (bytes.size() < 12 || bytes.size() > kMaxNoticeBytes)
    return invalidArgument("bootstrap: failure notice of {} bytes", bytes.size());
  uint32_t magic, code;
  Notice n;
  std::memcpy(&magic, bytes.data(), 4);
  std::memcpy(&code, bytes.data() + 4, 4);
  std::memcpy(&n.origin, bytes.data() + 8, 4);
  if (magic != kNoticeMagic)
    return invalidArgument("bootstrap: not a failure notice (magic={:#x})", magic);
  if (code == 0 || code > static_cast<uint32_t>(Code::kTimeout) ||
      code == static_cast<uint32_t>(Code::kInProgress))
    return invalidArgument("bootstrap: failure notice with code {}", code);
  if (n.origin < 0 || n.origin >= nranks)
    return invalidArgument("bootstrap: failure notice from rank {} outside [0, {})", n.origin,
                           nranks);
  n.code = static_cast<Code>(code);
  n.text.assign(reinterpret_cast<const char*>(bytes.data()) + 12, bytes.size() - 12);
  return n;
}

std::string encodePeerInfo(int pid, const std::string& hostId, const std::string& hostname) {
  return fmt::format("{}{}{}{}{}", pid, kSep, hostId, kSep, hostname);
}

Result<transport::PeerInfo> parsePeerInfo(std::string_view text, int rank) {
  const size_t a = text.find(kSep);
  const size_t b = a == std::string_view::npos ? a : text.find(kSep, a + 1);
  if (b == std::string_view::npos || text.find(kSep, b + 1) != std::string_view::npos)
    return invalidArgument("init: malformed peer info from rank {} ({} bytes)", rank, text.size());
  int pid = 0;
  const std::string_view pidText = text.substr(0, a);
  if (pidText.empty() || pidText.size() > 9) pid = -1;
  for (char c : pidText) {
    if (c < '0' || c > '9') pid = -1;
    if (pid >= 0) pid = pid * 10 + (c - '0');
  }
  if (pid <= 0) return invalidArgument("init: rank {} sent an invalid pid", rank);
  transport::PeerInfo p;
  p.rank = rank;
  p.pid = pid;
  p.hostId = std::string(text.substr(a + 1, b - a - 1));
  p.hostname = std::string(text.substr(b + 1));
  if (p.hostId.empty()) return invalidArgument("init: rank {} sent an empty host id", rank);
  return p;
}

std::string encodeBlobs(const std::vector<std::string>& blobs) {
  std::string out;
  for (const auto& b : blobs) {
    const uint64_t len = b.size();
    out.append(reinterpret_cast<const char*>(&len), sizeof len);
    out += b;
  }
  return out;
}

Result<std::vector<std::string>> parseBlobs(std::string_view bytes) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    uint64_t len;
    if (bytes.size() - pos < sizeof len)
      return invalidArgument("init: truncated transport blob header at byte {}", pos);
    std::memcpy(&len, bytes.data() + pos, sizeof len);
    pos += sizeof len;
    if (len > bytes.size() - pos)
      return invalidArgument("init: transport blob of {} bytes at byte {} runs past the end ({} "
                             "bytes)",
                             len, pos, bytes.size());
    out.emplace_back(bytes.substr(pos, len));
    pos += len;
  }
  return out;
}

}  // namespace tutti::bootstrap::wire
