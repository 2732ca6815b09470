// File: topology/gpu_probe.h
// What hwloc cannot tell about GPUs, from the CUDA driver (libcuda.so.1: ordinals by PCI bus id,
// peer access) and NVML (libnvidia-ml.so.1: NVLink counts per peer), both loaded with dlopen at
// run time. Internal to topology/.
#pragma once

#include "topology/topology.h"

namespace tutti::topo::detail {

/// Fills Gpu::cudaDevice and Gpu::links of `host` (adding GPUs CUDA sees that hwloc did not).
/// Does nothing when the libraries are absent or the host has no NVIDIA GPU; never fails.
void probeGpus(Host& host);

/// "00000000:3B:00.0" or "0000:3b:00.0" -> "0000:3b:00.0"; "" when it does not parse.
std::string normalizeBusId(const std::string& busId);

}  // namespace tutti::topo::detail
