// File: base/log.cc
// The logger behind TUTTI_LOG_*: spdlog sink chosen from TUTTI_DEBUG_FILE (or stderr), line
// prefix "host:pid:rank [SUBSYS]", level/subsystem masks from TUTTI_DEBUG(_SUBSYS) or NCCL_*.
#include "base/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>

namespace tutti::log {

std::atomic<int> gLevel{static_cast<int>(LogLevel::kWarn)};
std::atomic<unsigned> gMask{~0u};

namespace {
std::once_flag gInitOnce;
std::shared_ptr<spdlog::logger> gLogger;
std::atomic<int> gRank{-1};
bool gLevelForced = false;
bool gVersionRequested = false;
std::atomic<int> gStyle{0};
std::string gHost;

struct SubsysName {
  const char* name;
  Subsys s;
};
constexpr SubsysName kSubsysNames[] = {
    {"INIT", Subsys::kInit},   {"COLL", Subsys::kColl},       {"NET", Subsys::kNet},
    {"SHM", Subsys::kShm},     {"BOOTSTRAP", Subsys::kBootstrap}, {"ALGO", Subsys::kAlgo},
    {"TUNING", Subsys::kTuning}, {"TOPO", Subsys::kTopo},     {"KERNEL", Subsys::kKernel},
    {"ENV", Subsys::kEnv},
};

const char* subsysName(Subsys s) {
  for (const auto& n : kSubsysNames)
    if (n.s == s) return n.name;
  return "?";
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

const char* getenv2(const char* a, const char* b) {
  const char* v = std::getenv(a);
  return v ? v : std::getenv(b);
}

// "path.%h.%p" -> hostname and pid substituted (NCCL_DEBUG_FILE syntax).
std::string expandPath(std::string p) {
  std::string out;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '%' && i + 1 < p.size()) {
      if (p[i + 1] == 'h') { out += gHost; ++i; continue; }
      if (p[i + 1] == 'p') { out += std::to_string(getpid()); ++i; continue; }
    }
    out += p[i];
  }
  return out;
}

void doInit() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  gHost = host;
  if (!gLevelForced) {
    if (const char* lvl = getenv2("TUTTI_DEBUG", "NCCL_DEBUG")) {
      std::string v = upper(lvl);
      gVersionRequested = v == "VERSION" || v == "WARN" || v == "INFO" || v == "TRACE";
      if (v == "NONE" || v == "OFF") gLevel = static_cast<int>(LogLevel::kNone);
      else if (v == "VERSION" || v == "WARN") gLevel = static_cast<int>(LogLevel::kWarn);
      else if (v == "INFO") gLevel = static_cast<int>(LogLevel::kInfo);
      else if (v == "TRACE" || v == "ABORT") gLevel = static_cast<int>(LogLevel::kTrace);
    }
  }
  if (const char* subs = getenv2("TUTTI_DEBUG_SUBSYS", "NCCL_DEBUG_SUBSYS")) {
    // NCCL syntax: comma list, ALL, and a leading '^' inverts the whole list.
    std::string v = upper(subs);
    bool invert = !v.empty() && v[0] == '^';
    if (invert) v.erase(0, 1);
    unsigned mask = 0;
    size_t pos = 0;
    while (pos <= v.size()) {
      size_t end = v.find(',', pos);
      if (end == std::string::npos) end = v.size();
      std::string tok = v.substr(pos, end - pos);
      if (tok == "ALL") mask = ~0u;
      for (const auto& n : kSubsysNames)
        if (tok == n.name) mask |= static_cast<unsigned>(n.s);
      pos = end + 1;
    }
    gMask = invert ? ~mask : mask;
  }
  if (const char* file = getenv2("TUTTI_DEBUG_FILE", "NCCL_DEBUG_FILE")) {
    try {
      gLogger = spdlog::basic_logger_mt("tutti-" + std::to_string(getpid()), expandPath(file));
    } catch (...) {
      gLogger = nullptr;
    }
  }
  if (!gLogger) gLogger = std::make_shared<spdlog::logger>("tutti", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  gLogger->set_pattern("%v");
  gLogger->set_level(spdlog::level::trace);
  gLogger->flush_on(spdlog::level::trace);
}

thread_local std::string tLastError;
}  // namespace

void init() { std::call_once(gInitOnce, doInit); }

namespace {
// Reads the environment when the library loads, so that enabled() is right from the first call.
const bool gAutoInit = (init(), true);
}  // namespace

void write(LogLevel level, Subsys s, std::string_view msg) {
  init();
  const char* lvl = level == LogLevel::kWarn ? "WARN" : level == LogLevel::kInfo ? "INFO" : "TRACE";
  if (gStyle.load(std::memory_order_relaxed) == static_cast<int>(LineStyle::kNccl)) {
    gLogger->info("{}:{}:{} [{}] NCCL {} {}", gHost, getpid(), syscall(SYS_gettid), gRank.load(),
                  lvl, msg);
    return;
  }
  gLogger->info("{}:{}:{} [{}] tutti {} {}", gHost, getpid(), gRank.load(), subsysName(s), lvl,
                msg);
}

void setRank(int rank) { gRank = rank; }
void setLineStyle(LineStyle style) { gStyle = static_cast<int>(style); }
bool versionRequested() {
  init();
  return gVersionRequested;
}
void writeBanner(std::string_view msg) {
  init();
  if (gStyle.load(std::memory_order_relaxed) == static_cast<int>(LineStyle::kNccl))
    gLogger->info("{}:{}:{} [{}] NCCL INFO {}", gHost, getpid(), syscall(SYS_gettid),
                  std::max(gRank.load(), 0), msg);
  else
    gLogger->info("{}:{}:{} [INIT] tutti INFO {}", gHost, getpid(), gRank.load(), msg);
}
void setLevel(LogLevel level) {
  gLevelForced = true;
  gLevel = static_cast<int>(level);
}
const std::string& lastError() { return tLastError; }
void setLastError(std::string msg) { tLastError = std::move(msg); }

}  // namespace tutti::log
