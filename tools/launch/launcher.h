// File: tools/launch/launcher.h
// Fork-per-rank launcher on one host, used by the multi-process tests and by tutti-run. The parent
// picks a rendezvous address and a secret, forks N children into one process group with the
// TUTTI_* launcher variables set, and waits for them under a watchdog with fail-fast.
// Depends on the standard library and POSIX only; nothing else in tutti.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tutti::launch {

// Every child gets these variables (opts.env is applied after them and may override any):
//   TUTTI_RANK, TUTTI_NRANKS, TUTTI_LOCAL_RANK (= rank), TUTTI_LOCAL_SIZE (= nranks),
//   TUTTI_COMM_ID     "127.0.0.1:<port>", a port that was free when the parent probed it; kept as
//                     is when already set in opts.env or in the parent's environment,
//   TUTTI_COMM_SECRET 16 hex digits from getrandom(); kept when already set likewise.
struct LaunchOptions {
  int nranks = 1;
  // Watchdog for the whole run; <= 0 means none. On expiry every rank still running is killed
  // with SIGKILL and reported with timedOut = true.
  std::chrono::milliseconds timeout{60000};
  // Fail-fast: once a rank fails (nonzero exit or signal), the others get this long to print their
  // own errors about the dead peer, then they are killed (killed = true, causeRank = that rank).
  std::chrono::milliseconds failFastGrace{2000};
  std::vector<std::pair<std::string, std::string>> env;  // extra variables for every child
  // Forward each output line, prefixed "[rank] ", to the parent's stdout / stderr as it arrives.
  bool tagOutput = false;
  // Keep each child's stdout+stderr in RankOutcome::output. With neither tagOutput nor
  // captureOutput, children write straight to the parent's stdout and stderr.
  bool captureOutput = true;
  // Per rank; beyond it the oldest output is dropped (the tail, where errors are, is kept).
  // 0 = unlimited.
  size_t maxCaptureBytes = size_t{1} << 20;
  // Optional stop request, e.g. set from a SIGINT handler: while running, the launcher checks it
  // every few ms; once it holds a signal number, that signal is sent to every rank, and the ranks
  // still alive failFastGrace later are killed (killed = true, causeRank = -1).
  const std::atomic<int>* stopSignal = nullptr;
  // Per rank (when not empty; a rank beyond it is left alone): the CPU ids the child binds
  // itself to (sched_setaffinity) before it runs the body or the command. A failing call leaves
  // the child unbound. binding.h computes them.
  std::vector<std::vector<int>> cpus;
};

struct RankOutcome {
  int rank = -1;
  pid_t pid = -1;       // -1 when the rank was never started
  bool exited = false;  // ended with exit(); exitCode is valid
  int exitCode = 0;
  int signal = 0;         // nonzero when ended by a signal (SIGKILL for ranks the launcher killed)
  bool timedOut = false;  // killed by the watchdog at opts.timeout
  bool killed = false;    // killed by the launcher after another rank failed or a stop request
  int causeRank = -1;     // with killed: the rank whose failure ended the run; -1 = stop request
  std::chrono::milliseconds elapsed{0};  // from the launch until the launcher saw the rank end
  std::string output;       // captured stdout+stderr (captureOutput only), interleaved as read
  std::string launchError;  // nonempty when the rank could not be started or waited for
};

// Forks opts.nranks children; child r runs body(r, nranks) and then _exit()s with its return value
// (a value outside [0, 255] becomes 1; an escaping exception prints a line and exits 1). A child
// never returns into the caller and never runs the parent's atexit handlers or static
// destructors; it flushes stdio before _exit. In the child, stdin is /dev/null, signal handlers
// are reset to SIG_DFL and the signal mask is cleared (so a Catch2 parent's crash handlers do not
// run there), and the child dies with SIGKILL if the forking thread of the parent exits.
// Blocks until every rank has ended, bounded by opts.timeout. Returns one outcome per rank in rank
// order; empty when opts.nranks < 1. Launch failures are reported in the outcomes, not thrown.
// When the run ends, processes the ranks left behind in their process group are killed, and
// every child is reaped (unless one survives SIGKILL for 10 s; its outcome then says so).
// Fork hygiene: call it while the parent holds no locks that the body needs, and never after
// initializing CUDA in the parent (CUDA is not fork-safe); the parent's SIGCHLD must not be
// ignored, and nothing else in the parent may reap them (waitpid(-1) on another thread).
std::vector<RankOutcome> runRanks(const LaunchOptions& opts,
                                  std::function<int(int rank, int nranks)> body);

// As runRanks, but each child execvp()s argv (argv[0] is looked up in PATH) with the same setup
// (stdin /dev/null, default signal dispositions, empty mask). A command that cannot be executed
// prints "tutti launcher: rank N: cannot execute ..." on its stderr and exits 127 (126 when it is
// found but not executable), as shells do. An empty argv fails every rank with launchError.
// Blocking, bounds and errors as for runRanks.
std::vector<RankOutcome> runCommand(const LaunchOptions& opts,
                                    const std::vector<std::string>& argv);

// True when outcomes is nonempty and every rank exited with code 0.
bool allPassed(const std::vector<RankOutcome>& outcomes);

// The likely root cause of a failed run: among the ranks that did not pass, the one that failed on
// its own first (not killed by the launcher); else the lowest timed-out or killed rank. nullptr
// when every rank passed. Ranks that end within one poll interval (a few ms) are ordered by rank.
const RankOutcome* firstFailure(const std::vector<RankOutcome>& outcomes);

// Shell-style status: exitCode, 128 + signal, 124 for a timed-out rank (as timeout(1) does), 127
// when the rank never started.
int exitStatus(const RankOutcome& outcome);

// One line, e.g. "rank 2 (pid 1234) exited with code 1", "rank 2 (pid 1234) was killed by signal
// 11 (SIGSEGV)", "rank 2 (pid 1234) timed out after 60 s and was killed".
std::string describe(const RankOutcome& outcome);

// "SIGSEGV" for 11; "signal 77" for numbers without a name.
std::string signalName(int signal);

namespace detail {
// Prints "rank <TUTTI_RANK>: check failed: <expr> (<file>:<line>)" to stderr.
void childCheckFailed(const char* expr, const char* file, int line);
}  // namespace detail

}  // namespace tutti::launch

// For runRanks bodies, which must not use Catch2's REQUIRE (it throws into the child): on failure
// prints the rank, expression and location, and makes the body return 1.
#define TUTTI_CHILD_CHECK(cond)                                             \
  do {                                                                      \
    if (!(cond)) {                                                          \
      ::tutti::launch::detail::childCheckFailed(#cond, __FILE__, __LINE__); \
      return 1;                                                             \
    }                                                                       \
  } while (0)
