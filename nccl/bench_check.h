// File: nccl/bench_check.h
// The NCCL-API benchmarks' call check (tutti-nccl-fusion, tutti-nccl-device-perf): those
// programs use the NCCL C API only, so that they also run on NVIDIA's library.
#pragma once

#include <cstdio>

#include <tutti/nccl.h>

/// Runs `call` (an ncclResult_t expression); on failure prints "rank R: <call> failed: <error>
/// (<last error>)" to stderr and returns 1 from the calling function, which must have an int
/// `rank` in scope and return int.
#define NCCL_BENCH_OK(call)                                                                      \
  do {                                                                                           \
    ncclResult_t r_ = (call);                                                                    \
    if (r_ != ncclSuccess) {                                                                     \
      std::fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank, #call, ncclGetErrorString(r_), \
                   ncclGetLastError(nullptr));                                                   \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)
