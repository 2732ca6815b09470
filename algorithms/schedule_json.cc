// File: algorithms/schedule_json.cc
// JSON <-> LoadedSchedule, chunk ranges -> element ranges, and registration of loaded schedules.
#include "algorithms/schedule_json.h"

#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

namespace tutti::algo {

namespace {

using Json = nlohmann::json;
constexpr const char* kFormat = "tutti-schedule-1";

struct OpName {
  const char* name;
  Op op;
};
constexpr OpName kOps[] = {{"send", Op::kSend},
                           {"recv", Op::kRecv},
                           {"recvReduce", Op::kRecvReduce},
                           {"recvReduceSend", Op::kRecvReduceSend},
                           {"recvCopySend", Op::kRecvCopySend},
                           {"copy", Op::kCopy},
                           {"reduce", Op::kReduce}};

bool hasPeer(Op op) { return op != Op::kCopy && op != Op::kReduce; }

std::optional<Buf> parseBuf(const std::string& s) {
  if (s == "input") return Buf::kInput;
  if (s == "output") return Buf::kOutput;
  if (s == "scratch") return Buf::kScratch;
  return std::nullopt;
}

// A small reader that remembers the JSON path for messages.
class Reader {
 public:
  Reader(const std::string& origin) : origin_(origin) {}
  Status error(const std::string& path, const std::string& what) const {
    return invalidArgument("schedule {}: {}: {}", origin_, path, what);
  }
  Result<int64_t> integer(const Json& j, const char* key, const std::string& path, int64_t def,
                          bool required) const {
    if (!j.contains(key)) {
      if (required) return error(path + "." + key, "missing");
      return def;
    }
    const Json& v = j[key];
    if (!v.is_number_integer()) return error(path + "." + key, "must be an integer");
    return v.get<int64_t>();
  }
  Result<std::string> string(const Json& j, const char* key, const std::string& path,
                             const char* def) const {
    if (!j.contains(key)) {
      if (!def) return error(path + "." + key, "missing");
      return std::string(def);
    }
    if (!j[key].is_string()) return error(path + "." + key, "must be a string");
    return j[key].get<std::string>();
  }

 private:
  std::string origin_;
};

Result<JsonStep> parseStep(const Reader& rd, const Json& j, const std::string& path, int nranks) {
  if (!j.is_object()) return rd.error(path, "a step must be an object");
  JsonStep st;
  TUTTI_TRY_ASSIGN(std::string op, rd.string(j, "op", path, nullptr));
  bool known = false;
  for (const auto& o : kOps)
    if (op == o.name) st.op = o.op, known = true;
  if (!known) return rd.error(path + ".op", fmt::format("unknown op '{}'", op));
  auto peerField = [&](const char* key, bool needed, int* out) -> Status {
    TUTTI_TRY_ASSIGN(int64_t p, rd.integer(j, key, path, -1, needed));
    if (needed && (p < 0 || p >= nranks))
      return rd.error(path + "." + key, fmt::format("rank {} outside [0, {})", p, nranks));
    *out = static_cast<int>(p);
    return Status::ok();
  };
  TUTTI_TRY(peerField("peer", hasPeer(st.op), &st.peer));
  TUTTI_TRY(peerField("send_peer", forwards(st.op), &st.sendPeer));
  auto bufField = [&](const char* key, const char* chunkKey, bool needed, Buf* buf,
                      size_t* chunk) -> Status {
    if (!needed) return Status::ok();
    TUTTI_TRY_ASSIGN(std::string b, rd.string(j, key, path, nullptr));
    auto parsed = parseBuf(b);
    if (!parsed)
      return rd.error(path + "." + key,
                      fmt::format("'{}' is not input, output or scratch", b));
    *buf = *parsed;
    TUTTI_TRY_ASSIGN(int64_t c, rd.integer(j, chunkKey, path, 0, true));
    if (c < 0) return rd.error(path + "." + chunkKey, "must be >= 0");
    *chunk = static_cast<size_t>(c);
    return Status::ok();
  };
  TUTTI_TRY(bufField("src", "src_chunk", readsSrc(st.op), &st.src, &st.srcChunk));
  TUTTI_TRY(bufField("dst", "dst_chunk", writesDst(st.op), &st.dst, &st.dstChunk));
  TUTTI_TRY_ASSIGN(int64_t n, rd.integer(j, "chunks", path, 1, false));
  if (n < 1) return rd.error(path + ".chunks", "must be >= 1");
  st.chunks = static_cast<size_t>(n);
  return st;
}

}  // namespace

Result<LoadedSchedule> parseSchedule(const std::string& text, const std::string& origin) {
  Reader rd(origin);
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return rd.error("$", "not valid JSON");
  if (!j.is_object()) return rd.error("$", "the top level must be an object");
  LoadedSchedule s;
  TUTTI_TRY_ASSIGN(std::string format, rd.string(j, "format", "$", kFormat));
  if (format != kFormat)
    return rd.error("$.format", fmt::format("'{}' is not '{}'", format, kFormat));
  TUTTI_TRY_ASSIGN(s.name, rd.string(j, "name", "$", nullptr));
  if (s.name.empty()) return rd.error("$.name", "must not be empty");
  TUTTI_TRY_ASSIGN(s.summary, rd.string(j, "summary", "$", "loaded schedule"));
  TUTTI_TRY_ASSIGN(std::string coll, rd.string(j, "collective", "$", nullptr));
  auto c = parseColl(coll);
  if (!c || *c == Coll::kSendRecv)
    return rd.error("$.collective", fmt::format("'{}' is not a collective", coll));
  s.coll = *c;
  TUTTI_TRY_ASSIGN(int64_t nranks, rd.integer(j, "nranks", "$", 0, true));
  if (nranks < 1 || nranks > 65536) return rd.error("$.nranks", "must be in [1, 65536]");
  s.nranks = static_cast<int>(nranks);
  TUTTI_TRY_ASSIGN(int64_t chunks, rd.integer(j, "chunks", "$", 1, false));
  if (chunks < 1) return rd.error("$.chunks", "must be >= 1");
  s.chunks = static_cast<size_t>(chunks);
  TUTTI_TRY_ASSIGN(int64_t scratch, rd.integer(j, "scratch_blocks", "$", 0, false));
  if (scratch < 0) return rd.error("$.scratch_blocks", "must be >= 0");
  s.scratchBlocks = static_cast<size_t>(scratch);
  if (!j.contains("ranks") || !j["ranks"].is_array() ||
      j["ranks"].size() != static_cast<size_t>(s.nranks))
    return rd.error("$.ranks", fmt::format("must be an array of {} ranks", s.nranks));
  for (int r = 0; r < s.nranks; ++r) {
    const Json& rank = j["ranks"][r];
    const std::string rpath = fmt::format("$.ranks[{}]", r);
    if (!rank.is_object() || !rank.contains("rounds") || !rank["rounds"].is_array())
      return rd.error(rpath, "must be an object with an array 'rounds'");
    std::vector<std::vector<JsonStep>> rounds;
    for (size_t k = 0; k < rank["rounds"].size(); ++k) {
      const Json& round = rank["rounds"][k];
      const std::string kpath = fmt::format("{}.rounds[{}]", rpath, k);
      if (!round.is_array()) return rd.error(kpath, "a round must be an array of steps");
      std::vector<JsonStep> steps;
      for (size_t i = 0; i < round.size(); ++i) {
        TUTTI_TRY_ASSIGN(JsonStep st,
                         parseStep(rd, round[i], fmt::format("{}[{}]", kpath, i), s.nranks));
        steps.push_back(st);
      }
      rounds.push_back(std::move(steps));
    }
    s.ranks.push_back(std::move(rounds));
  }
  return s;
}

Result<LoadedSchedule> loadScheduleFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return invalidArgument("schedule file '{}' cannot be read: {}", path, errnoString(errno));
  std::stringstream ss;
  ss << f.rdbuf();
  return parseSchedule(ss.str(), path);
}

std::string toJson(const LoadedSchedule& s) {
  Json j;
  j["format"] = kFormat;
  j["name"] = s.name;
  j["summary"] = s.summary;
  j["collective"] = std::string(collName(s.coll));
  j["nranks"] = s.nranks;
  j["chunks"] = s.chunks;
  j["scratch_blocks"] = s.scratchBlocks;
  Json ranks = Json::array();
  for (const auto& rounds : s.ranks) {
    Json jr = Json::array();
    for (const auto& steps : rounds) {
      Json js = Json::array();
      for (const JsonStep& st : steps) {
        Json o;
        o["op"] = opName(st.op);
        if (hasPeer(st.op)) o["peer"] = st.peer;
        if (forwards(st.op)) o["send_peer"] = st.sendPeer;
        if (readsSrc(st.op)) o["src"] = bufName(st.src), o["src_chunk"] = st.srcChunk;
        if (writesDst(st.op)) o["dst"] = bufName(st.dst), o["dst_chunk"] = st.dstChunk;
        if (st.chunks != 1) o["chunks"] = st.chunks;
        js.push_back(o);
      }
      jr.push_back(js);
    }
    ranks.push_back(Json{{"rounds", jr}});
  }
  j["ranks"] = ranks;
  return j.dump(1);
}

Result<Schedule> LoadedSchedule::build(const CollShape& shape) const {
  if (shape.coll != coll || shape.nranks != nranks)
    return invalidArgument("schedule '{}' is for {} on {} ranks, not {} on {} ranks", name,
                           collName(coll), nranks, collName(shape.coll), shape.nranks);
  // Chunk c of a buffer: block c / chunks, even chunk c % chunks of that block.
  auto range = [&](size_t first, size_t n) -> std::pair<size_t, size_t> {
    const size_t last = first + n - 1;
    auto a = patterns::evenChunk(shape.count, static_cast<int>(chunks),
                                 static_cast<int>(first % chunks));
    auto b = patterns::evenChunk(shape.count, static_cast<int>(chunks),
                                 static_cast<int>(last % chunks));
    const size_t begin = (first / chunks) * shape.count + a.offset;
    const size_t end = (last / chunks) * shape.count + b.offset + b.count;
    return {begin, end - begin};
  };
  ScheduleBuilder b(shape);
  if (scratchBlocks > 0) b.scratch(scratchBlocks * shape.count);
  const auto& rounds = ranks[shape.rank];
  for (size_t k = 0; k < rounds.size(); ++k) {
    for (size_t i = 0; i < rounds[k].size(); ++i) {
      const JsonStep& st = rounds[k][i];
      auto [srcOff, srcCount] = range(st.srcChunk, st.chunks);
      auto [dstOff, dstCount] = range(st.dstChunk, st.chunks);
      if (readsSrc(st.op) && writesDst(st.op) && srcCount != dstCount)
        return invalidArgument("schedule '{}': rank {} round {} step {}: source chunks {}..{} "
                               "and destination chunks {}..{} differ in size for count {}",
                               name, shape.rank, k, i, st.srcChunk, st.srcChunk + st.chunks - 1,
                               st.dstChunk, st.dstChunk + st.chunks - 1, shape.count);
      const size_t count = readsSrc(st.op) ? srcCount : dstCount;
      switch (st.op) {
        case Op::kSend: b.send(st.peer, st.src, srcOff, count); break;
        case Op::kRecv: b.recv(st.peer, st.dst, dstOff, count); break;
        case Op::kRecvReduce: b.recvReduce(st.peer, st.src, srcOff, st.dst, dstOff, count); break;
        case Op::kRecvReduceSend:
          b.recvReduceSend(st.peer, st.sendPeer, st.src, srcOff, st.dst, dstOff, count);
          break;
        case Op::kRecvCopySend: b.recvCopySend(st.peer, st.sendPeer, st.dst, dstOff, count); break;
        case Op::kCopy: b.copy(st.src, srcOff, st.dst, dstOff, count); break;
        case Op::kReduce: b.reduce(st.src, srcOff, st.dst, dstOff, count); break;
      }
    }
    b.nextRound();
  }
  return b.finish();
}

Status registerLoaded(LoadedSchedule s) {
  // Names and summaries live as long as the registry (string_views point into them).
  static std::deque<std::string> strings;
  auto shared = std::make_shared<const LoadedSchedule>(std::move(s));
  strings.push_back(shared->name);
  std::string_view name = strings.back();
  strings.push_back(shared->summary);
  std::string_view summary = strings.back();
  const int nranks = shared->nranks;
  return registerAlgorithm(
      {.name = name,
       .coll = shared->coll,
       .summary = summary,
       .supports = [nranks](const CollShape& shape) { return shape.nranks == nranks; },
       .build = [shared](const CollShape& shape) { return shared->build(shape); },
       .priority = -1,
       .loaded = true});
}

}  // namespace tutti::algo
