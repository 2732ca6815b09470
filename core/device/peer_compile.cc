// File: core/device/peer_compile.cc
// The peer compiler (see peer_compile.h): pieces, one schedule per distinct piece size, ops with
// their FIFO slots, and the pairing check.
#include "core/device/peer_compile.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "base/collectives.h"
#include "base/hash.h"

namespace tutti::device {

namespace peer = kernels::peer;
using algo::Buf;
using algo::CollShape;
using algo::Schedule;
using algo::Step;

class PeerBuilder {
 public:
  static PeerProgram make(peer::ProgramHeader h, const std::vector<peer::Piece>& pieces,
                          const std::vector<peer::Round>& rounds, const std::vector<peer::Op>& ops,
                          std::string_view algorithm) {
    h.piecesAt = static_cast<uint32_t>(sizeof(peer::ProgramHeader));
    h.roundsAt = h.piecesAt + static_cast<uint32_t>(pieces.size() * sizeof(peer::Piece));
    h.opsAt = h.roundsAt + static_cast<uint32_t>(rounds.size() * sizeof(peer::Round));
    h.bytes = h.opsAt + static_cast<uint32_t>(ops.size() * sizeof(peer::Op));
    h.npieces = static_cast<uint32_t>(pieces.size());
    h.nrounds = static_cast<uint32_t>(rounds.size());
    h.nops = static_cast<uint32_t>(ops.size());
    PeerProgram p;
    p.words_.assign((h.bytes + 7) / 8, 0);
    auto* base = reinterpret_cast<unsigned char*>(p.words_.data());
    std::memcpy(base, &h, sizeof(h));
    if (!pieces.empty())
      std::memcpy(base + h.piecesAt, pieces.data(), pieces.size() * sizeof(peer::Piece));
    if (!rounds.empty())
      std::memcpy(base + h.roundsAt, rounds.data(), rounds.size() * sizeof(peer::Round));
    if (!ops.empty()) std::memcpy(base + h.opsAt, ops.data(), ops.size() * sizeof(peer::Op));
    p.algorithm_ = std::string(algorithm);
    return p;
  }
};

namespace {

constexpr const char* kWhat = "compilePeer";

bool blocked(Extent e) { return e == Extent::kRanksCount || e == Extent::kRootRanksCount; }

// Where an element of a sub-call lives: in place, one user buffer holds both input and output
// (NCCL's forms), so their elements share a space; scratch and out-of-place buffers are their own.
struct Place {
  int space = 0;
  uint64_t at = 0;
};
Place placeOf(const CollShape& s, Buf b, uint64_t offset) {
  if (b == Buf::kScratch) return {2, offset};
  if (!s.inPlace) return {b == Buf::kInput ? 0 : 1, offset};
  const uint64_t block = static_cast<uint64_t>(s.rank) * s.count;
  switch (collInfo(s.coll).inPlace) {
    case InPlaceForm::kSendInRecv:
      return {0, b == Buf::kInput ? block + offset : offset};
    case InPlaceForm::kRecvInSend:
      return {0, b == Buf::kOutput ? block + offset : offset};
    default:
      return {0, offset};
  }
}

// A step that reads src and writes dst element by element in parallel: the two ranges must be
// the same elements or disjoint.
Status checkOverlap(const CollShape& s, const Step& st, size_t round) {
  const bool both = st.op == algo::Op::kCopy || st.op == algo::Op::kReduce ||
                    st.op == algo::Op::kRecvReduce || st.op == algo::Op::kRecvReduceSend;
  if (!both || st.count == 0) return Status::ok();
  const Place a = placeOf(s, st.src, st.srcOffset), b = placeOf(s, st.dst, st.dstOffset);
  if (a.space != b.space || a.at == b.at) return Status::ok();
  if (a.at < b.at + st.count && b.at < a.at + st.count) {
    return invalidUsage(
        "{}: rank {} round {}: {} of {} elements reads {}[{}] and writes {}[{}], which partly "
        "overlap (a parallel copy cannot run it)",
        kWhat, s.rank, round, algo::opName(st.op), st.count, algo::bufName(st.src), st.srcOffset,
        algo::bufName(st.dst), st.dstOffset);
  }
  return Status::ok();
}

peer::OpKind kindOf(algo::Op op) {
  switch (op) {
    case algo::Op::kSend:
      return peer::OpKind::kSend;
    case algo::Op::kRecv:
      return peer::OpKind::kRecv;
    case algo::Op::kRecvReduce:
      return peer::OpKind::kRecvReduce;
    case algo::Op::kRecvReduceSend:
      return peer::OpKind::kRecvReduceSend;
    case algo::Op::kRecvCopySend:
      return peer::OpKind::kRecvCopySend;
    case algo::Op::kCopy:
      return peer::OpKind::kCopy;
    case algo::Op::kReduce:
      return peer::OpKind::kReduce;
  }
  return peer::OpKind::kCopy;
}

bool sendsTo(peer::OpKind k) {
  return k == peer::OpKind::kSend || k == peer::OpKind::kRecvReduceSend ||
         k == peer::OpKind::kRecvCopySend;
}
bool receivesFrom(peer::OpKind k) {
  return k == peer::OpKind::kRecv || k == peer::OpKind::kRecvReduce ||
         k == peer::OpKind::kRecvReduceSend || k == peer::OpKind::kRecvCopySend;
}

// The schedules of one piece size: every rank's, and the largest scratch of any rank.
struct Built {
  std::vector<Schedule> all;
  size_t maxScratch = 0;
};

// Builds every rank's schedule for pieces of `count` elements and checks what the interpreter
// needs of each (so that every rank accepts or declines a shape alike): no step reads and writes
// partly overlapping elements, no round of more than kMaxRoundOps steps, and with premulsum no
// step writes the input.
Result<Built> buildAll(const CollShape& shape, const algo::AlgorithmInfo& algo, size_t count,
                       bool preMul) {
  Built b;
  for (int r = 0; r < shape.nranks; ++r) {
    CollShape s = shape;
    s.rank = r;
    s.count = count;
    if (algo.supports && !algo.supports(s)) {
      return invalidUsage("{}: algorithm {} declines {} of count={} on {} ranks", kWhat, algo.name,
                          collInfo(shape.coll).name, count, shape.nranks);
    }
    Result<Schedule> sched = algo.build(s);
    if (!sched.isOk()) return sched.status();
    const Schedule& sc = sched.value();
    for (size_t ri = 0; ri < sc.rounds.size(); ++ri) {
      size_t steps = 0;
      for (const Step& st : sc.rounds[ri]) {
        if (st.count == 0) continue;
        ++steps;
        TUTTI_TRY(checkOverlap(s, st, ri));
        if (preMul && algo::writesDst(st.op) && st.dst == Buf::kInput)
          return invalidUsage(
              "{}: rank {} round {} writes the input, which premulsum reads "
              "scaled",
              kWhat, r, ri);
      }
      if (steps > static_cast<size_t>(peer::kMaxRoundOps))
        return invalidUsage("{}: rank {} round {} has {} steps, more than {}", kWhat, r, ri, steps,
                            peer::kMaxRoundOps);
    }
    b.maxScratch = std::max(b.maxScratch, sc.scratchCount);
    b.all.push_back(std::move(sched).value());
  }
  return b;
}

// One rank's rounds and ops, channel by channel (the rounds of channel c:
// [channelRounds[c], channelRounds[c + 1])).
struct RankOps {
  std::vector<peer::Round> rounds;
  std::vector<peer::Op> ops;
  std::vector<uint32_t> channelRounds;
  uint64_t scratchNeed = 0;
};

// What a sending op sends: a plain send its src, a forward its dst (after receiving into it).
std::pair<peer::BufKind, uint64_t> sentFrom(const peer::Op& op) {
  if (op.kind == peer::OpKind::kSend) return {op.src, op.srcOffset};
  return {op.dst, op.dstOffset};
}

// Direct messages (kernels/peer_program.h): which sends of every rank may be read in place, and
// the receives that pair with them. A send or forward qualifies when what it sends lies in the
// input or the output (a plain send: not scaled by premulsum) and no later op of the sender's
// piece writes any of those elements (in place, input and output share elements: placeOf). Every
// rank computes every rank's marks alike, so both ends of a FIFO agree.
void markDirect(const CollShape& shape, const std::vector<peer::Piece>& pieces,
                std::vector<RankOps>& all) {
  const int n = shape.nranks;
  // [sender] -> (channel, receiver, slot) of its direct sends -> (buffer, offset).
  std::vector<std::map<std::tuple<uint32_t, int, uint32_t>, std::pair<peer::BufKind, uint64_t>>>
      sends(n);
  for (int p = 0; p < n; ++p) {
    RankOps& ro = all[p];
    CollShape s = shape;
    s.rank = p;
    for (uint32_t c = 0; c + 1 < ro.channelRounds.size(); ++c) {
      for (uint32_t ri = ro.channelRounds[c]; ri < ro.channelRounds[c + 1]; ++ri) {
        const peer::Round& rd = ro.rounds[ri];
        s.count = pieces[rd.piece].count;
        for (uint32_t k = rd.firstOp; k < rd.firstOp + rd.nops; ++k) {
          peer::Op& op = ro.ops[k];
          if (!sendsTo(op.kind)) continue;
          if (op.kind == peer::OpKind::kSend && (op.flags & peer::kPreMulSrc) != 0) continue;
          const auto [buf, offset] = sentFrom(op);
          if (buf != peer::BufKind::kInput && buf != peer::BufKind::kOutput) continue;
          const Place from = placeOf(s, static_cast<Buf>(buf), offset);
          bool rewritten = false;
          for (uint32_t later = ri + 1;
               !rewritten && later < ro.channelRounds[c + 1] && ro.rounds[later].piece == rd.piece;
               ++later) {
            const peer::Round& lr = ro.rounds[later];
            for (uint32_t j = lr.firstOp; j < lr.firstOp + lr.nops && !rewritten; ++j) {
              const peer::Op& w = ro.ops[j];
              if (w.kind == peer::OpKind::kSend) continue;
              const Place to = placeOf(s, static_cast<Buf>(w.dst), w.dstOffset);
              rewritten = to.space == from.space && to.at < from.at + op.count &&
                          from.at < to.at + w.count;
            }
          }
          if (rewritten) continue;
          op.flags |= peer::kDirectSend;
          sends[p][{c, op.sendPeer, op.sendSlot}] = {buf, offset};
        }
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    RankOps& ro = all[r];
    for (uint32_t c = 0; c + 1 < ro.channelRounds.size(); ++c) {
      for (uint32_t ri = ro.channelRounds[c]; ri < ro.channelRounds[c + 1]; ++ri) {
        const peer::Round& rd = ro.rounds[ri];
        for (uint32_t k = rd.firstOp; k < rd.firstOp + rd.nops; ++k) {
          peer::Op& op = ro.ops[k];
          if (!receivesFrom(op.kind)) continue;
          auto it = sends[op.peer].find({c, r, op.recvSlot});
          if (it == sends[op.peer].end()) continue;
          op.flags |= peer::kDirectRecv;
          op.peerBuf = it->second.first;
          op.peerOffset = it->second.second;
        }
      }
    }
  }
}

}  // namespace

Result<PeerProgram> compilePeer(const CollShape& shape, const algo::AlgorithmInfo& algo,
                                const PeerCompileConfig& config, const std::byte* preMulScalar) {
  const CollInfo& info = collInfo(shape.coll);
  if (shape.coll == Coll::kSendRecv || shape.coll == Coll::kBarrier)
    return invalidUsage("{}: coll={} is not compiled (grouped send/recv has no schedule)", kWhat,
                        info.name);
  if (algo.coll != shape.coll)
    return invalidUsage("{}: algorithm {} is for {}, not {}", kWhat, algo.name,
                        collInfo(algo.coll).name, info.name);
  if (shape.nranks < 1 || shape.nranks > peer::kMaxRanks)
    return invalidUsage("{}: nranks={} outside [1, {}]", kWhat, shape.nranks, peer::kMaxRanks);
  if (shape.rank < 0 || shape.rank >= shape.nranks)
    return invalidUsage("{}: rank={} outside [0, {})", kWhat, shape.rank, shape.nranks);
  if (config.channels < 1 || config.channels > peer::kMaxChannels)
    return invalidUsage("{}: channels={} outside [1, {}]", kWhat, config.channels,
                        peer::kMaxChannels);
  if (config.payloadBytes == 0 || config.payloadBytes % 16 != 0)
    return invalidUsage("{}: payloadBytes={} is not a positive multiple of 16", kWhat,
                        config.payloadBytes);
  if (!isValid(shape.dtype) || !isValid(shape.op))
    return invalidArgument("{}: invalid dtype or op (dtype={}, op={})", kWhat,
                           static_cast<int>(shape.dtype), static_cast<int>(shape.op));
  if (preMulScalar != nullptr && (shape.inPlace || shape.op != RedOp::kSum || !info.reduces))
    return invalidUsage(
        "{}: premulsum needs an out-of-place sum of a reducing collective "
        "(inPlace={}, op={}, coll={})",
        kWhat, shape.inPlace, redOpName(shape.op), info.name);

  const size_t elem = dataTypeBytes(shape.dtype);
  peer::ProgramHeader h;
  h.rank = shape.rank;
  h.nranks = shape.nranks;
  h.count = shape.count;
  h.coll = shape.coll;
  h.dtype = shape.dtype;
  h.op = shape.op == RedOp::kAvg ? RedOp::kSum : shape.op;
  h.protocol = config.protocol;
  h.inputBlocked = blocked(info.input);
  h.outputBlocked = blocked(info.output);
  h.elemBytes = static_cast<uint8_t>(elem);
  if (preMulScalar != nullptr) {
    h.preMul = 1;
    std::memcpy(h.scalar, preMulScalar, elem);
  }
  h.divisor = shape.nranks;
  h.payloadBytes = config.payloadBytes;

  std::vector<peer::Piece> pieces;
  if (shape.count == 0) {
    h.nchannels = 1;
    return PeerBuilder::make(h, pieces, {}, {}, algo.name);
  }

  // Pieces: as many as channels, smaller when the scratch of every rank's schedule must fit.
  const uint64_t channels = std::min<uint64_t>(config.channels, shape.count);
  uint64_t piece = (shape.count + channels - 1) / channels;
  if (config.maxPieceCount != 0) piece = std::min(piece, config.maxPieceCount);
  std::map<uint64_t, Built> built;
  for (;;) {
    TUTTI_TRY_ASSIGN(Built b, buildAll(shape, algo, piece, preMulScalar != nullptr));
    const uint64_t need = b.maxScratch * elem;
    if (need <= config.scratchBytes) {
      built.emplace(piece, std::move(b));
      break;
    }
    if (piece == 1)
      return invalidUsage(
          "{}: algorithm {} needs {} bytes of scratch for one element, the "
          "arena has {} per channel",
          kWhat, algo.name, need, config.scratchBytes);
    piece = std::clamp<uint64_t>(piece * config.scratchBytes / need, 1, piece - 1);
  }
  const uint64_t npieces = (shape.count + piece - 1) / piece;
  const uint64_t nch = std::min<uint64_t>(channels, npieces);
  h.nchannels = static_cast<uint32_t>(nch);
  for (uint64_t k = 0; k < npieces; ++k)
    pieces.push_back({k * piece, std::min<uint64_t>(piece, shape.count - k * piece)});
  // What every rank's program of this call shares (FNV-1a): a direct receiver checks the
  // sender's CallRecord against it.
  const uint64_t identity[] = {static_cast<uint64_t>(shape.coll),  shape.count,
                               static_cast<uint64_t>(shape.dtype), static_cast<uint64_t>(shape.op),
                               static_cast<uint64_t>(info.rooted ? shape.root : 0),
                               static_cast<uint64_t>(shape.nranks),
                               static_cast<uint64_t>(config.protocol), nch, npieces, piece};
  h.shape = fnv1a(algo.name, fnv1a(identity, sizeof identity));

  // Rank `rank`'s rounds and ops; every rank's when direct messages need the pairs' both ends.
  auto opsOf = [&](int rank) -> Result<RankOps> {
    RankOps ro;
    const bool holdsResult = shape.op == RedOp::kAvg && shape.nranks > 1 &&
                             (shape.coll == Coll::kAllReduce ||
                              shape.coll == Coll::kReduceScatter ||
                              (shape.coll == Coll::kReduce && rank == shape.root));
    for (uint64_t c = 0; c < nch; ++c) {
      ro.channelRounds.push_back(static_cast<uint32_t>(ro.rounds.size()));
      std::vector<uint32_t> sendSlot(shape.nranks, 0), recvSlot(shape.nranks, 0);
      for (uint64_t k = c; k < npieces; k += nch) {
        const uint64_t n = pieces[k].count;
        auto it = built.find(n);
        if (it == built.end()) {
          TUTTI_TRY_ASSIGN(Built b, buildAll(shape, algo, n, preMulScalar != nullptr));
          it = built.emplace(n, std::move(b)).first;
        }
        const Schedule& sched = it->second.all[rank];
        ro.scratchNeed = std::max<uint64_t>(ro.scratchNeed, sched.scratchCount * elem);
        for (size_t ri = 0; ri < sched.rounds.size(); ++ri) {
          const uint32_t first = static_cast<uint32_t>(ro.ops.size());
          for (const Step& st : sched.rounds[ri]) {
            if (st.count == 0) continue;
            peer::Op op;
            op.kind = kindOf(st.op);
            op.src = static_cast<peer::BufKind>(st.src);
            op.dst = static_cast<peer::BufKind>(st.dst);
            op.srcOffset = st.srcOffset;
            op.dstOffset = st.dstOffset;
            op.count = st.count;
            op.peer = static_cast<uint16_t>(std::max(st.peer, 0));
            if (preMulScalar != nullptr && algo::readsSrc(st.op) && st.src == Buf::kInput)
              op.flags |= peer::kPreMulSrc;
            const uint64_t slots = peer::slotsFor(st.count * elem, config.payloadBytes);
            if (receivesFrom(op.kind)) {
              op.recvSlot = recvSlot[st.peer];
              recvSlot[st.peer] += static_cast<uint32_t>(slots);
            }
            if (sendsTo(op.kind)) {
              const int to = op.kind == peer::OpKind::kSend ? st.peer : st.sendPeer;
              op.sendPeer = static_cast<uint16_t>(to);
              op.sendSlot = sendSlot[to];
              sendSlot[to] += static_cast<uint32_t>(slots);
            }
            ro.ops.push_back(op);
          }
          const uint32_t nops = static_cast<uint32_t>(ro.ops.size()) - first;
          if (nops == 0) continue;  // buildAll checked nops <= kMaxRoundOps
          ro.rounds.push_back({first, nops, static_cast<uint32_t>(k), static_cast<uint32_t>(ri)});
        }
        if (holdsResult) {
          peer::Op div;
          div.kind = peer::OpKind::kDivide;
          div.src = div.dst = peer::BufKind::kOutput;
          div.count = n;
          ro.rounds.push_back({static_cast<uint32_t>(ro.ops.size()), 1, static_cast<uint32_t>(k),
                               static_cast<uint32_t>(sched.rounds.size())});
          ro.ops.push_back(div);
        }
      }
    }
    ro.channelRounds.push_back(static_cast<uint32_t>(ro.rounds.size()));
    return ro;
  };
  const bool direct = config.direct && config.protocol == peer::Protocol::kSimple &&
                      shape.nranks > 1;
  std::vector<RankOps> all(shape.nranks);
  for (int r = 0; r < shape.nranks; ++r) {
    if (!direct && r != shape.rank) continue;
    TUTTI_TRY_ASSIGN(all[r], opsOf(r));
  }
  if (direct) markDirect(shape, pieces, all);
  RankOps& mine = all[shape.rank];
  for (uint64_t c = 0; c <= static_cast<uint64_t>(peer::kMaxChannels); ++c)
    h.channelRounds[c] = mine.channelRounds[std::min<uint64_t>(c, nch)];
  for (const peer::Op& op : mine.ops)
    if ((op.flags & (peer::kDirectSend | peer::kDirectRecv)) != 0) h.direct = 1;
  h.scratchBytes = mine.scratchNeed;
  return PeerBuilder::make(h, pieces, mine.rounds, mine.ops, algo.name);
}

Result<PeerProgram> compilePeerMessages(int rank, int nranks, std::span<const PeerMessage> msgs,
                                        const PeerCompileConfig& config) {
  constexpr const char* kMsgs = "compilePeerMessages";
  if (nranks < 1 || nranks > peer::kMaxRanks)
    return invalidUsage("{}: nranks={} outside [1, {}]", kMsgs, nranks, peer::kMaxRanks);
  if (rank < 0 || rank >= nranks)
    return invalidUsage("{}: rank={} outside [0, {})", kMsgs, rank, nranks);
  if (config.channels < 1 || config.channels > peer::kMaxChannels)
    return invalidUsage("{}: channels={} outside [1, {}]", kMsgs, config.channels,
                        peer::kMaxChannels);
  if (config.payloadBytes == 0 || config.payloadBytes % 16 != 0)
    return invalidUsage("{}: payloadBytes={} is not a positive multiple of 16", kMsgs,
                        config.payloadBytes);
  std::vector<const PeerMessage*> selfSends, selfRecvs;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const PeerMessage& m = msgs[i];
    if (m.peer < 0 || m.peer >= nranks)
      return invalidUsage("{}: message {} names peer {} outside [0, {})", kMsgs, i, m.peer, nranks);
    if (m.buffer < 0 || m.buffer >= peer::kMaxBuffers)
      return invalidUsage("{}: message {} names buffer {} outside [0, {})", kMsgs, i, m.buffer,
                          peer::kMaxBuffers);
    if (m.peer == rank) (m.send ? selfSends : selfRecvs).push_back(&m);
  }
  if (selfSends.size() != selfRecvs.size())
    return invalidUsage("{}: rank {} sends {} messages to itself and receives {}", kMsgs, rank,
                        selfSends.size(), selfRecvs.size());
  for (size_t i = 0; i < selfSends.size(); ++i)
    if (selfSends[i]->bytes != selfRecvs[i]->bytes)
      return invalidUsage("{}: rank {}'s send {} to itself has {} bytes, its receive {}", kMsgs,
                          rank, i, selfSends[i]->bytes, selfRecvs[i]->bytes);
  const uint64_t bytesPerChannel = std::max<uint64_t>(config.messageBytesPerChannel, 1);
  auto channelsOf = [&](uint64_t bytes) {
    return std::clamp<uint64_t>(bytes / bytesPerChannel, 1, static_cast<uint64_t>(config.channels));
  };
  // One round per channel: the parts of every message, in batch order.
  std::vector<std::vector<peer::Op>> parts(config.channels);
  std::vector<std::vector<uint32_t>> sendSlot(config.channels, std::vector<uint32_t>(nranks, 0)),
      recvSlot(config.channels, std::vector<uint32_t>(nranks, 0));
  auto bufKind = [](int buffer) { return static_cast<peer::BufKind>(peer::kFirstBuffer + buffer); };
  size_t selfIndex = 0;
  for (const PeerMessage& m : msgs) {
    if (m.peer == rank && !m.send) continue;  // a receive from itself pairs with a send
    const PeerMessage* selfRecv = m.peer == rank ? selfRecvs[selfIndex++] : nullptr;
    if (m.bytes == 0) continue;
    const uint64_t k = channelsOf(m.bytes);
    for (uint64_t c = 0; c < k; ++c) {
      const uint64_t from = m.bytes * c / k, to = m.bytes * (c + 1) / k;
      if (to == from) continue;
      peer::Op op;
      op.count = to - from;
      op.srcOffset = op.dstOffset = from;
      if (m.peer == rank) {
        op.kind = peer::OpKind::kCopy;
        op.src = bufKind(m.buffer);
        op.dst = bufKind(selfRecv->buffer);
      } else if (m.send) {
        op.kind = peer::OpKind::kSend;
        op.src = bufKind(m.buffer);
        op.peer = op.sendPeer = static_cast<uint16_t>(m.peer);
        op.sendSlot = sendSlot[c][m.peer];
        sendSlot[c][m.peer] += static_cast<uint32_t>(peer::slotsFor(op.count, config.payloadBytes));
      } else {
        op.kind = peer::OpKind::kRecv;
        op.dst = bufKind(m.buffer);
        op.peer = static_cast<uint16_t>(m.peer);
        op.recvSlot = recvSlot[c][m.peer];
        recvSlot[c][m.peer] += static_cast<uint32_t>(peer::slotsFor(op.count, config.payloadBytes));
      }
      parts[c].push_back(op);
    }
  }
  peer::ProgramHeader h;
  h.rank = rank;
  h.nranks = nranks;
  h.coll = Coll::kSendRecv;
  h.dtype = DataType::kUint8;
  h.elemBytes = 1;
  h.protocol = config.protocol;
  h.payloadBytes = config.payloadBytes;
  h.nchannels = 1;
  std::vector<peer::Piece> pieces{{0, 1}};  // messages address their own buffers
  std::vector<peer::Round> rounds;
  std::vector<peer::Op> ops;
  for (int c = 0; c < config.channels; ++c) {
    h.channelRounds[c] = static_cast<uint32_t>(rounds.size());
    if (parts[c].empty()) continue;
    if (parts[c].size() > static_cast<size_t>(peer::kMaxRoundOps))
      return invalidUsage("{}: rank {} has {} message parts on channel {}, more than {}", kMsgs,
                          rank, parts[c].size(), c, peer::kMaxRoundOps);
    h.nchannels = static_cast<uint32_t>(c + 1);
    rounds.push_back(
        {static_cast<uint32_t>(ops.size()), static_cast<uint32_t>(parts[c].size()), 0, 0});
    ops.insert(ops.end(), parts[c].begin(), parts[c].end());
  }
  for (int c = config.channels; c <= peer::kMaxChannels; ++c)
    h.channelRounds[c] = static_cast<uint32_t>(rounds.size());
  return PeerBuilder::make(h, pieces, rounds, ops, "sendrecv");
}

Status checkPairing(std::span<const PeerProgram* const> programs) {
  struct Message {
    uint32_t slot;
    uint64_t bytes;
    uint32_t piece, round;
    uint32_t op;
    bool direct = false;  // read in place: from the sender's buf at offset
    peer::BufKind buf = peer::BufKind::kInput;
    uint64_t offset = 0;
  };
  // [channel][sender][receiver] -> messages, as the sender sends and as the receiver receives.
  std::map<std::tuple<int, int, int>, std::vector<Message>> sent, received;
  const int n = static_cast<int>(programs.size());
  for (int r = 0; r < n; ++r) {
    const peer::ProgramHeader* h = programs[r]->header();
    if (h->rank != r || h->nranks != n)
      return internalError("checkPairing: programs[{}] is rank {} of {} (expected {} of {})", r,
                           h->rank, h->nranks, r, n);
    const peer::Round* rs = peer::rounds(h);
    const peer::Op* os = peer::ops(h);
    for (uint32_t c = 0; c < h->nchannels; ++c) {
      for (uint32_t ri = h->channelRounds[c]; ri < h->channelRounds[c + 1]; ++ri) {
        for (uint32_t k = rs[ri].firstOp; k < rs[ri].firstOp + rs[ri].nops; ++k) {
          const peer::Op& op = os[k];
          const Message m{0, op.count * h->elemBytes, rs[ri].piece, rs[ri].scheduleRound, k};
          if (sendsTo(op.kind)) {
            Message s = m;
            s.slot = op.sendSlot;
            if ((op.flags & peer::kDirectSend) != 0) {
              s.direct = true;
              std::tie(s.buf, s.offset) = sentFrom(op);
            }
            sent[{static_cast<int>(c), r, op.sendPeer}].push_back(s);
          }
          if (receivesFrom(op.kind)) {
            Message s = m;
            s.slot = op.recvSlot;
            if ((op.flags & peer::kDirectRecv) != 0) {
              s.direct = true;
              s.buf = op.peerBuf;
              s.offset = op.peerOffset;
            }
            received[{static_cast<int>(c), op.peer, r}].push_back(s);
          }
        }
      }
    }
  }
  auto check = [&](const auto& a, const auto& b, const char* aName) -> Status {
    for (const auto& [key, msgs] : a) {
      const auto [c, s, r] = key;
      auto it = b.find(key);
      const size_t other = it == b.end() ? 0 : it->second.size();
      if (other != msgs.size())
        return internalError(
            "checkPairing: channel {} FIFO {} -> {}: {} messages {}, {} on the "
            "other side",
            c, s, r, msgs.size(), aName, other);
      uint64_t next = 0;
      for (size_t i = 0; i < msgs.size(); ++i) {
        const Message &x = msgs[i], &y = it->second[i];
        if (x.slot != y.slot || x.bytes != y.bytes || x.piece != y.piece || x.round != y.round)
          return internalError(
              "checkPairing: channel {} FIFO {} -> {} message {}: slot {} bytes "
              "{} piece {} round {} {} (op {}), slot {} bytes {} piece {} round "
              "{} on the other side (op {})",
              c, s, r, i, x.slot, x.bytes, x.piece, x.round, aName, x.op, y.slot, y.bytes, y.piece,
              y.round, y.op);
        if (x.direct != y.direct || (x.direct && (x.buf != y.buf || x.offset != y.offset)))
          return internalError(
              "checkPairing: channel {} FIFO {} -> {} message {}: direct={} (buffer {}, offset "
              "{}) {} (op {}), direct={} (buffer {}, offset {}) on the other side (op {})",
              c, s, r, i, x.direct, static_cast<int>(x.buf), x.offset, aName, x.op, y.direct,
              static_cast<int>(y.buf), y.offset, y.op);
        if (x.slot != next)
          return internalError(
              "checkPairing: channel {} FIFO {} -> {} message {} starts at slot "
              "{}, the previous ones end at {}",
              c, s, r, i, x.slot, next);
        next = x.slot + peer::slotsFor(x.bytes, programs[s]->header()->payloadBytes);
      }
    }
    return Status::ok();
  };
  TUTTI_TRY(check(sent, received, "sent"));
  return check(received, sent, "received");
}

}  // namespace tutti::device
