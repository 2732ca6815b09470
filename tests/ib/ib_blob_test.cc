// File: tests/ib/ib_blob_test.cc
// The ib setup blob: round trip, and rejection of truncated, padded, corrupted or inconsistent
// blobs; the completion-status texts.
#include <catch2/catch.hpp>
#include <random>

#include "transports/ib/conn_blob.h"
#include "transports/ib/wc_status.h"

namespace tutti::transport::ib {
namespace {

ConnBlob sample() {
  ConnBlob b;
  b.rank = 3;
  b.device = "mlx5_0";
  b.port = 1;
  b.linkLayer = LinkLayer::kEthernet;
  b.lid = 0;
  b.mtu = 5;
  b.gidIndex = 3;
  for (int i = 0; i < 16; ++i) b.gid.raw[i] = static_cast<uint8_t>(i * 17);
  b.slotBytes = 128 * 1024;
  b.slots = 8;
  b.endpoints = {{0, 0x123, 0xabcdef, 0x7f0000001000ull, 0xdeadbeef},
                 {1, 0xffffff, 0, 0x7f0000101000ull, 1},
                 {7, 0x42, 0x99, 0x1000, 0}};
  return b;
}

}  // namespace

TEST_CASE("blob: round trip") {
  const ConnBlob b = sample();
  const auto bytes = serializeBlob(b);
  auto back = parseBlob(bytes, 3);
  REQUIRE(back.isOk());
  CHECK(back.value() == b);
  REQUIRE(back->endpointFor(7) != nullptr);
  CHECK(back->endpointFor(7)->qpn == 0x42);
  CHECK(back->endpointFor(2) == nullptr);

  ConnBlob ib = b;
  ib.linkLayer = LinkLayer::kInfiniBand;
  ib.lid = 0xbeef;
  ib.endpoints.clear();
  ib.device = std::string(64, 'x');
  auto back2 = parseBlob(serializeBlob(ib), 3);
  REQUIRE(back2.isOk());
  CHECK(back2.value() == ib);
}

TEST_CASE("blob: every truncation and any trailing byte is rejected") {
  const auto bytes = serializeBlob(sample());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = parseBlob(std::span<const std::byte>(bytes.data(), n), 3);
    INFO("length " << n);
    REQUIRE_FALSE(r.isOk());
    CHECK(r.status().code() == Code::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::Contains("rank 3"));
  }
  auto longer = bytes;
  longer.push_back(std::byte{0});
  CHECK_FALSE(parseBlob(longer, 3).isOk());
}

TEST_CASE("blob: wrong fields are rejected with what is wrong") {
  auto check = [](ConnBlob b, const char* what) {
    auto r = parseBlob(serializeBlob(b), b.rank);
    INFO(what);
    REQUIRE_FALSE(r.isOk());
    CHECK_THAT(r.status().message(), Catch::Contains(what));
  };
  ConnBlob b = sample();
  b.mtu = 6;
  check(b, "MTU");
  b = sample();
  b.mtu = 0;
  check(b, "MTU");
  b = sample();
  b.slotBytes = 100000;  // not a power of two
  check(b, "slot size");
  b = sample();
  b.slotBytes = 2048;  // too small
  check(b, "slot size");
  b = sample();
  b.slots = 0;
  check(b, "slots");
  b = sample();
  b.slots = kMaxFifoSlots + 1;
  check(b, "slots");
  b = sample();
  b.endpoints[1].qpn = 0x1000000;
  check(b, "24 bits");
  b = sample();
  b.endpoints[2].peer = 0;
  check(b, "two endpoints for peer 0");
  b = sample();
  b.endpoints[0].peer = -5;
  check(b, "peer -5");
  b = sample();
  b.endpoints[0].fifoAddr = 0;
  check(b, "null FIFO");
  b = sample();
  b.port = 0;
  check(b, "port 0");
  b = sample();
  b.linkLayer = LinkLayer::kUnspecified;
  check(b, "link layer");

  // Claims another rank.
  auto r = parseBlob(serializeBlob(sample()), 4);
  REQUIRE_FALSE(r.isOk());
  CHECK_THAT(r.status().message(), Catch::Contains("claims to come from rank 3"));
  // Magic and version.
  auto bytes = serializeBlob(sample());
  bytes[0] ^= std::byte{1};
  CHECK_THAT(parseBlob(bytes, 3).status().message(), Catch::Contains("magic"));
  bytes = serializeBlob(sample());
  bytes[4] = std::byte{9};
  CHECK_THAT(parseBlob(bytes, 3).status().message(), Catch::Contains("version"));
  // An endpoint count that does not fit what is left.
  bytes = serializeBlob(sample());
  const size_t countAt = bytes.size() - 3 * 24 - 4;
  bytes[countAt] = std::byte{200};
  CHECK_THAT(parseBlob(bytes, 3).status().message(), Catch::Contains("endpoints"));
}

TEST_CASE("blob: random garbage never parses into something out of range") {
  std::mt19937 rng(12345);
  const auto good = serializeBlob(sample());
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<std::byte> bytes;
    if (iter % 2 == 0) {  // random bytes of random length
      bytes.resize(rng() % 200);
      for (auto& b : bytes) b = static_cast<std::byte>(rng());
    } else {  // the good blob with a few bytes flipped
      bytes = good;
      for (int k = 0; k < 3; ++k)
        bytes[rng() % bytes.size()] ^= static_cast<std::byte>(1 + rng() % 255);
    }
    auto r = parseBlob(bytes, 3);
    if (!r.isOk()) continue;
    ++accepted;
    const ConnBlob& b = r.value();
    CHECK(mtuBytes(b.mtu) != 0);
    CHECK(b.slots >= 1);
    CHECK(b.slots <= kMaxFifoSlots);
    CHECK(b.slotBytes >= kMinSlotBytes);
    CHECK((b.slotBytes & (b.slotBytes - 1)) == 0);
    for (const Endpoint& e : b.endpoints) {
      CHECK(e.peer >= 0);
      CHECK(e.qpn <= 0xffffff);
      CHECK(e.fifoAddr != 0);
    }
  }
  // Flips in the GID, lid, QPN low bits etc. are legitimately accepted; most others are not.
  CHECK(accepted < 20000);
}

TEST_CASE("completion status: numbers, names and causes") {
  CHECK(describeWcStatus(0).name == "IBV_WC_SUCCESS");
  CHECK(describeWcStatus(4).name == "IBV_WC_LOC_PROT_ERR");
  CHECK(describeWcStatus(5).name == "IBV_WC_WR_FLUSH_ERR");
  CHECK(describeWcStatus(10).name == "IBV_WC_REM_ACCESS_ERR");
  CHECK(describeWcStatus(12).name == "IBV_WC_RETRY_EXC_ERR");
  CHECK(describeWcStatus(13).name == "IBV_WC_RNR_RETRY_EXC_ERR");
  CHECK(describeWcStatus(23).name == "IBV_WC_TM_RNDV_INCOMPLETE");
  CHECK(describeWcStatus(24).name == "IBV_WC_UNKNOWN");
  CHECK(describeWcStatus(-1).name == "IBV_WC_UNKNOWN");
  for (int s = 1; s < 24; ++s) CHECK_FALSE(describeWcStatus(s).meaning.empty());
  CHECK(ackTimeoutUs(0) == 0);
  CHECK(ackTimeoutUs(1) == Approx(8.192));
  CHECK(ackTimeoutUs(20) == Approx(4.294967296e6));  // 4.3 s
}

TEST_CASE("completion status: the message names the cause, the peer and what to try") {
  CompletionError e;
  e.status = 12;
  e.vendorErr = 0x81;
  e.rank = 0;
  e.peer = 3;
  e.peerHost = "nodeB";
  e.device = "mlx5_0:1";
  e.timeout = 20;
  e.retryCnt = 7;
  const std::string m = completionErrorMessage(e);
  CHECK_THAT(m, Catch::Contains("status 12") && Catch::Contains("IBV_WC_RETRY_EXC_ERR") &&
                    Catch::Contains("retry counter exceeded") && Catch::Contains("link") &&
                    Catch::Contains("rout") && Catch::Contains("NCCL_IB_TIMEOUT=20") &&
                    Catch::Contains("NCCL_IB_RETRY_CNT=7") && Catch::Contains("rank 3") &&
                    Catch::Contains("nodeB") && Catch::Contains("0x81") &&
                    Catch::Contains("mlx5_0:1") && Catch::Contains("RDMA write to"));
  CHECK_THAT(m, Catch::Contains("ACK timeout 4.29 s per try"));

  e.status = 10;
  const std::string rem = completionErrorMessage(e);
  CHECK_THAT(rem, Catch::Contains("IBV_WC_REM_ACCESS_ERR") && Catch::Contains("rkey"));
  CHECK_THAT(rem, !Catch::Contains("NCCL_IB_TIMEOUT="));
  e.status = 4;
  CHECK_THAT(completionErrorMessage(e),
             Catch::Contains("local protection") && Catch::Contains("TUTTI_IB_REG_CACHE"));
  e.status = 13;
  CHECK_THAT(completionErrorMessage(e), Catch::Contains("receiver-not-ready"));
  e.status = 5;
  e.isRecv = true;
  CHECK_THAT(completionErrorMessage(e),
             Catch::Contains("receive from rank 3") && Catch::Contains("earlier failure"));
}

}  // namespace tutti::transport::ib
