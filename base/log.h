// File: base/log.h
// Leveled, subsystem-masked logging (TUTTI_DEBUG, TUTTI_DEBUG_SUBSYS, TUTTI_DEBUG_FILE; NCCL_DEBUG
// and NCCL_DEBUG_SUBSYS honoured). Level and subsystem are checked before any formatting. Only
// base/log.cc includes spdlog. The last WARN of each thread is kept for getLastError().
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <string>
#include <string_view>

namespace tutti {

enum class LogLevel : int { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

/// Subsystems, one bit each; names as NCCL's where they exist.
enum class Subsys : unsigned {
  kInit = 1u << 0,
  kColl = 1u << 1,
  kNet = 1u << 2,
  kShm = 1u << 3,
  kBootstrap = 1u << 4,
  kAlgo = 1u << 5,
  kTuning = 1u << 6,
  kTopo = 1u << 7,
  kKernel = 1u << 8,
  kEnv = 1u << 9,
};

namespace log {
/// Current level and subsystem mask (read once from the environment at first use).
extern std::atomic<int> gLevel;
extern std::atomic<unsigned> gMask;
void init();  // idempotent; called by the first log macro and by every init path
inline bool enabled(LogLevel level, Subsys s) {
  return static_cast<int>(level) <= gLevel.load(std::memory_order_relaxed) &&
         (gMask.load(std::memory_order_relaxed) & static_cast<unsigned>(s)) != 0;
}
void write(LogLevel level, Subsys s, std::string_view msg);
/// Sets the rank shown in the line prefix ("host:pid:rank [SUBSYS]") for this process.
void setRank(int rank);
/// Line format: tutti's ("host:pid:rank [SUBSYS] tutti INFO msg") or NCCL's ("host:pid:tid [rank]
/// NCCL INFO msg", what scripts that grep NCCL logs expect). libnccl.so.2 selects kNccl.
enum class LineStyle : int { kTutti = 0, kNccl = 1 };
void setLineStyle(LineStyle style);
/// True when TUTTI_DEBUG / NCCL_DEBUG is set to VERSION or to any level that prints (the version
/// banner is then due).
bool versionRequested();
/// Writes `msg` as one INFO line whatever the level and subsystem mask (the version banner).
void writeBanner(std::string_view msg);
/// Forces the level (tests); the environment is not read afterwards.
void setLevel(LogLevel level);
/// The calling thread's last WARN message ("" when none).
const std::string& lastError();
void setLastError(std::string msg);
}  // namespace log

}  // namespace tutti

#define TUTTI_LOG_AT_(lvl, subsys, ...)                                         \
  do {                                                                         \
    if (::tutti::log::enabled(lvl, subsys))                                    \
      ::tutti::log::write(lvl, subsys, ::fmt::format(__VA_ARGS__));            \
  } while (0)
/// WARN is always formatted (it becomes the thread's last error) and printed when enabled.
#define TUTTI_LOG_WARN(subsys, ...)                                            \
  do {                                                                         \
    std::string tutti_warn_ = ::fmt::format(__VA_ARGS__);                      \
    if (::tutti::log::enabled(::tutti::LogLevel::kWarn, subsys))               \
      ::tutti::log::write(::tutti::LogLevel::kWarn, subsys, tutti_warn_);      \
    ::tutti::log::setLastError(std::move(tutti_warn_));                        \
  } while (0)
#define TUTTI_LOG_INFO(subsys, ...) TUTTI_LOG_AT_(::tutti::LogLevel::kInfo, subsys, __VA_ARGS__)
#define TUTTI_LOG_TRACE(subsys, ...) TUTTI_LOG_AT_(::tutti::LogLevel::kTrace, subsys, __VA_ARGS__)
