// File: base/env.h
// Typed environment parameters. Every knob is declared once with TUTTI_PARAM into a registry
// (name, default, help) that tools can print. A TUTTI_X knob also reads NCCL_X when given an alias.
// A value that does not parse is reported with a WARN naming the variable and value, and the
// default is used.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tutti::env {

/// Raw lookup: the first of `names` that is set (empty string counts as set).
std::optional<std::string> get(std::initializer_list<const char*> names);

struct ParamInfo {
  const char* name;      // "TUTTI_TIMEOUT"
  const char* alias;     // "NCCL_..." or nullptr
  const char* group;     // "CORE", "NET", ...
  std::string defaultText;
  const char* help;
};
/// Every declared parameter (declaration order across translation units is unspecified).
const std::vector<ParamInfo>& registry();

/// A numeric parameter (int64_t or double): read from the environment on the first get() and
/// cached, so get() is cheap enough for hot paths. Thread-safe: a race reads the environment
/// twice and stores the same value.
template <typename T>
class NumericParam {
 public:
  NumericParam(const char* name, const char* alias, const char* group, T def, const char* help);
  T get() const {
    if (!have_.load(std::memory_order_acquire)) load();
    return value_.load(std::memory_order_relaxed);
  }

 private:
  void load() const;
  const char* name_;
  const char* alias_;
  T def_;
  mutable std::atomic<T> value_{};
  mutable std::atomic<bool> have_{false};
};
using IntParam = NumericParam<int64_t>;
using DoubleParam = NumericParam<double>;

class StringParam {
 public:
  StringParam(const char* name, const char* alias, const char* group, const char* def,
              const char* help);
  std::string get() const;  // re-reads the environment each call (cheap; not on hot paths)
 private:
  const char* name_;
  const char* alias_;
  const char* def_;
};

/// Parses "123", "0x10", and sizes with K/M/G suffixes (powers of 1024). nullopt if malformed.
std::optional<int64_t> parseInt(std::string_view text);

}  // namespace tutti::env

/// Declares a parameter object `kName` in the current namespace, e.g.
///   TUTTI_PARAM_INT(kTimeoutSec, "TUTTI_TIMEOUT", nullptr, "CORE", 0, "collective timeout (s)");
#define TUTTI_PARAM_INT(var, name, alias, group, def, help) \
  static const ::tutti::env::IntParam var(name, alias, group, def, help)
#define TUTTI_PARAM_DOUBLE(var, name, alias, group, def, help) \
  static const ::tutti::env::DoubleParam var(name, alias, group, def, help)
#define TUTTI_PARAM_STRING(var, name, alias, group, def, help) \
  static const ::tutti::env::StringParam var(name, alias, group, def, help)
