// File: core/launcher_env.h
// Reads rank, size, local rank and the rendezvous root from the launcher's environment:
// tutti-run, torchrun, Open MPI, PMI (MPICH Hydra), Slurm — in that order (DESIGN section 5).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"

namespace tutti {

struct LaunchEnv {
  std::string launcher;  ///< "tutti-run", "torchrun", "openmpi", "pmi", "slurm"
  int rank = -1;
  int nranks = 0;
  int localRank = -1;   ///< -1 when unknown
  int localSize = -1;   ///< -1 when unknown
  /// Root "host:port": rank 0 hosts the rendezvous root there.
  std::string rootAddress;
  std::string rootSource;  ///< where rootAddress came from (for messages)
  uint64_t secret = 0;
};

/// InvalidUsage naming the variables looked for when no launcher is found; InvalidArgument
/// naming a variable whose value does not parse.
Result<LaunchEnv> readLaunchEnv();

}  // namespace tutti
