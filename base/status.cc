// File: base/status.cc
// Status names and formatting, errno text, and the invariant-failure path.
#include "base/status.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/log.h"

namespace tutti {

std::string_view codeName(Code code) noexcept {
  switch (code) {
    case Code::kSuccess: return "Success";
    case Code::kUnhandledCudaError: return "UnhandledCudaError";
    case Code::kSystemError: return "SystemError";
    case Code::kInternalError: return "InternalError";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kInvalidUsage: return "InvalidUsage";
    case Code::kRemoteError: return "RemoteError";
    case Code::kInProgress: return "InProgress";
    case Code::kTimeout: return "Timeout";
  }
  return "UnknownCode";
}

std::string Status::toString() const {
  if (isOk()) return "Success";
  std::string s(codeName(code_));
  s += ": ";
  s += message_;
  return s;
}

std::string errnoString(int err) {
  char buf[256];
  // GNU strerror_r returns a char* that may or may not point into buf.
  const char* s = strerror_r(err, buf, sizeof buf);
  return fmt::format("{} (errno {})", s, err);
}

namespace detail {
const char* baseName(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}
void assertFail(const char* file, int line, const char* cond, const std::string& msg) {
  std::string text = fmt::format("internal error: assertion '{}' failed at {}:{}: {}", cond,
                                 baseName(file), line, msg);
  TUTTI_LOG_WARN(Subsys::kInit, "{}", text);
  std::fprintf(stderr, "tutti: %s\n", text.c_str());
  std::abort();
}
}  // namespace detail

}  // namespace tutti
