// tutti's nccl.h beside NVIDIA's nccl_device.h in one translation unit, as nccl-tests and PyTorch's
// symmetric-memory code include them. Compiled (not run) by device_header_compat.sh with the host
// compiler and with nvcc (as CUDA). <nccl.h> must resolve to tutti's header; NVIDIA's
// nccl_device.h includes <nccl.h> itself and defines the device-API types (struct ncclTeam, ...),
// which tutti's nccl.h must therefore leave alone.
//   TUTTI_TEST_DEVICE_FIRST: include nccl_device.h before nccl.h (its own #include <nccl.h> then
//   pulls tutti's header in first).
//   TUTTI_NCCL_COMPAT_2_28: the header presents itself as 2.28.9 (checked below).
#ifdef TUTTI_TEST_DEVICE_FIRST
#include <nccl_device.h>
#include <nccl.h>
#else
#include <nccl.h>
#include <nccl_device.h>
#endif

#include <string.h>

#ifndef TUTTI_NCCL_HEADER
#error "<nccl.h> is not tutti's header: put tutti's directory first on the include path"
#endif
#ifdef TUTTI_NCCL_COMPAT_2_28
static_assert(NCCL_VERSION_CODE == NCCL_VERSION(2, 28, 9), "compat version");
#else
static_assert(NCCL_VERSION_CODE == NCCL_VERSION(2, 32, 3), "tutti's version");
#endif

#if defined(__CUDACC__)
// A device kernel over the device API's types, as nccl-tests' device implementations write them.
__global__ void teamKernel(ncclDevComm devComm, int* out) {
  ncclTeam world = ncclTeamWorld(devComm);
  out[0] = world.nRanks;
}
#endif

// Host code: the NCCL API from tutti's header and the device API's host functions and types from
// NVIDIA's, in one function.
int useBoth(ncclComm_t comm) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclDevCommRequirements reqs;
  memset(&reqs, 0, sizeof reqs);
  ncclDevComm devComm;
  if (ncclDevCommCreate(comm, &reqs, &devComm) != ncclSuccess) return -1;
  ncclTeam_t team = ncclTeamWorld(comm);
  int world = ncclTeamRankToWorld(comm, team, 0);
  int slots = ncclLLA2ACalcSlots(4, 8);
  int v = 0;
  ncclGetVersion(&v);
  float x = 1.f;
  ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, nullptr);
  return world + slots + v + config.blocking;
}
