// File: nccl/api_ext.cc
// The host side of NCCL's device API (2.28 ... 2.32) and the later additions (2.29 ... 2.32:
// grow, suspend/resume, memory statistics, one-sided signals, encryption, parameters). The
// device API needs kernels over symmetric device memory, which tutti does not have: those calls
// return ncclInvalidUsage with a "<function>: not supported by tutti: ..." message. Team queries
// (rank arithmetic over tutti's model: a rank's load/store-accessible team is itself),
// suspend/resume, memory statistics, encryption mode NONE and the parameter API work. The window
// pointer queries live in api_coll.cc, beside the windows.
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <tutti/nccl_device_host.h>

#include "base/env.h"
#include "base/log.h"
#include "nccl/internal.h"

extern char** environ;

using namespace tutti;
using namespace tutti::nccl;

namespace {

ncclResult_t notImplemented(const char* api, const char* what) {
  return fail(invalidUsage("{}: not supported by tutti {}: {}", api, versionString(), what));
}

constexpr const char* kDeviceApi =
    "the NCCL device API (kernels over symmetric device memory) is not implemented";
constexpr const char* kMultimem = "multicast (NVLink SHARP) memory is not implemented";
constexpr const char* kCft = "copy-engine forwarding (CFT) is not implemented";
constexpr const char* kGin = "GPU-initiated networking (GIN) is not implemented";
constexpr const char* kOneSided = "one-sided operations on windows are not implemented";
constexpr ncclTeam_t kSelfTeam{1, 0, 1};  // a team of this rank alone

// ncclParamHandle_t points at one of these; they live for the process.
struct ParamHandle {
  std::string key;  // without the NCCL_ prefix
};
std::mutex gParamMu;
std::vector<std::unique_ptr<ParamHandle>> gParams;

Result<std::string> paramValue(const ParamHandle* h, const char* api) {
  if (!h) return invalidArgument("{}: handle is NULL", api);
  auto v = env::get({("NCCL_" + h->key).c_str()});
  if (!v) return invalidArgument("{}: NCCL_{} is not set", api, h->key);
  return *v;
}

template <typename T>
ncclResult_t getInt(ncclParamHandle_t h, T* out, const char* api) {
  if (!out) return fail(invalidArgument("{}: out is NULL", api));
  auto v = paramValue(reinterpret_cast<const ParamHandle*>(h), api);
  if (!v.isOk()) return fail(v.status());
  auto n = env::parseInt(v.value());
  if (!n || *n < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      (*n > 0 && static_cast<uint64_t>(*n) > static_cast<uint64_t>(std::numeric_limits<T>::max())))
    return fail(invalidArgument("{}: value '{}' does not fit", api, v.value()));
  *out = static_cast<T>(*n);
  return ncclSuccess;
}

std::vector<std::string> ncclEnvKeys() {
  std::vector<std::string> keys;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("NCCL_", 0) != 0) continue;
    keys.push_back(kv.substr(5, kv.find('=') - 5));
  }
  return keys;
}

}  // namespace

// ---- device API, host side ----

NCCL_API(ncclResult_t, ncclCommQueryProperties, ncclComm_t comm, ncclCommProperties_t*) {
  (void)comm;
  return notImplemented("ncclCommQueryProperties", kDeviceApi);
}

NCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const ncclDevCommRequirements_t*,
         ncclDevComm_t*) {
  (void)comm;
  return notImplemented("ncclDevCommCreate", kDeviceApi);
}
NCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const ncclDevComm_t*) {
  (void)comm;
  return notImplemented("ncclDevCommDestroy", kDeviceApi);
}
NCCL_API(ncclTeam_t, ncclTeamWorld, ncclComm_t comm) {
  auto s = checkComm(comm, "ncclTeamWorld");
  if (!s.isOk()) return ncclTeam_t{0, 0, 1};
  return ncclTeam_t{s.value()->nranks, s.value()->rank, 1};
}
NCCL_API(ncclTeam_t, ncclTeamLsa, ncclComm_t comm) {
  (void)comm;
  return kSelfTeam;
}
NCCL_API(ncclTeam_t, ncclTeamRail, ncclComm_t comm) {
  auto s = checkComm(comm, "ncclTeamRail");
  if (!s.isOk()) return ncclTeam_t{0, 0, 1};
  return ncclTeam_t{s.value()->nranks, s.value()->rank, 1};
}
NCCL_API(ncclTeam_t, ncclTeamCft, ncclComm_t comm, ncclCftTeamMode_t mode) {
  (void)comm;
  switch (mode) {
    case NCCL_CFT_TEAM_FLAT:
    case NCCL_CFT_TEAM_HIER_MULTIMEM:
    case NCCL_CFT_TEAM_HIER_LSA:
      return kSelfTeam;  // no CFT: every grouping of "this rank alone" is itself
  }
  return ncclTeam_t{0, 0, 0};
}
NCCL_API(ncclTeam_t, ncclTeamCftMultimem, ncclComm_t comm) {
  (void)comm;
  return kSelfTeam;
}
NCCL_API(int, ncclTeamRankToWorld, ncclComm_t comm, ncclTeam_t team, int rank) {
  auto s = checkComm(comm, "ncclTeamRankToWorld");
  if (!s.isOk()) return -1;
  return s.value()->rank + (rank - team.rank) * team.stride;
}
NCCL_API(int, ncclTeamRankToLsa, ncclComm_t comm, ncclTeam_t team, int rank) {
  auto s = checkComm(comm, "ncclTeamRankToLsa");
  if (!s.isOk()) return -1;
  return rank == team.rank ? 0 : -1;  // only this rank is load/store accessible
}
NCCL_API(ncclResult_t, ncclLsaBarrierCreateRequirement, ncclTeam_t, int, ncclLsaBarrierHandle_t*,
         ncclDevResourceRequirements_t*) {
  return notImplemented("ncclLsaBarrierCreateRequirement", kDeviceApi);
}
NCCL_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t, ncclTeam_t, int,
         ncclGinBarrierHandle_t*, ncclDevResourceRequirements_t*) {
  return notImplemented("ncclGinBarrierCreateRequirement", kGin);
}
NCCL_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize) {
  if (maxElts <= 0 || maxEltSize <= 0) return 0;
  return maxElts * ((maxEltSize + 7) / 8);
}
NCCL_API(ncclResult_t, ncclLLA2ACreateRequirement, int, int, ncclLLA2AHandle_t*,
         ncclDevResourceRequirements_t*) {
  return notImplemented("ncclLLA2ACreateRequirement", kDeviceApi);
}
NCCL_API(ncclResult_t, ncclGinOutboxCreateRequirement, int, int, struct ncclGinOutboxHandle*,
         ncclDevResourceRequirements_t*) {
  return notImplemented("ncclGinOutboxCreateRequirement", kGin);
}
NCCL_API(ncclResult_t, ncclGinInboxA2ACreateRequirement, ncclTeam_t, int, int,
         struct ncclGinInboxA2AHandle*, ncclDevResourceRequirements_t*) {
  return notImplemented("ncclGinInboxA2ACreateRequirement", kGin);
}
// The window's own pointer (ncclGetLsaDevicePointer, ncclGetPeerDevicePointer) is in api_coll.cc;
// multicast and CFT addresses do not exist in tutti.
NCCL_API(ncclResult_t, ncclGetLsaMultimemDevicePointer, ncclWindow_t, size_t, void**) {
  return notImplemented("ncclGetLsaMultimemDevicePointer", kMultimem);
}
NCCL_API(ncclResult_t, ncclGetMultimemDevicePointer, ncclWindow_t, size_t, ncclMultimemHandle_t,
         void**) {
  return notImplemented("ncclGetMultimemDevicePointer", kMultimem);
}
NCCL_API(ncclResult_t, ncclGetMultimemDeviceLeInfo, ncclWindow_t, size_t, ncclCftLeId*, size_t*) {
  return notImplemented("ncclGetMultimemDeviceLeInfo", kCft);
}
NCCL_API(ncclResult_t, ncclGetCftDeviceLeInfo, ncclWindow_t, size_t, int, ncclTeam_t, ncclCftLeId*,
         size_t*) {
  return notImplemented("ncclGetCftDeviceLeInfo", kCft);
}
NCCL_API(ncclResult_t, ncclGetPeerDeviceLeInfo, ncclWindow_t, size_t, int, ncclCftLeId*, size_t*) {
  return notImplemented("ncclGetPeerDeviceLeInfo", kCft);
}

// ---- 2.29 ... 2.32 ----

NCCL_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId* uniqueId) {
  (void)comm;
  (void)uniqueId;
  return notImplemented("ncclCommGetUniqueId", "growing a communicator is not implemented");
}
NCCL_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId,
         int rank, ncclComm_t* newcomm, ncclConfig_t* config) {
  (void)comm, (void)nRanks, (void)uniqueId, (void)rank, (void)config;
  if (newcomm) *newcomm = nullptr;
  return notImplemented("ncclCommGrow", "growing a communicator is not implemented");
}
NCCL_API(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags) {
  auto s = checkComm(comm, "ncclCommSuspend");
  if (!s.isOk()) return fail(s.status());
  if (flags & ~NCCL_SUSPEND_MEM)
    return fail(invalidArgument("ncclCommSuspend: unknown flags {:#x}", flags), s.value());
  s.value()->worker->drain();
  s.value()->suspended.store(true);
  return ncclSuccess;
}
NCCL_API(ncclResult_t, ncclCommResume, ncclComm_t comm) {
  auto s = checkComm(comm, "ncclCommResume");
  if (!s.isOk()) return fail(s.status());
  s.value()->suspended.store(false);
  return ncclSuccess;
}
NCCL_API(ncclResult_t, ncclCommMemStats, ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  auto s = checkComm(comm, "ncclCommMemStats");
  if (!s.isOk()) return fail(s.status());
  if (!value) return fail(invalidArgument("ncclCommMemStats: value is NULL"), s.value());
  switch (stat) {
    case ncclStatGpuMemSuspend:
    case ncclStatGpuMemPersist:
    case ncclStatGpuMemTotal:
      *value = 0;
      return ncclSuccess;  // no GPU memory on host paths
    case ncclStatGpuMemSuspended:
      *value = s.value()->suspended.load() ? 1 : 0;
      return ncclSuccess;
  }
  return fail(invalidArgument("ncclCommMemStats: unknown stat {}", static_cast<int>(stat)),
              s.value());
}
NCCL_API(ncclResult_t, ncclPutSignal, const void*, size_t, ncclDataType_t, int, ncclWindow_t,
         size_t, int, int, unsigned int, ncclComm_t, cudaStream_t) {
  return notImplemented("ncclPutSignal", kOneSided);
}
NCCL_API(ncclResult_t, ncclSignal, int, int, int, unsigned int, ncclComm_t, cudaStream_t) {
  return notImplemented("ncclSignal", kOneSided);
}
NCCL_API(ncclResult_t, ncclWaitSignal, int, ncclWaitSignalDesc_t*, ncclComm_t, cudaStream_t) {
  return notImplemented("ncclWaitSignal", kOneSided);
}
NCCL_API(ncclResult_t, ncclSetEncryption, const ncclEncryptionConfig_t* config) {
  constexpr const char* api = "ncclSetEncryption";
  if (!config) return fail(invalidArgument("{}: config is NULL", api));
  if (config->magic != NCCL_API_MAGIC)
    return fail(invalidArgument(
        "{}: config not initialized via NCCL_ENCRYPTION_CONFIG_INITIALIZER (magic={:#x})", api,
        config->magic));
  // The mode is the first field after the header; psk follows it and is not read.
  if (config->size < offsetof(ncclEncryptionConfig_t, mode) + sizeof(int))
    return fail(invalidArgument("{}: config size {} bytes is too small", api, config->size));
  switch (config->mode) {
    case NCCL_ENCRYPTION_MODE_NONE:
      return ncclSuccess;  // tutti's sockets are plaintext already
    case NCCL_ENCRYPTION_MODE_PSK:
      return notImplemented(api, "TLS with a pre-shared key is not implemented (mode=PSK)");
  }
  return fail(invalidArgument("{}: unknown encryption mode {}", api, config->mode));
}

// ---- parameters ----

NCCL_API(ncclResult_t, ncclParamBind, ncclParamHandle_t* out, const char* key) {
  if (!out || !key) return fail(invalidArgument("ncclParamBind: out and key must not be NULL"));
  std::string k = key;
  if (k.rfind("NCCL_", 0) == 0) k = k.substr(5);
  std::lock_guard<std::mutex> lock(gParamMu);
  for (auto& p : gParams)
    if (p->key == k) {
      *out = reinterpret_cast<ncclParamHandle_t>(p.get());
      return ncclSuccess;
    }
  gParams.push_back(std::make_unique<ParamHandle>(ParamHandle{k}));
  *out = reinterpret_cast<ncclParamHandle_t>(gParams.back().get());
  return ncclSuccess;
}
NCCL_API(ncclResult_t, ncclParamGetI8, ncclParamHandle_t h, int8_t* out) {
  return getInt(h, out, "ncclParamGetI8");
}
NCCL_API(ncclResult_t, ncclParamGetI16, ncclParamHandle_t h, int16_t* out) {
  return getInt(h, out, "ncclParamGetI16");
}
NCCL_API(ncclResult_t, ncclParamGetI32, ncclParamHandle_t h, int32_t* out) {
  return getInt(h, out, "ncclParamGetI32");
}
NCCL_API(ncclResult_t, ncclParamGetI64, ncclParamHandle_t h, int64_t* out) {
  return getInt(h, out, "ncclParamGetI64");
}
NCCL_API(ncclResult_t, ncclParamGetU8, ncclParamHandle_t h, uint8_t* out) {
  return getInt(h, out, "ncclParamGetU8");
}
NCCL_API(ncclResult_t, ncclParamGetU16, ncclParamHandle_t h, uint16_t* out) {
  return getInt(h, out, "ncclParamGetU16");
}
NCCL_API(ncclResult_t, ncclParamGetU32, ncclParamHandle_t h, uint32_t* out) {
  return getInt(h, out, "ncclParamGetU32");
}
NCCL_API(ncclResult_t, ncclParamGetU64, ncclParamHandle_t h, uint64_t* out) {
  return getInt(h, out, "ncclParamGetU64");
}
NCCL_API(ncclResult_t, ncclParamGetStr, ncclParamHandle_t h, const char** out) {
  if (!out) return fail(invalidArgument("ncclParamGetStr: out is NULL"));
  auto v = paramValue(reinterpret_cast<const ParamHandle*>(h), "ncclParamGetStr");
  if (!v.isOk()) return fail(v.status());
  static thread_local std::string value;
  value = v.value();
  *out = value.c_str();
  return ncclSuccess;
}
NCCL_API(ncclResult_t, ncclParamGet, ncclParamHandle_t h, void* out, int maxLen, int* len) {
  auto v = paramValue(reinterpret_cast<const ParamHandle*>(h), "ncclParamGet");
  if (!v.isOk()) return fail(v.status());
  if (len) *len = static_cast<int>(v->size());
  if (out && maxLen > 0) std::memcpy(out, v->data(), std::min<size_t>(v->size(), maxLen));
  return ncclSuccess;
}
NCCL_API(ncclResult_t, ncclParamGetParameter, const char* key, const char** value, int* valueLen) {
  if (!key || !value)
    return fail(invalidArgument("ncclParamGetParameter: key and value must not be NULL"));
  std::string k = key;
  if (k.rfind("NCCL_", 0) == 0) k = k.substr(5);
  ParamHandle h{k};
  auto v = paramValue(&h, "ncclParamGetParameter");
  if (!v.isOk()) return fail(v.status());
  static thread_local std::string copy;
  copy = v.value();
  *value = copy.c_str();
  if (valueLen) *valueLen = static_cast<int>(copy.size());
  return ncclSuccess;
}
NCCL_API(ncclResult_t, ncclParamGetAllParameterKeys, const char*** table, int* tableLen) {
  if (!table || !tableLen)
    return fail(
        invalidArgument("ncclParamGetAllParameterKeys: table and tableLen must not be "
                        "NULL"));
  static thread_local std::vector<std::string> keys;
  static thread_local std::vector<const char*> ptrs;
  keys = ncclEnvKeys();
  ptrs.clear();
  for (auto& k : keys) ptrs.push_back(k.c_str());
  *table = ptrs.data();
  *tableLen = static_cast<int>(ptrs.size());
  return ncclSuccess;
}
NCCL_API(void, ncclParamDumpAll, void) {
  for (const auto& k : ncclEnvKeys()) {
    auto v = env::get({("NCCL_" + k).c_str()});
    TUTTI_LOG_INFO(Subsys::kEnv, "NCCL_{}={}", k, v ? *v : "");
  }
}
