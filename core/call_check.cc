// File: core/call_check.cc
// Signatures of collective calls and their comparison (see call_check.h).
#include "core/call_check.h"

#include <cstring>

namespace tutti {

namespace {
constexpr uint32_t kSigMagic = 0x53434c54u;  // "TLCS"

bool usesOp(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce;
}
bool usesRoot(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather || c == Coll::kScatter;
}
bool usesData(Coll c) { return c != Coll::kBarrier; }

std::string typeName(uint8_t dtype) {
  auto t = static_cast<DataType>(dtype);
  return isValid(t) ? std::string(dataTypeName(t)) : fmt::format("invalid({})", dtype);
}
std::string opName(uint8_t op) {
  auto o = static_cast<RedOp>(op);
  return isValid(o) ? std::string(redOpName(o)) : fmt::format("invalid({})", op);
}
std::string collText(uint8_t coll) {
  return coll < kNumColls ? std::string(collName(static_cast<Coll>(coll)))
                          : fmt::format("invalid({})", coll);
}
}  // namespace

void makeSignature(CallCheck& check, Coll coll, size_t count, DataType dtype, RedOp op, int root,
                   uint64_t collSeq) {
  CallSignature& s = check.mine.sig;
  s.magic = kSigMagic;
  s.seq = static_cast<uint32_t>(collSeq);
  s.coll = static_cast<uint8_t>(coll);
  s.dtype = usesData(coll) ? static_cast<uint8_t>(dtype) : 0;
  s.op = usesOp(coll) ? static_cast<uint8_t>(op) : 0;
  s.root = usesRoot(coll) ? root : 0;
  s.count = usesData(coll) ? count : 0;
  s.inlineBytes = 0;
  check.sign = true;
}

Result<CallSignature> parseSignature(std::span<const std::byte> bytes) {
  CallSignature s{};
  if (bytes.size() != sizeof s)
    return invalidUsage("call check: signature of {} bytes (expected {})", bytes.size(), sizeof s);
  std::memcpy(&s, bytes.data(), sizeof s);
  if (s.magic != kSigMagic)
    return invalidUsage("call check: the first bytes of the call are not a call signature "
                        "(magic={:#x}): an earlier call already differed between ranks",
                        s.magic);
  return s;
}

std::string describe(const CallSignature& s) {
  const Coll c = static_cast<Coll>(s.coll);
  std::string out = collText(s.coll) + "(";
  if (s.coll >= kNumColls || usesData(c)) out += fmt::format("count={}, dtype={}", s.count, typeName(s.dtype));
  if (s.coll >= kNumColls || usesOp(c)) out += fmt::format(", op={}", opName(s.op));
  if (s.coll >= kNumColls || usesRoot(c)) out += fmt::format(", root={}", s.root);
  return out + ")";
}

Status verifyCall(const CallSignature& mine, const CallSignature& theirs, uint64_t seq, int rank,
                  int prev, size_t maxInline) {
  const CallSignature& a = mine;
  // The common case, on every call. Everything below formats text (error path only).
  if (sameCall(a, theirs) && theirs.inlineBytes <= maxInline) return Status::ok();
  auto parsed = parseSignature(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(&theirs), sizeof theirs));
  const std::string what = fmt::format("{} #{}", collText(a.coll), seq);
  if (!parsed.isOk())
    return invalidUsage("{}: rank {} received garbage instead of rank {}'s call signature: {}",
                        what, rank, prev, parsed.status().message());
  const CallSignature& b = parsed.value();
  std::string diff;
  auto add = [&](bool differs, const char* name) {
    if (differs) diff += (diff.empty() ? "" : ", ") + std::string(name);
  };
  add(a.coll != b.coll, "collective");
  add(a.count != b.count, "count");
  add(a.dtype != b.dtype, "dtype");
  add(a.op != b.op, "op");
  add(a.root != b.root, "root");
  add(a.seq != b.seq, "collective sequence number");
  add(a.reserved2 != b.reserved2, "signature format");
  if (diff.empty() && b.inlineBytes > maxInline)
    return invalidUsage(
        "{}: rank {} received a call message from rank {} with {} inline bytes "
        "(at most {} here): the streams are out of step",
        what, rank, prev, b.inlineBytes, maxInline);
  if (diff.empty()) return Status::ok();
  return invalidUsage(
      "{}: ranks called different operations at collective call {}: rank {} "
      "called {} but rank {} called {} (values that differ: {})",
      what, a.seq, rank, describe(a), prev, describe(b), diff);
}

}  // namespace tutti
