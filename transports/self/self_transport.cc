// File: transports/self/self_transport.cc
// The `self` transport: a rank talking to itself (sendRecv to self). Sends and receives are
// paired in order inside the process and copied (or reduced) in one pass, no intermediate buffer.
#include <cstring>
#include <deque>

#include "transports/transport.h"

namespace tutti::transport {
namespace {

class SelfConnection final : public Connection {
 public:
  uint64_t postSend(const void* src, size_t bytes) override {
    sends_.push_back({static_cast<const std::byte*>(src), bytes});
    return ++sendsPosted_;
  }
  uint64_t postRecv(const RecvSpec& spec) override {
    recvs_.push_back(spec);
    return ++recvsPosted_;
  }
  Status progress() override {
    while (!sends_.empty() && !recvs_.empty()) {
      auto [src, bytes] = sends_.front();
      const RecvSpec& r = recvs_.front();
      if (r.bytes != bytes)
        return internalError("self: message size mismatch (send bytes={}, recv bytes={})", bytes,
                             r.bytes);
      if (bytes > 0) {
        if (r.reduce) r.reduce(r.dst, r.src, src, bytes / r.elemBytes);
        else if (r.dst != src) std::memmove(r.dst, src, bytes);
      }
      bytesSent += bytes;
      bytesReceived += bytes;
      sends_.pop_front();
      recvs_.pop_front();
      ++sendsDone_;
      ++recvsDone_;
    }
    return Status::ok();
  }
  uint64_t sendsDone() const override { return sendsDone_; }
  uint64_t recvsDone() const override { return recvsDone_; }

 private:
  std::deque<std::pair<const std::byte*, size_t>> sends_;
  std::deque<RecvSpec> recvs_;
  uint64_t sendsDone_ = 0, recvsDone_ = 0;
};

class SelfTransport final : public Transport {
 public:
  std::string_view name() const override { return "self"; }
  Result<std::vector<std::byte>> setup(const Context&) override {
    return std::vector<std::byte>{};
  }
  bool canConnect(const Context& ctx, int peer) const override { return peer == ctx.rank; }
  Result<std::unique_ptr<Connection>> connect(const Context&, int,
                                              std::span<const std::byte>) override {
    return std::unique_ptr<Connection>(std::make_unique<SelfConnection>());
  }
};

}  // namespace

TUTTI_REGISTER_TRANSPORT({.name = "self", .priority = 100,
                          .make = [] { return std::make_unique<SelfTransport>(); }});

}  // namespace tutti::transport
