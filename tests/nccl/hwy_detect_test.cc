// File: tests/nccl/hwy_detect_test.cc
// libnccl.so.2 detects the CPU's Highway targets itself (kernels/cpu/hwy_runtime.cc) instead of
// linking libhwy.so. This program is linked with Highway's own library as well and checks, on the
// machine it runs on, that the two agree on every target tutti compiles (SSE4, AVX2, AVX3, and
// the EMU128/SCALAR fallbacks): a target we report that Highway does not would crash (SIGILL);
// one we miss would be slower.
#include <hwy/targets.h>

#include <cstdint>
#include <cstdio>

namespace tutti::kernels {
int64_t detectHwyTargets();
}

int main() {
  const int64_t compiled = HWY_SSE4 | HWY_AVX2 | HWY_AVX3 | HWY_EMU128 | HWY_SCALAR;
  const int64_t theirs = hwy::SupportedTargets() & compiled;
  const int64_t ours = tutti::kernels::detectHwyTargets();
  std::printf("Highway: %#llx, tutti: %#llx (of %#llx)\n", static_cast<long long>(theirs),
              static_cast<long long>(ours), static_cast<long long>(compiled));
  for (int64_t bit : {HWY_SSE4, HWY_AVX2, HWY_AVX3, HWY_EMU128, HWY_SCALAR})
    std::printf("  %-8s Highway %d tutti %d\n", hwy::TargetName(bit), (theirs & bit) != 0,
                (ours & bit) != 0);
  if (ours != theirs) {
    std::printf("FAILED: the detections differ\n");
    return 1;
  }
  std::printf("ok\n");
  return 0;
}
