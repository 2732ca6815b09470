// File: tests/unit/launcher_test.cc
// The fork-per-rank launcher and tutti-run, checked on real outcomes: exit codes, signals,
// timeouts, fail-fast, environment, output capture and tagging, and that no child is left behind.

#include "tools/launch/launcher.h"
#include "tools/launch/binding.h"

#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tutti::launch {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The launcher reaps everything it forked, the group leader included.
bool noChildrenLeft() {
  errno = 0;
  return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD;
}

std::string failures(const std::vector<RankOutcome>& outcomes) {
  std::string text;
  for (const RankOutcome& o : outcomes) text += describe(o) + "\n" + o.output + "\n";
  return text;
}

std::string envOr(const char* key, const char* fallback) {
  const char* v = std::getenv(key);
  return v != nullptr ? v : fallback;
}

bool isHex16(const std::string& s) {
  if (s.size() != 16) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

LaunchOptions options(int nranks, std::chrono::milliseconds timeout = 30s) {
  LaunchOptions o;
  o.nranks = nranks;
  o.timeout = timeout;
  return o;
}

TEST_CASE("launcher: every rank passes and sees its own launcher variables", "[launcher]") {
  const int n = GENERATE(1, 3, 5);
  const auto outcomes = runRanks(options(n), [](int rank, int nranks) {
    TUTTI_CHILD_CHECK(envOr("TUTTI_RANK", "") == std::to_string(rank));
    TUTTI_CHILD_CHECK(envOr("TUTTI_NRANKS", "") == std::to_string(nranks));
    TUTTI_CHILD_CHECK(envOr("TUTTI_LOCAL_RANK", "") == std::to_string(rank));
    TUTTI_CHILD_CHECK(envOr("TUTTI_LOCAL_SIZE", "") == std::to_string(nranks));
    TUTTI_CHILD_CHECK(envOr("TUTTI_COMM_ID", "").rfind("127.0.0.1:", 0) == 0);
    TUTTI_CHILD_CHECK(isHex16(envOr("TUTTI_COMM_SECRET", "")));
    std::printf("id=%s secret=%s\n", envOr("TUTTI_COMM_ID", "").c_str(),
                envOr("TUTTI_COMM_SECRET", "").c_str());
    return 0;
  });
  INFO(failures(outcomes));
  REQUIRE(outcomes.size() == static_cast<size_t>(n));
  REQUIRE(allPassed(outcomes));
  REQUIRE(firstFailure(outcomes) == nullptr);
  for (int r = 0; r < n; ++r) {
    CHECK(outcomes[r].rank == r);
    CHECK(outcomes[r].pid > 0);
    CHECK(outcomes[r].exited);
    CHECK(outcomes[r].exitCode == 0);
    CHECK_FALSE(outcomes[r].timedOut);
    CHECK_FALSE(outcomes[r].killed);
    CHECK(outcomes[r].output == outcomes[0].output);  // one rendezvous address and secret for all
  }
  const std::string& line = outcomes[0].output;
  const auto port = std::stoi(line.substr(line.find(':') + 1));
  CHECK(port > 0);
  CHECK(port < 65536);
  CHECK(noChildrenLeft());
}

TEST_CASE(
    "launcher: preset TUTTI_COMM_ID and TUTTI_COMM_SECRET are kept, opts.env reaches every rank",
    "[launcher]") {
  LaunchOptions o = options(2);
  o.env = {{"TUTTI_COMM_ID", "127.0.0.1:4242"},
           {"TUTTI_COMM_SECRET", "00000000deadbeef"},
           {"LAUNCHER_TEST_VAR", "first"},
           {"LAUNCHER_TEST_VAR", "second"}};
  const auto outcomes = runRanks(o, [](int, int) {
    TUTTI_CHILD_CHECK(envOr("TUTTI_COMM_ID", "") == "127.0.0.1:4242");
    TUTTI_CHILD_CHECK(envOr("TUTTI_COMM_SECRET", "") == "00000000deadbeef");
    TUTTI_CHILD_CHECK(envOr("LAUNCHER_TEST_VAR", "") == "second");  // the last one wins
    TUTTI_CHILD_CHECK(envOr("PATH", "").size() > 0);                // the rest is inherited
    return 0;
  });
  INFO(failures(outcomes));
  REQUIRE(allPassed(outcomes));

  ::setenv("TUTTI_COMM_ID", "127.0.0.1:4343", 1);
  const auto fromParent = runRanks(
      options(2), [](int, int) { return envOr("TUTTI_COMM_ID", "") == "127.0.0.1:4343" ? 0 : 1; });
  ::unsetenv("TUTTI_COMM_ID");
  INFO(failures(fromParent));
  REQUIRE(allPassed(fromParent));
  CHECK(noChildrenLeft());
}

TEST_CASE("launcher: a failing rank is reported with its code and the others are killed",
          "[launcher]") {
  LaunchOptions o = options(4);
  o.failFastGrace = 300ms;
  const auto begin = Clock::now();
  const auto outcomes = runRanks(o, [](int rank, int) {
    if (rank == 2) return 3;
    std::this_thread::sleep_for(20s);
    return 0;
  });
  const auto took = Clock::now() - begin;
  INFO(failures(outcomes));
  REQUIRE(outcomes.size() == 4);
  CHECK_FALSE(allPassed(outcomes));
  CHECK(took < 10s);
  CHECK(outcomes[2].exited);
  CHECK(outcomes[2].exitCode == 3);
  CHECK_FALSE(outcomes[2].killed);
  CHECK(describe(outcomes[2]) ==
        "rank 2 (pid " + std::to_string(outcomes[2].pid) + ") exited with code 3");
  for (int r : {0, 1, 3}) {
    CHECK_FALSE(outcomes[r].exited);
    CHECK(outcomes[r].signal == SIGKILL);
    CHECK(outcomes[r].killed);
    CHECK(outcomes[r].causeRank == 2);
    CHECK_FALSE(outcomes[r].timedOut);
    CHECK(describe(outcomes[r]).find("killed by the launcher after rank 2 failed") !=
          std::string::npos);
  }
  REQUIRE(firstFailure(outcomes) == &outcomes[2]);
  CHECK(exitStatus(outcomes[2]) == 3);
  CHECK(noChildrenLeft());
}

TEST_CASE("launcher: a peer that exits on its own during the grace period keeps its status",
          "[launcher]") {
  LaunchOptions o = options(2);
  o.failFastGrace = 5s;
  const auto outcomes = runRanks(o, [](int rank, int) {
    if (rank == 0) return 1;
    std::this_thread::sleep_for(200ms);
    std::fprintf(stderr, "rank 1: peer 0 is gone\n");
    return 5;
  });
  INFO(failures(outcomes));
  CHECK(outcomes[0].exitCode == 1);
  CHECK(outcomes[1].exited);
  CHECK(outcomes[1].exitCode == 5);
  CHECK_FALSE(outcomes[1].killed);
  CHECK(outcomes[1].output == "rank 1: peer 0 is gone\n");
  REQUIRE(firstFailure(outcomes) == &outcomes[0]);
  CHECK(noChildrenLeft());
}

TEST_CASE("launcher: a rank raising SIGSEGV is reported as signal 11", "[launcher]") {
  LaunchOptions o = options(3);
  o.failFastGrace = 200ms;
  const auto outcomes = runRanks(o, [](int rank, int) {
    // Catch2 installed SIGSEGV handlers in the parent; the child must die with the default action.
    if (rank == 1) std::raise(SIGSEGV);
    return 0;
  });
  INFO(failures(outcomes));
  CHECK(outcomes[0].exitCode == 0);
  CHECK(outcomes[2].exitCode == 0);
  CHECK_FALSE(outcomes[1].exited);
  CHECK(outcomes[1].signal == SIGSEGV);
  CHECK(outcomes[1].output.find("FATAL") == std::string::npos);  // not Catch2's crash report
  CHECK(describe(outcomes[1]) ==
        "rank 1 (pid " + std::to_string(outcomes[1].pid) + ") was killed by signal 11 (SIGSEGV)");
  CHECK(exitStatus(outcomes[1]) == 128 + SIGSEGV);
  CHECK(noChildrenLeft());
}

TEST_CASE("launcher: a hanging rank is killed at the timeout", "[launcher]") {
  const auto begin = Clock::now();
  const auto outcomes = runRanks(options(3, 1s), [](int rank, int) {
    if (rank == 1) {
      std::printf("rank 1 hangs\n");
      std::fflush(stdout);
      ::pause();
    }
    return 0;
  });
  const auto took = Clock::now() - begin;
  INFO(failures(outcomes));
  CHECK(took >= 1s);
  CHECK(took < 5s);
  CHECK(outcomes[0].exitCode == 0);
  CHECK(outcomes[2].exitCode == 0);
  CHECK(outcomes[1].timedOut);
  CHECK_FALSE(outcomes[1].killed);
  CHECK(outcomes[1].signal == SIGKILL);
  CHECK(outcomes[1].elapsed >= 1s);
  CHECK(outcomes[1].output == "rank 1 hangs\n");
  CHECK(describe(outcomes[1]) ==
        "rank 1 (pid " + std::to_string(outcomes[1].pid) + ") timed out after 1 s and was killed");
  CHECK(exitStatus(outcomes[1]) == 124);
  REQUIRE(firstFailure(outcomes) == &outcomes[1]);
  CHECK(noChildrenLeft());
}

TEST_CASE("launcher: output capture keeps stdout and stderr, bounded, without blocking children",
          "[launcher]") {
  SECTION("short output") {
    const auto outcomes = runRanks(options(2), [](int rank, int) {
      std::printf("out from rank %d\n", rank);
      std::fprintf(stderr, "err from rank %d\n", rank);
      std::printf("no newline at the end");
      return 0;
    });
    INFO(failures(outcomes));
    REQUIRE(allPassed(outcomes));
    for (int r = 0; r < 2; ++r) {
      const std::string& out = outcomes[r].output;
      CHECK(out.find("out from rank " + std::to_string(r) + "\n") != std::string::npos);
      CHECK(out.find("err from rank " + std::to_string(r) + "\n") != std::string::npos);
      CHECK(out.find("no newline at the end") != std::string::npos);
    }
  }
  SECTION("far more than a pipe holds, trimmed to the tail") {
    LaunchOptions o = options(3);
    o.maxCaptureBytes = 64 * 1024;
    const auto outcomes = runRanks(o, [](int rank, int) {
      const std::string line(1023, 'a' + rank);
      for (int i = 0; i < 4096; ++i) std::printf("%s\n", line.c_str());  // 4 MiB each
      std::printf("last line of rank %d\n", rank);
      return 0;
    });
    REQUIRE(allPassed(outcomes));
    for (int r = 0; r < 3; ++r) {
      const std::string& out = outcomes[r].output;
      CHECK(out.size() < 70 * 1024);
      CHECK(out.rfind("[launcher: the first ", 0) == 0);
      CHECK(out.find("last line of rank " + std::to_string(r) + "\n") != std::string::npos);
    }
  }
  CHECK(noChildrenLeft());
}

TEST_CASE("launcher: runCommand reports each rank's exit code", "[launcher]") {
  const auto outcomes = runCommand(options(4), {"/bin/sh", "-c", "exit $TUTTI_RANK"});
  INFO(failures(outcomes));
  REQUIRE(outcomes.size() == 4);
  for (int r = 0; r < 4; ++r) {
    CHECK(outcomes[r].exited);
    CHECK(outcomes[r].exitCode == r);
  }
  CHECK_FALSE(allPassed(outcomes));

  const auto echo = runCommand(options(2), {"sh", "-c", "echo rank=$TUTTI_RANK of $TUTTI_NRANKS"});
  REQUIRE(allPassed(echo));
  CHECK(echo[0].output == "rank=0 of 2\n");
  CHECK(echo[1].output == "rank=1 of 2\n");
  CHECK(noChildrenLeft());
}

TEST_CASE("launcher: runCommand of a missing program exits 127, an empty argv is refused",
          "[launcher]") {
  const auto outcomes = runCommand(options(2), {"/nonexistent/tutti-no-such-program"});
  INFO(failures(outcomes));
  for (const RankOutcome& o : outcomes) {
    CHECK(o.exitCode == 127);
    CHECK(o.output.find("cannot execute") != std::string::npos);
  }
  const auto empty = runCommand(options(2), {});
  REQUIRE(empty.size() == 2);
  CHECK(empty[1].launchError == "empty command");
  CHECK(describe(empty[1]) == "rank 1 was not started: empty command");
  CHECK(exitStatus(empty[1]) == 127);
  CHECK(noChildrenLeft());
}

TEST_CASE("launcher: processes left behind by a rank are killed when the run ends", "[launcher]") {
  const auto begin = Clock::now();
  const auto outcomes = runCommand(options(1), {"sh", "-c", "sleep 30 & echo $!"});
  INFO(failures(outcomes));
  REQUIRE(allPassed(outcomes));
  CHECK(Clock::now() - begin < 5s);
  const pid_t stray = std::stoi(outcomes[0].output);
  // Reparented to init (or a subreaper); gone or at least a zombie within a moment.
  bool dead = false;
  for (int i = 0; i < 200 && !dead; ++i) {
    std::ifstream stat("/proc/" + std::to_string(stray) + "/stat");
    std::string pid, comm, state;
    dead = !(stat >> pid >> comm >> state) || state == "Z";
    if (!dead) std::this_thread::sleep_for(10ms);
  }
  CHECK(dead);
}

TEST_CASE("launcher: body results, exceptions and atexit handlers in the child", "[launcher]") {
  static pid_t parent = ::getpid();
  static bool registered = false;
  if (!registered) {
    std::atexit([] {
      if (::getpid() != parent) std::printf("parent's atexit handler ran in a child\n");
    });
    registered = true;
  }
  const auto outcomes = runRanks(options(4), [](int rank, int) -> int {
    if (rank == 1) return 300;  // not representable as an exit status: reported as 1
    if (rank == 2) throw std::runtime_error("boom");
    return 0;
  });
  INFO(failures(outcomes));
  CHECK(outcomes[0].exitCode == 0);
  CHECK(outcomes[0].output.empty());
  CHECK(outcomes[1].exitCode == 1);
  CHECK(outcomes[2].exitCode == 1);
  CHECK(outcomes[2].output == "rank 2: uncaught exception: boom\n");
  CHECK(outcomes[3].output.empty());  // _exit: the parent's atexit handler never runs here
}

TEST_CASE("launcher: a stop request is forwarded, then enforced", "[launcher]") {
  std::atomic<int> stop{0};
  LaunchOptions o = options(2);
  o.failFastGrace = 300ms;
  o.stopSignal = &stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(300ms);
    stop.store(SIGTERM);
  });
  const auto outcomes = runRanks(o, [](int rank, int) {
    if (rank == 1) ::signal(SIGTERM, SIG_IGN);
    std::this_thread::sleep_for(20s);
    return 0;
  });
  stopper.join();
  INFO(failures(outcomes));
  CHECK(outcomes[0].signal == SIGTERM);
  CHECK_FALSE(outcomes[0].killed);
  CHECK(outcomes[1].signal == SIGKILL);
  CHECK(outcomes[1].killed);
  CHECK(outcomes[1].causeRank == -1);
  CHECK(describe(outcomes[1]).find("after a stop request") != std::string::npos);
  CHECK(noChildrenLeft());
}

TEST_CASE("launcher: sleeps while the ranks run, woken by their ends", "[launcher]") {
  // A launcher that woke on a short tick would preempt a rank bound to its core every time.
  const int probe = static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0));
  if (probe < 0) {
    WARN("no pidfd_open on this kernel: the launcher polls on a 2 ms tick");
    return;
  }
  ::close(probe);
  rusage before{}, after{};
  ::getrusage(RUSAGE_THREAD, &before);
  const auto begin = Clock::now();
  const auto outcomes = runRanks(options(2), [](int rank, int) {
    std::this_thread::sleep_for(rank == 0 ? 300ms : 800ms);
    return 0;
  });
  const auto took = Clock::now() - begin;
  ::getrusage(RUSAGE_THREAD, &after);
  const long sleeps = after.ru_nvcsw - before.ru_nvcsw;
  INFO(failures(outcomes) << "launcher thread slept " << sleeps << " times; the run took "
                          << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                          << " ms");
  REQUIRE(allPassed(outcomes));
  // 800 ms on a 2 ms tick is ~400 sleeps; waking at most every 100 ms, plus one per rank's end.
  CHECK(sleeps <= 30);
  CHECK(took >= 800ms);
  CHECK(outcomes[0].elapsed >= 300ms);
  CHECK(outcomes[0].elapsed < outcomes[1].elapsed);  // each end recorded when it happened
  CHECK(noChildrenLeft());
}

TEST_CASE("launcher: nranks < 1 runs nothing", "[launcher]") {
  const auto outcomes = runRanks(options(0), [](int, int) { return 0; });
  CHECK(outcomes.empty());
  CHECK_FALSE(allPassed(outcomes));
}

TEST_CASE("launcher: describe, exitStatus and signalName", "[launcher]") {
  RankOutcome o;
  o.rank = 2;
  o.pid = 1234;
  o.signal = SIGABRT;
  CHECK(describe(o) == "rank 2 (pid 1234) was killed by signal 6 (SIGABRT)");
  CHECK(exitStatus(o) == 134);
  o.signal = SIGKILL;
  o.timedOut = true;
  o.elapsed = 60000ms;
  CHECK(describe(o) == "rank 2 (pid 1234) timed out after 60 s and was killed");
  o.elapsed = 1500ms;
  CHECK(describe(o) == "rank 2 (pid 1234) timed out after 1.5 s and was killed");
  CHECK(signalName(SIGSEGV) == "SIGSEGV");
  CHECK(signalName(77) == "signal 77");
}

TEST_CASE("binding: ranks share the cores, then take a hardware thread each, and none beyond",
          "[launcher][binding]") {
  // 2 cores with 2 hardware threads each, siblings numbered as Linux does on x86: (0, 2), (1, 3).
  const std::vector<Cpu> smt = {{0, 0, 0}, {1, 0, 1}, {2, 0, 0}, {3, 0, 1}};
  std::string why;
  using Sets = std::vector<std::vector<int>>;
  CHECK(bindByCore(smt, 1, &why) == Sets{{0, 1, 2, 3}});
  CHECK(why == "1 ranks on 2 cores: 2 each");
  CHECK(bindByCore(smt, 2, &why) == Sets{{0, 2}, {1, 3}});
  CHECK(why == "2 ranks on 2 cores: 1 each");
  // Fewer ranks than cores: each rank keeps an equal, contiguous share for its compute threads.
  const std::vector<Cpu> eight = {{0, 0, 0}, {1, 0, 1}, {2, 0, 2}, {3, 0, 3},
                                  {4, 1, 0}, {5, 1, 1}, {6, 1, 2}, {7, 1, 3}};
  CHECK(bindByCore(eight, 2, &why) == Sets{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(bindByCore(eight, 3, &why) == Sets{{0, 1}, {2, 3, 4}, {5, 6, 7}});
  CHECK(why == "3 ranks on 8 cores: 2 or 3 each");
  CHECK(bindByCore(smt, 3, &why) == Sets{{0}, {1}, {2}});
  CHECK(bindByCore(smt, 4, &why) == Sets{{0}, {1}, {2}, {3}});
  CHECK(why == "4 ranks on 4 CPUs of 2 cores: one CPU each");
  CHECK(bindByCore(smt, 5, &why).empty());
  CHECK(why == "5 ranks outnumber the 4 CPUs: not bound");
  // Two packages with the same core ids are different cores; a restricted set (taskset) keeps
  // only what it allows.
  const std::vector<Cpu> two = {{4, 0, 0}, {5, 1, 0}};
  CHECK(bindByCore(two, 2, &why) == Sets{{4}, {5}});
  CHECK(bindByCore({}, 2, &why).empty());
  CHECK(bindByCore(smt, 0, &why).empty());
}

TEST_CASE("launcher: LaunchOptions::cpus binds each rank before it runs", "[launcher][binding]") {
  const std::vector<Cpu> cpus = allowedCpus();
  REQUIRE(!cpus.empty());
  LaunchOptions o = options(2);
  o.cpus = {{cpus.front().id}, {cpus.back().id}};
  const auto outcomes = runRanks(o, [&](int rank, int) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 2;
    const int want = rank == 0 ? cpus.front().id : cpus.back().id;
    return CPU_COUNT(&set) == 1 && CPU_ISSET(want, &set) ? 0 : 1;
  });
  for (const RankOutcome& r : outcomes) {
    INFO(describe(r) + "\n" + r.output);
    CHECK(r.exitCode == 0);
  }
}

#ifdef TUTTI_RUN_PATH
// Runs tutti-run as a single captured rank of an outer launch.
RankOutcome tuttiRun(std::vector<std::string> args) {
  args.insert(args.begin(), TUTTI_RUN_PATH);
  auto outcomes = runCommand(options(1), args);
  REQUIRE(outcomes.size() == 1);
  return outcomes[0];
}

TEST_CASE("tutti-run: runs N ranks and exits 0 when all pass", "[launcher][tutti-run]") {
  const RankOutcome o = tuttiRun({"-n", "3", "--tag-output", "--", "sh", "-c",
                                  "echo hi $TUTTI_RANK/$TUTTI_NRANKS; echo oops >&2"});
  INFO(describe(o) + "\n" + o.output);
  CHECK(o.exitCode == 0);
  for (int r = 0; r < 3; ++r) {
    CHECK(o.output.find(fmt::format("[{}] hi {}/3\n", r, r)) != std::string::npos);
    CHECK(o.output.find(fmt::format("[{}] oops\n", r)) != std::string::npos);
  }
  const RankOutcome compact = tuttiRun({"-n4", "sh", "-c", "echo $TUTTI_LOCAL_SIZE"});
  CHECK(compact.exitCode == 0);
  CHECK(compact.output == "4\n4\n4\n4\n");
  CHECK(tuttiRun({"--np", "2", "true"}).exitCode == 0);
  CHECK(tuttiRun({"-np", "2", "--timeout", "30", "true"}).exitCode == 0);
}

TEST_CASE("tutti-run: exits with the failing rank's status and names it", "[launcher][tutti-run]") {
  const RankOutcome code =
      tuttiRun({"-n", "3", "--", "sh", "-c", "if [ $TUTTI_RANK = 2 ]; then exit 7; fi; sleep 30"});
  INFO(describe(code) + "\n" + code.output);
  CHECK(code.exitCode == 7);
  CHECK(code.output.find("tutti-run: rank 2 (pid ") != std::string::npos);
  CHECK(code.output.find("exited with code 7") != std::string::npos);
  CHECK(code.output.find("killed by the launcher after rank 2 failed") != std::string::npos);

  const RankOutcome segv =
      tuttiRun({"-n", "2", "--", "sh", "-c", "if [ $TUTTI_RANK = 1 ]; then kill -SEGV $$; fi"});
  INFO(segv.output);
  CHECK(segv.exitCode == 128 + SIGSEGV);
  CHECK(segv.output.find("killed by signal 11 (SIGSEGV)") != std::string::npos);

  const RankOutcome timeout = tuttiRun({"-n", "2", "--timeout", "0.5", "--", "sleep", "30"});
  INFO(timeout.output);
  CHECK(timeout.exitCode == 124);
  CHECK(timeout.output.find("timed out after 0.5 s and was killed") != std::string::npos);
}

TEST_CASE("tutti-run: binds ranks by core unless told --bind-to none", "[launcher][tutti-run]") {
  // Every rank prints its affinity mask (hex, in 32-bit groups); bindByCore says what it should be.
  const std::vector<Cpu> cpus = allowedCpus();
  REQUIRE(!cpus.empty());
  if (cpus.back().id >= 64) SUCCEED("CPU ids beyond 64: the masks are not compared");
  if (cpus.back().id >= 64) return;
  const auto masks = [](std::vector<std::string> args) {  // rank -> mask
    args.insert(args.end(), {"--tag-output", "--", "sh", "-c",
                             "grep Cpus_allowed: /proc/self/status | cut -f2 | tr -d ,"});
    const RankOutcome o = tuttiRun(args);
    INFO(o.output);
    REQUIRE(o.exitCode == 0);
    std::map<int, uint64_t> out;
    std::istringstream in(o.output);
    for (std::string line; std::getline(in, line);) {
      const size_t close = line.find("] ");
      REQUIRE(close != std::string::npos);
      const std::string hex = line.substr(close + 2);
      out[std::stoi(line.substr(1, close - 1))] =
          std::stoull(hex.size() > 16 ? hex.substr(hex.size() - 16) : hex, nullptr, 16);
    }
    return out;
  };
  auto maskOf = [](const std::vector<int>& ids) {
    uint64_t m = 0;
    for (int id : ids) m |= uint64_t{1} << id;
    return m;
  };
  std::vector<int> all;
  for (const Cpu& c : cpus) all.push_back(c.id);
  const auto expected = bindByCore(cpus, 2, nullptr);
  const auto bound = masks({"-n", "2"});
  REQUIRE(bound.size() == 2);
  for (int r = 0; r < 2; ++r)
    CHECK(bound.at(r) == maskOf(expected.empty() ? all : expected[r]));
  const auto unbound = masks({"-n", "2", "--bind-to", "none"});
  REQUIRE(unbound.size() == 2);
  for (int r = 0; r < 2; ++r) CHECK(unbound.at(r) == maskOf(all));
  CHECK(tuttiRun({"-n", "2", "--bind-to", "socket", "true"}).output ==
        "tutti-run: --bind-to expects core or none (got 'socket')\n");
}

TEST_CASE("tutti-run: bad usage exits 2 with a message", "[launcher][tutti-run]") {
  const RankOutcome zero = tuttiRun({"-n", "0", "--", "true"});
  CHECK(zero.exitCode == 2);
  CHECK(zero.output == "tutti-run: -n must be >= 1 (got 0)\n");
  CHECK(tuttiRun({"-n", "x", "true"}).output == "tutti-run: -n expects an integer (got 'x')\n");
  CHECK(tuttiRun({"-n", "2"}).output == "tutti-run: no command given\n");
  CHECK(tuttiRun({"--", "true"}).exitCode == 2);
  CHECK(tuttiRun({"-n", "2", "--bogus", "true"}).exitCode == 2);
  CHECK(tuttiRun({"-n", "2", "--timeout", "-1", "true"}).exitCode == 2);
  const RankOutcome help = tuttiRun({"--help"});
  CHECK(help.exitCode == 0);
  CHECK(help.output.rfind("usage: tutti-run -n N", 0) == 0);
}
#endif  // TUTTI_RUN_PATH

}  // namespace
}  // namespace tutti::launch
