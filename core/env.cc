// File: core/env.cc
// Typed environment parameters and their registry.
#include "core/env.h"

#include <cstdlib>
#include <mutex>

#include "core/log.h"

namespace tutti::env {

std::optional<std::string> get(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (!n) continue;
    if (const char* v = std::getenv(n)) return std::string(v);
  }
  return std::nullopt;
}

namespace {
std::vector<ParamInfo>& mutableRegistry() {
  static std::vector<ParamInfo> r;
  return r;
}
std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}
void addParam(ParamInfo info) {
  std::lock_guard<std::mutex> lock(registryMutex());
  mutableRegistry().push_back(std::move(info));
}
}  // namespace

const std::vector<ParamInfo>& registry() { return mutableRegistry(); }

std::optional<int64_t> parseInt(std::string_view text) {
  std::string t(text);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\n')) t.pop_back();
  if (t.empty()) return std::nullopt;
  int64_t mult = 1;
  char last = t.back();
  if (last == 'K' || last == 'k') mult = int64_t(1) << 10;
  if (last == 'M' || last == 'm') mult = int64_t(1) << 20;
  if (last == 'G' || last == 'g') mult = int64_t(1) << 30;
  if (mult != 1) t.pop_back();
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(t.c_str(), &end, 0);
  if (errno != 0 || end == t.c_str() || *end != '\0') return std::nullopt;
  return static_cast<int64_t>(v) * mult;
}

IntParam::IntParam(const char* name, const char* alias, const char* group, int64_t def,
                   const char* help)
    : name_(name), alias_(alias), def_(def) {
  addParam({name, alias, group, std::to_string(def), help});
}

void IntParam::load() const {
  int64_t result = def_;
  if (auto raw = env::get({name_, alias_})) {
    if (auto v = parseInt(*raw)) result = *v;
    else
      TUTTI_LOG_WARN(Subsys::kEnv, "env: {} is not an integer (value='{}'); using default {}",
                     name_, *raw, def_);
  }
  value_.store(result, std::memory_order_relaxed);
  have_.store(true, std::memory_order_release);
}

DoubleParam::DoubleParam(const char* name, const char* alias, const char* group, double def,
                         const char* help)
    : name_(name), alias_(alias), def_(def) {
  addParam({name, alias, group, std::to_string(def), help});
}

void DoubleParam::load() const {
  double result = def_;
  if (auto raw = env::get({name_, alias_})) {
    char* end = nullptr;
    double v = std::strtod(raw->c_str(), &end);
    if (end == raw->c_str() || *end != '\0')
      TUTTI_LOG_WARN(Subsys::kEnv, "env: {} is not a number (value='{}'); using default {}",
                     name_, *raw, def_);
    else
      result = v;
  }
  value_.store(result, std::memory_order_relaxed);
  have_.store(true, std::memory_order_release);
}

StringParam::StringParam(const char* name, const char* alias, const char* group, const char* def,
                         const char* help)
    : name_(name), alias_(alias), def_(def) {
  addParam({name, alias, group, def ? def : "", help});
}

std::string StringParam::get() const {
  auto raw = env::get({name_, alias_});
  return raw ? *raw : std::string(def_ ? def_ : "");
}

}  // namespace tutti::env
