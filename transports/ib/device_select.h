// File: transports/ib/device_select.h
// Device-free parts of IB device, port and address selection: the NCCL_IB_HCA list syntax
// (TUTTI_IB_HCA read first) and the choice of the GID table entry a port's queue pairs use
// (NCCL_IB_GID_INDEX, or automatic: RoCE v2 with an IPv4-mapped address first). No verbs types:
// verbs.cc fills these plain structs from the device.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tutti::transport::ib {

/// The link layer of a port (ibv_port_attr::link_layer): InfiniBand, or Ethernet (RoCE).
enum class LinkLayer : uint8_t { kUnspecified = 0, kInfiniBand = 1, kEthernet = 2 };
std::string_view linkLayerName(LinkLayer l);

/// The type of a GID table entry (ibv_gid_entry::gid_type, or sysfs gid_attrs/types).
enum class GidType : uint8_t { kIb = 0, kRoceV1 = 1, kRoceV2 = 2, kUnknown = 255 };
std::string_view gidTypeName(GidType t);

/// A 128-bit GID in network byte order (the layout of union ibv_gid).
struct Gid {
  std::array<uint8_t, 16> raw{};
  bool isZero() const;
  /// ::ffff:a.b.c.d (the GID of a RoCE port's IPv4 address).
  bool isIpv4Mapped() const;
  /// fe80::/10 (derived from the MAC address; not routable).
  bool isLinkLocal() const;
  /// "fe80:0000:...:ca54" (8 groups, as show_gids prints) or "::ffff:10.0.0.1" for IPv4-mapped.
  std::string toString() const;
  friend bool operator==(const Gid&, const Gid&) = default;
};

struct GidEntry {
  int index = 0;
  Gid gid;
  GidType type = GidType::kUnknown;
};

/// One port of a device as the device reports it (filled by verbs.cc, or by tests).
struct PortInfo {
  int port = 0;
  bool active = false;
  std::string state;  ///< "PORT_ACTIVE", "PORT_DOWN", ... (ibv_port_state_str)
  LinkLayer linkLayer = LinkLayer::kUnspecified;
  uint16_t lid = 0;
  uint8_t activeMtu = 0;  ///< enum ibv_mtu (1 = 256 .. 5 = 4096)
  int gidTableLen = 0;
  int speedMbps = 0;  ///< active speed x width, 0 when unknown
};

struct DeviceInfo {
  std::string name;
  std::vector<PortInfo> ports;
};

// ---- NCCL_IB_HCA ----

/// One item of an HCA list: a device name (a prefix unless the list starts with '=') and an
/// optional port number (-1: every port).
struct HcaPattern {
  std::string name;
  int port = -1;
};

/// A parsed NCCL_IB_HCA value. Syntax (NCCL's): comma-separated `name[:port]` items; a leading
/// '^' excludes the listed devices instead of selecting them; a following '=' requires exact
/// names (otherwise each name is a prefix: "mlx5" matches mlx5_0, mlx5_1, ...). Examples:
/// "mlx5_0:1,mlx5_1", "^mlx5_3", "=mlx5_1", "^=mlx5_10:2". An empty list selects every device.
struct HcaFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<HcaPattern> patterns;

  /// Whether port `port` of device `device` may be used.
  bool allows(std::string_view device, int port) const;
};

/// Parses `text` (the value of the variable named `var`, for messages). InvalidArgument naming
/// the variable, the value and the item when a port is not an integer in 1..255 or an item has
/// an empty device name. Pure.
Result<HcaFilter> parseHcaList(std::string_view text, std::string_view var = "NCCL_IB_HCA");

/// The port a rank uses.
struct PortChoice {
  std::string device;
  PortInfo port;
  size_t candidates = 0;  ///< usable ports found (the choice is localRank % candidates)
};

/// Picks among the ports that are active, have an InfiniBand or Ethernet link layer and pass
/// `filter`, in device-list order then port order, the one at localRank % count (ranks of one
/// host spread over the host's NICs). InvalidArgument naming every port seen and its state when
/// none qualifies. Pure.
Result<PortChoice> selectPort(std::span<const DeviceInfo> devices, const HcaFilter& filter,
                              int localRank, std::string_view filterText = "");

// ---- GID choice ----

struct GidPolicy {
  /// NCCL_IB_GID_INDEX: >= 0 forces that entry on RoCE ports; -1 chooses automatically.
  int64_t userIndex = -1;
  /// NCCL_IB_ROCE_VERSION_NUM: the preferred RoCE version when choosing automatically (1 or 2).
  int roceVersion = 2;
  /// NCCL_IB_ADDR_FAMILY: true for AF_INET (IPv4-mapped GIDs first), false for AF_INET6.
  bool preferIpv4 = true;
};

struct GidChoice {
  int index = 0;
  bool useGrh = false;  ///< the address vector carries a GRH (always on RoCE; off on IB here)
  std::string reason;   ///< one line for the INFO log
};

/// Chooses the GID table entry for a port. InfiniBand: index 0 without a GRH (LID routing inside
/// one subnet, as NCCL does by default). RoCE: policy.userIndex when >= 0 (InvalidArgument when it
/// is outside the table or the entry is empty), else the best non-zero entry ranked by address
/// family (IPv4-mapped first unless preferIpv4 is false), then by RoCE version (roceVersion
/// first), then by global over link-local, then by lowest index. `table` holds the entries the
/// device reported (any order, empty ones may be absent); `tableLen` is the port's gid_tbl_len.
/// InvalidArgument when a RoCE port has no usable entry. Pure.
Result<GidChoice> chooseGid(LinkLayer link, std::span<const GidEntry> table, int tableLen,
                            const GidPolicy& policy, std::string_view device = "?", int port = 1);

}  // namespace tutti::transport::ib
