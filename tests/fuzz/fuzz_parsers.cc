// File: tests/fuzz/fuzz_parsers.cc
// libFuzzer targets for every parser of bytes that arrive from the network or from peers during
// setup. One source, one executable per parser: TUTTI_FUZZ_TARGET selects which (see
// CMakeLists.txt). Each parser must accept any input without crashing, reading out of bounds
// (ASan) or allocating more than the input's size.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/bootstrap_wire.h"
#include "core/call_check.h"
#include "transports/shm/shm_wire.h"
#include "transports/tcp/tcp_wire.h"

using namespace tutti;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // A small rank count from the first byte, for the parsers that take one.
  const int nranks = size > 0 ? 1 + data[0] % 64 : 1;
  const std::span<const std::byte> rest = size > 0 ? bytes.subspan(1) : bytes;
  namespace w = bootstrap::wire;
#if TUTTI_FUZZ_TARGET == 1
  (void)w::parseHello(bytes);
#elif TUTTI_FUZZ_TARGET == 2
  (void)w::parseRingHello(bytes);
#elif TUTTI_FUZZ_TARGET == 3
  auto t = w::parseAddressTable(rest, nranks);
  if (t.isOk() && t->size() != static_cast<size_t>(nranks)) __builtin_trap();
#elif TUTTI_FUZZ_TARGET == 4
  auto n = w::parseNotice(rest, nranks);
  if (n.isOk()) {  // round trip
    auto again = w::parseNotice(w::asBytes(w::encodeNotice(*n)), nranks);
    if (!again.isOk() || again->text != n->text || again->origin != n->origin) __builtin_trap();
  }
#elif TUTTI_FUZZ_TARGET == 5
  (void)w::parseId(bytes);
#elif TUTTI_FUZZ_TARGET == 6
  auto p = w::parsePeerInfo(text, 0);
  if (p.isOk() && p->pid <= 0) __builtin_trap();
#elif TUTTI_FUZZ_TARGET == 7
  auto b = w::parseBlobs(text);
  if (b.isOk() && w::encodeBlobs(*b) != text) __builtin_trap();  // exact round trip
#elif TUTTI_FUZZ_TARGET == 8
  auto s = parseSignature(bytes);
  if (s.isOk()) (void)describe(*s);
#elif TUTTI_FUZZ_TARGET == 9
  (void)transport::tcp_wire::parseAddrBlob(bytes, 0, 1);
#elif TUTTI_FUZZ_TARGET == 10
  (void)transport::tcp_wire::checkHello(rest, 0x1234, nranks - 1, nranks);
#elif TUTTI_FUZZ_TARGET == 11
  (void)transport::shm_wire::parseBlob(bytes, 1, 1 << 20, 1792, 0);
#elif TUTTI_FUZZ_TARGET == 12
  auto h = w::parseP2pHello(rest, nranks);
  if (h.isOk() && (h->from < 0 || h->from >= nranks || h->bytes > w::kMaxP2pBytes))
    __builtin_trap();
#else
#error "TUTTI_FUZZ_TARGET must be 1..12"
#endif
  return 0;
}
