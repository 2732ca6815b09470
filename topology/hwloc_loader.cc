// File: topology/hwloc_loader.cc
// hwloc for libnccl.so.2, opened at run time. libnccl.so.2 must load on machines without hwloc
// (a PyTorch host), and Debian's libhwloc.a is not position-independent, so it cannot be linked
// into a shared library. This file defines the hwloc functions tutti's probe calls
// (topology/probe.cc and the inline helpers of hwloc.h) as forwarders to libhwloc.so.15, opened
// with dlopen on first use, as libibverbs and the CUDA driver are. When hwloc is absent, or its
// API major version differs from the headers', hwloc_topology_init fails with ENOSYS, the probe
// reports it, and the communicator uses a bare host (core/selection.cc): only the link model
// loses its hardware details. libtutti.so and the tools link libhwloc.so normally; only
// libnccl.so.2 compiles this file, and its version script keeps these definitions local.
//
// The library is opened RTLD_LOCAL, so it never interposes on anything. Should another library
// of the process have loaded libhwloc.so.15 already, dlopen returns that same instance: there is
// only ever one hwloc in the process (hwloc's plugins, which want the hwloc core in the global
// namespace, then behave as for that library).
#include <dlfcn.h>
#include <hwloc.h>

#include <cerrno>
#include <mutex>

#include "base/log.h"

// Every hwloc function the probe reaches: (return type, name, parameters, argument names, what to
// return when hwloc is unavailable). A function missing here shows up as an undefined symbol
// when libnccl.so.2 is linked (-Wl,--no-undefined), or as a NEEDED libhwloc.so that
// tests/nccl/needed.sh rejects.
#define TUTTI_HWLOC_FUNCTIONS(X)                                                                 \
  X(int, hwloc_topology_init, (hwloc_topology_t * t), (t), -1)                                    \
  X(int, hwloc_topology_load, (hwloc_topology_t t), (t), -1)                                      \
  X(void, hwloc_topology_destroy, (hwloc_topology_t t), (t), )                                    \
  X(int, hwloc_topology_set_io_types_filter, (hwloc_topology_t t, enum hwloc_type_filter_e f),    \
    (t, f), -1)                                                                                   \
  X(int, hwloc_topology_set_icache_types_filter,                                                  \
    (hwloc_topology_t t, enum hwloc_type_filter_e f), (t, f), -1)                                 \
  X(int, hwloc_get_type_depth, (hwloc_topology_t t, hwloc_obj_type_t type), (t, type),            \
    HWLOC_TYPE_DEPTH_UNKNOWN)                                                                     \
  X(unsigned, hwloc_get_nbobjs_by_depth, (hwloc_topology_t t, int depth), (t, depth), 0)          \
  X(hwloc_obj_t, hwloc_get_obj_by_depth, (hwloc_topology_t t, int depth, unsigned idx),           \
    (t, depth, idx), nullptr)                                                                     \
  X(int, hwloc_bitmap_iszero, (hwloc_const_bitmap_t b), (b), 1)                                   \
  X(int, hwloc_bitmap_first, (hwloc_const_bitmap_t b), (b), -1)                                   \
  X(int, hwloc_bitmap_next, (hwloc_const_bitmap_t b, int prev), (b, prev), -1)                    \
  X(int, hwloc_bitmap_weight, (hwloc_const_bitmap_t b), (b), -1)                                  \
  X(int, hwloc_bitmap_isincluded, (hwloc_const_bitmap_t sub, hwloc_const_bitmap_t super),         \
    (sub, super), 0)

namespace tutti::topo {
namespace {

struct HwlocApi {
  bool ok = false;
#define TUTTI_HWLOC_POINTER(ret, name, params, args, fallback) ret(*name) params = nullptr;
  TUTTI_HWLOC_FUNCTIONS(TUTTI_HWLOC_POINTER)
#undef TUTTI_HWLOC_POINTER
};

HwlocApi load() {
  HwlocApi api;
  constexpr const char* kLib = "libhwloc.so.15";
  void* h = dlopen(kLib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    TUTTI_LOG_INFO(Subsys::kTopo, "topology: {} not loaded ({}): no hardware details", kLib,
                   dlerror());
    return api;
  }
  auto version = reinterpret_cast<unsigned (*)()>(dlsym(h, "hwloc_get_api_version"));
  if (!version || (version() >> 16) != (HWLOC_API_VERSION >> 16)) {
    TUTTI_LOG_INFO(Subsys::kTopo, "topology: {} has API version {:#x}, tutti was built for {:#x}: "
                   "not used", kLib, version ? version() : 0u, HWLOC_API_VERSION);
    return api;  // the handle stays open: closing a library that may be shared gains nothing
  }
  bool all = true;
#define TUTTI_HWLOC_RESOLVE(ret, name, params, args, fallback) \
  api.name = reinterpret_cast<ret(*) params>(dlsym(h, #name)); \
  all = all && api.name != nullptr;
  TUTTI_HWLOC_FUNCTIONS(TUTTI_HWLOC_RESOLVE)
#undef TUTTI_HWLOC_RESOLVE
  api.ok = all;
  if (!all) TUTTI_LOG_INFO(Subsys::kTopo, "topology: {} lacks a function tutti uses", kLib);
  return api;
}

const HwlocApi& api() {
  static const HwlocApi a = load();
  return a;
}

}  // namespace
}  // namespace tutti::topo

extern "C" {
#define TUTTI_HWLOC_FORWARD(ret, name, params, args, fallback) \
  ret name params {                                            \
    const auto& a = tutti::topo::api();                        \
    if (!a.ok) {                                               \
      errno = ENOSYS;                                          \
      return fallback;                                         \
    }                                                          \
    return a.name args;                                        \
  }
TUTTI_HWLOC_FUNCTIONS(TUTTI_HWLOC_FORWARD)
#undef TUTTI_HWLOC_FORWARD
}
