// File: core/trace.cc
// The process-wide trace file (see trace.h). One mutex guards the file; events are written as
// they happen (buffered stdio), so a crashed process leaves every event but the closing bracket.
#include "core/trace.h"

#include <unistd.h>

#include <cstdio>
#include <mutex>

#include <nlohmann/json.hpp>

#include "base/env.h"
#include "base/log.h"

namespace tutti::trace {

namespace {

TUTTI_PARAM_STRING(kTrace, "TUTTI_TRACE", nullptr, "CORE", "",
                   "write Chrome-trace/Perfetto events to this file (%r rank, %p pid, %h host)");

struct File {
  std::mutex mu;
  FILE* f = nullptr;
  int users = 0;
  int nextTrack = 0;
  bool first = true;
  std::string path;
};
File& file() {
  static File* f = new File();  // never destroyed: communicators may outlive static destructors
  return *f;
}

int64_t micros(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

void emit(File& tf, const nlohmann::json& ev) {
  std::string text = ev.dump();
  std::fputs(tf.first ? "\n" : ",\n", tf.f);
  std::fputs(text.c_str(), tf.f);
  tf.first = false;
}

}  // namespace

std::string expandPath(const std::string& pattern, int rank, int nranks, const std::string& host) {
  if (pattern.find('%') == std::string::npos) {
    if (nranks <= 1) return pattern;
    const size_t slash = pattern.rfind('/');
    const size_t dot = pattern.rfind('.');
    const bool hasExt = dot != std::string::npos && (slash == std::string::npos || dot > slash);
    return hasExt ? fmt::format("{}.{}{}", pattern.substr(0, dot), rank, pattern.substr(dot))
                  : fmt::format("{}.{}", pattern, rank);
  }
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char c = pattern[++i];
    if (c == 'r') out += std::to_string(rank);
    else if (c == 'p') out += std::to_string(getpid());
    else if (c == 'h') out += host;
    else out += std::string("%") + c;
  }
  return out;
}

int attach(int rank, int nranks, const std::string& host) {
  const std::string pattern = kTrace.get();
  if (pattern.empty()) return -1;
  File& tf = file();
  std::lock_guard<std::mutex> lock(tf.mu);
  if (!tf.f) {
    tf.path = expandPath(pattern, rank, nranks, host);
    tf.f = std::fopen(tf.path.c_str(), "w");
    if (!tf.f) {
      TUTTI_LOG_WARN(Subsys::kInit, "TUTTI_TRACE: cannot write {}: {}", tf.path,
                     errnoString(errno));
      return -1;
    }
    tf.first = true;
    std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", tf.f);
    emit(tf, {{"name", "process_name"}, {"ph", "M"}, {"pid", getpid()},
              {"args", {{"name", fmt::format("tutti rank {} ({})", rank, host)}}}});
    TUTTI_LOG_INFO(Subsys::kInit, "TUTTI_TRACE: writing {}", tf.path);
  }
  const int track = tf.nextTrack++;
  ++tf.users;
  emit(tf, {{"name", "thread_name"}, {"ph", "M"}, {"pid", getpid()}, {"tid", track},
            {"args", {{"name", fmt::format("communicator {} (rank {}/{})", track, rank, nranks)}}}});
  return track;
}

void detach(int track) {
  if (track < 0) return;
  File& tf = file();
  std::lock_guard<std::mutex> lock(tf.mu);
  if (!tf.f) return;
  if (--tf.users > 0) {
    std::fflush(tf.f);
    return;
  }
  std::fputs("\n]}\n", tf.f);
  std::fclose(tf.f);
  tf.f = nullptr;
}

void complete(int track, const char* category, const std::string& name, TimePoint start,
              TimePoint end, const Args& args) {
  if (track < 0) return;
  nlohmann::json ev = {{"name", name},
                       {"cat", category},
                       {"ph", "X"},
                       {"ts", micros(start)},
                       {"dur", std::max<int64_t>(micros(end) - micros(start), 0)},
                       {"pid", getpid()},
                       {"tid", track}};
  nlohmann::json a = nlohmann::json::object();
  for (const auto& [k, v] : args.ints) a[k] = v;
  for (const auto& [k, v] : args.texts) a[k] = v;
  ev["args"] = std::move(a);
  File& tf = file();
  std::lock_guard<std::mutex> lock(tf.mu);
  if (tf.f) emit(tf, ev);
}

}  // namespace tutti::trace
