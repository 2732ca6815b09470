// File: tools/tutti_run.cc
// tutti-run: the single-host launcher (as `torchrun --standalone`). Runs N copies of a command as
// ranks 0..N-1 of one job with the TUTTI_* launcher variables set, fails fast when a rank fails,
// and exits with the status of the rank that failed first. Multi-host jobs use mpirun/srun.
// --emulate-hosts HxR runs the job across H emulated hosts (network namespaces) by executing
// tools/hosts.sh, installed beside tutti-run as tutti-hosts: the namespaces, links, shaping and
// their teardown are ip/tc/iptables steps that the script owns with its traps, and the tests run
// the same script.

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tools/launch/binding.h"
#include "tools/launch/launcher.h"

namespace {

constexpr int kMaxRanks = 1024;  // each rank costs the launcher up to two pipe fds
constexpr int kUsageExit = 2;
constexpr double kMaxTimeoutSec = 1e7;
constexpr int kMaxListedFailures = 8;

constexpr std::string_view kUsage =
    R"(usage: tutti-run -n N [--bind-to core|none] [--timeout SEC] [--tag-output] [--] CMD [ARGS...]
       tutti-run --emulate-hosts HxR [--link rate=RATE,loss=P%] [--timeout SEC] [--] CMD [ARGS...]

Runs N copies of CMD on this host as ranks 0..N-1 of one tutti job. Every rank gets
TUTTI_RANK, TUTTI_NRANKS, TUTTI_LOCAL_RANK, TUTTI_LOCAL_SIZE, TUTTI_COMM_ID (127.0.0.1 and a
free port, unless already set) and TUTTI_COMM_SECRET (random, unless already set).

options:
  -n N, -nN, -np N, --np N  number of ranks (1..1024)
  --bind-to core|none       core (the default): bind every rank to its own equal share of the
                            cores this process may run on (C/N contiguous cores each, with their
                            hardware threads), or to one hardware thread each when ranks
                            outnumber the cores; ranks that outnumber the CPUs are not bound.
                            none: leave the ranks to the kernel. Binding keeps a
                            waiting rank on its own CPU: next to a busy process, a 2-rank 8-byte
                            allreduce took 0.14 us bound and 3.1 us unbound (docs/PERFORMANCE.md).
                            With --emulate-hosts the ranks are not bound
  --timeout SEC             kill every rank after SEC seconds (default 0: no timeout)
  --tag-output              prefix every output line with "[rank] "
  --emulate-hosts HxR       run H*R ranks on H emulated hosts, R per host: network
                            namespaces on a bridge (root only; see docs/HOSTS.md). Ranks of a
                            host use shm, hosts reach each other over tcp on their eth0.
                            -n may be left out; if given it must be H*R. Output is tagged.
  --link SPEC               with --emulate-hosts: shape every host's link, e.g. rate=10gbit,
                            loss=1% (tc tbf and iptables; both directions)
  -h, --help                show this text

When a rank fails, the others get 2 s to report it, then they are killed. The exit status is
that of the first rank that failed (128+S for a signal S, 124 for a timeout), 0 if all passed.
Ranks read stdin from /dev/null. SIGINT, SIGTERM and SIGHUP are forwarded to the ranks.
With --emulate-hosts, the exit status is 77 when this machine cannot make namespaces (not root,
no iproute2), and everything created for the run is removed when it ends.
)";

struct Args {
  int nranks = 0;
  double timeoutSec = 0;
  bool tagOutput = false;
  bool bind = true;  // --bind-to core (the default) or none
  bool help = false;
  int hosts = 0;         // --emulate-hosts HxR: H (0: a plain local run)
  int ranksPerHost = 0;  // R
  std::string link;      // --link SPEC, passed to the hosts script as is
  std::vector<std::string> command;
};

struct Parsed {
  Args args;
  std::string error;  // nonempty: bad usage
};

std::optional<long> parseInt(std::string_view s) {
  long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> parseSeconds(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

// Options come first; the command starts at "--" or at the first argument that is not an option.
Parsed parseArgs(int argc, char** argv) {
  Parsed p;
  std::optional<std::string> ranksText, timeoutText, emulateText;
  std::string ranksFlag = "-n";
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const bool hasNext = i + 1 < argc;
    if (a == "--") {
      p.args.command.assign(argv + i + 1, argv + argc);
      break;
    } else if (a == "-h" || a == "--help") {
      p.args.help = true;
      return p;
    } else if (a == "--tag-output") {
      p.args.tagOutput = true;
    } else if (a == "-n" || a == "-np" || a == "--np") {
      ranksFlag = a;
      if (hasNext) {
        ranksText = argv[++i];
      } else {
        p.error = fmt::format("tutti-run: {} needs a number of ranks", a);
      }
    } else if (a.starts_with("--np=")) {
      ranksFlag = "--np";
      ranksText = a.substr(5);
    } else if (a.starts_with("-n") && !a.starts_with("--")) {  // -n4
      ranksFlag = "-n";
      ranksText = a.substr(2);
    } else if (a == "--bind-to" || a.starts_with("--bind-to=")) {
      std::string_view v;
      if (a.starts_with("--bind-to=")) {
        v = a.substr(10);
      } else if (hasNext) {
        v = argv[++i];
      } else {
        p.error = "tutti-run: --bind-to needs core or none";
      }
      if (p.error.empty() && v != "core" && v != "none")
        p.error = fmt::format("tutti-run: --bind-to expects core or none (got '{}')", v);
      p.args.bind = v == "core";
    } else if (a == "--timeout") {
      if (hasNext) {
        timeoutText = argv[++i];
      } else {
        p.error = "tutti-run: --timeout needs a number of seconds";
      }
    } else if (a.starts_with("--timeout=")) {
      timeoutText = a.substr(10);
    } else if (a == "--emulate-hosts" || a == "--link") {
      if (!hasNext) {
        p.error = fmt::format("tutti-run: {} needs a value", a);
      } else if (a == "--link") {
        p.args.link = argv[++i];
      } else {
        emulateText = argv[++i];
      }
    } else if (a.starts_with("--emulate-hosts=")) {
      emulateText = a.substr(16);
    } else if (a.starts_with("--link=")) {
      p.args.link = a.substr(7);
    } else if (a.size() > 1 && a[0] == '-') {
      p.error = fmt::format("tutti-run: unknown option '{}' (see tutti-run --help)", a);
    } else {
      p.args.command.assign(argv + i, argv + argc);
      break;
    }
    if (!p.error.empty()) return p;
  }
  if (emulateText) {
    const size_t x = emulateText->find('x');
    const std::optional<long> h =
        x == std::string::npos ? std::nullopt : parseInt(emulateText->substr(0, x));
    const std::optional<long> r =
        x == std::string::npos ? std::nullopt : parseInt(emulateText->substr(x + 1));
    if (!h || !r || *h < 1 || *r < 1 || *h > 200 || *h * *r > kMaxRanks) {
      p.error = fmt::format(
          "tutti-run: --emulate-hosts expects HxR with 1 <= H <= 200 and H*R <= {} (got '{}')",
          kMaxRanks, *emulateText);
      return p;
    }
    p.args.hosts = static_cast<int>(*h);
    p.args.ranksPerHost = static_cast<int>(*r);
    if (!ranksText) ranksText = std::to_string(*h * *r);
  } else if (!p.args.link.empty()) {
    p.error = "tutti-run: --link needs --emulate-hosts HxR";
    return p;
  }
  if (!ranksText) {
    p.error = "tutti-run: the number of ranks is missing (-n N)";
    return p;
  }
  const std::optional<long> n = parseInt(*ranksText);
  if (!n) {
    p.error = fmt::format("tutti-run: {} expects an integer (got '{}')", ranksFlag, *ranksText);
  } else if (*n < 1) {
    p.error = fmt::format("tutti-run: {} must be >= 1 (got {})", ranksFlag, *n);
  } else if (*n > kMaxRanks) {
    p.error = fmt::format("tutti-run: {} must be <= {} (got {})", ranksFlag, kMaxRanks, *n);
  } else {
    p.args.nranks = static_cast<int>(*n);
  }
  if (p.error.empty() && timeoutText) {
    const std::optional<double> t = parseSeconds(*timeoutText);
    if (!t || *t < 0 || *t > kMaxTimeoutSec) {
      p.error = fmt::format("tutti-run: --timeout expects seconds in [0, {:.0f}] (got '{}')",
                            kMaxTimeoutSec, *timeoutText);
    } else {
      p.args.timeoutSec = *t;
    }
  }
  if (p.error.empty() && p.args.hosts > 0 && p.args.nranks != p.args.hosts * p.args.ranksPerHost) {
    p.error = fmt::format("tutti-run: {} {} does not match --emulate-hosts {}x{} ({} ranks)",
                          ranksFlag, p.args.nranks, p.args.hosts, p.args.ranksPerHost,
                          p.args.hosts * p.args.ranksPerHost);
  }
  if (p.error.empty() && p.args.command.empty()) p.error = "tutti-run: no command given";
  return p;
}

std::atomic<int> gStopSignal{0};
static_assert(std::atomic<int>::is_always_lock_free, "used from a signal handler");

extern "C" void onStopSignal(int sig) { gStopSignal.store(sig); }

void forwardStopSignals() {
  struct sigaction sa {};
  sa.sa_handler = onStopSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
}

// Replaces this process with the hosts script (tools/hosts.sh, copied beside this executable as
// tutti-hosts by the build). Returns only on failure.
int execEmulatedHosts(const Args& args) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path script = self.parent_path() / "tutti-hosts";
  if (ec || access(script.c_str(), X_OK) != 0) {
    fmt::print(stderr,
               "tutti-run: --emulate-hosts needs {} (tools/hosts.sh, copied there by the "
               "build): {}\n",
               script.string(), ec ? ec.message() : std::strerror(errno));
    return 127;
  }
  std::vector<std::string> argv{script.string(), "--emulate",
                                fmt::format("{}x{}", args.hosts, args.ranksPerHost), "--timeout",
                                fmt::format("{}", args.timeoutSec)};
  if (!args.link.empty()) {
    argv.push_back("--link");
    argv.push_back(args.link);
  }
  argv.push_back("--");
  argv.insert(argv.end(), args.command.begin(), args.command.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  ::execv(cargv[0], cargv.data());
  fmt::print(stderr, "tutti-run: cannot execute {}: {}\n", script.string(), std::strerror(errno));
  return 127;
}

}  // namespace

int main(int argc, char** argv) {
  const Parsed parsed = parseArgs(argc, argv);
  if (parsed.args.help) {
    fmt::print("{}", kUsage);
    return 0;
  }
  if (!parsed.error.empty()) {
    fmt::print(stderr, "{}\n", parsed.error);
    return kUsageExit;
  }
  const Args& args = parsed.args;
  if (args.hosts > 0) return execEmulatedHosts(args);

  namespace launch = tutti::launch;
  launch::LaunchOptions opts;
  opts.nranks = args.nranks;
  opts.timeout =
      std::chrono::milliseconds(static_cast<long long>(std::ceil(args.timeoutSec * 1000)));
  opts.tagOutput = args.tagOutput;
  opts.captureOutput = false;  // without --tag-output the ranks write straight to our stdout/stderr
  opts.stopSignal = &gStopSignal;
  if (args.bind) opts.cpus = launch::bindByCore(launch::allowedCpus(), args.nranks, nullptr);
  forwardStopSignals();

  const std::vector<launch::RankOutcome> outcomes = launch::runCommand(opts, args.command);
  const int stopSignal = gStopSignal.load();
  if (stopSignal != 0) {
    fmt::print(stderr, "tutti-run: {} received; stopped the ranks\n",
               launch::signalName(stopSignal));
  }
  const launch::RankOutcome* first = launch::firstFailure(outcomes);
  if (first == nullptr) return stopSignal != 0 ? 128 + stopSignal : 0;

  fmt::print(stderr, "tutti-run: {}\n", launch::describe(*first));
  int listed = 0, unlisted = 0;
  for (const launch::RankOutcome& o : outcomes) {
    if (&o == first || (o.exited && o.exitCode == 0 && o.launchError.empty())) continue;
    if (listed++ < kMaxListedFailures) {
      fmt::print(stderr, "tutti-run: {}\n", launch::describe(o));
    } else {
      ++unlisted;
    }
  }
  if (unlisted > 0) fmt::print(stderr, "tutti-run: ... and {} more ranks did not pass\n", unlisted);
  if (stopSignal != 0 && (first->killed || first->timedOut)) return 128 + stopSignal;
  const int status = launch::exitStatus(*first);
  return status != 0 ? status : 1;
}
