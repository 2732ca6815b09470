// File: tests/ib/ib_select_test.cc
// Device-free ib selection: NCCL_IB_HCA parsing and matching, port choice from a fake device
// list, and GID table entry choice from fake GID tables.
#include <catch2/catch.hpp>

#include "transports/ib/device_select.h"

namespace tutti::transport::ib {
namespace {

Gid gidOf(std::initializer_list<uint8_t> bytes) {
  Gid g;
  size_t i = 0;
  for (uint8_t b : bytes) g.raw[i++] = b;
  return g;
}
Gid ipv4Gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return gidOf({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d});
}
Gid linkLocalGid(uint8_t last) {
  return gidOf({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x0a, 0xc0, 0xeb, 0xff, 0xfe, 0x3d, 0xca, last});
}
Gid globalV6Gid() { return gidOf({0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}); }

HcaFilter parse(std::string_view text) {
  auto f = parseHcaList(text);
  REQUIRE(f.isOk());
  return f.value();
}

}  // namespace

TEST_CASE("NCCL_IB_HCA: empty selects everything") {
  const HcaFilter f = parse("");
  CHECK(f.allows("mlx5_0", 1));
  CHECK(f.allows("anything", 7));
  CHECK(parse("   ").patterns.empty());
}

TEST_CASE("NCCL_IB_HCA: prefixes and ports") {
  const HcaFilter f = parse("mlx5_0:1,mlx5_1");
  REQUIRE(f.patterns.size() == 2);
  CHECK_FALSE(f.exclude);
  CHECK_FALSE(f.exact);
  CHECK(f.patterns[0].name == "mlx5_0");
  CHECK(f.patterns[0].port == 1);
  CHECK(f.patterns[1].port == -1);
  CHECK(f.allows("mlx5_0", 1));
  CHECK_FALSE(f.allows("mlx5_0", 2));  // port restricted
  CHECK(f.allows("mlx5_1", 1));
  CHECK(f.allows("mlx5_1", 2));   // every port
  CHECK(f.allows("mlx5_10", 2));  // prefix: mlx5_1 matches mlx5_10
  CHECK_FALSE(f.allows("mlx5_2", 1));
  CHECK(parse("mlx5").allows("mlx5_7", 1));
  CHECK_FALSE(parse("mlx5").allows("bnxt_re0", 1));
}

TEST_CASE("NCCL_IB_HCA: '=' requires exact names") {
  const HcaFilter f = parse("=mlx5_1");
  CHECK(f.exact);
  CHECK(f.allows("mlx5_1", 1));
  CHECK_FALSE(f.allows("mlx5_10", 1));
  CHECK_FALSE(f.allows("mlx5_", 1));
}

TEST_CASE("NCCL_IB_HCA: '^' excludes") {
  const HcaFilter f = parse("^mlx5_3");
  CHECK(f.exclude);
  CHECK_FALSE(f.allows("mlx5_3", 1));
  CHECK_FALSE(f.allows("mlx5_30", 1));  // prefix
  CHECK(f.allows("mlx5_2", 1));
  const HcaFilter g = parse("^=mlx5_3:2, mlx5_4");
  CHECK(g.exclude);
  CHECK(g.exact);
  CHECK_FALSE(g.allows("mlx5_3", 2));
  CHECK(g.allows("mlx5_3", 1));
  CHECK(g.allows("mlx5_30", 2));
  CHECK_FALSE(g.allows("mlx5_4", 1));
  CHECK(parse("^").allows("mlx5_0", 1));  // excludes nothing
}

TEST_CASE("NCCL_IB_HCA: whitespace and empty items are tolerated") {
  const HcaFilter f = parse(" mlx5_0 : 1 ,, mlx5_1 ,");
  REQUIRE(f.patterns.size() == 2);
  CHECK(f.patterns[0].name == "mlx5_0");
  CHECK(f.patterns[0].port == 1);
  CHECK(f.patterns[1].name == "mlx5_1");
}

TEST_CASE("NCCL_IB_HCA: bad ports and empty names are rejected with the value") {
  for (const char* bad :
       {"mlx5_0:x", "mlx5_0:0", "mlx5_0:256", "mlx5_0:1x", ":1", "mlx5_0:", "mlx5_0:-1"}) {
    auto f = parseHcaList(bad, "TUTTI_IB_HCA");
    INFO(bad);
    REQUIRE_FALSE(f.isOk());
    CHECK(f.status().code() == Code::kInvalidArgument);
    CHECK_THAT(f.status().message(), Catch::Contains("TUTTI_IB_HCA") && Catch::Contains(bad));
  }
}

TEST_CASE("port choice: active IB/RoCE ports that pass the filter, spread by local rank") {
  std::vector<DeviceInfo> devs = {
      {"mlx5_0", {{1, true, "PORT_ACTIVE", LinkLayer::kInfiniBand, 5, 5, 128, 200000}}},
      {"mlx5_1",
       {{1, false, "PORT_DOWN", LinkLayer::kInfiniBand, 0, 5, 128, 0},
        {2, true, "PORT_ACTIVE", LinkLayer::kEthernet, 0, 5, 256, 100000}}},
      {"eth_weird", {{1, true, "PORT_ACTIVE", LinkLayer::kUnspecified, 0, 5, 1, 0}}},
  };
  auto c0 = selectPort(devs, parse(""), 0);
  REQUIRE(c0.isOk());
  CHECK(c0->device == "mlx5_0");
  CHECK(c0->port.port == 1);
  CHECK(c0->candidates == 2);
  auto c1 = selectPort(devs, parse(""), 1);
  REQUIRE(c1.isOk());
  CHECK(c1->device == "mlx5_1");
  CHECK(c1->port.port == 2);
  auto c2 = selectPort(devs, parse(""), 2);
  REQUIRE(c2.isOk());
  CHECK(c2->device == "mlx5_0");

  auto onlyRoce = selectPort(devs, parse("mlx5_1"), 0);
  REQUIRE(onlyRoce.isOk());
  CHECK(onlyRoce->device == "mlx5_1");
  CHECK(onlyRoce->port.linkLayer == LinkLayer::kEthernet);

  auto none = selectPort(devs, parse("mlx5_1:1"), 0, "mlx5_1:1");
  REQUIRE_FALSE(none.isOk());
  CHECK_THAT(none.status().message(), Catch::Contains("mlx5_1:1") && Catch::Contains("PORT_DOWN") &&
                                          Catch::Contains("excluded by NCCL_IB_HCA"));
  auto empty = selectPort(std::vector<DeviceInfo>{}, parse(""), 0);
  REQUIRE_FALSE(empty.isOk());
  CHECK_THAT(empty.status().message(), Catch::Contains("no RDMA device"));
}

TEST_CASE("GID: helpers") {
  CHECK(ipv4Gid(10, 0, 0, 1).isIpv4Mapped());
  CHECK_FALSE(linkLocalGid(1).isIpv4Mapped());
  CHECK(linkLocalGid(1).isLinkLocal());
  CHECK_FALSE(globalV6Gid().isLinkLocal());
  CHECK(Gid{}.isZero());
  CHECK(ipv4Gid(10, 110, 0, 33).toString() == "::ffff:10.110.0.33");
  CHECK(linkLocalGid(0x54).toString() == "fe80:0000:0000:0000:0ac0:ebff:fe3d:ca54");
}

TEST_CASE("GID: InfiniBand uses index 0 without a GRH") {
  auto c = chooseGid(LinkLayer::kInfiniBand, {}, 128, GidPolicy{});
  REQUIRE(c.isOk());
  CHECK(c->index == 0);
  CHECK_FALSE(c->useGrh);
  // NCCL_IB_GID_INDEX applies to RoCE only.
  GidPolicy p;
  p.userIndex = 3;
  CHECK(chooseGid(LinkLayer::kInfiniBand, {}, 128, p)->index == 0);
}

TEST_CASE("GID: automatic RoCE choice prefers v2 with an IPv4-mapped address") {
  // The classic mlx5 table (show_gids): link-local v1/v2, IPv4 v1/v2, IPv6 global v1/v2.
  const std::vector<GidEntry> table = {
      {0, linkLocalGid(0x54), GidType::kRoceV1},
      {1, linkLocalGid(0x54), GidType::kRoceV2},
      {2, ipv4Gid(10, 110, 0, 33), GidType::kRoceV1},
      {3, ipv4Gid(10, 110, 0, 33), GidType::kRoceV2},
      {4, globalV6Gid(), GidType::kRoceV1},
      {5, globalV6Gid(), GidType::kRoceV2},
  };
  auto c = chooseGid(LinkLayer::kEthernet, table, 16, GidPolicy{}, "mlx5_0", 1);
  REQUIRE(c.isOk());
  CHECK(c->index == 3);
  CHECK(c->useGrh);
  CHECK_THAT(c->reason, Catch::Contains("10.110.0.33") && Catch::Contains("RoCE v2"));

  // The table order does not matter.
  std::vector<GidEntry> shuffled(table.rbegin(), table.rend());
  CHECK(chooseGid(LinkLayer::kEthernet, shuffled, 16, GidPolicy{})->index == 3);

  GidPolicy v1;
  v1.roceVersion = 1;
  CHECK(chooseGid(LinkLayer::kEthernet, table, 16, v1)->index == 2);
  GidPolicy v6;
  v6.preferIpv4 = false;
  CHECK(chooseGid(LinkLayer::kEthernet, table, 16, v6)->index == 5);  // global before link-local

  // Without an IPv4 address: v2 link-local beats v1 link-local; a global IPv6 beats both.
  const std::vector<GidEntry> noV4 = {{0, linkLocalGid(1), GidType::kRoceV1},
                                      {1, linkLocalGid(1), GidType::kRoceV2}};
  CHECK(chooseGid(LinkLayer::kEthernet, noV4, 16, GidPolicy{})->index == 1);
  std::vector<GidEntry> withV6 = noV4;
  withV6.push_back({7, globalV6Gid(), GidType::kRoceV2});
  CHECK(chooseGid(LinkLayer::kEthernet, withV6, 16, GidPolicy{})->index == 7);

  // Zero entries and entries beyond the table length are never chosen.
  const std::vector<GidEntry> junk = {{0, Gid{}, GidType::kRoceV2},
                                      {20, ipv4Gid(1, 2, 3, 4), GidType::kRoceV2},
                                      {1, linkLocalGid(9), GidType::kRoceV1}};
  CHECK(chooseGid(LinkLayer::kEthernet, junk, 16, GidPolicy{})->index == 1);
}

TEST_CASE("GID: NCCL_IB_GID_INDEX forces an entry and is checked") {
  const std::vector<GidEntry> table = {{0, linkLocalGid(1), GidType::kRoceV1},
                                       {3, ipv4Gid(10, 0, 0, 1), GidType::kRoceV2}};
  GidPolicy p;
  p.userIndex = 0;
  auto c = chooseGid(LinkLayer::kEthernet, table, 16, p);
  REQUIRE(c.isOk());
  CHECK(c->index == 0);
  CHECK_THAT(c->reason, Catch::Contains("NCCL_IB_GID_INDEX"));
  p.userIndex = 2;  // empty entry
  auto empty = chooseGid(LinkLayer::kEthernet, table, 16, p);
  REQUIRE_FALSE(empty.isOk());
  CHECK_THAT(empty.status().message(), Catch::Contains("NCCL_IB_GID_INDEX=2"));
  p.userIndex = 16;  // outside the table
  auto outside = chooseGid(LinkLayer::kEthernet, table, 16, p);
  REQUIRE_FALSE(outside.isOk());
  CHECK_THAT(outside.status().message(), Catch::Contains("16 entries"));
  p.userIndex = 300;  // beyond the 8-bit source GID index
  CHECK_THAT(chooseGid(LinkLayer::kEthernet, table, 512, p).status().message(),
             Catch::Contains("8 bits"));
  const std::vector<GidEntry> wide = {{300, ipv4Gid(10, 0, 0, 9), GidType::kRoceV2},
                                      {4, linkLocalGid(2), GidType::kRoceV1}};
  CHECK(chooseGid(LinkLayer::kEthernet, wide, 512, GidPolicy{})->index == 4);
}

TEST_CASE("GID: a RoCE port without any address is an error naming the port") {
  auto c = chooseGid(LinkLayer::kEthernet, {}, 16, GidPolicy{}, "mlx5_2", 1);
  REQUIRE_FALSE(c.isOk());
  CHECK_THAT(c.status().message(), Catch::Contains("mlx5_2:1") && Catch::Contains("IP address"));
  CHECK_FALSE(chooseGid(LinkLayer::kUnspecified, {}, 16, GidPolicy{}).isOk());
}

}  // namespace tutti::transport::ib
