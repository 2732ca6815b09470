// File: tests/unit/topology_test.cc
// The topology library: the hwloc probe of this machine checked against what the OS reports, JSON
// round trips (probe and every shipped example, byte for byte), parse errors naming the JSON
// path, assembling a job's topology from rank summaries, and the link model derived from the
// examples (link classes per rank pair, hierarchy groups, overrides from a file).
#include <catch2/catch.hpp>
#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include "algorithms/link_model.h"
#include "topology/topology.h"

namespace tutti::topo {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string example(const std::string& name) {
  return std::string(TUTTI_SOURCE_DIR) + "/topology/examples/" + name + ".json";
}

Topology loadExample(const std::string& name) {
  auto t = loadFile(example(name));
  INFO(name << ": " << (t.isOk() ? "" : t.status().message()));
  REQUIRE(t.isOk());
  return t.value();
}

}  // namespace

TEST_CASE("the probe finds this machine's packages, NUMA nodes, cores and caches", "[topology]") {
  auto t = probe();
  REQUIRE(t.isOk());
  REQUIRE(t.value().hosts.size() == 1);
  REQUIRE(t.value().ranks.empty());
  const Host& h = t.value().hosts[0];
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  CHECK(h.name == name);
  REQUIRE(!h.packages.empty());
  REQUIRE(!h.numaNodes.empty());
  REQUIRE(!h.caches.empty());
  REQUIRE(h.cores >= 1);
  REQUIRE(h.pus >= h.cores);
  int pkgCores = 0, pkgPus = 0;
  for (const Package& p : h.packages) pkgCores += p.cores, pkgPus += p.pus;
  CHECK(pkgCores == h.cores);
  CHECK(pkgPus == h.pus);
  // Every CPU this process may run on belongs to exactly one NUMA node.
  std::set<int> numaCpus;
  size_t listed = 0;
  for (const NumaNode& n : h.numaNodes) {
    CHECK(n.memoryBytes > 0);
    numaCpus.insert(n.cpus.begin(), n.cpus.end());
    listed += n.cpus.size();
  }
  CHECK(listed == numaCpus.size());
  CHECK(static_cast<int>(numaCpus.size()) == h.pus);
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) CHECK(numaCpus.count(cpu) == 1);
  CHECK(currentNumaNode(t.value()) >= 0);
  for (const Cache& c : h.caches) {
    CHECK(c.level >= 1);
    CHECK(c.sizeBytes > 0);
    CHECK(c.count >= 1);
  }
  // The tree names what it found.
  const std::string tree = toTree(t.value());
  CHECK(tree.find("Package") != std::string::npos);
  CHECK(tree.find("NUMANode") != std::string::npos);
  CHECK(tree.find("Cache L") != std::string::npos);
}

TEST_CASE("dump -> load -> dump is byte-identical (probe and examples)", "[topology]") {
  auto probed = probe();
  REQUIRE(probed.isOk());
  const std::string once = toJson(probed.value());
  auto back = fromJson(once);
  REQUIRE(back.isOk());
  CHECK(toJson(back.value()) == once);

  for (const char* name : {"cpu-2socket", "dgx-h100-8gpu", "tcp-4host", "ib-2host-8gpu"}) {
    INFO(name);
    const std::string text = readFile(example(name));
    auto t = fromJson(text);
    REQUIRE(t.isOk());
    CHECK(toJson(t.value()) == text);
  }
}

TEST_CASE("the examples describe the machines they are named after", "[topology]") {
  Topology cpu = loadExample("cpu-2socket");
  REQUIRE(cpu.hosts.size() == 1);
  CHECK(cpu.hosts[0].packages.size() == 2);
  CHECK(cpu.hosts[0].numaNodes.size() == 2);
  CHECK(cpu.ranks.size() == 16);

  Topology dgx = loadExample("dgx-h100-8gpu");
  REQUIRE(dgx.hosts.size() == 1);
  CHECK(dgx.hosts[0].gpus.size() == 8);
  CHECK(dgx.ranks.size() == 8);

  Topology tcp = loadExample("tcp-4host");
  CHECK(tcp.hosts.size() == 4);
  CHECK(tcp.ranks.size() == 16);
  CHECK(tcp.links.count("tcp") == 1);

  Topology ib = loadExample("ib-2host-8gpu");
  CHECK(ib.hosts.size() == 2);
  CHECK(ib.ranks.size() == 16);
  for (const Host& h : ib.hosts) {
    CHECK(h.gpus.size() == 8);
    int ibNics = 0;
    for (const Nic& n : h.nics) ibNics += n.type == "infiniband";
    CHECK(ibNics == 8);
  }
}

TEST_CASE("link classes, ports and hierarchy groups follow the topology", "[topology]") {
  using algo::LinkClass;
  Topology cpu = loadExample("cpu-2socket");
  CHECK(algo::linkClassBetween(cpu, 0, 0) == LinkClass::kSelf);
  CHECK(algo::linkClassBetween(cpu, 0, 15) == LinkClass::kShm);
  // One host, ranks on two NUMA nodes: the NUMA nodes are the hierarchy.
  auto g = algo::hierarchyGroups(cpu);
  REQUIRE(g.size() == 16);
  CHECK(g[0] == 0);
  CHECK(g[7] == 0);
  CHECK(g[8] == 1);

  Topology dgx = loadExample("dgx-h100-8gpu");
  CHECK(algo::linkClassBetween(dgx, 0, 7) == LinkClass::kNvlink);  // through the NVSwitches
  auto m = algo::linkModelFor(dgx);
  CHECK(m.linkClass(0, 7) == LinkClass::kNvlink);
  // Every GPU reaches the others over its 18 NVLinks to the switches (20 GB/s each).
  CHECK(m.links[static_cast<int>(LinkClass::kNvlink)].bandwidthGBps == Approx(18 * 20.0));
  CHECK(m.links[static_cast<int>(LinkClass::kPcie)].bandwidthGBps == Approx(0.8 * 64.0));

  Topology tcp = loadExample("tcp-4host");
  CHECK(algo::linkClassBetween(tcp, 0, 3) == LinkClass::kShm);
  CHECK(algo::linkClassBetween(tcp, 0, 4) == LinkClass::kTcp);
  auto mt = algo::linkModelFor(tcp);
  // The file's override wins over the NIC-derived bandwidth.
  CHECK(mt.links[static_cast<int>(LinkClass::kTcp)].latencyUs == 25.0);
  CHECK(mt.links[static_cast<int>(LinkClass::kTcp)].bandwidthGBps == 2.8);
  // A host's ranks share its NIC over tcp, not over shm.
  CHECK(mt.portOf(0, LinkClass::kTcp) == mt.portOf(3, LinkClass::kTcp));
  CHECK(mt.portOf(0, LinkClass::kTcp) != mt.portOf(4, LinkClass::kTcp));
  CHECK(mt.portOf(0, LinkClass::kShm) != mt.portOf(3, LinkClass::kShm));
  auto hg = algo::hierarchyGroups(tcp);
  REQUIRE(hg.size() == 16);
  CHECK(hg[5] == 1);
  CHECK(hg[15] == 3);

  Topology ib = loadExample("ib-2host-8gpu");
  CHECK(algo::linkClassBetween(ib, 0, 8) == LinkClass::kIb);
  CHECK(algo::linkClassBetween(ib, 8, 15) == LinkClass::kNvlink);
  auto mi = algo::linkModelFor(ib);
  CHECK(mi.links[static_cast<int>(LinkClass::kIb)].bandwidthGBps == Approx(400.0 / 8));
  CHECK(mi.portOf(0, LinkClass::kIb) != mi.portOf(1, LinkClass::kIb));  // one NIC per GPU
}

TEST_CASE("hosts that share a machine send tcp through its kernel, at its load", "[topology]") {
  using algo::LinkClass;
  // Two hosts of 2 PUs, 2 ranks each, as tools/hosts.sh's 2x2 on a 2-core machine.
  Topology w;
  for (const char* name : {"node0", "node1"}) {
    Host h;
    h.name = name;
    h.cores = h.pus = 2;
    w.hosts.push_back(h);
  }
  for (int r = 0; r < 4; ++r) w.ranks.push_back({.host = r / 2});
  const auto tcpOf = [](const Topology& t) {
    return algo::linkModelFor(t).links[static_cast<int>(LinkClass::kTcp)];
  };
  // Separate machines (or unknown ones): a NIC's costs, and neither host is oversubscribed.
  const algo::LinkParams nic = tcpOf(w);
  CHECK(nic.latencyUs == 10.0);
  CHECK(nic.overheadUs == 2.0);
  CHECK(algo::linkModelFor(w).cpuLoad == 1.0);
  w.hosts[0].machine = "boot-a";
  w.hosts[1].machine = "boot-b";
  CHECK(tcpOf(w).latencyUs == 10.0);
  // One machine: loopback's latency, and 4 ranks on its 2 PUs make each message wait (o = 4 us
  // per rank per PU); inside each host too the ranks share the machine's 2 PUs: shm is costed
  // as 4 ranks on 2 cores (load 2, as one host with 4 ranks), and calibration keeps off.
  const algo::LinkParams oneHostShm =
      algo::linkModelFor(w).links[static_cast<int>(LinkClass::kShm)];
  w.hosts[1].machine = "boot-a";
  const algo::LinkParams shared = tcpOf(w);
  CHECK(shared.latencyUs == Approx(2.9));
  CHECK(shared.overheadUs == Approx(8.0));
  CHECK(shared.bandwidthGBps == nic.bandwidthGBps);
  CHECK(algo::linkModelFor(w).cpuLoad == 2.0);
  CHECK(algo::linkModelFor(w).links[static_cast<int>(LinkClass::kShm)].latencyUs >
        oneHostShm.latencyUs);
  // One rank per host on the same machine: not oversubscribed.
  w.ranks = {{.host = 0}, {.host = 1}};
  CHECK(tcpOf(w).overheadUs == Approx(1.6));
  CHECK(algo::linkModelFor(w).cpuLoad == 1.0);
  // The machine survives a JSON round trip; a host without one writes none.
  auto back = fromJson(toJson(w));
  REQUIRE(back.isOk());
  CHECK(back->hosts[1].machine == "boot-a");
  w.hosts[0].machine.clear();
  CHECK(toJson(w).find("\"machine\"") != std::string::npos);
  w.hosts[1].machine.clear();
  CHECK(toJson(w).find("\"machine\"") == std::string::npos);
}

TEST_CASE("parse errors name the JSON path", "[topology]") {
  auto err = [](const std::string& text) {
    auto t = fromJson(text);
    REQUIRE(!t.isOk());
    CHECK(t.status().code() == Code::kInvalidArgument);
    return t.status().message();
  };
  CHECK(err("{").find("not valid JSON") != std::string::npos);
  CHECK(err(R"({"version": 1})").find("$.hosts: missing") != std::string::npos);
  CHECK(err(R"({"version": 2, "hosts": []})").find("$.version: 2") != std::string::npos);
  CHECK(err(R"({"version": 1, "hosts": []})").find("at least one host") != std::string::npos);
  const std::string host =
      R"({"name": "a", "cores": 1, "pus": 1, "packages": [], "numa_nodes": []})";
  CHECK(err(R"({"version": 1, "hosts": [{"name": "a", "cores": "x"}]})")
            .find("$.hosts[0].cores: expected an integer") != std::string::npos);
  CHECK(err(R"({"version": 1, "hosts": [)" + host + R"(], "ranks": [{"host": 1}]})")
            .find("$.ranks[0].host: 1 is not a host index") != std::string::npos);
  CHECK(err(R"({"version": 1, "hosts": [)" + host + R"(], "ranks": [{"host": 0, "gpu": 0}]})")
            .find("$.ranks[0].gpu") != std::string::npos);
  CHECK(err(R"({"version": 1, "hosts": [)" + host +
            R"(], "links": {"tcp": {"latency_us": 1, "bandwidth_gbps": 0}}})")
            .find("$.links.tcp") != std::string::npos);
  auto missing = loadFile("/nonexistent/topo.json");
  REQUIRE(!missing.isOk());
  CHECK(missing.status().message().find("/nonexistent/topo.json") != std::string::npos);
}

TEST_CASE("a job's topology is assembled from the ranks' summaries", "[topology]") {
  Topology a = loadExample("tcp-4host"), b = a;
  a.ranks.clear();
  a.hosts.resize(1);
  b.ranks.clear();
  b.hosts = {b.hosts[2]};
  // Ranks 0, 2 on host "A", rank 1 and 3 on host "B"; only each host's lowest rank describes it.
  std::vector<std::string> s = {rankSummary(a, "A", true, 0, -1), rankSummary(b, "B", true, 0, -1),
                                rankSummary(a, "A", false, 0, -1),
                                rankSummary(b, "B", false, -1, -1)};
  auto w = assemble(s);
  REQUIRE(w.isOk());
  REQUIRE(w.value().hosts.size() == 2);
  CHECK(w.value().hosts[0].name == "node-0");
  CHECK(w.value().hosts[1].name == "node-2");
  REQUIRE(w.value().ranks.size() == 4);
  CHECK(w.value().ranks[0].host == 0);
  CHECK(w.value().ranks[1].host == 1);
  CHECK(w.value().ranks[2].host == 0);
  CHECK(w.value().ranks[3].host == 1);
  CHECK(w.value().ranks[3].numaNode == -1);
  CHECK(algo::hierarchyGroups(w.value()) == std::vector<int>{0, 1, 0, 1});

  s[1] = rankSummary(b, "B", false, 0, -1);  // nobody describes host B
  auto bad = assemble(s);
  REQUIRE(!bad.isOk());
  CHECK(bad.status().message().find("rank 1") != std::string::npos);
  CHECK(!assemble({"not json"}).isOk());
}

TEST_CASE("a link-model file overrides the classes it names", "[topology]") {
  const std::string path = "/tmp/tutti_link_model_" + std::to_string(getpid()) + ".json";
  {
    std::ofstream f(path);
    f << R"({"links": {"shm": {"latency_us": 0.25, "overhead_us": 0.05}, "reduce_gbps": 7.5}})";
  }
  algo::LinkModel m = algo::LinkModel::defaults();
  const double bw = m.links[static_cast<int>(algo::LinkClass::kShm)].bandwidthGBps;
  REQUIRE(algo::applyLinkFile(path, m).isOk());
  CHECK(m.links[static_cast<int>(algo::LinkClass::kShm)].latencyUs == 0.25);
  CHECK(m.links[static_cast<int>(algo::LinkClass::kShm)].overheadUs == 0.05);
  CHECK(m.links[static_cast<int>(algo::LinkClass::kShm)].bandwidthGBps == bw);
  CHECK(m.reduceGBps == 7.5);
  {
    std::ofstream f(path);
    f << R"({"links": {"warp": {"latency_us": 1}}})";
  }
  Status s = algo::applyLinkFile(path, m);
  CHECK(!s.isOk());
  CHECK(s.message().find("links.warp") != std::string::npos);
  std::remove(path.c_str());
}

}  // namespace tutti::topo
