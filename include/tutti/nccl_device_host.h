/* File: include/tutti/nccl_device_host.h
 * The host side of NCCL's device API (NCCL 2.28 ... 2.32) as tutti's libnccl.so.2 exports it:
 * teams, device communicators, resource requirements and window pointer queries. Written for
 * tutti (not copied from NVIDIA's headers).
 *
 * NVIDIA declares these functions in nccl_device.h (a C++/CUDA header shipped with the CUDA
 * toolkit and with NCCL), not in nccl.h. A program that uses NVIDIA's nccl_device.h gets them from
 * there and must NOT include this header as well: both define struct ncclTeam. This header is for
 * programs that call the host functions without NVIDIA's device headers (C programs, host-only
 * builds); it includes <tutti/nccl.h>. The layouts below match NVIDIA's where a value crosses the
 * ABI (ncclTeam_t returned by value, ncclMultimemHandle_t passed by value).
 *
 * tutti does not implement the device API (kernels over symmetric device memory). What it
 * answers: the team queries, which are rank arithmetic over tutti's model, in which a rank's
 * load/store-accessible (LSA) team is that rank alone; ncclLLA2ACalcSlots (arithmetic); and the
 * window pointer queries for the calling rank's own window. Everything else returns
 * ncclInvalidUsage with a "<function>: not supported by tutti: ..." message in ncclGetLastError.
 */
#ifndef TUTTI_NCCL_DEVICE_HOST_H_
#define TUTTI_NCCL_DEVICE_HOST_H_

#include <tutti/nccl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- types (opaque unless a value crosses the ABI) ---- */

struct ncclDevComm; /* device communicator, filled by ncclDevCommCreate */
typedef struct ncclDevComm ncclDevComm_t;
struct ncclDevCommRequirements; /* what a device communicator must provide */
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
struct ncclDevResourceRequirements; /* one buffer/signal request, chained */
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
struct ncclCommProperties; /* filled by ncclCommQueryProperties */
typedef struct ncclCommProperties ncclCommProperties_t;
struct ncclLsaBarrierHandle;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
struct ncclGinBarrierHandle;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
struct ncclLLA2AHandle;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;
struct ncclGinOutboxHandle;
struct ncclGinInboxA2AHandle;

/* A set of ranks: nRanks members, this rank's index among them (rank), and the world-rank
 * distance between consecutive members (stride). Member i is world rank
 * ownWorldRank + (i - rank) * stride. */
typedef struct ncclTeam {
  int nRanks;
  int rank;
  int stride;
} ncclTeam_t;

/* A multicast (multimem) object of a team; passed by value. */
typedef struct ncclMultimemHandle {
  void* multicastBase;
} ncclMultimemHandle_t;

/* Identifier of a copy-engine forwarding (CFT) list entry. */
typedef uint32_t ncclCftLeId;
typedef ncclCftLeId ncclCftLeId_t;

/* How ncclTeamCft groups the CFT ranks. */
typedef enum {
  NCCL_CFT_TEAM_FLAT = 0,
  NCCL_CFT_TEAM_HIER_MULTIMEM = 1,
  NCCL_CFT_TEAM_HIER_LSA = 2
} ncclCftTeamMode_t;

/* ---- device communicators ---- */

/* Reports what comm supports for the device API. Not supported by tutti: ncclInvalidUsage. */
ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);
ncclResult_t pncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);
/* Creates / destroys a device communicator. Not supported by tutti: ncclInvalidUsage. */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements_t* reqs,
                               ncclDevComm_t* outDevComm);
ncclResult_t pncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements_t* reqs,
                                ncclDevComm_t* outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const ncclDevComm_t* devComm);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, const ncclDevComm_t* devComm);

/* ---- window pointer queries (NCCL 2.30+); offsets in bytes from the window's start ---- */

/* *outPtr = the address of byte `offset` of LSA rank lsaRank's copy of `window`. tutti's LSA team
 * is the calling rank alone: lsaRank must be 0 and the result is the caller's own buffer + offset.
 * ncclInvalidArgument for an unknown window, outPtr NULL, offset beyond the window's size, or
 * lsaRank != 0. */
ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                     void** outPtr);
ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                      void** outPtr);
/* *outPtr = the address of byte `offset` of world rank peer's copy of `window`, for a peer the
 * caller can load from and store to: in tutti only the caller itself (errors as above; another
 * rank is ncclInvalidUsage: not supported by tutti). */
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer,
                                      void** outPtr);
ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer,
                                       void** outPtr);
/* Multicast addresses of a window (NVLink SHARP). Not supported by tutti: ncclInvalidUsage. */
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                          ncclMultimemHandle_t multimem, void** outPtr);
ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                           ncclMultimemHandle_t multimem, void** outPtr);
/* Copy-engine forwarding (CFT) entries of a window. Not supported by tutti: ncclInvalidUsage. */
ncclResult_t ncclGetMultimemDeviceLeInfo(ncclWindow_t window, size_t offset, ncclCftLeId* leId,
                                         size_t* leOffset);
ncclResult_t pncclGetMultimemDeviceLeInfo(ncclWindow_t window, size_t offset, ncclCftLeId* leId,
                                          size_t* leOffset);
ncclResult_t ncclGetCftDeviceLeInfo(ncclWindow_t window, size_t offset, int peerCft,
                                    ncclTeam_t cftTeam, ncclCftLeId* leId, size_t* leOffset);
ncclResult_t pncclGetCftDeviceLeInfo(ncclWindow_t window, size_t offset, int peerCft,
                                     ncclTeam_t cftTeam, ncclCftLeId* leId, size_t* leOffset);
ncclResult_t ncclGetPeerDeviceLeInfo(ncclWindow_t window, size_t offset, int peerWorld,
                                     ncclCftLeId* leId, size_t* leOffset);
ncclResult_t pncclGetPeerDeviceLeInfo(ncclWindow_t window, size_t offset, int peerWorld,
                                      ncclCftLeId* leId, size_t* leOffset);

/* ---- teams (no error channel: an invalid comm gives {0, 0, 1} and rank functions -1) ---- */

/* Every rank: {nranks, rank, 1}. */
ncclTeam_t ncclTeamWorld(ncclComm_t comm);
ncclTeam_t pncclTeamWorld(ncclComm_t comm);
/* Load/store-accessible ranks: this rank alone, {1, 0, 1}. */
ncclTeam_t ncclTeamLsa(ncclComm_t comm);
ncclTeam_t pncclTeamLsa(ncclComm_t comm);
/* The ranks with this rank's LSA index, one per LSA team: every rank, {nranks, rank, 1}. */
ncclTeam_t ncclTeamRail(ncclComm_t comm);
ncclTeam_t pncclTeamRail(ncclComm_t comm);
/* The CFT team in `mode`: tutti has no CFT, so it is this rank alone, {1, 0, 1}, in every valid
 * mode; {0, 0, 0} for an unknown mode. In C++ mode defaults to NCCL_CFT_TEAM_FLAT, as in
 * NVIDIA's declaration. */
#ifdef __cplusplus
ncclTeam_t ncclTeamCft(ncclComm_t comm, ncclCftTeamMode_t mode = NCCL_CFT_TEAM_FLAT);
#else
ncclTeam_t ncclTeamCft(ncclComm_t comm, ncclCftTeamMode_t mode);
#endif
ncclTeam_t pncclTeamCft(ncclComm_t comm, ncclCftTeamMode_t mode);
/* The multimem CFT team: this rank alone, {1, 0, 1}. */
ncclTeam_t ncclTeamCftMultimem(ncclComm_t comm);
ncclTeam_t pncclTeamCftMultimem(ncclComm_t comm);
/* World rank of member `rank` of team: own world rank + (rank - team.rank) * team.stride. */
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
/* LSA index of team member `rank`: 0 for this rank, -1 for any other (not load/store
 * accessible). */
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

/* ---- resource requirements of device kernels ----
 * Not supported by tutti (no device communicator to attach them to): ncclInvalidUsage. */
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                             ncclLsaBarrierHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                              ncclLsaBarrierHandle_t* outHandle,
                                              ncclDevResourceRequirements_t* outReq);
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                              ncclGinBarrierHandle_t* outHandle,
                                              ncclDevResourceRequirements_t* outReq);
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                        ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                         ncclDevResourceRequirements_t* outReq);
/* GPU-initiated networking mailboxes: nBlocks blocks of 2^size_log2 bytes. */
ncclResult_t ncclGinOutboxCreateRequirement(int nBlocks, int size_log2,
                                            struct ncclGinOutboxHandle* outHandle,
                                            ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclGinOutboxCreateRequirement(int nBlocks, int size_log2,
                                             struct ncclGinOutboxHandle* outHandle,
                                             ncclDevResourceRequirements_t* outReq);
ncclResult_t ncclGinInboxA2ACreateRequirement(ncclTeam_t peers, int nBlocks, int size_log2,
                                              struct ncclGinInboxA2AHandle* outHandle,
                                              ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclGinInboxA2ACreateRequirement(ncclTeam_t peers, int nBlocks, int size_log2,
                                               struct ncclGinInboxA2AHandle* outHandle,
                                               ncclDevResourceRequirements_t* outReq);
/* Slots a low-latency all-to-all of maxElts elements of maxEltSize bytes needs: maxElts *
 * ceil(maxEltSize / 8) (16-byte lines carrying 8 data bytes each); 0 for non-positive inputs. */
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
int pncclLLA2ACalcSlots(int maxElts, int maxEltSize);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TUTTI_NCCL_DEVICE_HOST_H_ */
