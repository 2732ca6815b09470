// File: base/env.cc
// Typed environment parameters and their registry.
#include "base/env.h"

#include <cstdlib>
#include <mutex>

#include "base/log.h"

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

namespace {
std::optional<double> parseDouble(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0') return std::nullopt;
  return v;
}
}  // namespace

template <typename T>
NumericParam<T>::NumericParam(const char* name, const char* alias, const char* group, T def,
                              const char* help)
    : name_(name), alias_(alias), def_(def) {
  addParam({name, alias, group, fmt::format("{}", def), help});
}

template <typename T>
void NumericParam<T>::load() const {
  T result = def_;
  if (auto raw = env::get({name_, alias_})) {
    std::optional<T> v;
    if constexpr (std::is_integral_v<T>) v = parseInt(*raw);
    else v = parseDouble(*raw);
    if (v)
      result = *v;
    else
      TUTTI_LOG_WARN(Subsys::kEnv, "env: {} is not a number (value='{}'); using default {}",
                     name_, *raw, def_);
  }
  value_.store(result, std::memory_order_relaxed);
  have_.store(true, std::memory_order_release);
}

template class NumericParam<int64_t>;
template class NumericParam<double>;

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
