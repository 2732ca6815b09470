// File: tests/gpu/gpu_main.cc
// Catch2 main for the GPU tests: exits 77 (ctest's skip code) when no CUDA device is present.
// The probe (cudaGetDeviceCount) runs in a forked child, so that a broken driver cannot take the
// test process down and this process initialises CUDA only when it will use it. --list* calls
// (catch_discover_tests at build time) never probe.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

namespace {

constexpr int kSkip = 77;

bool listing(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--list", 6) == 0) return true;
  }
  return false;
}

// True when a child process sees at least one CUDA device.
bool haveGpu() {
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    int n = 0;
    _exit(cudaGetDeviceCount(&n) == cudaSuccess && n > 0 ? 0 : 1);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (!listing(argc, argv) && !haveGpu()) {
    std::fprintf(stderr, "no CUDA device (cudaGetDeviceCount failed or returned 0): skipped\n");
    return kSkip;
  }
  return Catch::Session().run(argc, argv);
}
