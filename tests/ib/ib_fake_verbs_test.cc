// File: tests/ib/ib_fake_verbs_test.cc
// The ib transport end to end over a fake libibverbs (tests/ib/fake_ibverbs.cc, loaded through
// TUTTI_IB_LIBRARY): two IbTransport instances in one process play ranks 0 and 1 on different
// hosts, exchange setup blobs, connect and move data through transports/ib/verbs.cc exactly as
// on a NIC (dlopen table, context->ops data path, queue-pair state machine, completion channel).
// Each scenario runs in a forked child so that its environment (read once per process) is its
// own. This is no substitute for a real port (tests/ib/ib_allreduce_test.cc), but it runs here.
#include <poll.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/reduce.h"
#include "tools/launch/launcher.h"
#include "transports/ib/conn_blob.h"
#include "transports/transport.h"

namespace tutti::transport::ib {
namespace {

#define CHILD_CHECK(cond)                                                                 \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "%s:%d: CHILD_CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)
#define CHILD_OK(expr)                                                                \
  do {                                                                                \
    Status s_ = (expr);                                                               \
    if (!s_.isOk()) {                                                                 \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, s_.toString().c_str()); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

/// Runs body in a forked child with `env` set; REQUIREs exit code 0.
void inChild(std::vector<std::pair<std::string, std::string>> env, std::function<int()> body) {
  launch::LaunchOptions opts;
  opts.nranks = 1;
  opts.timeout = std::chrono::seconds(60);
  opts.env = {{"TUTTI_IB_LIBRARY", TUTTI_FAKE_IBVERBS}};
  for (auto& kv : env) opts.env.push_back(kv);
  auto outcomes = launch::runRanks(opts, [&](int, int) { return body(); });
  REQUIRE(outcomes.size() == 1);
  INFO(launch::describe(outcomes[0]) << "\n" << outcomes[0].output);
  REQUIRE(launch::allPassed(outcomes));
}

std::unique_ptr<Transport> makeIb() {
  for (auto& e : transportRegistry())
    if (e.name == "ib") return e.make();
  return nullptr;
}

/// Ranks 0 and 1 on hosts A and B, connected over ib.
struct TwoRanks {
  std::vector<PeerInfo> peers = {{0, 100, "hostA-id", "hostA"}, {1, 101, "hostB-id", "hostB"}};
  Context ctx[2];
  std::unique_ptr<Transport> t[2];
  std::vector<std::byte> blob[2];
  std::unique_ptr<Connection> c[2];  // c[r]: rank r's connection to the other rank

  Status up() {
    for (int r = 0; r < 2; ++r) {
      ctx[r].rank = r;
      ctx[r].nranks = 2;
      ctx[r].peers = peers;
      t[r] = makeIb();
      if (!t[r]) return internalError("no ib transport registered");
      if (std::string why = t[r]->unavailableReason(ctx[r]); !why.empty())
        return invalidUsage("unavailable: {}", why);
      auto b = t[r]->setup(ctx[r]);
      if (!b.isOk()) return b.status();
      blob[r] = b.value();
    }
    for (int r = 0; r < 2; ++r) {
      if (!t[r]->canConnect(ctx[r], 1 - r)) return internalError("canConnect is false");
      auto conn = t[r]->connect(ctx[r], 1 - r, blob[1 - r]);
      if (!conn.isOk()) return conn.status();
      c[r] = std::move(conn).value();
    }
    for (int r = 0; r < 2; ++r) t[r]->finishSetup();
    return Status::ok();
  }

  /// Progresses both until every posted operation finished (bounded).
  Status run() {
    for (int i = 0; i < 1000000; ++i) {
      for (int r = 0; r < 2; ++r) TUTTI_TRY(c[r]->progress());
      if (c[0]->idle() && c[1]->idle()) return Status::ok();
    }
    return timeoutError("did not finish");
  }
};

std::vector<std::byte> pattern(size_t bytes, uint32_t seed) {
  std::vector<std::byte> v(bytes);
  uint32_t x = seed + 1;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::byte>(x >> 24);
  }
  return v;
}

int exchange(TwoRanks& w) {
  const std::vector<size_t> sizes = {0, 1, 4096, 128 * 1024, 128 * 1024 + 1, 3 * 1024 * 1024 + 13};
  std::vector<std::vector<std::byte>> out[2], in[2];
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      out[r].push_back(pattern(sizes[i], static_cast<uint32_t>(r * 100 + i)));
      in[r].emplace_back(sizes[i], std::byte{0xEE});
    }
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (int r = 0; r < 2; ++r) {
      w.c[r]->postSend(out[r][i].data(), sizes[i]);
      RecvSpec s;
      s.dst = in[r][i].data();
      s.bytes = sizes[i];
      w.c[r]->postRecv(s);
    }
  }
  CHILD_OK(w.run());
  for (int r = 0; r < 2; ++r)
    for (size_t i = 0; i < sizes.size(); ++i) CHILD_CHECK(in[r][i] == out[1 - r][i]);
  // A reducing receive (int64 sum) straight from the FIFO.
  const size_t count = 100000;
  std::vector<int64_t> a(count), b(count), sum(count, -1);
  for (size_t i = 0; i < count; ++i) {
    a[i] = static_cast<int64_t>(i);
    b[i] = 3 * static_cast<int64_t>(i) - 7;
  }
  w.c[0]->postSend(a.data(), count * 8);
  RecvSpec s;
  s.dst = sum.data();
  s.src = b.data();
  s.bytes = count * 8;
  s.reduce = kernels::reduce2Fn(DataType::kInt64, RedOp::kSum);
  s.elemBytes = 8;
  w.c[1]->postRecv(s);
  CHILD_OK(w.run());
  for (size_t i = 0; i < count; ++i) CHILD_CHECK(sum[i] == a[i] + b[i]);
  CHILD_CHECK(w.c[0]->bytesSent >= count * 8);
  return 0;
}

}  // namespace

TEST_CASE("ib over fake verbs: InfiniBand port, data both ways, reducing receive") {
  inChild({{"TUTTI_IB_SLOTS", "4"}}, [] {
    TwoRanks w;
    CHILD_OK(w.up());
    auto blob = parseBlob(w.blob[0], 0);
    CHILD_CHECK(blob.isOk());
    CHILD_CHECK(blob->linkLayer == LinkLayer::kInfiniBand);
    CHILD_CHECK(blob->lid == 7);
    CHILD_CHECK(blob->gidIndex == 0);
    CHILD_CHECK(blob->slots == 4);
    CHILD_CHECK(blob->endpoints.size() == 1 && blob->endpoints[0].peer == 1);
    return exchange(w);
  });
}

TEST_CASE("ib over fake verbs: RoCE port picks the IPv4-mapped RoCE v2 GID") {
  inChild({{"FAKE_IBV_LINK", "eth"}}, [] {
    TwoRanks w;
    CHILD_OK(w.up());
    auto blob = parseBlob(w.blob[1], 1);
    CHILD_CHECK(blob.isOk());
    CHILD_CHECK(blob->linkLayer == LinkLayer::kEthernet);
    CHILD_CHECK(blob->gidIndex == 3);
    CHILD_CHECK(blob->gid.isIpv4Mapped());
    return exchange(w);
  });
  // A forced empty GID entry is refused at setup.
  inChild({{"FAKE_IBV_LINK", "eth"}, {"NCCL_IB_GID_INDEX", "5"}}, [] {
    TwoRanks w;
    Status s = w.up();
    CHILD_CHECK(!s.isOk());
    CHILD_CHECK(s.message().find("NCCL_IB_GID_INDEX=5") != std::string::npos);
    return 0;
  });
}

TEST_CASE("ib over fake verbs: tiny FIFO and zero-copy sends through the registration cache") {
  inChild({{"TUTTI_IB_SLOTS", "1"}, {"TUTTI_IB_SLOT_BYTES", "4096"}}, [] {
    TwoRanks w;
    CHILD_OK(w.up());
    return exchange(w);
  });
  inChild({{"TUTTI_IB_REG_CACHE", "1"}}, [] {
    TwoRanks w;
    CHILD_OK(w.up());
    return exchange(w);
  });
}

TEST_CASE("ib over fake verbs: the completion channel wakes a sleeping rank") {
  inChild({}, [] {
    TwoRanks w;
    CHILD_OK(w.up());
    std::vector<std::byte> in(64), out = pattern(64, 5);
    RecvSpec s;
    s.dst = in.data();
    s.bytes = in.size();
    w.c[1]->postRecv(s);
    CHILD_OK(w.c[1]->progress());
    pollfd p{w.c[1]->pollFd(), w.c[1]->pollEvents(), 0};  // arms the channel
    CHILD_CHECK(p.fd >= 0);
    CHILD_CHECK(::poll(&p, 1, 0) == 0);  // nothing yet
    w.c[0]->postSend(out.data(), out.size());
    CHILD_OK(w.c[0]->progress());
    p.revents = 0;
    CHILD_CHECK(::poll(&p, 1, 1000) == 1);  // the write woke it
    CHILD_OK(w.run());
    CHILD_CHECK(in == out);
    p.revents = 0;
    CHILD_CHECK(::poll(&p, 1, 0) == 0);  // the event was consumed
    return 0;
  });
}

TEST_CASE("ib over fake verbs: a dead peer surfaces as retry-exceeded from checkPeer") {
  inChild({}, [] {
    TwoRanks w;
    CHILD_OK(w.up());
    std::vector<std::byte> in(64);
    RecvSpec s;
    s.dst = in.data();
    s.bytes = in.size();
    w.c[0]->postRecv(s);
    w.c[1].reset();  // rank 1 goes away
    w.t[1].reset();
    CHILD_OK(w.c[0]->checkPeer());
    Status st = w.c[0]->progress();
    CHILD_CHECK(!st.isOk());
    CHILD_CHECK(st.code() == Code::kRemoteError);
    std::fprintf(stderr, "%s\n", st.message().c_str());
    CHILD_CHECK(st.message().find("IBV_WC_RETRY_EXC_ERR") != std::string::npos);
    CHILD_CHECK(st.message().find("rank 1 (host hostB)") != std::string::npos);
    CHILD_CHECK(st.message().find("device=fakeib0:1") != std::string::npos);
    return 0;
  });
}

TEST_CASE("ib over fake verbs: NCCL_IB_HCA, NCCL_IB_DISABLE and bad settings") {
  inChild({{"NCCL_IB_HCA", "mlx5"}}, [] {
    TwoRanks w;
    Status s = w.up();
    CHILD_CHECK(!s.isOk());
    CHILD_CHECK(s.message().find("fakeib0:1 IB PORT_ACTIVE (excluded by NCCL_IB_HCA)") !=
                std::string::npos);
    return 0;
  });
  inChild({{"NCCL_IB_HCA", "=fakeib0:1"}}, [] {
    TwoRanks w;
    CHILD_OK(w.up());
    return 0;
  });
  inChild({{"NCCL_IB_DISABLE", "1"}}, [] {
    TwoRanks w;
    Status s = w.up();
    CHILD_CHECK(s.message().find("NCCL_IB_DISABLE") != std::string::npos);
    return 0;
  });
  inChild({{"NCCL_IB_TIMEOUT", "40"}}, [] {
    TwoRanks w;
    Status s = w.up();
    CHILD_CHECK(s.message().find("NCCL_IB_TIMEOUT=40 is outside 1..31") != std::string::npos);
    return 0;
  });
  inChild({}, [] {  // peers on one host: not offered, no library touched
    auto t = makeIb();
    std::vector<PeerInfo> peers = {{0, 1, "same", "h"}, {1, 2, "same", "h"}};
    Context ctx;
    ctx.rank = 0;
    ctx.nranks = 2;
    ctx.peers = peers;
    CHILD_CHECK(t->unavailableReason(ctx) == "every peer is on this host");
    return 0;
  });
  inChild({{"TUTTI_IB_LIBRARY", "/nonexistent/libibverbs.so.1"}}, [] {
    TwoRanks w;
    Status s = w.up();
    CHILD_CHECK(s.message().find("cannot load /nonexistent/libibverbs.so.1") != std::string::npos);
    return 0;
  });
}

TEST_CASE("ib over fake verbs: peers that disagree on the FIFO shape are refused") {
  inChild({}, [] {
    TwoRanks w;
    CHILD_OK(w.up());
    auto blob = parseBlob(w.blob[1], 1);
    CHILD_CHECK(blob.isOk());
    ConnBlob other = blob.value();
    other.slots = 3;
    auto t = makeIb();
    CHILD_CHECK(t->unavailableReason(w.ctx[0]).empty());
    CHILD_CHECK(t->setup(w.ctx[0]).isOk());
    auto conn = t->connect(w.ctx[0], 1, serializeBlob(other));
    CHILD_CHECK(!conn.isOk());
    CHILD_CHECK(conn.status().message().find("TUTTI_IB_SLOTS") != std::string::npos);
    return 0;
  });
}

}  // namespace tutti::transport::ib
