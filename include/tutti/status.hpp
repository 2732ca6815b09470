// File: include/tutti/status.hpp
// Status and Result<T>: how every tutti function reports failure. Codes mirror ncclResult_t so
// that NCCL-literate users and the NCCL shim map them 1:1. No exceptions cross this API.
// Self-contained: needs only the standard library.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#if defined(__GNUC__)
#define TUTTI_API [[gnu::visibility("default")]]
#else
#define TUTTI_API
#endif

namespace tutti {

/// Error codes. The numeric values equal ncclResult_t's (ncclSuccess = 0 ... ncclInProgress = 7);
/// kTimeout (8) is tutti's own (tuttiTimeout in the C API); NCCL has no such code.
enum class Code : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,       ///< an OS call failed (socket, shm, fork, out of memory)
  kInternalError = 3,     ///< a tutti bug: an invariant did not hold
  kInvalidArgument = 4,   ///< a bad argument value (null buffer, bad dtype, out-of-range rank)
  kInvalidUsage = 5,      ///< a call that is wrong in this state (use after destroy, mismatch)
  kRemoteError = 6,       ///< a peer failed, closed its connection or died
  kInProgress = 7,        ///< a non-blocking operation has not finished yet
  kTimeout = 8,           ///< a wait ran past its timeout (bootstrap or collective)
};

/// Name of a code ("InvalidArgument"). Thread-safe.
TUTTI_API std::string_view codeName(Code code) noexcept;

/// A code plus a human-readable message of the form "<api>: <what> (<key>=<value>...)". Cheap when
/// ok (no allocation). Thread-compatible: a Status is a value; copy it freely.
class [[nodiscard]] TUTTI_API Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }

  bool isOk() const { return code_ == Code::kSuccess; }
  explicit operator bool() const { return isOk(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "InvalidArgument: <message>", or "Success".
  std::string toString() const;

  /// Appends context to the message (used by TUTTI_TRY to leave a trail of file:line).
  Status& append(std::string_view more) {
    message_.append(more);
    return *this;
  }

 private:
  Code code_ = Code::kSuccess;
  std::string message_;
};

/// A value or a non-ok Status (std::expected is C++23; we target C++20).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}           // NOLINT(implicit)
  Result(Status status) : v_(std::move(status)) {}    // NOLINT(implicit); must not be ok

  bool isOk() const { return v_.index() == 0; }
  explicit operator bool() const { return isOk(); }
  /// The error; Status::ok() when a value is held.
  Status status() const { return isOk() ? Status() : std::get<1>(v_); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tutti
