// File: tools/tutti_sched.cc
// tutti-sched: looks at schedules without running them. `list` prints the registered algorithms,
// `verify` runs the symbolic verifier (algorithms/verifier.h) over algorithms x nranks x counts x
// roots x placements, `predict` tabulates the alpha-beta-gamma simulator's times
// (algorithms/simulator.h) and `dump` prints one rank's schedule. Exit 0 ok, 1 a check failed,
// 2 bad usage. Options are parsed by hand: CLI11 is a bench/ dependency only.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/link_model.h"
#include "algorithms/schedule_json.h"
#include "algorithms/selector.h"
#include "algorithms/simulator.h"
#include "algorithms/verifier.h"
#include "base/strings.h"
#include "topology/topology.h"

namespace tutti::algo {
namespace {

constexpr int kUsage = 2;
// Rooted algorithms are written relative to the root; these catch root 0 special cases, the
// wrap-around and a middle root. `--root all` sweeps every root (O(n) times longer).
constexpr const char* kDefaultRoots = "0,1,n/2,n-1";

const char* const kHelp = R"(usage: tutti-sched <command> [options]
  list
      one line per registered algorithm: <collective> <algorithm> <summary>
  verify (--all | --coll C [--algo A] | --file F) [--nranks 1-64] [--count LIST]
         [--root all|LIST] [--inplace both|yes|no] [--per-host L]
      symbolic verification; LIST is comma-separated numbers with K/M/G suffixes and the
      tokens n-1, n+1, n/2 (relative to nranks); --nranks takes ranges (1-64) and lists.
      Defaults: --nranks 1-16 --count 0,1,n-1,n+1,1009 --root 0,1,n/2,n-1 --inplace both;
      --file F verifies a JSON schedule (docs/SCHEDULES.md) at the file's own nranks;
      --per-host L puts rank r on host r / L where nranks is a multiple of L with 2+ hosts
      (hierarchical algorithms decline without hosts; the others ignore them)
  predict --coll C [--algo A] [--sizes 8:256M] [--dtype float] [--root N] [--link-file F]
          (--nranks N [--link shm|tcp] [--latency-us X] [--bandwidth-gbps Y] [--reduce-gbps Z]
           | --topo FILE [--nranks N])
      predicted microseconds per algorithm and size, the selector's choice per size and, last,
      where each choice wins ("# selector: ring 8 B..4 KiB, ..."); sizes are bytes (a:b
      doubles from a to b, a:b:f multiplies by f, or a list); per-rank collectives
      (allgather, reducescatter, alltoall, gather, scatter) take the total size as nccl-tests
      prints it. --link: every pair joined by one class of the default model; --topo: the
      machine a topology file describes (docs/TOPOLOGY.md; its ranks, or N ranks on its first
      host), costed as the library costs it there (hierarchical algorithms included);
      --link-file: a link-model file (TUTTI_LINK_FILE's format) applied last
  dump --coll C --algo A --nranks N --rank R --count K [--root N] [--inplace] [--per-host L]
      prints one rank's schedule
)";

template <typename... Args>
int usage(fmt::format_string<Args...> f, Args&&... args) {
  fmt::print(stderr, "tutti-sched: {}\n(tutti-sched --help for usage)\n",
             fmt::format(f, std::forward<Args>(args)...));
  return kUsage;
}

// --key value / --key=value options; `flags` take no value.
struct Options {
  std::map<std::string, std::string> values;
  std::set<std::string> flags;
  std::string error;
  bool has(const std::string& k) const { return values.count(k) || flags.count(k); }
  std::string get(const std::string& k, const std::string& def = "") const {
    auto it = values.find(k);
    return it == values.end() ? def : it->second;
  }
};

Options parseOptions(int argc, char** argv, const std::set<std::string>& valued,
                     const std::set<std::string>& flagNames) {
  Options o;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i], v;
    const bool hasEq = a.find('=') != std::string::npos;
    if (hasEq) v = a.substr(a.find('=') + 1), a = a.substr(0, a.find('='));
    if (a.rfind("--", 0) != 0) {
      o.error = fmt::format("unexpected argument '{}'", argv[i]);
      return o;
    }
    a = a.substr(2);
    if (flagNames.count(a) && !hasEq) {
      o.flags.insert(a);
    } else if (valued.count(a)) {
      if (!hasEq) {
        if (i + 1 >= argc) {
          o.error = fmt::format("--{} needs a value", a);
          return o;
        }
        v = argv[++i];
      }
      o.values[a] = v;
    } else {
      o.error = fmt::format("unknown option --{}", a);
      return o;
    }
  }
  return o;
}

// "12", "4K", "1M" (binary), "2G". False on anything else.
bool parseNumber(const std::string& s, uint64_t& out) {
  if (s.empty()) return false;
  uint64_t mult = 1;
  std::string digits = s;
  switch (s.back()) {
    case 'k':
    case 'K':
      mult = 1ull << 10;
      digits.pop_back();
      break;
    case 'm':
    case 'M':
      mult = 1ull << 20;
      digits.pop_back();
      break;
    case 'g':
    case 'G':
      mult = 1ull << 30;
      digits.pop_back();
      break;
    default:
      break;
  }
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || p != digits.data() + digits.size() || digits.empty()) return false;
  out = v * mult;
  return true;
}

bool parseDouble(const std::string& s, double& out) {
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size();
}

// "1-64", "1,2,4-8".
bool parseRanks(const std::string& s, std::vector<int>& out) {
  out.clear();
  for (const std::string& tok : split(s, ',')) {
    uint64_t a = 0, b = 0;
    const size_t dash = tok.find('-');
    if (dash == std::string::npos) {
      if (!parseNumber(tok, a)) return false;
      b = a;
    } else if (!parseNumber(tok.substr(0, dash), a) || !parseNumber(tok.substr(dash + 1), b)) {
      return false;
    }
    if (a < 1 || b < a || b > 4096) return false;
    for (uint64_t n = a; n <= b; ++n) out.push_back(static_cast<int>(n));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return !out.empty();
}

// A list of numbers and the tokens n, n-1, n+1, n/2 (and, for roots, "all"), evaluated for
// nranks n.
struct RelList {
  std::vector<std::string> tokens;
  bool all = false;
  static bool parse(const std::string& s, bool allowAll, RelList& out) {
    out.tokens = split(s, ',');
    for (const std::string& t : out.tokens) {
      uint64_t v;
      if (t == "all" && allowAll)
        out.all = true;
      else if (t != "n" && t != "n-1" && t != "n+1" && t != "n/2" && !parseNumber(t, v))
        return false;
    }
    return true;
  }
  std::vector<uint64_t> eval(int n, uint64_t limit) const {
    std::vector<uint64_t> out;
    if (all)
      for (int i = 0; i < n; ++i) out.push_back(static_cast<uint64_t>(i));
    for (const std::string& t : tokens) {
      uint64_t v = 0;
      if (t == "all") continue;
      if (t == "n")
        v = n;
      else if (t == "n-1")
        v = n - 1;
      else if (t == "n+1")
        v = n + 1;
      else if (t == "n/2")
        v = n / 2;
      else
        parseNumber(t, v);
      if (v < limit) out.push_back(v);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
};

bool rooted(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather || c == Coll::kScatter;
}
bool inPlaceDefined(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kAllGather || c == Coll::kReduceScatter ||
         c == Coll::kBroadcast || c == Coll::kReduce;
}

std::vector<const AlgorithmInfo*> sortedAlgorithms() {
  std::vector<const AlgorithmInfo*> out;
  for (const AlgorithmInfo& a : registry()) out.push_back(&a);
  std::sort(out.begin(), out.end(), [](const AlgorithmInfo* a, const AlgorithmInfo* b) {
    return std::make_pair(static_cast<int>(a->coll), a->name) <
           std::make_pair(static_cast<int>(b->coll), b->name);
  });
  return out;
}

int cmdList() {
  for (const AlgorithmInfo* a : sortedAlgorithms())
    fmt::print("{} {} {}\n", collName(a->coll), a->name, a->summary);
  return 0;
}

// What `verify` sweeps.
struct Sweep {
  std::vector<int> nranks;
  RelList counts, roots;
  std::vector<bool> placements;
  int perHost = 0;  // --per-host: ranks per host (0: no host map)
};

// --per-host L: rank r on host r / L, when n ranks make 2+ whole hosts; else no host map.
std::vector<int> hostMap(int n, int perHost) {
  std::vector<int> hostOf;
  if (perHost <= 0 || n % perHost != 0 || n / perHost < 2) return hostOf;
  for (int r = 0; r < n; ++r) hostOf.push_back(r / perHost);
  return hostOf;
}

// Parses --per-host into `out` (0 when absent); false on a bad value.
bool parsePerHost(const Options& o, int& out) {
  out = 0;
  if (!o.has("per-host")) return true;
  uint64_t v = 0;
  if (!parseNumber(o.get("per-host"), v) || v < 1 || v > 4096) return false;
  out = static_cast<int>(v);
  return true;
}

std::string placementName(bool inPlace) { return inPlace ? "in-place" : "out-of-place"; }

// Verifies one algorithm (or a loaded file) over the sweep; prints failures and a summary line.
template <typename Supports, typename Check>
bool sweepOne(const std::string& label, Coll coll, const Sweep& sw, Supports&& supports,
              Check&& check) {
  size_t verified = 0, declined = 0, failed = 0;
  for (int n : sw.nranks) {
    std::vector<uint64_t> counts =
        coll == Coll::kBarrier ? std::vector<uint64_t>{0} : sw.counts.eval(n, UINT64_MAX);
    std::vector<uint64_t> roots = rooted(coll) ? sw.roots.eval(n, n) : std::vector<uint64_t>{0};
    const std::vector<int> hostOf = hostMap(n, sw.perHost);
    for (uint64_t count : counts)
      for (uint64_t root : roots)
        for (bool inPlace : sw.placements) {
          if (inPlace && !inPlaceDefined(coll)) continue;
          CollShape s{coll,   0, n, count, DataType::kFloat32, RedOp::kSum, static_cast<int>(root),
                      inPlace};
          s.hostOf = hostOf;
          if (!supports(s)) {
            ++declined;
            continue;
          }
          ++verified;
          Status st = check(s);
          if (st.isOk()) continue;
          ++failed;
          fmt::print("FAIL {}: nranks={} count={}{} {}: {}\n", label, n, count,
                     rooted(coll) ? fmt::format(" root={}", root) : "", placementName(inPlace),
                     st.message());
        }
  }
  std::string dims =
      fmt::format("{} sizes ({}-{}) x {} counts", sw.nranks.size(), sw.nranks.front(),
                  sw.nranks.back(), coll == Coll::kBarrier ? 1 : sw.counts.tokens.size());
  if (rooted(coll)) dims += " x roots";
  if (inPlaceDefined(coll) && sw.placements.size() > 1) dims += " x in/out of place";
  fmt::print("{}: {}: {} shapes verified, {} declined ... {}\n", label, dims, verified, declined,
             failed ? fmt::format("FAILED ({} shapes)", failed) : std::string("ok"));
  std::fflush(stdout);
  return failed == 0;
}

int cmdVerify(const Options& o) {
  Sweep sw;
  if (!parseRanks(o.get("nranks", "1-16"), sw.nranks))
    return usage("--nranks: expected a range or list of positive numbers, got '{}'",
                 o.get("nranks"));
  if (!RelList::parse(o.get("count", "0,1,n-1,n+1,1009"), false, sw.counts))
    return usage("--count: expected numbers (K/M/G suffixes) or n-1, n+1, got '{}'",
                 o.get("count"));
  if (!RelList::parse(o.get("root", kDefaultRoots), true, sw.roots))
    return usage("--root: expected 'all' or numbers (or n-1, n/2), got '{}'", o.get("root"));
  const std::string place = o.get("inplace", "both");
  if (place == "both")
    sw.placements = {false, true};
  else if (place == "yes")
    sw.placements = {true};
  else if (place == "no")
    sw.placements = {false};
  else
    return usage("--inplace: expected both, yes or no, got '{}'", place);

  if (!parsePerHost(o, sw.perHost))
    return usage("--per-host: expected a number of ranks per host, got '{}'", o.get("per-host"));
  const int modes = o.has("all") + o.has("coll") + o.has("file");
  if (modes != 1) return usage("verify needs exactly one of --all, --coll C, --file F");
  if (o.has("algo") && !o.has("coll")) return usage("--algo needs --coll");

  bool ok = true;
  if (o.has("file")) {
    auto loaded = loadScheduleFile(o.get("file"));
    if (!loaded.isOk()) {
      fmt::print(stderr, "tutti-sched: {}\n", loaded.status().message());
      return kUsage;
    }
    const LoadedSchedule& ls = loaded.value();
    sw.nranks = {ls.nranks};  // a file describes one nranks
    const std::string label = fmt::format("{} {} ({})", collName(ls.coll), ls.name, o.get("file"));
    ok = sweepOne(
        label, ls.coll, sw, [](const CollShape&) { return true; },
        [&](const CollShape& s) -> Status {
          std::vector<Schedule> per(s.nranks);
          for (int r = 0; r < s.nranks; ++r) {
            CollShape rs = s;
            rs.rank = r;
            auto b = ls.build(rs);
            if (!b.isOk()) return b.status();
            per[r] = std::move(b).value();
          }
          return verify(s, per);
        });
    return ok ? 0 : 1;
  }

  std::vector<const AlgorithmInfo*> algos;
  std::optional<Coll> coll;
  if (o.has("coll")) {
    coll = parseColl(o.get("coll"));
    if (!coll) return usage("--coll: unknown collective '{}'", o.get("coll"));
  }
  for (const AlgorithmInfo* a : sortedAlgorithms()) {
    if (coll && a->coll != *coll) continue;
    if (o.has("algo") && a->name != o.get("algo")) continue;
    algos.push_back(a);
  }
  if (algos.empty()) return usage("no registered algorithm matches (try tutti-sched list)");
  for (const AlgorithmInfo* a : algos) {
    ok &= sweepOne(
        fmt::format("{} {}", collName(a->coll), a->name), a->coll, sw,
        [&](const CollShape& s) { return !a->supports || a->supports(s); },
        [&](const CollShape& s) { return verifyAlgorithm(*a, s); });
  }
  return ok ? 0 : 1;
}

// Shape arguments shared by predict and dump.
int parseAlgoArgs(const Options& o, Coll& coll, int& nranks) {
  if (!o.has("coll")) return usage("--coll is required");
  auto c = parseColl(o.get("coll"));
  if (!c) return usage("--coll: unknown collective '{}'", o.get("coll"));
  coll = *c;
  uint64_t n = 0;
  if (!parseNumber(o.get("nranks"), n) || n < 1 || n > 4096)
    return usage("--nranks: expected a number of ranks, got '{}'", o.get("nranks"));
  nranks = static_cast<int>(n);
  return 0;
}

// Sizes for predict: "a:b[:factor]" (a, a*factor, ... up to b) or a comma list of byte sizes.
int parseSizes(const std::string& spec, std::vector<uint64_t>& sizes) {
  if (spec.find(':') != std::string::npos) {
    auto parts = split(spec, ':');
    uint64_t lo = 0, hi = 0, factor = 2;
    if (parts.size() > 3 || !parseNumber(parts[0], lo) || !parseNumber(parts[1], hi) ||
        (parts.size() == 3 && !parseNumber(parts[2], factor)) || lo < 1 || hi < lo || factor < 2)
      return usage("--sizes: expected a:b[:factor] or a list of byte sizes, got '{}'", spec);
    for (uint64_t b = lo; b <= hi; b *= factor) sizes.push_back(b);
  } else {
    for (const std::string& t : split(spec, ',')) {
      uint64_t b;
      if (!parseNumber(t, b)) return usage("--sizes: '{}' is not a byte size", t);
      sizes.push_back(b);
    }
  }
  return 0;
}

// What predict costs on: the link model, the ranks and, from a topology, their host groups.
struct Machine {
  LinkModel model;
  int nranks = 0;
  std::vector<int> hostOf;  // CollShape::hostOf: empty on one host
  std::string description;  // the header's "every pair" or "topology=F (H hosts)"
};

// " shm (0.3 us, 5 GB/s) tcp (25 us, 2.8 GB/s)": the classes that join ranks of `m`.
std::string classesText(const Machine& m) {
  std::set<int> classes;
  for (int a = 0; a < m.nranks; ++a)
    for (int b = 0; b < m.nranks; ++b) classes.insert(static_cast<int>(m.model.classOf(a, b)));
  std::string text;
  for (int c : classes) {
    if (c == static_cast<int>(LinkClass::kSelf)) continue;
    const LinkParams& lp = m.model.links[c];
    text += fmt::format(" {} ({} us, {} GB/s)", linkClassName(static_cast<LinkClass>(c)),
                        lp.latencyUs, lp.bandwidthGBps);
  }
  return text;
}

// --topo FILE: the machine a topology file describes (its placement of ranks, or --nranks ranks
// on its first host), costed like the library would cost it there.
int topologyMachine(const Options& o, Machine& m) {
  for (const char* name : {"link", "latency-us", "bandwidth-gbps", "reduce-gbps"})
    if (o.has(name)) return usage("--{} does not go with --topo (use --link-file)", name);
  auto t = topo::loadFile(o.get("topo"));
  if (!t.isOk()) return fmt::print(stderr, "tutti-sched: {}\n", t.status().message()), 1;
  topo::Topology world = std::move(t.value());
  if (world.ranks.empty()) {
    uint64_t n = 0;
    if (!parseNumber(o.get("nranks"), n) || n < 1 || n > 4096)
      return usage("--nranks: {} places no ranks, so give 1..4096 (on its first host), got '{}'",
                   o.get("topo"), o.get("nranks"));
    world.ranks.assign(n, topo::RankPlace{});
  } else if (uint64_t n = 0; o.has("nranks") && (!parseNumber(o.get("nranks"), n) ||
                                                 n != world.ranks.size())) {
    return usage("--nranks: {} places {} ranks, got '{}'", o.get("topo"), world.ranks.size(),
                 o.get("nranks"));
  }
  m.model = linkModelFor(world);
  m.nranks = static_cast<int>(world.ranks.size());
  m.hostOf = hierarchyGroups(world);
  m.description = fmt::format("topology={} ({} host{})", o.get("topo"), world.hosts.size(),
                              world.hosts.size() == 1 ? "" : "s");
  return 0;
}

// --link shm|tcp: every pair of ranks joined by one class of LinkModel::defaults(), adjusted by
// --latency-us, --bandwidth-gbps and --reduce-gbps.
int uniformMachine(const Options& o, Machine& m) {
  Coll unused;
  if (int rc = parseAlgoArgs(o, unused, m.nranks)) return rc;
  m.model = LinkModel::defaults();
  LinkClass cls = LinkClass::kShm;
  const std::string link = o.get("link", "shm");
  if (link == "tcp")
    cls = LinkClass::kTcp;
  else if (link != "shm")
    return usage("--link: expected shm or tcp, got '{}'", link);
  m.model.classOf = [cls](int s, int d) { return s == d ? LinkClass::kSelf : cls; };
  LinkParams& lp = m.model.links[static_cast<int>(cls)];
  for (auto [name, field] :
       {std::pair{"latency-us", &lp.latencyUs}, std::pair{"bandwidth-gbps", &lp.bandwidthGBps},
        std::pair{"reduce-gbps", &m.model.reduceGBps}}) {
    if (!o.has(name)) continue;
    if (!parseDouble(o.get(name), *field) || *field <= 0)
      return usage("--{}: expected a positive number, got '{}'", name, o.get(name));
  }
  m.description = "every pair";
  return 0;
}

// "8 B", "4 KiB", "256 MiB" for the crossover lines.
std::string bytesText(uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return fmt::format("{} GiB", b >> 30);
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= (1ull << 10) && b % (1ull << 10) == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

int cmdPredict(const Options& o) {
  if (!o.has("coll")) return usage("--coll is required");
  auto parsed = parseColl(o.get("coll"));
  if (!parsed) return usage("--coll: unknown collective '{}'", o.get("coll"));
  const Coll coll = *parsed;
  Machine m;
  if (int rc = o.has("topo") ? topologyMachine(o, m) : uniformMachine(o, m)) return rc;
  if (o.has("link-file")) {
    Status s = applyLinkFile(o.get("link-file"), m.model);
    if (!s.isOk()) return fmt::print(stderr, "tutti-sched: {}\n", s.message()), 1;
    m.description += fmt::format(" + {}", o.get("link-file"));
  }
  const int n = m.nranks;
  auto dtype = parseDataType(o.get("dtype", "float"));
  if (!dtype) return usage("--dtype: unknown type '{}'", o.get("dtype"));
  std::vector<uint64_t> sizes;
  if (int rc = parseSizes(o.get("sizes", "8:256M"), sizes)) return rc;
  std::vector<const AlgorithmInfo*> algos;
  for (const AlgorithmInfo* a : sortedAlgorithms())
    if (a->coll == coll && (!o.has("algo") || a->name == o.get("algo"))) algos.push_back(a);
  if (algos.empty()) return usage("no {} algorithm matches", collName(coll));

  uint64_t root = 0;
  if (o.has("root") && (!rooted(coll) || !parseNumber(o.get("root"), root) ||
                        root >= static_cast<uint64_t>(n)))
    return usage("--root: expected 0..{} for a rooted collective, got '{}'", n - 1, o.get("root"));
  const size_t elem = dataTypeBytes(*dtype);
  const bool perRank = coll == Coll::kAllGather || coll == Coll::kReduceScatter ||
                       coll == Coll::kAllToAll || coll == Coll::kGather || coll == Coll::kScatter;
  fmt::print("# {} nranks={}{} dtype={} {}:{}; reduce {} GB/s; predicted us\n", collName(coll), n,
             rooted(coll) ? fmt::format(" root={}", root) : "", dataTypeName(*dtype),
             m.description, classesText(m), m.model.reduceGBps);
  std::string header = fmt::format("{:>12} {:>12}", "size(B)", "count");
  std::vector<size_t> width;
  for (const AlgorithmInfo* a : algos) {
    width.push_back(std::max<size_t>(12, a->name.size()));
    header += fmt::format(" {:>{}}", a->name, width.back());
  }
  fmt::print("{}  selector\n", header);
  std::vector<std::string> errors;
  struct Run {
    std::string algo;
    uint64_t from, to;
  };
  std::vector<Run> runs;  // the selector's choice over consecutive sizes
  for (uint64_t bytes : sizes) {
    const uint64_t count = bytes / elem / (perRank ? n : 1);
    CollShape s{coll, 0, n, count, *dtype, RedOp::kSum, static_cast<int>(root), false};
    s.hostOf = m.hostOf;
    // The selector simulates every algorithm that supports the call: the table reads its
    // candidates, and the last column is the choice the library would make on this machine
    // (among every registered algorithm, so with --algo it may name one not in the table).
    auto d = select(s, m.model, {});
    std::string line = fmt::format("{:>12} {:>12}", bytes, count);
    for (size_t i = 0; i < algos.size(); ++i) {
      const Candidate* c = nullptr;
      if (d.isOk())
        for (const Candidate& k : d.value().candidates)
          if (k.algo == algos[i]) c = &k;
      if (!c) {  // does not support the call
        line += fmt::format(" {:>{}}", "-", width[i]);
      } else if (!c->error.empty()) {
        line += fmt::format(" {:>{}}", "error", width[i]);
        errors.push_back(fmt::format("{} at {} bytes: {}", algos[i]->name, bytes, c->error));
      } else {
        line += fmt::format(" {:>{}.2f}", c->predictedUs, width[i]);
      }
    }
    const std::string chosen(d.isOk() && d.value().algo ? d.value().algo->name : "-");
    fmt::print("{}  {}\n", line, chosen);
    if (count == 0) continue;  // a per-rank size below one element per rank: nothing to choose
    if (runs.empty() || runs.back().algo != chosen) runs.push_back(Run{chosen, bytes, bytes});
    runs.back().to = bytes;
  }
  std::string text;
  for (const Run& r : runs)
    text += fmt::format("{}{} {}{}", text.empty() ? "" : ", ", r.algo, bytesText(r.from),
                        r.to == r.from ? "" : ".." + bytesText(r.to));
  if (!runs.empty()) fmt::print("# selector: {}\n", text);
  for (const std::string& e : errors) fmt::print(stderr, "tutti-sched: {}\n", e);
  return errors.empty() ? 0 : 1;
}

int cmdDump(const Options& o) {
  Coll coll;
  int n = 0;
  if (int rc = parseAlgoArgs(o, coll, n)) return rc;
  if (!o.has("algo")) return usage("--algo is required");
  const AlgorithmInfo* a = find(coll, o.get("algo"));
  if (!a)
    return usage("no {} algorithm named '{}' (try tutti-sched list)", collName(coll),
                 o.get("algo"));
  uint64_t rank = 0, count = 0, root = 0;
  if (!parseNumber(o.get("rank"), rank) || rank >= static_cast<uint64_t>(n))
    return usage("--rank: expected 0..{}, got '{}'", n - 1, o.get("rank"));
  if (!parseNumber(o.get("count"), count))
    return usage("--count: expected a number of elements, got '{}'", o.get("count"));
  if (o.has("root") && (!parseNumber(o.get("root"), root) || root >= static_cast<uint64_t>(n)))
    return usage("--root: expected 0..{}, got '{}'", n - 1, o.get("root"));
  CollShape s{coll,
              static_cast<int>(rank),
              n,
              count,
              DataType::kFloat32,
              RedOp::kSum,
              static_cast<int>(root),
              o.has("inplace")};
  int perHost = 0;
  if (!parsePerHost(o, perHost))
    return usage("--per-host: expected a number of ranks per host, got '{}'", o.get("per-host"));
  s.hostOf = hostMap(n, perHost);
  fmt::print("# {} {} nranks={} rank={} count={} root={} {}{}\n", collName(coll), a->name, n,
             rank, count, root, placementName(s.inPlace),
             s.hostOf.empty() ? "" : fmt::format(" hosts={}x{}", n / perHost, perHost));
  if (a->supports && !a->supports(s)) {
    fmt::print("# declined: {} {} does not support this shape\n", collName(coll), a->name);
    return 1;
  }
  auto b = a->build(s);
  if (!b.isOk()) {
    fmt::print(stderr, "tutti-sched: build failed: {}\n", b.status().message());
    return 1;
  }
  fmt::print("# {} rounds, scratch {} elements\n{}", b.value().rounds.size(),
             b.value().scratchCount, toString(b.value()));
  return 0;
}

int run(int argc, char** argv) {
  if (argc < 2) return usage("missing command (list, verify, predict, dump)");
  const std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    fmt::print("{}", kHelp);
    return 0;
  }
  for (int i = 2; i < argc; ++i)
    if (std::string(argv[i]) == "-h" || std::string(argv[i]) == "--help") {
      fmt::print("{}", kHelp);
      return 0;
    }
  if (cmd == "list") {
    if (argc > 2) return usage("list takes no options");
    return cmdList();
  }
  if (cmd == "verify") {
    Options o = parseOptions(
        argc, argv, {"coll", "algo", "file", "nranks", "count", "root", "inplace", "per-host"},
        {"all"});
    return o.error.empty() ? cmdVerify(o) : usage("{}", o.error);
  }
  if (cmd == "predict") {
    Options o = parseOptions(argc, argv,
                             {"coll", "algo", "nranks", "sizes", "dtype", "link", "latency-us",
                              "bandwidth-gbps", "reduce-gbps", "topo", "link-file", "root"},
                             {});
    return o.error.empty() ? cmdPredict(o) : usage("{}", o.error);
  }
  if (cmd == "dump") {
    Options o =
        parseOptions(argc, argv, {"coll", "algo", "nranks", "rank", "count", "root", "per-host"},
                     {"inplace"});
    return o.error.empty() ? cmdDump(o) : usage("{}", o.error);
  }
  return usage("unknown command '{}' (list, verify, predict, dump)", cmd);
}

}  // namespace
}  // namespace tutti::algo

int main(int argc, char** argv) { return tutti::algo::run(argc, argv); }
