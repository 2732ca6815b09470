// Prints the ABI facts of whichever nccl.h it is compiled against, one "key value" per line:
// sizes, field offsets and enum values that cross the C ABI. abi_layout.sh builds it against
// tutti's header and against NVIDIA's, and compares the keys both print (an older NVIDIA header
// lacks the newer fields). Facts that NVIDIA's header of that release does not have are not
// printed, so the comparison stays meaningful across releases.
#include <cstddef>
#include <cstdio>

#ifdef TUTTI_TEST_OWN_HEADER
#include <tutti/nccl.h>
#else
#include <nccl.h>
#endif

#define FACT(key, value) std::printf("%s %lld\n", key, static_cast<long long>(value))
#define OFFSET(type, field) FACT(#type "." #field, offsetof(type, field))

int main() {
  FACT("sizeof.ncclUniqueId", sizeof(ncclUniqueId));
  FACT("sizeof.ncclResult_t", sizeof(ncclResult_t));
  FACT("sizeof.ncclRedOp_t", sizeof(ncclRedOp_t));
  FACT("sizeof.ncclDataType_t", sizeof(ncclDataType_t));
  FACT("ncclInProgress", ncclInProgress);
  FACT("ncclMaxRedOp", ncclMaxRedOp);
  FACT("ncclNumTypes", ncclNumTypes);
  FACT("ncclFloat8e5m2", ncclFloat8e5m2);
  FACT("ncclScalarHostImmediate", ncclScalarHostImmediate);
#ifdef NCCL_API_MAGIC
  FACT("NCCL_API_MAGIC", NCCL_API_MAGIC);
#endif
  FACT("NCCL_WIN_REQUIRED_ALIGNMENT", NCCL_WIN_REQUIRED_ALIGNMENT);
  FACT("NCCL_SPLIT_NOCOLOR", NCCL_SPLIT_NOCOLOR);
  FACT("sizeof.ncclSimInfo_t", sizeof(ncclSimInfo_t));
  OFFSET(ncclSimInfo_t, estimatedTime);
  OFFSET(ncclConfig_t, blocking);
  OFFSET(ncclConfig_t, netName);
  OFFSET(ncclConfig_t, commName);
  OFFSET(ncclConfig_t, nvlinkCentricSched);
#if NCCL_VERSION_CODE >= 23200
  // NCCL 2.29 ... 2.32 additions.
  FACT("sizeof.ncclConfig_t", sizeof(ncclConfig_t));
  OFFSET(ncclConfig_t, graphUsageMode);
  OFFSET(ncclConfig_t, nvlsHostMode);
  FACT("ncclTimeout", ncclTimeout);
  FACT("ncclNumResults", ncclNumResults);
  FACT("ncclHostCftDefault", ncclHostCftDefault);
  FACT("ncclNvlsHostModeDisable", ncclNvlsHostModeDisable);
  FACT("NCCL_WIN_CFT_COUNTED", NCCL_WIN_CFT_COUNTED);
  FACT("ncclStatGpuMemTotal", ncclStatGpuMemTotal);
  FACT("sizeof.ncclWaitSignalDesc_t", sizeof(ncclWaitSignalDesc_t));
  FACT("sizeof.ncclConfigExt_t", sizeof(ncclConfigExt_t));
  OFFSET(ncclConfigExt_t, val);
  FACT("sizeof.ncclCollConfig_t", sizeof(ncclCollConfig_t));
  OFFSET(ncclCollConfig_t, ext);
  OFFSET(ncclCollConfig_t, algSelection);
  OFFSET(ncclCollConfig_t, forceAlgSelection);
  OFFSET(ncclCollConfig_t, userProfilerTag);
  OFFSET(ncclCollConfig_t, launchCompletionEvent);
  FACT("sizeof.ncclEncryptionConfig_t", sizeof(ncclEncryptionConfig_t));
  OFFSET(ncclEncryptionConfig_t, psk);
  FACT("NCCL_ENCRYPTION_MODE_PSK", NCCL_ENCRYPTION_MODE_PSK);
  {
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    FACT("init.ncclConfig_t.nvlsHostMode", c.nvlsHostMode);
    ncclCollConfig_t cc = NCCL_COLLCONFIG_INITIALIZER;
    FACT("init.ncclCollConfig_t.forceAlgSelection", cc.forceAlgSelection);
    FACT("init.ncclCollConfig_t.userProfilerTag", cc.userProfilerTag);
  }
#endif
  return 0;
}
