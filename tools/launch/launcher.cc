// File: tools/launch/launcher.cc
// The parent prepares everything that needs allocation (environment blocks, argv, pipes) before
// forking, so a child only rewires file descriptors and signals before it runs the body or exec.
// Supervision is one loop: poll the output pipes and one pidfd per rank (readable when the rank
// ends) until the next deadline, reap with waitid(WNOHANG), then apply the stop request, the
// watchdog and fail-fast. The launcher thus sleeps while the ranks run: on a machine whose cores
// are all bound to ranks, a launcher that woke on a short tick would preempt one of them every
// time (without pidfds, before Linux 5.3, it falls back to a 2 ms tick). Rank 0 leads the process
// group and is only observed (WNOWAIT) until the end: its zombie keeps the group id reserved, so
// the final kill(-pgid) that clears stray grandchildren can never hit a recycled group.

#include "tools/launch/launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>

extern char** environ;

namespace tutti::launch {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kPollIntervalMs = 2;        // without pidfds: how often ranks are checked for
constexpr milliseconds kIdleWake{100};     // at most this long asleep: a stop request set just
                                           // before poll (its signal then interrupts nothing)
constexpr size_t kReadChunkBytes = 64 * 1024;
constexpr size_t kMaxLineBytes = 64 * 1024;  // a longer unterminated line is forwarded in pieces
constexpr milliseconds kStrayGrace{200};     // all ranks ended, pipes still held by leftovers
constexpr milliseconds kFinalDrain{1000};    // after the final kill of leftovers
constexpr milliseconds kReapLimit{10000};    // a SIGKILLed rank that is still not reapable
constexpr milliseconds kForever = std::chrono::hours(24 * 365 * 100);

std::string errnoText(int err) { return std::generic_category().message(err); }

std::string formatSeconds(milliseconds d) {
  if (d.count() >= 10000) return fmt::format("{} s", (d.count() + 500) / 1000);
  std::string s = fmt::format("{:.1f}", static_cast<double>(d.count()) / 1000.0);
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s + " s";
}

// The value for key from opts.env (the last one wins), else from the parent's environment.
std::optional<std::string> lookupVar(const LaunchOptions& opts, const std::string& key) {
  for (auto it = opts.env.rbegin(); it != opts.env.rend(); ++it) {
    if (it->first == key) return it->second;
  }
  if (const char* v = std::getenv(key.c_str())) return std::string(v);
  return std::nullopt;
}

struct Probe {
  std::string value;
  std::string error;
};

// Binds 127.0.0.1:0 to learn a free port. The port is released again before the ranks start, so
// another process may take it in between; rank 0's bootstrap then fails to listen and says so.
Probe probeLoopbackAddress() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {"", fmt::format("socket: {}", errnoText(errno))};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    ::close(fd);
    return {"", fmt::format("binding 127.0.0.1:0 to pick a port: {}", errnoText(err))};
  }
  ::close(fd);
  return {fmt::format("127.0.0.1:{}", ntohs(addr.sin_port)), ""};
}

std::string makeSecret() {
  uint64_t v = 0;
  size_t got = 0;
  for (int tries = 0; got < sizeof(v) && tries < 8; ++tries) {
    const ssize_t n = ::getrandom(reinterpret_cast<char*>(&v) + got, sizeof(v) - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
    if (n < 0 && errno != EINTR) break;
  }
  if (got < sizeof(v)) {  // no getrandom (old kernel, seccomp): still unpredictable enough
    const uint64_t t = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
    v ^= t * 0x9e3779b97f4a7c15ull ^ (static_cast<uint64_t>(::getpid()) << 32);
  }
  return fmt::format("{:016x}", v);
}

// A NULL-terminated "KEY=VALUE" array for one child; the strings own the storage.
struct EnvBlock {
  std::vector<std::string> strings;
  std::vector<char*> ptrs;
};

enum class PendingKill : uint8_t { kNone, kTimeout, kFailFast };

struct Channel {
  int fd = -1;
  int rank = -1;
  bool toStderr = false;
  std::string partialLine;  // tagOutput only
};

struct Child {
  bool started = false;
  bool ended = false;
  bool leader = false;  // rank 0: observed with WNOWAIT, reaped last
  PendingKill pending = PendingKill::kNone;
  size_t droppedBytes = 0;
  int pidfd = -1;  // readable once the rank has ended; closed when it is recorded as ended
};

// A pidfd for `pid` (close-on-exec), or -1 where the kernel has none (before Linux 5.3).
int openPidfd(pid_t pid) {
#if defined(__linux__) && defined(SYS_pidfd_open)
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

[[noreturn]] void exitChild(int rc) {
  std::cout.flush();
  std::cerr.flush();
  std::clog.flush();
  std::fflush(nullptr);
  ::_exit(rc);
}

class Run {
 public:
  explicit Run(const LaunchOptions& opts) : opts_(opts) {}

  // childMain runs in the child after its setup and must not return.
  std::vector<RankOutcome> execute(const std::function<void(int rank)>& childMain) {
    if (opts_.nranks < 1) return {};
    const int n = opts_.nranks;
    outcomes_.resize(n);
    children_.resize(n);
    for (int r = 0; r < n; ++r) outcomes_[r].rank = r;
    start_ = Clock::now();
    if (std::string err = prepareEnv(); !err.empty()) {
      for (auto& o : outcomes_) o.launchError = err;
      return std::move(outcomes_);
    }
    startAll(childMain);
    supervise();
    finish();
    return std::move(outcomes_);
  }

 private:
  bool piped() const { return opts_.captureOutput || opts_.tagOutput; }

  std::string prepareEnv() {
    std::vector<std::pair<std::string, std::string>> common;
    if (auto id = lookupVar(opts_, "TUTTI_COMM_ID")) {
      common.emplace_back("TUTTI_COMM_ID", *id);
    } else {
      Probe p = probeLoopbackAddress();
      if (!p.error.empty()) return p.error;
      common.emplace_back("TUTTI_COMM_ID", p.value);
    }
    auto secret = lookupVar(opts_, "TUTTI_COMM_SECRET");
    common.emplace_back("TUTTI_COMM_SECRET", secret ? *secret : makeSecret());
    common.emplace_back("TUTTI_NRANKS", std::to_string(opts_.nranks));
    common.emplace_back("TUTTI_LOCAL_SIZE", std::to_string(opts_.nranks));

    std::set<std::string, std::less<>> overridden{"TUTTI_RANK", "TUTTI_LOCAL_RANK"};
    for (const auto& kv : common) overridden.insert(kv.first);
    for (const auto& kv : opts_.env) overridden.insert(kv.first);
    std::vector<std::string> inherited;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string_view entry(*e);
      const size_t eq = entry.find('=');
      if (eq != std::string_view::npos && overridden.count(entry.substr(0, eq)) != 0) continue;
      inherited.emplace_back(entry);
    }

    envs_.resize(opts_.nranks);
    for (int r = 0; r < opts_.nranks; ++r) {
      // Later entries win: launcher variables, then opts.env.
      std::vector<std::pair<std::string, std::string>> vars = common;
      vars.emplace_back("TUTTI_RANK", std::to_string(r));
      vars.emplace_back("TUTTI_LOCAL_RANK", std::to_string(r));
      vars.insert(vars.end(), opts_.env.begin(), opts_.env.end());
      EnvBlock& block = envs_[r];
      block.strings = inherited;
      for (size_t i = 0; i < vars.size(); ++i) {
        bool laterWins = false;
        for (size_t j = i + 1; j < vars.size() && !laterWins; ++j) {
          laterWins = vars[j].first == vars[i].first;
        }
        if (!laterWins) block.strings.push_back(vars[i].first + "=" + vars[i].second);
      }
      for (auto& s : block.strings) block.ptrs.push_back(s.data());
      block.ptrs.push_back(nullptr);
    }
    return "";
  }

  void startAll(const std::function<void(int)>& childMain) {
    // Unflushed parent output would otherwise be written once more by every child.
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    const pid_t parentPid = ::getpid();
    for (int r = 0; r < opts_.nranks; ++r) {
      int outPipe[2] = {-1, -1}, errPipe[2] = {-1, -1};
      std::string err;
      if (piped() && ::pipe2(outPipe, O_CLOEXEC) != 0) {
        err = fmt::format("pipe: {}", errnoText(errno));
      }
      if (err.empty() && opts_.tagOutput && ::pipe2(errPipe, O_CLOEXEC) != 0) {
        err = fmt::format("pipe: {}", errnoText(errno));
      }
      if (err.empty()) {
        // Every read end the child inherits, its own included, is closed in the child.
        std::vector<int> closeInChild;
        for (const Channel& c : channels_) closeInChild.push_back(c.fd);
        for (int q = 0; q < r; ++q)
          if (children_[q].pidfd >= 0) closeInChild.push_back(children_[q].pidfd);
        if (outPipe[0] >= 0) closeInChild.push_back(outPipe[0]);
        if (errPipe[0] >= 0) closeInChild.push_back(errPipe[0]);
        const pid_t pid = ::fork();
        if (pid == 0) {
          enterChild(r, parentPid, outPipe[1], errPipe[1] >= 0 ? errPipe[1] : outPipe[1],
                     closeInChild, childMain);
        }
        if (pid < 0) err = fmt::format("fork: {}", errnoText(errno));
        if (pid > 0) {
          ::setpgid(pid, pgid_ > 0 ? pgid_ : pid);  // also done by the child; whoever runs first
          if (r == 0) pgid_ = pid;
          outcomes_[r].pid = pid;
          children_[r].started = true;
          children_[r].leader = (r == 0);
          children_[r].pidfd = openPidfd(pid);
          if (outPipe[0] >= 0) channels_.push_back(Channel{outPipe[0], r, false, {}});
          if (errPipe[0] >= 0) channels_.push_back(Channel{errPipe[0], r, true, {}});
          outPipe[0] = errPipe[0] = -1;  // now owned by channels_
        }
      }
      for (int fd : {outPipe[0], outPipe[1], errPipe[0], errPipe[1]}) {
        if (fd >= 0) ::close(fd);
      }
      if (!err.empty()) {
        abortLaunch(r, err);
        return;
      }
    }
  }

  // Runs in the child: no allocation before childMain except what the body does itself.
  [[noreturn]] void enterChild(int rank, pid_t parentPid, int outFd, int errFd,
                               const std::vector<int>& closeFds,
                               const std::function<void(int)>& childMain) {
    ::setpgid(0, pgid_);  // pgid_ == 0 for rank 0: lead a new group
#ifdef __linux__
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parentPid) ::_exit(1);  // the parent died before prctl
    if (static_cast<size_t>(rank) < opts_.cpus.size() && !opts_.cpus[rank].empty()) {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int cpu : opts_.cpus[rank])
        if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
      ::sched_setaffinity(0, sizeof(set), &set);  // failing: the rank runs unbound
    }
#else
    (void)parentPid;
#endif
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int s = 1; s < NSIG; ++s) ::sigaction(s, &dfl, nullptr);  // fails harmlessly for some
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (outFd >= 0) {
      ::dup2(outFd, STDOUT_FILENO);
      ::dup2(errFd, STDERR_FILENO);
    }
    const int devNull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devNull >= 0) ::dup2(devNull, STDIN_FILENO);  // dup2 clears O_CLOEXEC on fd 0
    for (int fd : {outFd, errFd, devNull}) {
      if (fd > STDERR_FILENO) ::close(fd);
    }
    for (int fd : closeFds) ::close(fd);
    environ = envs_[rank].ptrs.data();
    childMain(rank);
    ::_exit(127);
  }

  void abortLaunch(int failedRank, const std::string& err) {
    outcomes_[failedRank].launchError = err;
    for (int r = failedRank + 1; r < opts_.nranks; ++r) {
      outcomes_[r].launchError =
          fmt::format("not started because rank {} could not be", failedRank);
    }
    for (int r = 0; r < failedRank; ++r) children_[r].pending = PendingKill::kFailFast;
    if (failedRank > 0) {
      killAt_ = Clock::now();
      causeRank_ = failedRank;
    }
  }

  void supervise() {
    // Beyond ~100 years the steady_clock arithmetic would overflow; treat it as "no timeout".
    const bool hasTimeout = opts_.timeout.count() > 0 && opts_.timeout < kForever;
    const auto deadline = hasTimeout ? start_ + opts_.timeout : Clock::time_point::max();
    std::optional<Clock::time_point> allEndedAt;
    while (true) {
      std::optional<Clock::time_point> wakeAt;  // the next deadline that needs this loop
      for (const auto& t : {hasTimeout ? std::optional(deadline) : std::nullopt, killAt_,
                            killedAt_ ? std::optional(*killedAt_ + kReapLimit) : std::nullopt,
                            allEndedAt ? std::optional(*allEndedAt + kStrayGrace) : std::nullopt})
        if (t && (!wakeAt || *t < *wakeAt)) wakeAt = t;
      pollOutput(waitMs(wakeAt));
      reap();
      const auto now = Clock::now();
      if (allEnded()) {
        if (openChannels() == 0) return;
        if (!allEndedAt) allEndedAt = now;
        if (now - *allEndedAt >= kStrayGrace) return;
        continue;
      }
      if (killedAt_) {
        if (now - *killedAt_ >= kReapLimit) return giveUp();
        continue;
      }
      if (opts_.stopSignal != nullptr && !stopSent_) {
        if (const int sig = opts_.stopSignal->load(); sig > 0) {
          stopSent_ = true;
          if (pgid_ > 0) ::kill(-pgid_, sig);
          if (!killAt_) {
            killAt_ = now + grace();
            causeRank_ = -1;
          }
        }
      }
      if (hasTimeout && now >= deadline) {
        killGroup(PendingKill::kTimeout, now);
      } else if (killAt_ && now >= *killAt_) {
        killGroup(PendingKill::kFailFast, now);
      }
    }
  }

  // How long the loop may sleep: until `wakeAt` (rounded up to a millisecond), at most kIdleWake,
  // or the short tick while a running rank has no pidfd to wake the loop when it ends.
  int waitMs(std::optional<Clock::time_point> wakeAt) const {
    for (const Child& c : children_)
      if (c.started && !c.ended && c.pidfd < 0) return kPollIntervalMs;
    milliseconds wait = kIdleWake;
    if (wakeAt) {
      const auto left = *wakeAt - Clock::now();
      wait = std::min(wait, std::chrono::ceil<milliseconds>(std::max(left, Clock::duration{0})));
    }
    return static_cast<int>(wait.count());
  }

  bool allEnded() const {
    for (const Child& c : children_) {
      if (c.started && !c.ended) return false;
    }
    return true;
  }

  size_t openChannels() const {
    return std::count_if(channels_.begin(), channels_.end(),
                         [](const Channel& c) { return c.fd >= 0; });
  }

  void killGroup(PendingKill why, Clock::time_point now) {
    for (Child& c : children_) {
      if (c.started && !c.ended) c.pending = why;
    }
    if (pgid_ > 0) ::kill(-pgid_, SIGKILL);  // never kill(0): that is our own group
    killedAt_ = now;
  }

  void reap() {
    for (int r = 0; r < opts_.nranks; ++r) {
      Child& c = children_[r];
      if (!c.started || c.ended) continue;
      siginfo_t info{};
      const int flags = WEXITED | WNOHANG | (c.leader ? WNOWAIT : 0);
      if (::waitid(P_PID, static_cast<id_t>(outcomes_[r].pid), &info, flags) != 0) {
        if (errno == EINTR) continue;
        markEnded(c);
        c.leader = false;  // nothing left to reap
        outcomes_[r].launchError =
            fmt::format("lost: waitid: {} (is SIGCHLD ignored?)", errnoText(errno));
        noteFailure(r);
        continue;
      }
      if (info.si_pid == 0) continue;  // still running
      recordEnd(r, info);
    }
  }

  void recordEnd(int r, const siginfo_t& info) {
    Child& c = children_[r];
    RankOutcome& o = outcomes_[r];
    markEnded(c);
    o.elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start_);
    if (info.si_code == CLD_EXITED) {
      o.exited = true;
      o.exitCode = info.si_status;
    } else {
      o.signal = info.si_status;
    }
    // A rank that ended on its own just before the kill keeps its own status.
    if (c.pending != PendingKill::kNone && o.signal == SIGKILL) {
      if (killedAt_) o.elapsed = std::chrono::duration_cast<milliseconds>(*killedAt_ - start_);
      if (c.pending == PendingKill::kTimeout) {
        o.timedOut = true;
      } else {
        o.killed = true;
        o.causeRank = causeRank_;
      }
      return;
    }
    if (!(o.exited && o.exitCode == 0)) noteFailure(r);
  }

  // An ended rank's pidfd stays readable (rank 0 stays a zombie until the end): stop polling it.
  static void markEnded(Child& c) {
    c.ended = true;
    closePidfd(c);
  }
  static void closePidfd(Child& c) {
    if (c.pidfd >= 0) ::close(c.pidfd);
    c.pidfd = -1;
  }

  milliseconds grace() const { return std::clamp(opts_.failFastGrace, milliseconds{0}, kForever); }

  void noteFailure(int r) {
    if (killAt_) return;
    killAt_ = Clock::now() + grace();
    causeRank_ = r;
  }

  void giveUp() {
    for (int r = 0; r < opts_.nranks; ++r) {
      Child& c = children_[r];
      if (!c.started || c.ended) continue;
      markEnded(c);
      c.leader = false;
      outcomes_[r].launchError =
          fmt::format("still not reapable {} after SIGKILL (uninterruptible sleep?); left behind",
                      formatSeconds(kReapLimit));
    }
  }

  void finish() {
    for (Child& c : children_) closePidfd(c);
    if (pgid_ > 0 && children_[0].leader) ::kill(-pgid_, SIGKILL);  // leftovers in the group
    const auto drainUntil = Clock::now() + kFinalDrain;
    while (openChannels() > 0 && Clock::now() < drainUntil) pollOutput(10);
    for (Channel& c : channels_) {
      if (c.fd >= 0) closeChannel(c);
    }
    if (pgid_ > 0 && children_[0].leader) {
      siginfo_t info{};
      ::waitid(P_PID, static_cast<id_t>(pgid_), &info, WEXITED | WNOHANG);
    }
    for (int r = 0; r < opts_.nranks; ++r) {
      RankOutcome& o = outcomes_[r];
      const size_t cap = opts_.maxCaptureBytes;
      size_t dropped = children_[r].droppedBytes;
      if (cap > 0 && o.output.size() > cap) {
        dropped += o.output.size() - cap;
        o.output.erase(0, o.output.size() - cap);
      }
      if (dropped > 0) {
        o.output.insert(
            0, fmt::format("[launcher: the first {} bytes of output were dropped]\n", dropped));
      }
    }
  }

  void pollOutput(int waitMs) {
    std::vector<pollfd> fds;
    std::vector<Channel*> owners;
    for (Channel& c : channels_) {
      if (c.fd < 0) continue;
      fds.push_back(pollfd{c.fd, POLLIN, 0});
      owners.push_back(&c);
    }
    // Ranks that end wake the poll too; reap() reads their status.
    for (const Child& c : children_)
      if (c.pidfd >= 0) fds.push_back(pollfd{c.pidfd, POLLIN, 0});
    const int ready = ::poll(fds.data(), fds.size(), waitMs);  // also the loop's sleep
    if (ready <= 0) return;
    char buf[kReadChunkBytes];
    for (size_t i = 0; i < owners.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Channel& c = *owners[i];
      const ssize_t n = ::read(c.fd, buf, sizeof(buf));
      if (n > 0) {
        consume(c, std::string_view(buf, static_cast<size_t>(n)));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        closeChannel(c);
      }
    }
  }

  void consume(Channel& c, std::string_view data) {
    if (opts_.captureOutput) {
      std::string& out = outcomes_[c.rank].output;
      out.append(data);
      const size_t cap = opts_.maxCaptureBytes;
      if (cap > 0 && out.size() > 2 * cap) {  // amortized: trim only when twice over
        children_[c.rank].droppedBytes += out.size() - cap;
        out.erase(0, out.size() - cap);
      }
    }
    if (!opts_.tagOutput) return;
    c.partialLine.append(data);
    size_t begin = 0;
    for (size_t nl; (nl = c.partialLine.find('\n', begin)) != std::string::npos; begin = nl + 1) {
      forwardLine(c, std::string_view(c.partialLine).substr(begin, nl - begin));
    }
    c.partialLine.erase(0, begin);
    if (c.partialLine.size() >= kMaxLineBytes) {
      forwardLine(c, c.partialLine);
      c.partialLine.clear();
    }
  }

  void closeChannel(Channel& c) {
    if (opts_.tagOutput && !c.partialLine.empty()) forwardLine(c, c.partialLine);
    c.partialLine.clear();
    ::close(c.fd);
    c.fd = -1;
  }

  static void forwardLine(const Channel& c, std::string_view line) {
    std::string text = fmt::format("[{}] {}\n", c.rank, line);
    writeAll(c.toStderr ? STDERR_FILENO : STDOUT_FILENO, text);
  }

  // Best effort: a stalled or closed destination drops the line after ~1 s instead of blocking.
  static void writeAll(int fd, std::string_view data) {
    for (int stalls = 0; !data.empty() && stalls < 10;) {
      const ssize_t n = ::write(fd, data.data(), data.size());
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
      } else if (n < 0 && errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, 100);
        ++stalls;
      } else if (n < 0 && errno != EINTR) {
        return;
      }
    }
  }

  const LaunchOptions& opts_;
  Clock::time_point start_;
  std::vector<RankOutcome> outcomes_;
  std::vector<Child> children_;
  std::vector<EnvBlock> envs_;
  std::vector<Channel> channels_;
  pid_t pgid_ = 0;
  std::optional<Clock::time_point> killAt_;    // fail-fast or stop: when to kill the group
  std::optional<Clock::time_point> killedAt_;  // when the group was killed
  int causeRank_ = -1;
  bool stopSent_ = false;
};

bool passed(const RankOutcome& o) { return o.launchError.empty() && o.exited && o.exitCode == 0; }

}  // namespace

std::vector<RankOutcome> runRanks(const LaunchOptions& opts,
                                  std::function<int(int rank, int nranks)> body) {
  const bool piped = opts.captureOutput || opts.tagOutput;
  return Run(opts).execute([&](int rank) {
    if (piped) std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines survive a SIGKILL
    int rc = 1;
    try {
      rc = body(rank, opts.nranks);
    } catch (const std::exception& e) {
      fmt::print(stderr, "rank {}: uncaught exception: {}\n", rank, e.what());
    } catch (...) {
      fmt::print(stderr, "rank {}: uncaught exception of unknown type\n", rank);
    }
    exitChild(rc >= 0 && rc <= 255 ? rc : 1);
  });
}

std::vector<RankOutcome> runCommand(const LaunchOptions& opts,
                                    const std::vector<std::string>& argv) {
  if (argv.empty()) {
    std::vector<RankOutcome> outcomes(std::max(opts.nranks, 0));
    for (int r = 0; r < opts.nranks; ++r) {
      outcomes[r].rank = r;
      outcomes[r].launchError = "empty command";
    }
    return outcomes;
  }
  std::vector<std::string> args = argv;
  std::vector<char*> ptrs;
  for (auto& a : args) ptrs.push_back(a.data());
  ptrs.push_back(nullptr);
  return Run(opts).execute([&](int rank) {
    ::execvp(ptrs[0], ptrs.data());
    const int err = errno;
    // stdio is still usable here: the parent flushed it before forking.
    std::fprintf(stderr, "tutti launcher: rank %d: cannot execute '%s': %s\n", rank, ptrs[0],
                 std::strerror(err));
    exitChild(err == ENOENT ? 127 : 126);
  });
}

bool allPassed(const std::vector<RankOutcome>& outcomes) {
  return !outcomes.empty() && std::all_of(outcomes.begin(), outcomes.end(), passed);
}

const RankOutcome* firstFailure(const std::vector<RankOutcome>& outcomes) {
  const RankOutcome* own = nullptr;         // failed by itself
  const RankOutcome* byLauncher = nullptr;  // timed out or killed
  for (const RankOutcome& o : outcomes) {
    if (passed(o)) continue;
    if (o.timedOut || o.killed) {
      if (byLauncher == nullptr) byLauncher = &o;
    } else if (own == nullptr || o.elapsed < own->elapsed) {
      own = &o;
    }
  }
  return own != nullptr ? own : byLauncher;
}

int exitStatus(const RankOutcome& o) {
  if (!o.launchError.empty()) return o.pid < 0 ? 127 : 1;
  if (o.timedOut) return 124;
  if (o.exited) return o.exitCode;
  if (o.signal > 0) return 128 + o.signal;
  return 1;
}

std::string describe(const RankOutcome& o) {
  if (!o.launchError.empty() && o.pid < 0) {
    return fmt::format("rank {} was not started: {}", o.rank, o.launchError);
  }
  const std::string who = fmt::format("rank {} (pid {})", o.rank, o.pid);
  if (!o.launchError.empty()) return fmt::format("{}: {}", who, o.launchError);
  if (o.timedOut)
    return fmt::format("{} timed out after {} and was killed", who, formatSeconds(o.elapsed));
  if (o.killed && o.causeRank >= 0) {
    return fmt::format("{} was killed by the launcher after rank {} failed", who, o.causeRank);
  }
  if (o.killed) return fmt::format("{} was killed by the launcher after a stop request", who);
  if (o.exited) return fmt::format("{} exited with code {}", who, o.exitCode);
  if (o.signal > 0) {
    return fmt::format("{} was killed by signal {} ({})", who, o.signal, signalName(o.signal));
  }
  return fmt::format("{} did not finish", who);
}

std::string signalName(int signal) {
  static constexpr std::pair<int, const char*> kNames[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
      {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
      {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGCHLD, "SIGCHLD"},
      {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
  };
  for (const auto& [num, name] : kNames) {
    if (num == signal) return name;
  }
  return fmt::format("signal {}", signal);
}

namespace detail {
void childCheckFailed(const char* expr, const char* file, int line) {
  const char* rank = std::getenv("TUTTI_RANK");
  fmt::print(stderr, "rank {}: check failed: {} ({}:{})\n", rank != nullptr ? rank : "?", expr,
             file, line);
  std::fflush(stderr);
}
}  // namespace detail

}  // namespace tutti::launch
