// File: base/status.h
// Internal helpers around tutti::Status: formatting constructors, TUTTI_TRY trails and
// TUTTI_ASSERT. The public types live in <tutti/status.hpp>.
#pragma once

#include <fmt/format.h>

#include <tutti/status.hpp>

namespace tutti {

template <typename... Args>
Status makeStatus(Code code, fmt::format_string<Args...> f, Args&&... args) {
  return Status(code, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status invalidArgument(fmt::format_string<Args...> f, Args&&... args) {
  return makeStatus(Code::kInvalidArgument, f, std::forward<Args>(args)...);
}
template <typename... Args>
Status invalidUsage(fmt::format_string<Args...> f, Args&&... args) {
  return makeStatus(Code::kInvalidUsage, f, std::forward<Args>(args)...);
}
template <typename... Args>
Status systemError(fmt::format_string<Args...> f, Args&&... args) {
  return makeStatus(Code::kSystemError, f, std::forward<Args>(args)...);
}
template <typename... Args>
Status internalError(fmt::format_string<Args...> f, Args&&... args) {
  return makeStatus(Code::kInternalError, f, std::forward<Args>(args)...);
}
template <typename... Args>
Status remoteError(fmt::format_string<Args...> f, Args&&... args) {
  return makeStatus(Code::kRemoteError, f, std::forward<Args>(args)...);
}
template <typename... Args>
Status timeoutError(fmt::format_string<Args...> f, Args&&... args) {
  return makeStatus(Code::kTimeout, f, std::forward<Args>(args)...);
}

/// strerror_r as a std::string.
std::string errnoString(int err);

namespace detail {
const char* baseName(const char* path);
[[noreturn]] void assertFail(const char* file, int line, const char* cond, const std::string& msg);
}  // namespace detail

}  // namespace tutti

#define TUTTI_STATUS_CONCAT_(a, b) a##b
#define TUTTI_STATUS_CONCAT(a, b) TUTTI_STATUS_CONCAT_(a, b)

/// Returns early with the Status of `expr` if it is not ok, appending " [at file.cc:123]".
#define TUTTI_TRY(expr)                                                                  \
  do {                                                                                   \
    ::tutti::Status tutti_try_status_ = (expr);                                          \
    if (!tutti_try_status_.isOk()) {                                                     \
      tutti_try_status_.append(                                                          \
          ::fmt::format(" [at {}:{}]", ::tutti::detail::baseName(__FILE__), __LINE__));  \
      return tutti_try_status_;                                                          \
    }                                                                                    \
  } while (0)

/// `TUTTI_TRY_ASSIGN(auto x, makeX());` declares x from a Result<T> or returns its error.
#define TUTTI_TRY_ASSIGN(decl, expr) \
  TUTTI_TRY_ASSIGN_IMPL_(TUTTI_STATUS_CONCAT(tutti_result_, __LINE__), decl, expr)
#define TUTTI_TRY_ASSIGN_IMPL_(tmp, decl, expr)                                        \
  auto tmp = (expr);                                                                   \
  if (!tmp.isOk()) {                                                                   \
    ::tutti::Status s_ = tmp.status();                                                 \
    s_.append(::fmt::format(" [at {}:{}]", ::tutti::detail::baseName(__FILE__), __LINE__)); \
    return s_;                                                                         \
  }                                                                                    \
  decl = std::move(tmp).value()

/// Internal invariant (never user input): logs and aborts when false.
#define TUTTI_ASSERT(cond, ...)                                                             \
  do {                                                                                      \
    if (!(cond)) ::tutti::detail::assertFail(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
  } while (0)
