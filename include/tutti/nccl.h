/* File: include/tutti/nccl.h
 * tutti's declaration of the NCCL C API and ABI (NCCL 2.32), written for tutti (not copied from
 * NVIDIA's header). A program compiled against NVIDIA's nccl.h (2.14 ... 2.32) runs unchanged on
 * tutti's libnccl.so.2, and a program compiled against this header runs on either library.
 * docs/NCCL.md says what is implemented; everything declared here is exported by libnccl.so.2.
 *
 * Scope: the same declarations as NVIDIA's nccl.h. The host side of NCCL's device API (teams,
 * ncclDevComm, resource requirements, window pointer queries) is declared by NVIDIA's
 * nccl_device.h, which a program may include after this header (nccl-tests does): this header
 * therefore defines none of the device-API types. Programs that call those host functions without
 * NVIDIA's device headers include <tutti/nccl_device_host.h> instead.
 *
 * ABI facts this header pins down (tests/nccl/abi_layout.cc compares them with NVIDIA's header):
 *  - every enum is int-sized and has NCCL's values; ncclUniqueId is 128 bytes passed by value;
 *  - ncclConfig_t, ncclCollConfig_t and ncclEncryptionConfig_t are versioned by their first three
 *    fields (size, magic, version): the library reads only min(size, its own size) bytes, so
 *    callers built against older or newer headers work;
 *  - each function is exported as a weak ncclX plus a strong pncclX alias (profiling hook);
 *  - ncclGetVersion reports 23203 (NCCL 2.32.3), the release whose exported symbols libnccl.so.2
 *    covers (tests/nccl/nccl_2_32_3_symbols.txt).
 *
 * Conventions shared by every function below:
 *  - counts are ELEMENTS of `datatype`, never bytes; "per rank" where a collective says so;
 *  - a count of 0 is a valid no-op and null buffers are then accepted;
 *  - buffers may be host memory (any stream; with a null stream the call completes before it
 *    returns, or at the outermost ncclGroupEnd inside a group) or CUDA device memory (the call
 *    is enqueued on `stream` and returns at once; completion follows stream order; calls may be
 *    captured in a CUDA graph). With one rank a device call is a device copy. Ranks that share
 *    one GPU (threads of one process, or one process each) run every collective as one kernel
 *    for all of them, and a call may then wait on the host until every rank has made it (as
 *    NCCL allows: one thread driving several ranks must group their calls); process ranks'
 *    buffers must be cudaMalloc'd device memory. Other layouts stage through pinned host memory
 *    and the communicator's worker thread. Errors that happen after the call returned (a dead
 *    peer, a timeout, an abort) surface through ncclCommGetAsyncError, with the outputs
 *    undefined (docs/GPU.md);
 *  - errors: ncclInvalidArgument for a bad argument (the call had no effect; the message,
 *    naming the argument and its value, is in ncclGetLastError), ncclInvalidUsage for a call
 *    that is wrong in the current state or not implemented (the message then starts with the
 *    function's name and says "not supported by tutti"), ncclRemoteError when a peer died,
 *    closed its connection or timed out, ncclSystemError for OS failures, ncclInProgress for
 *    nonblocking communicators;
 *  - thread safety: as NCCL: one thread at a time per communicator, except ncclCommAbort and
 *    ncclCommGetAsyncError, which any thread may call at any time. Group state is per thread.
 */
#ifndef TUTTI_NCCL_H_
#define TUTTI_NCCL_H_

#if defined(__has_include) && !defined(TUTTI_NCCL_NO_CUDA)
#if __has_include(<cuda_runtime.h>)
#include <cuda_runtime.h>
#define TUTTI_NCCL_HAVE_CUDA_RUNTIME 1
#endif
#endif
#ifndef TUTTI_NCCL_HAVE_CUDA_RUNTIME
/* Without the CUDA toolkit a stream or an event is an opaque pointer; pass NULL. Same types as
 * CUDA's. */
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;
struct CUevent_st;
typedef struct CUevent_st* cudaEvent_t;
#endif

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* The NCCL release whose API this header declares and whose exported symbols libnccl.so.2
 * covers; ncclGetVersion reports the same code at run time.
 *
 * TUTTI_NCCL_COMPAT_2_28 (define it before including this header) makes the header present
 * itself as NCCL 2.28.9 instead: the version macros change, nothing else. It is for programs that
 * gate device-API code on NCCL_VERSION_CODE and are compiled with the CUDA toolkit's NCCL 2.28
 * nccl_device.h (CUDA 13.0 ships 2.28.9): their 2.29+ branches need types (ncclCommProperties_t,
 * ...) that only 2.29+ device headers define. ncclGetVersion still reports 2.32.3. */
#ifdef TUTTI_NCCL_COMPAT_2_28
#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_VERSION_CODE 22809
#else
#define NCCL_MAJOR 2
#define NCCL_MINOR 32
#define NCCL_PATCH 3
#define NCCL_VERSION_CODE 23203
#endif
#define NCCL_SUFFIX ""
/* NCCL's version encoding: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z from 2.9 on. */
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

/* tutti's own marker: lets code tell this header from NVIDIA's. */
#define TUTTI_NCCL_HEADER 1

#ifdef __cplusplus
extern "C" {
#endif

/* ---- handles and identifiers ---- */

typedef struct ncclComm* ncclComm_t;                 /* opaque communicator */
typedef struct ncclWindow_vidmem* ncclWindow_t;      /* opaque registered window */
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
/* Rendezvous identifier: the root's socket address and a random secret. POD, passed by value. */
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* ---- result codes (NCCL values) ---- */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  /* An operation did not complete in time (NCCL 2.29+). tutti reports its own timeouts
   * (TUTTI_TIMEOUT) as ncclRemoteError, which programs built against any NCCL header know. */
  ncclTimeout = 8,
  ncclNumResults = 9
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f
#define NCCL_API_MAGIC 0xcafebeef

/* Window registration flags (ncclCommWindowRegister; bits may be combined). */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01   /* same size registered by every rank */
#define NCCL_WIN_STRICT_ORDERING 0x02  /* one-sided operations complete in issue order */
#define NCCL_WIN_GIN_ONLY 0x04         /* register for GPU-initiated networking only */
#define NCCL_WIN_CFT_COUNTED 0x08      /* register for counted CFT access only */
/* Alignment in bytes that NCCL requires of symmetric window buffers. */
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* CTA policies (accepted and ignored on host memory). */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink flags. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* ncclCommRevoke flags. */
#define NCCL_REVOKE_DEFAULT 0x00

/* ncclConfig_t.hostCftMode: host-side copy-engine forwarding (GPU fabric feature; accepted and
 * ignored by tutti). */
typedef enum {
  ncclHostCftDefault = NCCL_CONFIG_UNDEF_INT,
  ncclHostCftEnable = 1,
  ncclHostCftDisable = 2,
  ncclHostCftFallback = 3
} ncclHostCftMode_t;

/* ncclConfig_t.nvlsHostMode: which host-side NVLink SHARP components to use (bits may be
 * combined; accepted and ignored by tutti). */
typedef enum {
  ncclNvlsHostModeDefault = NCCL_CONFIG_UNDEF_INT,
  ncclNvlsHostModeEnable = 0,
  ncclNvlsHostModeDisableTransport = 1 << 0,
  ncclNvlsHostModeDisableSymmetricMultimem = 1 << 1,
  ncclNvlsHostModeDisable = INT_MAX
} ncclNvlsHostMode_t;

/* Communicator configuration, NCCL 2.32 layout (fields are only ever appended; a caller built
 * against an older header passes its smaller size, and the fields it lacks keep their defaults).
 * Initialise with NCCL_CONFIG_INITIALIZER, then set fields. Fields that tutti honours: blocking (0
 * = nonblocking communicator), splitShare and shrinkShare (accepted; resources are never shared),
 * commName (logs). The others are accepted and ignored: they tune GPU kernels and NCCL's
 * transports. */
typedef struct ncclConfig_v23100 {
  size_t size;           /* sizeof(ncclConfig_t) of the caller's header, bytes */
  unsigned int magic;    /* NCCL_API_MAGIC */
  unsigned int version;  /* NCCL_VERSION_CODE of the caller's header */
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  /* NCCL 2.29 ... 2.32 */
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
  int launchOrderImplicit;
  int numRmaSig;
  int rmaEagerInit;
  int hostCftMode;  /* ncclHostCftMode_t */
  int nvlsHostMode; /* ncclNvlsHostMode_t */
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                             \
  {                                                                                         \
    sizeof(ncclConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT,         \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                \
        NCCL_CONFIG_UNDEF_INT                                                               \
  }

/* One vendor-specific option of a ncclCollConfig_t: a (vendorId, optionId) key and a value, in a
 * NULL-terminated list through `next`. NVIDIA's library ignores every option; so does tutti. */
typedef struct ncclConfigExt {
  struct ncclConfigExt* next;
  struct {
    int vendorId; /* non-zero, below 2^24, chosen by the vendor library */
    int optionId;
  } key;
  union {
    int i;
    const char* s;
    void* raw;
  } val;
} ncclConfigExt_t;

/* Per-call configuration of the nccl*Config collectives (NCCL 2.32), versioned like ncclConfig_t.
 * Initialise with NCCL_COLLCONFIG_INITIALIZER. tutti accepts and ignores the tuning fields (CTA
 * counts, cluster size, CTA policy, profiler tag, ext). algSelection names NCCL algorithms, which
 * tutti does not have: a non-empty algSelection with forceAlgSelection != 0 is ncclInvalidUsage,
 * with forceAlgSelection == 0 it is ignored. A non-NULL launchCompletionEvent is ncclInvalidUsage
 * (not supported by tutti). */
typedef struct ncclCollConfig_v23200 {
  size_t size;           /* sizeof(ncclCollConfig_t) of the caller's header, bytes */
  unsigned int magic;    /* NCCL_API_MAGIC */
  unsigned int version;  /* NCCL_VERSION_CODE of the caller's header */
  ncclConfigExt_t* ext;  /* vendor options, or NULL */
  int minCTAs;
  int maxCTAs;
  int nvlsCTAs;
  int cgaClusterSize;
  const char* algSelection; /* NULL or "" = automatic */
  int forceAlgSelection;    /* 1 (default): an unsatisfiable algSelection is an error */
  int CTAPolicy;
  uint64_t userProfilerTag; /* handed to profiler plugins; 0 = untagged */
  cudaEvent_t launchCompletionEvent;
} ncclCollConfig_t;

#define NCCL_COLLCONFIG_INITIALIZER                                                         \
  {                                                                                         \
    sizeof(ncclCollConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_PTR,     \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, 1, NCCL_CONFIG_UNDEF_INT, 0,          \
        NCCL_CONFIG_UNDEF_PTR                                                               \
  }

/* Result of ncclGroupSimulateEnd. estimatedTime is in microseconds. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;    /* 0x74685283 */
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT }

/* ---- reduction operators and element types (NCCL values) ---- */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4, /* sum / nranks; integers truncate toward zero */
  ncclNumOps = 5, /* first value of operators created by ncclRedOpCreatePreMulSum */
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives. */
typedef enum {
  ncclScalarDevice = 0,        /* read when the collective runs (not supported yet) */
  ncclScalarHostImmediate = 1  /* read before ncclRedOpCreatePreMulSum returns */
} ncclScalarResidence_t;

/* ---- memory ---- */

/* Allocates `size` bytes for communication buffers: device memory (cudaMalloc) when a CUDA device
 * is present, else 4096-byte-aligned host memory. ncclInvalidArgument for ptr == NULL;
 * ncclSystemError / ncclUnhandledCudaError when the allocation fails. Thread-safe; may be called
 * inside a group. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);
/* Frees memory from ncclMemAlloc. ncclInvalidArgument for a pointer it did not return. NULL is a
 * no-op. */
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* ---- version and identifiers ---- */

/* Stores the version code of the NCCL release the library covers, 23203 (2.32.3), whatever header
 * the caller was compiled with. ncclInvalidArgument for NULL. */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/* Creates an id for ncclCommInitRank and starts the rendezvous root in a background thread of the
 * calling process (it serves one rendezvous, then exits; or at TUTTI_BOOTSTRAP_TIMEOUT). With
 * NCCL_COMM_ID=host:port (or TUTTI_COMM_ID) the id is the same on every rank, no root is started
 * here, and rank 0 hosts the root at host:port inside ncclCommInitRank. ncclSystemError when the
 * root socket cannot be bound; ncclInvalidArgument for NULL or a malformed NCCL_COMM_ID. */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/* ---- communicator creation (collective over the new communicator's ranks) ---- */

/* Joins the rendezvous of `commId` as `rank` of `nranks`. Blocks until all ranks joined, unless
 * called inside a group (created at the outermost ncclGroupEnd, concurrently with the group's other
 * inits) or with config->blocking == 0 (returns ncclInProgress; poll ncclCommGetAsyncError). *comm
 * is valid when the call returns. config may be NULL (defaults). ncclInvalidArgument for nranks <
 * 1, rank outside [0, nranks), comm NULL, or a config not made by NCCL_CONFIG_INITIALIZER;
 * ncclRemoteError / ncclSystemError when the rendezvous fails or times out (naming the missing
 * ranks in ncclGetLastError). */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config);
/* ncclCommInitRankConfig with default configuration. */
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
/* Creates `ndev` ranks of one communicator in this process (comm[i] is rank i), from one thread;
 * also inside a group. devlist (may be NULL) gives each rank's CUDA device (ncclCommCuDevice).
 * ncclInvalidArgument for ndev < 1 or comm NULL. */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
/* As ncclCommInitRankConfig with nId ids (same order on every rank); tutti rendezvouses on the
 * first id only (one root serves every rank). ncclInvalidArgument for nId < 1 or commIds NULL. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId* commIds, ncclConfig_t* config);

/* ---- teardown ---- */

/* Completes every operation issued on comm and synchronises with the peers (a barrier). After it,
 * ncclCommDestroy is local. Nonblocking communicators return ncclInProgress. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);
/* Waits for comm's pending operations, then frees it (no synchronisation with peers). NULL is
 * ncclInvalidArgument. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);
/* Makes every pending and running operation on comm fail, from any thread, within about a second,
 * then frees comm. Returns ncclSuccess. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);
/* Stops comm's operations (as abort) but keeps the handle for ncclCommDestroy; later operations
 * fail. revokeFlags must be NCCL_REVOKE_DEFAULT (else ncclInvalidArgument). */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* ---- derived communicators ---- */

/* Collective over comm: ranks with the same color form a new communicator, ordered by (key, rank
 * in comm). color NCCL_SPLIT_NOCOLOR (or any negative) leaves this rank out: *newcomm = NULL.
 * config NULL inherits comm's. ncclInvalidArgument for newcomm NULL. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                            ncclConfig_t* config);
/* Called by the ranks of comm that are NOT in excludeRanksList: they form a new communicator in
 * the order of their ranks in comm. shrinkFlags: NCCL_SHRINK_DEFAULT, or NCCL_SHRINK_ABORT
 * (comm's operations are aborted once the survivors have agreed). ncclInvalidArgument for a rank
 * out of range, a caller that is in the list, or all ranks excluded. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                             ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);

/* ---- errors and queries ---- */

/* NCCL's text for a result code ("invalid usage (run with NCCL_DEBUG=WARN for details)", ...). */
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);
/* The message of the last error on comm (or of this thread when comm is NULL), "" when none. The
 * pointer stays valid until the next failing call of this thread. */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);
/* Re-reads NCCL_DEBUG / NCCL_DEBUG_SUBSYS (deprecated in NCCL; kept for the ABI). */
void ncclResetDebugInit(void);
void pncclResetDebugInit(void);
/* *asyncError = ncclInProgress while a nonblocking init/operation runs, else the first error seen
 * by comm (ncclRemoteError for a dead peer or a timeout), else ncclSuccess. Any thread. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
/* Number of ranks. */
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);
/* CUDA device of comm: the devlist entry for ncclCommInitAll, else the current device at init, or
 * -1 when there is no CUDA device. */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);
/* This rank in comm. */
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* ---- buffer registration (recorded; host memory needs no registration) ---- */

/* Records [buff, buff+size) and returns a handle for ncclCommDeregister. ncclInvalidArgument for a
 * NULL handle pointer or NULL buff with size > 0. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
/* ncclInvalidArgument for a handle not returned by ncclCommRegister on comm. */
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);
/* Records a window over [buff, buff+size) (size in bytes). Local, except with the peer device
 * executor (TUTTI_DEVICE_PATH=peer) over ranks that are processes of their own: then collective
 * (every rank, same order; at ncclGroupEnd inside a group), and the ranks map each other's
 * windows with CUDA IPC (cudaMalloc'd memory), so that a collective whose buffers lie in windows
 * on every rank reads its peers' buffers in place; a window some rank cannot share stays local
 * on all. winFlags: NCCL_WIN_DEFAULT or any combination of the NCCL_WIN_* bits (recorded).
 * ncclInvalidArgument for win NULL, buff NULL with size > 0, or an unknown bit. */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                     int winFlags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* ---- custom reduction operators ---- */

/* Creates an operator for comm and datatype: every input is multiplied by *scalar (one element of
 * `datatype`), then summed. residence must be ncclScalarHostImmediate (the scalar is copied now);
 * ncclScalarDevice returns ncclInvalidUsage in this release. At most 1024 live operators per
 * communicator. The handle may be destroyed as soon as the last call using it has returned. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);
/* ncclInvalidArgument for a built-in op or a handle not created on comm. */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- collectives (every rank of comm calls them in the same order) ----
 * Buffer sizes in elements:
 *   Reduce         send count; recv count on root only (may be NULL elsewhere); in place if equal
 *   Bcast          buff count (in place)
 *   Broadcast      send count (root); recv count; in place if equal
 *   AllReduce      send count; recv count; in place if equal
 *   ReduceScatter  send nranks*recvcount; recv recvcount; in place if recv == send + rank*recvcount
 *   AllGather      send sendcount; recv nranks*sendcount; in place if send == recv + rank*sendcount
 *   AlltoAll       send nranks*count (block j goes to rank j); recv nranks*count
 *   Gather         send count; recv nranks*count (root only)
 *   Scatter        send nranks*count (root only); recv count
 * Errors: ncclInvalidArgument (bad datatype/op/root, NULL buffer with count > 0, a forbidden
 * overlap, comm NULL), ncclInvalidUsage (a communicator that failed or was revoked),
 * ncclUnhandledCudaError (a CUDA call failed while enqueuing on a device buffer), ncclRemoteError (peer died or timed out). Inside a group, communication errors are
 * returned by ncclGroupEnd. */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream);
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm,
                          cudaStream_t stream);

/* ---- point to point ----
 * A send of `count` elements to `peer` is matched by a receive of the same count and datatype from
 * this rank, in call order per pair. Outside a group each call completes on its own (a send may
 * wait for its receive); inside a group every send and receive of the group progresses together.
 * peer == own rank is allowed inside a group. ncclInvalidArgument for peer outside [0, nranks). */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

/* ---- groups (per thread; nest freely; only the outermost ncclGroupEnd acts) ----
 * Inside a group, calls are recorded and run at the outermost ncclGroupEnd: inits concurrently,
 * then per communicator its collectives in issue order (consecutive small allreduces of one
 * datatype and op fused into one, up to TUTTI_FUSION_BYTES), then its sends and receives
 * together; several communicators run concurrently. ncclGroupEnd returns the first error of the
 * group (an argument error of a call inside it discards the group), or ncclInProgress when the
 * group holds nonblocking communicators (blocking and nonblocking ones may not be mixed:
 * ncclInvalidUsage). */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);
/* Ends the group without running it and stores in simInfo->estimatedTime the predicted time in
 * microseconds (sum over its collectives of tutti's alpha-beta-gamma simulator, algorithms/
 * simulator.h). ncclInvalidArgument for a simInfo not made by NCCL_SIM_INFO_INITIALIZER. */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

/* ---- collectives with a per-call configuration (NCCL 2.32) ----
 * Each is the collective of the same name with `config` added (NULL = defaults). Shapes, units,
 * completion and errors as above; in addition ncclInvalidArgument for a config not made by
 * NCCL_COLLCONFIG_INITIALIZER (bad magic, or a size smaller than its first fields), and
 * ncclInvalidUsage for the fields ncclCollConfig_t says tutti does not support. */
ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t pncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                  cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, int root, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t pncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                              ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t pncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                               cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount,
                                 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                 const ncclCollConfig_t* config);
ncclResult_t pncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount,
                                  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                  const ncclCollConfig_t* config);
ncclResult_t ncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t pncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount,
                                      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count,
                                ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                const ncclCollConfig_t* config);
ncclResult_t pncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                 const ncclCollConfig_t* config);
ncclResult_t ncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count,
                              ncclDataType_t datatype, int root, ncclComm_t comm,
                              cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t pncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t datatype, int root, ncclComm_t comm,
                               cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count,
                               ncclDataType_t datatype, int root, ncclComm_t comm,
                               cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t pncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count,
                                ncclDataType_t datatype, int root, ncclComm_t comm,
                                cudaStream_t stream, const ncclCollConfig_t* config);

/* ---- growing, suspending and inspecting communicators (NCCL 2.29 ... 2.32) ---- */

/* ncclCommGrow / ncclCommGetUniqueId: adding ranks to a live communicator. Not supported by
 * tutti: ncclInvalidUsage (*newcomm is set to NULL when newcomm is not NULL). */
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                           ncclComm_t* newcomm, ncclConfig_t* config);

/* ncclCommSuspend flag: release the communicator's releasable GPU memory. */
#define NCCL_SUSPEND_MEM 0x01
/* Waits for comm's pending work, then marks it suspended: operations return ncclInvalidUsage
 * until ncclCommResume. flags: 0 or NCCL_SUSPEND_MEM (tutti holds no releasable GPU memory, so
 * both behave the same); other bits are ncclInvalidArgument. */
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm);

/* What ncclCommMemStats reports. */
typedef enum {
  ncclStatGpuMemSuspend = 0,   /* bytes of GPU memory a suspend would release */
  ncclStatGpuMemSuspended = 1, /* 1 while suspended, else 0 */
  ncclStatGpuMemPersist = 2,   /* bytes of GPU memory a suspend keeps */
  ncclStatGpuMemTotal = 3      /* bytes of GPU memory the communicator holds */
} ncclCommMemStat_t;
/* Stores the statistic in *value. tutti reports 0 bytes for the three memory statistics (its GPU
 * staging buffers are per process, not per communicator). ncclInvalidArgument for value NULL or
 * an unknown stat. */
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);

/* Stores in *outUserPtr the buffer `win` was registered with on comm. ncclInvalidArgument for a
 * window not registered on comm or outUserPtr NULL. */
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);

/* ---- one-sided operations on windows (NCCL 2.29) ----
 * Not supported by tutti: every call returns ncclInvalidUsage and does nothing. */
/* One entry of ncclWaitSignal: wait for opCnt signals from `peer` on (sigIdx, ctx). */
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;
/* Writes count elements of localbuff to peer's window at peerWinOffset (bytes), then signals
 * (sigIdx, ctx) on the peer. flags is reserved (0). */
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                           unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                            unsigned int flags, ncclComm_t comm, cudaStream_t stream);
/* Signals (sigIdx, ctx) on peer without data. */
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                         cudaStream_t stream);
/* Waits (stream-ordered) for every signal that the nDesc descriptors describe. */
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                            cudaStream_t stream);
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                             cudaStream_t stream);

/* ---- encryption of NCCL's TCP sockets (NCCL 2.32) ---- */
typedef enum {
  NCCL_ENCRYPTION_MODE_NONE = 0, /* plaintext */
  NCCL_ENCRYPTION_MODE_PSK = 1   /* TLS with a pre-shared key */
} ncclEncryptionMode_t;
/* Versioned like ncclConfig_t; initialise with NCCL_ENCRYPTION_CONFIG_INITIALIZER. */
typedef struct ncclEncryptionConfig_v23200 {
  size_t size;          /* sizeof(ncclEncryptionConfig_t) of the caller's header, bytes */
  unsigned int magic;   /* NCCL_API_MAGIC */
  unsigned int version; /* NCCL_VERSION_CODE of the caller's header */
  int mode;             /* ncclEncryptionMode_t */
  const char* psk;      /* the key for NCCL_ENCRYPTION_MODE_PSK */
} ncclEncryptionConfig_t;
#define NCCL_ENCRYPTION_CONFIG_INITIALIZER                                                   \
  {                                                                                          \
    sizeof(ncclEncryptionConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE,                       \
        NCCL_ENCRYPTION_MODE_NONE, NCCL_CONFIG_UNDEF_PTR                                     \
  }
/* Sets how later communicators encrypt their TCP connections. NCCL_ENCRYPTION_MODE_NONE is
 * accepted (tutti's sockets are plaintext, authenticated by the unique id's secret);
 * NCCL_ENCRYPTION_MODE_PSK is ncclInvalidUsage (not supported by tutti). ncclInvalidArgument for
 * config NULL, a config not made by NCCL_ENCRYPTION_CONFIG_INITIALIZER, or an unknown mode. */
ncclResult_t ncclSetEncryption(const ncclEncryptionConfig_t* config);
ncclResult_t pncclSetEncryption(const ncclEncryptionConfig_t* config);

/* ---- parameters (NCCL 2.30) ---- */
typedef struct ncclParamHandle* ncclParamHandle_t;
/* A key is an environment variable name without its NCCL_ prefix ("DEBUG").
 * ncclParamBind and ncclParamGetParameter read the environment (NCCL_<key>); ncclInvalidArgument
 * for an unset key. Typed getters parse the value as an integer (ncclInvalidArgument when it does
 * not parse or does not fit). Returned strings stay valid until the next call of this thread. */
ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key);
ncclResult_t pncclParamBind(ncclParamHandle_t* out, const char* key);
ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t pncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t pncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t pncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t pncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t pncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t pncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t pncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t* out);
ncclResult_t pncclParamGetU64(ncclParamHandle_t h, uint64_t* out);
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out);
ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char** out);
/* Copies the value's bytes (no terminating NUL) into out, at most maxLen; *len = its length. */
ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);
ncclResult_t pncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);
ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen);
ncclResult_t pncclParamGetParameter(const char* key, const char** value, int* valueLen);
/* Keys of every NCCL_* variable set in the environment. */
ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen);
ncclResult_t pncclParamGetAllParameterKeys(const char*** table, int* tableLen);
/* Logs every NCCL_* variable set in the environment at INFO level. */
void ncclParamDumpAll(void);
void pncclParamDumpAll(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* TUTTI_NCCL_H_ */
