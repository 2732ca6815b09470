// File: transports/ib/device_select.cc
// NCCL_IB_HCA parsing and GID table entry choice (see device_select.h). The matching rules follow
// NCCL's documentation of NCCL_IB_HCA; the automatic GID ranking follows NCCL's ncclIbGetGidIndex
// (address family first, then RoCE version), with link-local entries ranked last.
#include "transports/ib/device_select.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

namespace tutti::transport::ib {
namespace {

constexpr int kMaxSgidIndex = 255;  // ibv_global_route::sgid_index is a uint8_t

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string_view linkLayerName(LinkLayer l) {
  switch (l) {
    case LinkLayer::kInfiniBand:
      return "IB";
    case LinkLayer::kEthernet:
      return "RoCE";
    case LinkLayer::kUnspecified:
      break;
  }
  return "unspecified";
}

std::string_view gidTypeName(GidType t) {
  switch (t) {
    case GidType::kIb:
      return "IB";
    case GidType::kRoceV1:
      return "RoCE v1";
    case GidType::kRoceV2:
      return "RoCE v2";
    case GidType::kUnknown:
      break;
  }
  return "unknown";
}

bool Gid::isZero() const {
  return std::all_of(raw.begin(), raw.end(), [](uint8_t b) { return b == 0; });
}

bool Gid::isIpv4Mapped() const {
  for (int i = 0; i < 10; ++i)
    if (raw[i] != 0) return false;
  return raw[10] == 0xff && raw[11] == 0xff;
}

bool Gid::isLinkLocal() const { return raw[0] == 0xfe && (raw[1] & 0xc0) == 0x80; }

std::string Gid::toString() const {
  if (isIpv4Mapped()) return fmt::format("::ffff:{}.{}.{}.{}", raw[12], raw[13], raw[14], raw[15]);
  std::string s;
  for (int i = 0; i < 16; i += 2) {
    if (i) s += ':';
    s += fmt::format("{:02x}{:02x}", raw[i], raw[i + 1]);
  }
  return s;
}

bool HcaFilter::allows(std::string_view device, int port) const {
  if (patterns.empty()) return true;  // "" selects all; a bare "^" excludes nothing
  bool listed = false;
  for (const HcaPattern& p : patterns) {
    const bool nameOk = exact ? device == p.name : device.substr(0, p.name.size()) == p.name;
    if (nameOk && (p.port < 0 || p.port == port)) {
      listed = true;
      break;
    }
  }
  return listed != exclude;
}

Result<HcaFilter> parseHcaList(std::string_view text, std::string_view var) {
  HcaFilter f;
  std::string_view rest = trim(text);
  if (!rest.empty() && rest.front() == '^') {
    f.exclude = true;
    rest = trim(rest.substr(1));
  }
  if (!rest.empty() && rest.front() == '=') {
    f.exact = true;
    rest = trim(rest.substr(1));
  }
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;
    HcaPattern p;
    const size_t colon = item.find(':');
    p.name = std::string(trim(item.substr(0, colon)));
    if (p.name.empty()) {
      return invalidArgument("{}: item '{}' names no device ({}='{}')", var, item, var, text);
    }
    if (colon != std::string_view::npos) {
      const std::string_view portText = trim(item.substr(colon + 1));
      int port = 0;
      const auto [end, ec] =
          std::from_chars(portText.data(), portText.data() + portText.size(), port);
      if (ec != std::errc() || end != portText.data() + portText.size() || port < 1 || port > 255) {
        return invalidArgument("{}: port '{}' of item '{}' is not an integer in 1..255 ({}='{}')",
                               var, portText, item, var, text);
      }
      p.port = port;
    }
    f.patterns.push_back(std::move(p));
  }
  return f;
}

Result<PortChoice> selectPort(std::span<const DeviceInfo> devices, const HcaFilter& filter,
                              int localRank, std::string_view filterText) {
  std::vector<PortChoice> usable;
  std::string seen;
  for (const DeviceInfo& d : devices) {
    for (const PortInfo& p : d.ports) {
      const bool linkOk =
          p.linkLayer == LinkLayer::kInfiniBand || p.linkLayer == LinkLayer::kEthernet;
      const bool allowed = filter.allows(d.name, p.port);
      seen += fmt::format("{}{}:{} {} {}{}", seen.empty() ? "" : ", ", d.name, p.port,
                          linkLayerName(p.linkLayer), p.state.empty() ? "?" : p.state,
                          allowed ? "" : " (excluded by NCCL_IB_HCA)");
      if (p.active && linkOk && allowed) usable.push_back(PortChoice{d.name, p, 0});
    }
  }
  if (usable.empty()) {
    return invalidArgument("ib: no active InfiniBand or RoCE port{}{} (seen: {})",
                           filterText.empty() ? "" : " matches NCCL_IB_HCA=", filterText,
                           seen.empty() ? "no RDMA device" : seen);
  }
  PortChoice c = usable[static_cast<size_t>(std::max(localRank, 0)) % usable.size()];
  c.candidates = usable.size();
  return c;
}

Result<GidChoice> chooseGid(LinkLayer link, std::span<const GidEntry> table, int tableLen,
                            const GidPolicy& policy, std::string_view device, int port) {
  if (link == LinkLayer::kInfiniBand) {
    return GidChoice{0, false,
                     fmt::format("{}:{} is InfiniBand: LID routing, GID index 0", device, port)};
  }
  if (link != LinkLayer::kEthernet) {
    return invalidArgument("ib: {}:{} has link layer '{}', neither InfiniBand nor Ethernet", device,
                           port, linkLayerName(link));
  }
  auto find = [&](int index) -> const GidEntry* {
    for (const GidEntry& e : table)
      if (e.index == index) return &e;
    return nullptr;
  };
  if (policy.userIndex >= 0) {
    if (policy.userIndex > kMaxSgidIndex) {
      return invalidArgument(
          "ib: NCCL_IB_GID_INDEX={} exceeds {} (the address vector's source GID "
          "index has 8 bits)",
          policy.userIndex, kMaxSgidIndex);
    }
    if (policy.userIndex >= tableLen) {
      return invalidArgument(
          "ib: NCCL_IB_GID_INDEX={} is outside the GID table of {}:{} ({} entries)",
          policy.userIndex, device, port, tableLen);
    }
    const GidEntry* e = find(static_cast<int>(policy.userIndex));
    if (e == nullptr || e->gid.isZero()) {
      return invalidArgument(
          "ib: NCCL_IB_GID_INDEX={} names an empty GID table entry of {}:{} (show_gids lists "
          "the valid ones)",
          policy.userIndex, device, port);
    }
    return GidChoice{e->index, true,
                     fmt::format("{}:{} GID index {} ({}, {}) from NCCL_IB_GID_INDEX", device, port,
                                 e->index, e->gid.toString(), gidTypeName(e->type))};
  }
  // Rank: smaller is better, compared lexicographically.
  auto rank = [&](const GidEntry& e) {
    const bool famOk = e.gid.isIpv4Mapped() == policy.preferIpv4;
    const GidType want = policy.roceVersion == 1 ? GidType::kRoceV1 : GidType::kRoceV2;
    return std::array<int, 4>{famOk ? 0 : 1, e.type == want ? 0 : 1, e.gid.isLinkLocal() ? 1 : 0,
                              e.index};
  };
  const GidEntry* best = nullptr;
  for (const GidEntry& e : table) {
    if (e.index < 0 || e.index >= tableLen || e.index > kMaxSgidIndex || e.gid.isZero()) continue;
    if (best == nullptr || rank(e) < rank(*best)) best = &e;
  }
  if (best == nullptr) {
    return invalidArgument(
        "ib: RoCE port {}:{} has no usable GID (all {} entries empty: is an IP address "
        "configured on its network interface?)",
        device, port, tableLen);
  }
  return GidChoice{best->index, true,
                   fmt::format("{}:{} GID index {} ({}, {}) chosen automatically", device, port,
                               best->index, best->gid.toString(), gidTypeName(best->type))};
}

}  // namespace tutti::transport::ib
