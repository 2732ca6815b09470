// File: nccl/common.cc
// Shared helpers of the NCCL layer: result codes and last-error text, handle checks, host/device
// memory detection through the static CUDA runtime, configuration parsing, the worker thread.
#include <cstring>
#include <deque>

#include "base/config.h"
#include "base/env.h"
#include "base/log.h"
#include "nccl/internal.h"

#if TUTTI_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tutti::nccl {

namespace {
thread_local std::string tLastError;
std::mutex gLastMu;
std::string gLastError;  // the most recent error of any thread
}  // namespace

ncclResult_t toResult(Code code) {
  switch (code) {
    case Code::kSuccess:
      return ncclSuccess;
    case Code::kUnhandledCudaError:
      return ncclUnhandledCudaError;
    case Code::kSystemError:
      return ncclSystemError;
    case Code::kInternalError:
      return ncclInternalError;
    case Code::kInvalidArgument:
      return ncclInvalidArgument;
    case Code::kInvalidUsage:
      return ncclInvalidUsage;
    case Code::kRemoteError:
      return ncclRemoteError;
    case Code::kInProgress:
      return ncclInProgress;
    case Code::kTimeout:
      // ncclTimeout exists from NCCL 2.29 on; callers built against older headers (PyTorch
      // 2.11's 2.28) would not know it, and for them a timed-out peer is a remote error.
      return ncclRemoteError;
  }
  return ncclInternalError;
}

ncclResult_t fail(const Status& s, CommState* comm) {
  if (s.isOk()) return ncclSuccess;
  if (s.code() == Code::kInProgress) return ncclInProgress;
  TUTTI_LOG_WARN(Subsys::kColl, "{}", s.message());
  tLastError = s.message();
  {
    std::lock_guard<std::mutex> lock(gLastMu);
    gLastError = s.message();
  }
  if (comm) {
    std::lock_guard<std::mutex> lock(comm->mu);
    comm->lastError = s.message();
  }
  return toResult(s.code());
}

const std::string& threadLastError() {
  if (!tLastError.empty()) return tLastError;
  std::lock_guard<std::mutex> lock(gLastMu);
  tLastError = gLastError;  // a copy this thread owns: stays valid until its next error
  return tLastError;
}

Result<CommState*> checkComm(ncclComm_t comm, const char* api) {
  if (!comm) return invalidArgument("{}: comm is NULL", api);
  if (comm->magic != kCommMagic || !comm->state)
    return invalidArgument(
        "{}: comm {} is not a live communicator (destroyed, or not returned "
        "by ncclCommInit*)",
        api, static_cast<const void*>(comm));
  return comm->state.get();
}

void retireHandle(ncclComm_t comm) {
  // Never destroyed: the handles stay reachable until the process ends (a FIFO destroyed at exit
  // would drop up to kRetiredHandles of them, and a comm destroyed by a thread still running
  // then would use a destroyed mutex).
  static auto* mu = new std::mutex;
  static auto* retired = new std::deque<ncclComm_t>;
  comm->magic = 0;
  comm->state.reset();  // the communicator itself is destroyed here
  std::lock_guard<std::mutex> lock(*mu);
  retired->push_back(comm);
  if (retired->size() > kRetiredHandles) {
    delete retired->front();
    retired->pop_front();
  }
}

Status checkUsable(CommState& s, const char* api) {
  if (s.aborted.load()) return invalidUsage("{}: the communicator was aborted", api);
  if (s.revoked.load()) return invalidUsage("{}: the communicator was revoked", api);
  if (s.suspended.load())
    return invalidUsage("{}: the communicator is suspended (call ncclCommResume first)", api);
  return Status::ok();
}

void initLogging() {
  static std::once_flag once;
  std::call_once(once, [] {
    log::init();
    log::setLineStyle(log::LineStyle::kNccl);
    // As NCCL: silent unless NCCL_DEBUG (or TUTTI_DEBUG) asks for output.
    if (!env::get({"NCCL_DEBUG", "TUTTI_DEBUG"})) log::setLevel(LogLevel::kNone);
    if (!log::versionRequested()) return;
#if TUTTI_HAVE_CUDA
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    const std::string cuda = fmt::format("cuda{}.{}", rt / 1000, rt % 1000 / 10);
#else
    const std::string cuda = "nocuda";
#endif
    log::writeBanner(
        fmt::format("NCCL version {}.{}.{}+{} (tutti {} emulating NCCL {}.{}.{}; "
                    "host memory)",
                    NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, cuda, versionString(), NCCL_MAJOR,
                    NCCL_MINOR, NCCL_PATCH));
  });
}

Result<Config> readConfig(const ncclConfig_t* in, const char* api) {
  Config c;
  ncclConfig_t v = NCCL_CONFIG_INITIALIZER;
  if (in) {
    if (in->magic != NCCL_API_MAGIC)
      return invalidArgument(
          "{}: ncclConfig_t argument not initialized via "
          "NCCL_CONFIG_INITIALIZER (magic={:#x})",
          api, in->magic);
    const size_t minSize = offsetof(ncclConfig_t, blocking) + sizeof(int);
    if (in->size < minSize)
      return invalidArgument("{}: ncclConfig_t size {} is smaller than any NCCL version's", api,
                             in->size);
    // Fields beyond the caller's struct keep their defaults; fields beyond ours are ignored.
    std::memcpy(&v, in, std::min(in->size, sizeof v));
  }
  if (v.blocking == NCCL_CONFIG_UNDEF_INT) {
    auto e = env::get({"NCCL_COMM_BLOCKING"});
    auto n = e ? env::parseInt(*e) : std::nullopt;
    v.blocking = n ? static_cast<int>(*n) : 1;
  }
  if (v.blocking != 0 && v.blocking != 1)
    return invalidArgument("{}: config blocking must be 0 or 1 (blocking={})", api, v.blocking);
  c.blocking = v.blocking == 1;
  c.splitShare = v.splitShare == NCCL_CONFIG_UNDEF_INT ? 0 : v.splitShare;
  c.shrinkShare = v.shrinkShare == NCCL_CONFIG_UNDEF_INT ? 0 : v.shrinkShare;
  if (v.commName) c.commName = v.commName;
  return c;
}

// ---- CommState ----

void CommState::recordAsync(const Status& s) {
  if (s.isOk() || s.code() == Code::kInProgress) return;
  if (ready.load()) {  // `comm` no longer changes
    recordAsyncError(comm, s);
    return;
  }
  std::lock_guard<std::mutex> lock(mu);
  if (initError.isOk()) initError = s;
}

Status CommState::asyncError() const {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!initError.isOk()) return initError;
  }
  if (ready.load() && comm.valid()) return comm.asyncError();
  return Status::ok();
}

// ---- Worker ----

}  // namespace tutti::nccl
