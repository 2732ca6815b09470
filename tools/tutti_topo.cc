// File: tools/tutti_topo.cc
// tutti-topo: prints the topology the library sees (TUTTI_TOPO_FILE when set, else the hwloc
// probe of this machine) as a tree, or as JSON with --json; `--select COLL` shows, for a sweep of
// sizes, the algorithm the selector picks on that topology's ranks and every candidate's
// predicted time, so that the choice can be studied for machines we do not have.
// Exit 0 ok, 1 failure, 2 bad usage. Options are parsed by hand, like tutti-sched.
#include <fmt/format.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "algorithms/link_model.h"
#include "algorithms/selector.h"
#include "topology/topology.h"

namespace {

using namespace tutti;

const char* const kHelp = R"(usage: tutti-topo [--json] [--file F] [--select COLL [--nranks N]
                  [--sizes 8:256M] [--dtype float] [--link-file F]]
  (no option)   the topology as a tree
  --json        the topology as JSON (load it back with TUTTI_TOPO_FILE)
  --file F      read F instead of TUTTI_TOPO_FILE / the probe
  --select COLL per size: the selector's choice and each candidate's predicted us on the
                topology's ranks ("ranks" in the file; else --nranks N ranks on host 0,
                default the host's PU count); sizes in bytes, a:b doubles from a to b
  --link-file F link-model overrides (JSON {"links": {...}}, docs/TOPOLOGY.md)
)";

int usage(const std::string& msg) {
  fmt::print(stderr, "tutti-topo: {}\n(tutti-topo --help for usage)\n", msg);
  return 2;
}

bool parseBytes(const std::string& s, uint64_t& out) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (end == s.c_str()) return false;
  uint64_t mult = 1;
  const std::string suffix(end);
  if (suffix == "K") mult = 1ull << 10;
  else if (suffix == "M") mult = 1ull << 20;
  else if (suffix == "G") mult = 1ull << 30;
  else if (!suffix.empty()) return false;
  out = v * mult;
  return true;
}

int select(topo::Topology t, const std::string& collText, const std::string& nranksText,
           const std::string& sizes, const std::string& dtypeText, const std::string& linkFile) {
  auto coll = parseColl(collText);
  if (!coll) return usage("--select: unknown collective '" + collText + "'");
  auto dtype = parseDataType(dtypeText);
  if (!dtype) return usage("--dtype: unknown type '" + dtypeText + "'");
  if (t.ranks.empty()) {
    uint64_t n = t.hosts[0].pus > 0 ? t.hosts[0].pus : 1;
    if (!nranksText.empty() && (!parseBytes(nranksText, n) || n < 1 || n > 4096))
      return usage("--nranks: expected 1..4096, got '" + nranksText + "'");
    t.ranks.assign(n, topo::RankPlace{});
  } else if (!nranksText.empty()) {
    return usage("--nranks: the topology places its ranks itself");
  }
  algo::LinkModel model = algo::linkModelFor(t);
  if (!linkFile.empty()) {
    Status s = algo::applyLinkFile(linkFile, model);
    if (!s.isOk()) return fmt::print(stderr, "tutti-topo: {}\n", s.message()), 1;
  }
  const auto colon = sizes.find(':');
  uint64_t lo = 0, hi = 0;
  if (colon == std::string::npos || !parseBytes(sizes.substr(0, colon), lo) ||
      !parseBytes(sizes.substr(colon + 1), hi) || lo < 1 || hi < lo)
    return usage("--sizes: expected a:b (bytes), got '" + sizes + "'");
  const int n = static_cast<int>(t.ranks.size());
  const size_t elem = dataTypeBytes(*dtype);
  const bool perRank = *coll == Coll::kAllGather || *coll == Coll::kReduceScatter ||
                       *coll == Coll::kAllToAll || *coll == Coll::kGather || *coll == Coll::kScatter;
  fmt::print("# {} on {} ranks, {} hosts; link classes:", collName(*coll), n, t.hosts.size());
  for (int c = 0; c < algo::kNumLinkClasses; ++c)
    fmt::print(" {} {}us/{}GB/s", algo::linkClassName(static_cast<algo::LinkClass>(c)),
               model.links[c].latencyUs, model.links[c].bandwidthGBps);
  fmt::print("\n");
  for (uint64_t bytes = lo; bytes <= hi; bytes *= 2) {
    algo::CollShape s{*coll, 0, n, bytes / elem / (perRank ? n : 1), *dtype, RedOp::kSum, 0, false};
    s.hostOf = algo::hierarchyGroups(t);
    auto d = algo::select(s, model, {});
    if (!d.isOk()) return fmt::print(stderr, "tutti-topo: {}\n", d.status().message()), 1;
    fmt::print("{}\n", algo::describe(s, d.value()));
  }
  return 0;
}

int run(int argc, char** argv) {
  bool json = false;
  std::string file, coll, nranks, sizes = "8:256M", dtype = "float", linkFile;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    if (a == "-h" || a == "--help") return fmt::print("{}", kHelp), 0;
    if (a == "--json") json = true;
    else if (a == "--file") { if (!value(file)) return usage("--file needs a path"); }
    else if (a == "--select") { if (!value(coll)) return usage("--select needs a collective"); }
    else if (a == "--nranks") { if (!value(nranks)) return usage("--nranks needs a number"); }
    else if (a == "--sizes") { if (!value(sizes)) return usage("--sizes needs a:b"); }
    else if (a == "--dtype") { if (!value(dtype)) return usage("--dtype needs a type"); }
    else if (a == "--link-file") { if (!value(linkFile)) return usage("--link-file needs a path"); }
    else return usage("unknown option '" + a + "'");
  }
  auto t = file.empty() ? topo::local() : topo::loadFile(file);
  if (!t.isOk()) return fmt::print(stderr, "tutti-topo: {}\n", t.status().message()), 1;
  if (!coll.empty()) return select(t.value(), coll, nranks, sizes, dtype, linkFile);
  // The probe's dump without the kernel's boot id (Host::machine): it describes the hardware, and
  // is often copied into a file of several hosts, which would then count as one machine. A file's
  // own ids are printed as it has them.
  const char* topoFile = std::getenv("TUTTI_TOPO_FILE");
  if (file.empty() && (topoFile == nullptr || *topoFile == '\0'))
    for (topo::Host& h : t.value().hosts) h.machine.clear();
  fmt::print("{}", json ? topo::toJson(t.value()) : topo::toTree(t.value()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
