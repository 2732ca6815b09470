// File: topology/gpu_probe.cc
// CUDA ordinals, peer access and NVLink counts through the CUDA driver API and NVML, loaded with
// dlopen so that one binary runs with and without a GPU. Only the few entry points used are
// declared here (their C signatures from cuda.h and nvml.h); no CUDA header is needed to build.
// Only called when hwloc saw an NVIDIA GPU, so CPU-only hosts never load either library.
#include "topology/gpu_probe.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <map>

namespace tutti::topo::detail {

namespace {

// cuda.h: CUresult is an int enum, CUdevice an int; CUDA_SUCCESS = 0.
using CuInit = int (*)(unsigned);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetPciBusId = int (*)(char*, int, int);
using CuDeviceCanAccessPeer = int (*)(int*, int, int);

// nvml.h: nvmlReturn_t is an int enum (NVML_SUCCESS = 0), nvmlDevice_t an opaque pointer,
// nvmlEnableState_t an int enum (NVML_FEATURE_ENABLED = 1).
struct NvmlPciInfo {  // nvmlPciInfo_t
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlGetHandleByBusId = int (*)(const char*, void**);
using NvmlGetNvLinkState = int (*)(void*, unsigned, int*);
using NvmlGetNvLinkRemotePci = int (*)(void*, unsigned, NvmlPciInfo*);
constexpr unsigned kNvmlMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS (Hopper, Blackwell)

template <typename F>
F sym(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

void probeCuda(Host& host) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  auto init = sym<CuInit>(lib, "cuInit");
  auto count = sym<CuDeviceGetCount>(lib, "cuDeviceGetCount");
  auto get = sym<CuDeviceGet>(lib, "cuDeviceGet");
  auto busIdOf = sym<CuDeviceGetPciBusId>(lib, "cuDeviceGetPCIBusId");
  auto canPeer = sym<CuDeviceCanAccessPeer>(lib, "cuDeviceCanAccessPeer");
  int n = 0;
  if (!init || !count || !get || !busIdOf || init(0) != 0 || count(&n) != 0) {
    dlclose(lib);
    return;
  }
  std::vector<int> gpuOfOrdinal(n, -1);
  for (int i = 0; i < n; ++i) {
    int dev = 0;
    char bus[64] = {};
    if (get(&dev, i) != 0 || busIdOf(bus, sizeof bus, dev) != 0) continue;
    const std::string id = normalizeBusId(bus);
    auto it = std::find_if(host.gpus.begin(), host.gpus.end(),
                           [&](const Gpu& g) { return g.busId == id; });
    if (it == host.gpus.end()) {  // CUDA sees it, hwloc did not (no PCI sysfs in a container)
      host.gpus.push_back({.busId = id, .name = "CUDA device"});
      it = host.gpus.end() - 1;
    }
    it->cudaDevice = i;
    gpuOfOrdinal[i] = static_cast<int>(it - host.gpus.begin());
  }
  for (int i = 0; canPeer && i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      int can = 0;
      if (i == j || gpuOfOrdinal[i] < 0 || gpuOfOrdinal[j] < 0) continue;
      if (canPeer(&can, i, j) == 0 && can)
        host.gpus[gpuOfOrdinal[i]].links.push_back(
            {.peerBusId = host.gpus[gpuOfOrdinal[j]].busId, .kind = "pcie", .count = 1});
    }
  }
  dlclose(lib);
}

void probeNvml(Host& host) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  auto init = sym<NvmlInit>(lib, "nvmlInit_v2");
  auto shutdown = sym<NvmlShutdown>(lib, "nvmlShutdown");
  auto byBus = sym<NvmlGetHandleByBusId>(lib, "nvmlDeviceGetHandleByPciBusId_v2");
  auto state = sym<NvmlGetNvLinkState>(lib, "nvmlDeviceGetNvLinkState");
  auto remote = sym<NvmlGetNvLinkRemotePci>(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  if (!init || !byBus || !state || !remote || init() != 0) {
    dlclose(lib);
    return;
  }
  for (Gpu& g : host.gpus) {
    void* dev = nullptr;
    if (byBus(g.busId.c_str(), &dev) != 0) continue;
    std::map<std::string, int> perPeer;
    for (unsigned l = 0; l < kNvmlMaxLinks; ++l) {
      int active = 0;
      NvmlPciInfo pci{};
      if (state(dev, l, &active) != 0 || active != 1) continue;
      if (remote(dev, l, &pci) != 0) continue;
      const std::string peer = normalizeBusId(pci.busId);
      if (!peer.empty()) ++perPeer[peer];
    }
    // NVLink replaces the PCIe peer path where both exist.
    for (const auto& [peer, count] : perPeer) {
      std::erase_if(g.links, [&](const GpuLink& x) { return x.peerBusId == peer; });
      g.links.push_back({.peerBusId = peer, .kind = "nvlink", .count = count});
    }
  }
  if (shutdown) shutdown();
  dlclose(lib);
}

}  // namespace

std::string normalizeBusId(const std::string& busId) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  if (std::sscanf(busId.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4) return "";
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, dev, fn);
}

void probeGpus(Host& host) {
  const bool nvidia = std::any_of(host.pci.begin(), host.pci.end(), [](const PciDevice& d) {
    return d.vendorId == 0x10de && ((d.className == "3D") || d.className == "VGA" ||
                                    d.className == "Display" || d.className == "Accelerator");
  });
  if (!nvidia) return;
  probeCuda(host);
  probeNvml(host);
}

}  // namespace tutti::topo::detail
