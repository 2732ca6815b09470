// File: core/calibrate.cc
// TUTTI_CALIBRATE (on unless a topology or link-model file describes the machine): fits the link
// model to this machine by short exchanges at init, and caches the result per host so that later
// jobs start at once, after a quick check that the machine still runs at the cached speed.
//
// Every rank of the job takes part, so the measurement sees the load the collectives will see
// (4 ranks on 2 cores pay context switches that 2 ranks on 2 cores do not):
//  1. host-mates (shm, or tcp with TUTTI_TRANSPORTS=tcp): the ranks of each host pair up in rank
//     order (1st with 2nd, 3rd with 4th, ...; an odd one out idles) and all pairs exchange
//     messages at once, both directions busy as in a collective's rounds: 8 B, 4 KiB, 32 KiB,
//     256 KiB, 1 MiB (and 4 MiB over tcp), the mean time of each (the smallest of three batches'
//     means). The 8 B exchange is o + alpha; bw(m) = m / (exchange(m) - exchange(8 B)) gives
//     the bandwidth curve (simulator.h "Curve"). For shm, one exchange of max(8 MiB, footprint
//     cache) bytes gives the memory term's stream factor ("Memory"), after the message cache term
//     is divided out.
//  2. compute: every rank times a float32 sum of two 256 KiB operands (the engine reduces in
//     slices that fit the cache) and a 256 KiB copy, all ranks at once.
//  3. network, with several hosts and TUTTI_CALIBRATE set (not by default): the first ranks of the
//     first two hosts ping-pong (8 B, 64 KiB and 1 MiB: half the 8 B round trip is o + alpha,
//     the slope between the other two the bandwidth) over whatever class joins them (tcp or
//     ib); the other ranks wait.
// The ranks' results are allgathered and combined the same way on every rank (the slowest pair's
// latency and bandwidth, the slowest rank's compute), so that every rank has the same model and
// picks the same algorithms. Each host's first rank writes the combined parameters, as a
// link-model file (docs/TOPOLOGY.md), to
//   $TUTTI_CALIBRATE_DIR (default $XDG_CACHE_HOME/tutti, else $HOME/.cache/tutti)
//     /calibration-<hostname>-<ranks on this host>r.json
// (with "-tcp" before ".json" when the ranks of a host are joined by tcp, TUTTI_TRANSPORTS=tcp)
// A later job with the same number of ranks per host loads those files instead of measuring when
// every host has one and every pair of host-mates, repeating the 8 B and 256 KiB exchanges, lands
// within kCacheTolerance of the file (else every rank measures again, and the file is rewritten;
// TUTTI_CALIBRATE=2 always measures). TUTTI_LINK_FILE is applied after, and wins.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "algorithms/link_model.h"
#include "base/env.h"
#include "base/host_id.h"
#include "base/log.h"
#include "core/comm.h"
#include "kernels/reduce.h"

namespace tutti::detail {

namespace {

TUTTI_PARAM_INT(kCalibrate, "TUTTI_CALIBRATE", nullptr, "TOPO", -1,
                "0: the fitted defaults; 1: fit the link model by short exchanges at init, or "
                "load this host's cached fit while a quick check still matches it; 2: measure "
                "again and rewrite the cache; unset: 1, unless TUTTI_TOPO_FILE or "
                "TUTTI_LINK_FILE describes the machine (then 0)");
TUTTI_PARAM_STRING(kCalibrateDir, "TUTTI_CALIBRATE_DIR", nullptr, "TOPO", "",
                   "where calibrations are cached (default $XDG_CACHE_HOME/tutti, else "
                   "$HOME/.cache/tutti)");

using Clock = std::chrono::steady_clock;

constexpr size_t kSmall = 8, kMid = 64 << 10, kLarge = 1 << 20, kTcpLarge = 4 << 20;
constexpr size_t kComputeBytes = 256 << 10;
// The memory term's exchange: at least 8 MiB, at least the footprint cache; none when that
// cache is above 64 MiB (the default factor stays: 2 x 64 MiB per rank is enough to ask).
constexpr size_t kMemoryExchangeBytes = 8 << 20, kMemoryExchangeMax = 64 << 20;
// The check of a cached fit: host-mates repeat two of its points, the 8 B exchange and the
// 256 KiB one, and the cache stands while both land within this factor of it (either way). The
// run-to-run spread of a quiet machine is inside it (2 ranks: 8 B 0.18-0.22 us over shm, the
// 256 KiB point 8.9-10.9 GB/s, in six calibrations one after another on the development VM); a
// VM moved to another placement (memcpy 7 against 12 GB/s) or a fit taken during a hiccup (a
// tcp 8 B exchange at 17.5 us where 6-8 is usual) is outside it.
constexpr double kCacheTolerance = 1.35;
constexpr size_t kCheckBytes = 256 << 10;
// Before measuring, host-mates exchange 64 KiB untimed about 200 times (2 ms over shm on the
// development VM): a rank that comes out of a blocking wait (the bootstrap's barrier) runs on a
// vCPU that had halted, and without this the first points came out 1.5-2x slow there (an 8 B
// exchange at 0.28 us where 0.16-0.20 is usual, 256 KiB at 7.2 GB/s against 10).
constexpr size_t kWarmUpBytes = 64 << 10;
constexpr int kWarmUpIters = 60;  // bestMeanUs: 3 batches of 60 and 12 more

// Whether TUTTI_CALIBRATE is set (not the default).
bool calibrationAsked() { return !env::get({"TUTTI_CALIBRATE"}).value_or("").empty(); }

// TUTTI_CALIBRATE, or when unset 1 where the model is this machine's own, 0 where a topology or
// link-model file describes the machine (its figures are the user's, and may be another
// machine's: a DGX emulated on this one).
int calibrationMode() {
  if (!calibrationAsked()) {
    const bool described = !env::get({"TUTTI_TOPO_FILE"}).value_or("").empty() ||
                           !env::get({"TUTTI_LINK_FILE"}).value_or("").empty();
    return described ? 0 : 1;
  }
  return static_cast<int>(kCalibrate.get());
}

double medianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::string cacheDir() {
  if (std::string d = kCalibrateDir.get(); !d.empty()) return d;
  if (auto x = env::get({"XDG_CACHE_HOME"}); x && !x->empty()) return *x + "/tutti";
  if (auto h = env::get({"HOME"}); h && !h->empty()) return *h + "/.cache/tutti";
  return "/tmp/tutti-cache";
}

// mkdir -p; errors surface when the file is written.
void makeDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
}

// What a cache file holds: the compute figures and the class that joins host-mates (`onHost`:
// "shm", "tcp", "mixed" for both, "" with one rank per host), the one link a later init's check
// repeats. A fit of the network between hosts (TUTTI_CALIBRATE asked) is the measuring job's
// alone: it follows the network's load and shaping of the moment, no check would catch it going
// stale, and emulated hosts of any link reuse the host names node0, node1, ... Older files that
// hold one are read through this too.
nlohmann::json cacheable(const nlohmann::json& links, const std::string& onHost) {
  nlohmann::json out = nlohmann::json::object();
  for (auto it = links.begin(); it != links.end(); ++it) {
    const std::string& k = it.key();
    const bool onHostClass = k == onHost || (onHost == "mixed" && (k == "shm" || k == "tcp"));
    if (!it->is_object() || onHostClass) out[k] = *it;
  }
  return out;
}

// Link parameters from three half round trips (bestMeanUs): half(S) = o + alpha + S / beta.
nlohmann::json fitLink(double halfSmallUs, double halfMidUs, double halfLargeUs, double o) {
  double slope = (halfLargeUs - halfMidUs) / static_cast<double>(kLarge - kMid);  // us per byte
  if (!(slope > 0)) slope = halfLargeUs / static_cast<double>(kLarge);
  return {{"latency_us", std::max(0.01, halfSmallUs - o)},
          {"bandwidth_gbps", 1e-3 / slope},  // bytes per us / 1000 = GB/s
          {"overhead_us", o}};
}

// The smallest of three batches' mean times of `once` (us), each batch `iters` timed runs after
// a few untimed ones. The mean, as a benchmark reports it: over tcp a few slow exchanges (a
// missed wake-up) are part of the cost. The smallest batch: a hiccup of the machine (a
// descheduled vCPU, another process) spoils one batch, not the fit. Every rank involved runs the
// same loop, so they agree.
template <class Once>
Result<double> bestMeanUs(int iters, Once&& once) {
  double best = 0;
  for (int batch = 0; batch < 3; ++batch) {
    std::vector<double> times;
    times.reserve(iters);
    for (int i = -std::max(2, iters / 5); i < iters; ++i) {  // the first rounds warm up
      const auto t0 = Clock::now();
      TUTTI_TRY(once());
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      if (i >= 0) times.push_back(us);
    }
    double mean = 0;
    for (double t : times) mean += t / static_cast<double>(times.size());
    best = batch == 0 ? mean : std::min(best, mean);
  }
  return best;
}

// Runs `f` when it goes out of scope (normal end or early error return).
template <class F>
struct OnExit {
  F f;
  ~OnExit() { f(); }
};

}  // namespace

Result<double> CommImpl::calibrationPingPong(int peer, bool leader, size_t bytes, int iters) {
  calibBuf_.grow(bytes);
  CallArgs send{.coll = Coll::kSendRecv, .send = calibBuf_.data(), .recv = nullptr,
                .count = bytes, .dtype = DataType::kUint8, .sendPeer = peer, .api = kCalibrateApi};
  CallArgs recv{.coll = Coll::kSendRecv, .send = nullptr, .recv = calibBuf_.data(),
                .count = bytes, .dtype = DataType::kUint8, .recvPeer = peer, .api = kCalibrateApi};
  TUTTI_TRY_ASSIGN(double roundTrip, bestMeanUs(iters, [&]() -> Status {
                     TUTTI_TRY(run(leader ? send : recv));
                     return run(leader ? recv : send);
                   }));
  return roundTrip / 2;
}

Result<double> CommImpl::calibrationExchange(int peer, size_t bytes, int iters) {
  calibBuf_.grow(2 * bytes);
  CallArgs both{.coll = Coll::kSendRecv, .send = calibBuf_.data(),
                .recv = calibBuf_.data() + bytes, .count = bytes, .dtype = DataType::kUint8,
                .sendPeer = peer, .recvPeer = peer, .api = kCalibrateApi};
  return bestMeanUs(iters, [&] { return run(both); });
}

Status CommImpl::calibrate(const std::vector<int>& hostOfRank) {
  const int mode = calibrationMode();
  if (mode <= 0 || nranks_ < 2) return Status::ok();  // one rank has no links to fit
  // More ranks than CPUs on a host: pairs that share CPUs measure the scheduler, not the links.
  // Six inits in a row of 4 ranks on the 2-core development VM each found the cache off by more
  // than 1.35x (8 B exchange 1.4-12.4 us, 256 KiB 3.0-10.8 GB/s) and measured again (250-290 ms
  // each), and the models so fitted did no better than the defaults (docs/TOPOLOGY.md). Not by
  // default, then; TUTTI_CALIBRATE=1 or 2 still measures. cpuLoad comes from every host's
  // topology (and the machines several hosts share), so every rank takes the same branch.
  if (!calibrationAsked() && selection_.model().cpuLoad > 1.0) {
    TUTTI_LOG_INFO(Subsys::kTuning, "calibrate: not by default with more ranks than CPUs on a "
                   "host or a machine of several hosts ({:.2g} per CPU): the fitted defaults "
                   "stand (TUTTI_CALIBRATE=1 measures)",
                   selection_.model().cpuLoad);
    return Status::ok();
  }
  const int myHost = hostOfRank[rank_];
  std::vector<int> local;  // ranks of this host, in rank order
  for (int r = 0; r < nranks_; ++r)
    if (hostOfRank[r] == myHost) local.push_back(r);
  // A job whose host-mates meet over tcp measures other links than one over shm: its own file.
  const std::string via =
      selection_.onHostTransport().empty() || selection_.onHostTransport() == "shm" ? "" : "-" + selection_.onHostTransport();
  const std::string path = fmt::format("{}/calibration-{}-{}r{}.json", cacheDir(), hostName(),
                                       local.size(), via);

  // 1. Cached? Every host must have its file, or every rank measures (the measurement needs all).
  std::string cached;
  if (mode == 1) {
    std::ifstream in(path);
    std::stringstream ss;
    if (in) ss << in.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, false, true);
    algo::LinkModel probe = selection_.model();
    if (j.is_object() && j.contains("links") &&
        algo::applyLinkText(ss.str(), path, probe).isOk())
      cached = cacheable(j["links"], selection_.onHostTransport()).dump();
    else if (in)
      TUTTI_LOG_WARN(Subsys::kTuning, "calibrate: ignoring unreadable cache {}", path);
  }
  TUTTI_TRY_ASSIGN(auto haveAll, net_->boot().allGather(cached.empty() ? "0" : "1"));
  auto allSay1 = [](const std::vector<std::string>& v) {
    return std::all_of(v.begin(), v.end(), [](const std::string& s) { return s == "1"; });
  };
  bool useCache = allSay1(haveAll);
  // Host-mates pair up in rank order (1st with 2nd, 3rd with 4th, ...; an odd one out idles).
  const auto me = std::find(local.begin(), local.end(), rank_) - local.begin();
  const size_t partnerIdx = static_cast<size_t>(me) ^ 1u;
  const int partner = partnerIdx < local.size() ? local[partnerIdx] : -1;

  // Calibration's calls are not the user's: when a measurement ends, by success or by error, its
  // buffer goes, sequence numbers start over and the statistics forget it.
  auto calibrationScope = [this] {
    return OnExit{[this, seqBefore = seq_] {
      calibBuf_.reset();
      seq_ = seqBefore;
      diag_.stats().reset();
    }};
  };
  nlohmann::json mine = nlohmann::json::object();
  const auto t0 = Clock::now();
  std::string staleWhy;  // why this rank found the cache stale
  std::string checked;   // what this rank's check measured, for the log
  if (useCache) {
    // 1b. Still this machine's speed? Host-mates repeat the cache's 8 B and 256 KiB points.
    if (partner >= 0) {
      const auto scope = calibrationScope();
      const algo::LinkModel& model = selection_.model();
      const std::string cls = algo::linkClassName(model.linkClass(rank_, partner));
      const auto file = nlohmann::json::parse(cached);
      TUTTI_TRY(calibrationExchange(partner, kWarmUpBytes, kWarmUpIters).status());
      TUTTI_TRY_ASSIGN(double base, calibrationExchange(partner, kSmall, 30));
      TUTTI_TRY_ASSIGN(double us, calibrationExchange(partner, kCheckBytes, 8));
      auto off = [](double now, double then) {
        return !(then > 0) || now > then * kCacheTolerance || now * kCacheTolerance < then;
      };
      if (file.contains(cls) && file[cls].is_object()) {
        const auto& link = file[cls];
        const double thenBase = link.value("latency_us", 0.0) + link.value("overhead_us", 0.0);
        double thenBw = 0;
        for (const auto& point : link.value("bandwidth_curve", nlohmann::json::array()))
          if (point.is_array() && point.size() == 2 && point[0].get<double>() == kCheckBytes)
            thenBw = point[1].get<double>();
        const double bw = kCheckBytes / std::max(us - base, us / 2) / 1e3;
        checked = fmt::format(" (checked: {} 8 B exchange {:.2f} us, 256 KiB {:.2f} GB/s)", cls,
                              base, bw);
        if (off(base, thenBase))
          staleWhy = fmt::format("{} 8 B exchange {:.2f} us, cached {:.2f}", cls, base, thenBase);
        else if (thenBw > 0 && off(bw, thenBw))
          staleWhy = fmt::format("{} 256 KiB exchange {:.2f} GB/s, cached {:.2f}", cls, bw,
                                 thenBw);
      }
    }
    TUTTI_TRY_ASSIGN(auto fresh, net_->boot().allGather(staleWhy.empty() ? "1" : "0"));
    useCache = allSay1(fresh);
    if (!useCache)
      TUTTI_LOG_INFO(Subsys::kTuning, "calibrate: the cache {} no longer matches this machine "
                     "({}): measuring again", path, staleWhy.empty() ? "on another rank" : staleWhy);
  }
  if (useCache) {
    mine = nlohmann::json::parse(cached);
  } else {
    const auto scope = calibrationScope();
    // Host-mates (shm, or tcp with TUTTI_TRANSPORTS=tcp) exchange messages: both send and
    // receive at once, as in most rounds of a collective. o + alpha is the 8 B exchange, the
    // bandwidth curve bw(m) = m / (exchange(m) - exchange(8 B)); for shm, the memory term's
    // stream factor comes from one exchange whose footprint (2 m per rank) is beyond the cache.
    auto measureOnHost = [&](int peer) -> Status {
      const algo::LinkModel& model = selection_.model();
      const algo::LinkClass cls = model.linkClass(rank_, peer);
      const double o = model.link(rank_, peer).overheadUs;
      TUTTI_TRY(calibrationExchange(peer, kWarmUpBytes, kWarmUpIters).status());
      TUTTI_TRY_ASSIGN(double base, calibrationExchange(peer, kSmall, 200));
      nlohmann::json curve = nlohmann::json::array();
      double top = 0;  // bandwidth of the largest in-cache exchange
      // tcp is still speeding up at 1 MiB (2-rank loopback exchanges: 1.8 GB/s at 1 MiB, 3 at 4
      // MiB): a 4 MiB point, so that the curve's flat end is not a mid-size rate.
      std::vector<std::pair<size_t, int>> points{
          {size_t{4} << 10, 200}, {size_t{32} << 10, 100}, {size_t{256} << 10, 40}, {kLarge, 15}};
      if (cls != algo::LinkClass::kShm) points.push_back({kTcpLarge, 6});
      for (auto [bytes, iters] : points) {
        TUTTI_TRY_ASSIGN(double us, calibrationExchange(peer, bytes, iters));
        // (A hiccup in the 8 B batches must not turn into an absurd bandwidth: the transfer is
        // at least half of the exchange.)
        top = bytes / std::max(us - base, us / 2) / 1e3;  // GB/s
        curve.push_back({bytes, top});
      }
      mine[algo::linkClassName(cls)] = {{"latency_us", std::max(0.01, base - o)},
                                        {"overhead_us", o},
                                        {"bandwidth_gbps", top},
                                        {"bandwidth_curve", curve}};
      const size_t c = model.footprintCacheBytes;
      if (c > 0 && c <= kMemoryExchangeMax && cls == algo::LinkClass::kShm) {
        const size_t m = std::max(kMemoryExchangeBytes, c);  // footprint 2 m >= 2 c
        TUTTI_TRY_ASSIGN(double us, calibrationExchange(peer, m, 4));
        // The simulator also slows the bytes of one message beyond cacheBytes (the cache term);
        // what is left of the exchange's slowdown is the memory term's F / (c + (F - c) / f).
        const algo::LinkParams& shm = model.links[static_cast<int>(algo::LinkClass::kShm)];
        double message = 1.0;
        if (shm.streamFactor < 1 && m > model.cacheBytes)
          message = m / (model.cacheBytes + (m - model.cacheBytes) / shm.streamFactor);
        const double g = m / std::max(us - base, us / 2) / 1e3 / top / message;
        const double F = 2.0 * m;
        const double f = g < 1 ? (F - c) / (F / g - c) : 1.0;
        mine["footprint_stream_factor"] = std::clamp(f, 0.05, 1.0);
      }
      return Status::ok();
    };
    // 2. host-mates in pairs, all pairs at once.
    TUTTI_TRY(net_->boot().barrier());
    if (partner >= 0) TUTTI_TRY(measureOnHost(partner));
    // 3. compute, all ranks at once.
    TUTTI_TRY(net_->boot().barrier());
    {
      std::vector<float> a(kComputeBytes / 4, 1.0f), b(kComputeBytes / 4, 2.0f),
          c(kComputeBytes / 4);
      std::vector<double> red, cpy;
      for (int i = 0; i < 30; ++i) {
        auto s0 = Clock::now();
        TUTTI_TRY(kernels::reduce2(c.data(), a.data(), b.data(), a.size(), DataType::kFloat32,
                                   RedOp::kSum));
        auto s1 = Clock::now();
        std::memcpy(a.data(), c.data(), kComputeBytes);
        auto s2 = Clock::now();
        red.push_back(std::chrono::duration<double, std::micro>(s1 - s0).count());
        cpy.push_back(std::chrono::duration<double, std::micro>(s2 - s1).count());
      }
      mine["reduce_gbps"] = kComputeBytes / std::max(1e-3, medianOf(red)) / 1e3;
      mine["copy_gbps"] = kComputeBytes / std::max(1e-3, medianOf(cpy)) / 1e3;
    }
  }
  // 4. network: the first ranks of the first two hosts, when TUTTI_CALIBRATE asks, cache or
  // not (the cache holds no network: cacheable). By default the NICs' speeds stay: a 1 MiB
  // ping-pong through a rate limiter (tc tbf) fits in its burst (2.1 GB/s measured through a
  // 10 Gbit/s shaper, docs/PERFORMANCE.md "Across emulated hosts").
  int first[2] = {0, -1};  // rank 0 and the first rank on another host
  for (int r = 1; r < nranks_ && first[1] < 0; ++r)
    if (hostOfRank[r] != hostOfRank[0]) first[1] = r;
  if (calibrationAsked() && first[1] >= 0) {
    const auto scope = calibrationScope();
    TUTTI_TRY(net_->boot().barrier());
    if (rank_ == first[0] || rank_ == first[1]) {
      const int peer = rank_ == first[0] ? first[1] : first[0];
      const bool leader = rank_ == first[0];
      TUTTI_TRY_ASSIGN(double sm, calibrationPingPong(peer, leader, kSmall, 50));
      TUTTI_TRY_ASSIGN(double md, calibrationPingPong(peer, leader, kMid, 10));
      TUTTI_TRY_ASSIGN(double lg, calibrationPingPong(peer, leader, kLarge, 5));
      mine[algo::linkClassName(selection_.model().linkClass(rank_, peer))] =
          fitLink(sm, md, lg, selection_.model().link(rank_, peer).overheadUs);
    }
    TUTTI_TRY(net_->boot().barrier());
  }

  // 5. Combine every rank's view the same way on every rank.
  TUTTI_TRY_ASSIGN(auto all, net_->boot().allGather(mine.dump()));
  nlohmann::json links = nlohmann::json::object();
  for (int r = 0; r < nranks_; ++r) {
    auto j = nlohmann::json::parse(all[r], nullptr, false);
    if (!j.is_object()) return internalError("calibrate: rank {} sent no JSON object", r);
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!links.contains(it.key())) {
        links[it.key()] = *it;
        continue;
      }
      auto& have = links[it.key()];
      if (it->is_number()) {  // reduce_gbps, copy_gbps: the slowest rank
        have = std::min(have.get<double>(), it->get<double>());
        continue;
      }
      for (const char* k : {"latency_us", "overhead_us"})
        if (it->contains(k)) have[k] = std::max(have.value(k, 0.0), (*it)[k].get<double>());
      if (it->contains("bandwidth_gbps"))
        have["bandwidth_gbps"] = std::min(have.value("bandwidth_gbps", 1e30),
                                          (*it)["bandwidth_gbps"].get<double>());
      if (it->contains("bandwidth_curve") && have.contains("bandwidth_curve") &&
          have["bandwidth_curve"].size() == (*it)["bandwidth_curve"].size())
        for (size_t i = 0; i < have["bandwidth_curve"].size(); ++i)
          have["bandwidth_curve"][i][1] = std::min(have["bandwidth_curve"][i][1].get<double>(),
                                                   (*it)["bandwidth_curve"][i][1].get<double>());
    }
  }
  const nlohmann::json file = {{"links", links}};
  TUTTI_TRY(algo::applyLinkText(file.dump(), "calibration", selection_.model()));
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  TUTTI_LOG_INFO(Subsys::kTuning, "calibrate: {} in {:.1f} ms: {}",
                 useCache ? "loaded " + path + checked : std::string("measured"), ms,
                 links.dump());
  if (!useCache && rank_ == local.front()) {
    makeDirs(cacheDir());
    const std::string tmp = path + fmt::format(".{}", ::getpid());
    std::ofstream out(tmp);
    out << nlohmann::json{{"links", cacheable(links, selection_.onHostTransport())}}.dump(2)
        << "\n";
    out.close();
    if (!out || std::rename(tmp.c_str(), path.c_str()) != 0) {
      std::remove(tmp.c_str());
      TUTTI_LOG_WARN(Subsys::kTuning, "calibrate: cannot write the cache {}", path);
    }
  }
  return Status::ok();
}

}  // namespace tutti::detail
