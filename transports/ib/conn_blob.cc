// File: transports/ib/conn_blob.cc
// Encoding and strict decoding of the ib setup blob (see conn_blob.h).
#include "transports/ib/conn_blob.h"

#include <algorithm>
#include <bit>
#include <set>

namespace tutti::transport::ib {
namespace {

constexpr size_t kEndpointBytes = 4 + 4 + 4 + 8 + 4;

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<std::byte>(v)); }
  void u16(uint16_t v) { put(v, 2); }
  void u32(uint32_t v) { put(v, 4); }
  void u64(uint64_t v) { put(v, 8); }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  std::vector<std::byte> take() { return std::move(out_); }

 private:
  void put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
  }
  std::vector<std::byte> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  bool u8(uint8_t& v) {
    uint64_t x;
    if (!get(x, 1)) return false;
    v = static_cast<uint8_t>(x);
    return true;
  }
  bool u16(uint16_t& v) {
    uint64_t x;
    if (!get(x, 2)) return false;
    v = static_cast<uint16_t>(x);
    return true;
  }
  bool u32(uint32_t& v) {
    uint64_t x;
    if (!get(x, 4)) return false;
    v = static_cast<uint32_t>(x);
    return true;
  }
  bool u64(uint64_t& v) { return get(v, 8); }
  bool bytes(void* p, size_t n) {
    if (left() < n) return false;
    std::copy_n(in_.data() + pos_, n, static_cast<std::byte*>(p));
    pos_ += n;
    return true;
  }
  size_t left() const { return in_.size() - pos_; }

 private:
  bool get(uint64_t& v, int n) {
    if (left() < static_cast<size_t>(n)) return false;
    v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(in_[pos_ + i]) << (8 * i);
    pos_ += n;
    return true;
  }
  std::span<const std::byte> in_;
  size_t pos_ = 0;
};

}  // namespace

const Endpoint* ConnBlob::endpointFor(int peer) const {
  for (const Endpoint& e : endpoints)
    if (e.peer == peer) return &e;
  return nullptr;
}

uint32_t mtuBytes(uint8_t mtu) { return mtu >= 1 && mtu <= 5 ? 128u << mtu : 0; }

std::vector<std::byte> serializeBlob(const ConnBlob& b) {
  Writer w;
  w.u32(kBlobMagic);
  w.u16(kBlobVersion);
  w.u32(static_cast<uint32_t>(b.rank));
  const size_t nameBytes = std::min(b.device.size(), kMaxDeviceNameBytes);
  w.u8(static_cast<uint8_t>(nameBytes));
  w.bytes(b.device.data(), nameBytes);
  w.u8(b.port);
  w.u8(static_cast<uint8_t>(b.linkLayer));
  w.u16(b.lid);
  w.u8(b.mtu);
  w.u16(b.gidIndex);
  w.bytes(b.gid.raw.data(), b.gid.raw.size());
  w.u32(b.slotBytes);
  w.u32(b.slots);
  w.u32(static_cast<uint32_t>(b.endpoints.size()));
  for (const Endpoint& e : b.endpoints) {
    w.u32(static_cast<uint32_t>(e.peer));
    w.u32(e.qpn);
    w.u32(e.psn);
    w.u64(e.fifoAddr);
    w.u32(e.fifoRkey);
  }
  return w.take();
}

Result<ConnBlob> parseBlob(std::span<const std::byte> bytes, int fromRank) {
  auto bad = [&](std::string_view what) {
    return invalidArgument("ib: malformed setup blob from rank {}: {} (bytes={})", fromRank, what,
                           bytes.size());
  };
  Reader r(bytes);
  ConnBlob b;
  uint32_t magic = 0, rank = 0, count = 0;
  uint16_t version = 0;
  uint8_t nameBytes = 0, link = 0;
  if (!r.u32(magic) || !r.u16(version)) return bad("truncated header");
  if (magic != kBlobMagic) return bad(fmt::format("wrong magic {:#x}", magic));
  if (version != kBlobVersion)
    return bad(fmt::format("version {} (this build speaks {})", version, kBlobVersion));
  if (!r.u32(rank) || !r.u8(nameBytes)) return bad("truncated header");
  if (nameBytes > kMaxDeviceNameBytes) return bad("device name longer than 64 bytes");
  b.rank = static_cast<int32_t>(rank);
  b.device.resize(nameBytes);
  if (!r.bytes(b.device.data(), nameBytes) || !r.u8(b.port) || !r.u8(link) || !r.u16(b.lid) ||
      !r.u8(b.mtu) || !r.u16(b.gidIndex) || !r.bytes(b.gid.raw.data(), b.gid.raw.size()) ||
      !r.u32(b.slotBytes) || !r.u32(b.slots) || !r.u32(count)) {
    return bad("truncated address");
  }
  if (b.rank != fromRank) return bad(fmt::format("it claims to come from rank {}", b.rank));
  if (link != static_cast<uint8_t>(LinkLayer::kInfiniBand) &&
      link != static_cast<uint8_t>(LinkLayer::kEthernet))
    return bad(fmt::format("link layer {}", link));
  b.linkLayer = static_cast<LinkLayer>(link);
  if (b.port == 0) return bad("port 0");
  if (mtuBytes(b.mtu) == 0) return bad(fmt::format("MTU code {}", b.mtu));
  if (b.slotBytes < kMinSlotBytes || b.slotBytes > kMaxSlotBytes ||
      !std::has_single_bit(b.slotBytes))
    return bad(fmt::format("FIFO slot size {}", b.slotBytes));
  if (b.slots < 1 || b.slots > kMaxFifoSlots) return bad(fmt::format("FIFO slots {}", b.slots));
  if (count > r.left() / kEndpointBytes || r.left() != count * kEndpointBytes)
    return bad(fmt::format("{} endpoints do not fit the {} bytes left", count, r.left()));
  std::set<int32_t> seen;
  b.endpoints.resize(count);
  for (Endpoint& e : b.endpoints) {
    uint32_t peer = 0;
    r.u32(peer);
    r.u32(e.qpn);
    r.u32(e.psn);
    r.u64(e.fifoAddr);
    r.u32(e.fifoRkey);
    e.peer = static_cast<int32_t>(peer);
    if (e.peer < 0) return bad(fmt::format("endpoint for peer {}", e.peer));
    if (!seen.insert(e.peer).second) return bad(fmt::format("two endpoints for peer {}", e.peer));
    if (e.qpn > 0xffffff || e.psn > 0xffffff) return bad("QPN or PSN over 24 bits");
    if (e.fifoAddr == 0) return bad("null FIFO address");
  }
  return b;
}

}  // namespace tutti::transport::ib
