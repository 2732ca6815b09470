// File: tests/nccl/dlopen_test.cc
// dlopen(RTLD_NOW) of libnccl.so.2 resolves every nccl* symbol that recent PyTorch releases
// import, as `import torch` does (Python loads extensions with RTLD_NOW: one missing symbol is an
// ImportError, pytorch#119072, #120186, #186591).
//
// Source of the list: the NCCL functions PyTorch's libtorch_cuda.so references when built against
// NCCL 2.29 (2026 wheels: torch/csrc/cuda/nccl.cpp, torch/csrc/distributed/c10d/NCCLUtils.cpp,
// ProcessGroupNCCL.cpp and the NCCL symmetric-memory backend, gated by NCCL_HAS_* on the header's
// version), as summarised in /work/shared/reference/ecosystem.md section 1 (host-API introduction
// table: every function up to 2.29.7, including ncclCommSuspend/Resume/MemStats). It was not taken
// with nm from a wheel (no torch on this machine); the symbol test (symbols.sh) covers NVIDIA's
// full export list. Usage: nccl_dlopen_test path/to/libnccl.so.2
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s libnccl.so.2\n", argv[0]);
    return 2;
  }
  static const char* const kTorchImports[] = {
      // <= 2.7
      "ncclGetVersion",
      "ncclGetUniqueId",
      "ncclCommInitRank",
      "ncclCommInitAll",
      "ncclCommDestroy",
      "ncclCommAbort",
      "ncclGetErrorString",
      "ncclCommGetAsyncError",
      "ncclCommCount",
      "ncclCommCuDevice",
      "ncclCommUserRank",
      "ncclReduce",
      "ncclBcast",
      "ncclBroadcast",
      "ncclAllReduce",
      "ncclReduceScatter",
      "ncclAllGather",
      "ncclGroupStart",
      "ncclGroupEnd",
      "ncclSend",
      "ncclRecv",
      // 2.11 (PREMUL_SUM), 2.13, 2.14 (nonblocking), 2.18, 2.19, 2.22, 2.23
      "ncclRedOpCreatePreMulSum",
      "ncclRedOpDestroy",
      "ncclGetLastError",
      "ncclCommInitRankConfig",
      "ncclCommFinalize",
      "ncclCommSplit",
      "ncclCommRegister",
      "ncclCommDeregister",
      "ncclMemAlloc",
      "ncclMemFree",
      "ncclGroupSimulateEnd",
      "ncclCommInitRankScalable",
      // 2.27, 2.28 (symmetric memory, shrink, all-to-all)
      "ncclCommWindowRegister",
      "ncclCommWindowDeregister",
      "ncclCommShrink",
      "ncclAlltoAll",
      "ncclGather",
      "ncclScatter",
      "ncclCommRevoke",
      "ncclDevCommCreate",
      "ncclDevCommDestroy",
      // 2.29 (2026 wheels)
      "ncclCommGetUniqueId",
      "ncclCommGrow",
      "ncclCommSuspend",
      "ncclCommResume",
      "ncclCommMemStats",
      "ncclWinGetUserPtr",
      // torch 2.12 ... 2.15 (NCCL 2.29/2.30 pins): window pointers for symmetric memory
      "ncclGetLsaMultimemDevicePointer",
      "ncclGetPeerDevicePointer",
  };
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "dlopen(%s, RTLD_NOW) failed: %s\n", argv[1], dlerror());
    return 1;
  }
  int missing = 0, n = 0;
  for (const char* name : kTorchImports) {
    ++n;
    if (!dlsym(lib, name)) {
      std::fprintf(stderr, "missing: %s\n", name);
      ++missing;
    }
  }
  // Call one through the handle: the library must be usable, not just linkable.
  using GetVersion = int (*)(int*);
  int version = 0;
  auto gv = reinterpret_cast<GetVersion>(dlsym(lib, "ncclGetVersion"));
  if (!gv || gv(&version) != 0 || version != 23203) {
    std::fprintf(stderr, "ncclGetVersion through dlopen gave %d\n", version);
    ++missing;
  }
  std::printf("%d of %d PyTorch imports resolved; ncclGetVersion = %d\n", n - missing, n, version);
  dlclose(lib);
  return missing ? 1 : 0;
}
