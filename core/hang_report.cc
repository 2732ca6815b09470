// File: core/hang_report.cc
// The SIGUSR1 handler, its watcher thread and the registry of communicators (see hang_report.h).
#include "core/hang_report.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "base/env.h"
#include "base/log.h"
#include "base/status.h"

namespace tutti::hang {

namespace {

TUTTI_PARAM_INT(kHangSignal, "TUTTI_HANG_SIGNAL", nullptr, "CORE", 0,
                "1: SIGUSR1 makes every rank write a hang report (one line per pending operation)");

std::mutex& registryMutex() {
  static std::mutex mu;
  return mu;
}
std::vector<Source*>& registry() {
  static std::vector<Source*> r;
  return r;
}

int gPipe[2] = {-1, -1};

extern "C" void onSignal(int) {
  const int saved = errno;
  const char b = 1;
  (void)!write(gPipe[1], &b, 1);  // async-signal-safe; a full pipe already has a request
  errno = saved;
}

void watcher() {
  for (;;) {
    char buf[64];
    const ssize_t n = read(gPipe[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    reportAll();
  }
}

void installOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (kHangSignal.get() != 1) return;
    if (pipe2(gPipe, O_CLOEXEC) != 0) {
      TUTTI_LOG_WARN(Subsys::kInit, "TUTTI_HANG_SIGNAL: pipe: {}", errnoString(errno));
      return;
    }
    fcntl(gPipe[1], F_SETFL, fcntl(gPipe[1], F_GETFL) | O_NONBLOCK);
    std::thread(watcher).detach();
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, nullptr);
    TUTTI_LOG_INFO(Subsys::kInit, "TUTTI_HANG_SIGNAL=1: SIGUSR1 writes a hang report (pid {})",
                   getpid());
  });
}

}  // namespace

void add(Source* s) {
  installOnce();
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().push_back(s);
}

void remove(Source* s) {
  std::lock_guard<std::mutex> lock(registryMutex());
  auto& r = registry();
  r.erase(std::remove(r.begin(), r.end(), s), r.end());
}

void reportAll() {
  std::lock_guard<std::mutex> lock(registryMutex());
  if (registry().empty()) writeLine(fmt::format("pid {}: no communicator", getpid()));
  for (Source* s : registry()) s->requestReport();
}

void writeLine(const std::string& line) {
  const std::string text = "tutti hang report: " + line;
  if (log::enabled(LogLevel::kWarn, Subsys::kColl)) {
    log::write(LogLevel::kWarn, Subsys::kColl, text);
  } else {
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    std::fprintf(stderr, "%s\n", text.c_str());
  }
}

}  // namespace tutti::hang
