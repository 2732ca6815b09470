// File: kernels/cpu/hwy_runtime.cc
// Highway's run-time half for the self-contained libnccl.so.2. Our kernels (simd_kernels.cc) use
// Highway's headers for everything but three functions that live in libhwy.so (hwy/targets.cc):
// GetChosenTarget (the dispatch state of HWY_DYNAMIC_DISPATCH), SupportedTargets (which targets
// this CPU and OS can run) and SetSupportedTargetsForTest (the kernel bench's per-target runs).
// Debian ships libhwy only as a shared library, and a machine running PyTorch has no libhwy.so.1,
// so libnccl.so.2 defines these three itself; libtutti.so, the tests and the tools keep linking
// Highway's own.
//
// Why this is safe:
//  - ODR: only libnccl.so.2 links this file, never together with libhwy; its version script
//    keeps the definitions local, so they neither interpose on nor are interposed by a libhwy.so
//    that another library of the process loads.
//  - ABI: ChosenTarget and the target bits (HWY_AVX3, ...) come from the Highway headers the
//    kernels were compiled with, so the dispatch table and this file agree by construction (more
//    than with a run-time libhwy.so.1 of another 1.x release).
//  - Detection is conservative: a target is reported only when the CPU has every feature of its
//    Highway feature group (Highway's own grouping, so that code compiled for a target never
//    meets a CPU without one of the features it may use) and the OS saves the registers (XCR0).
//    Only the targets tutti compiles are detected (SSE4, AVX2, AVX3; simd_kernels.cc disables
//    SSSE3 and AVX3_DL); missing one costs speed, never correctness.
// Sources: Intel SDM vol. 2A, CPUID leaves 1, 7 and 0x80000001; XGETBV/XCR0 (vol. 1, 13.3).
#include <cpuid.h>
#include <hwy/targets.h>

#include <atomic>
#include <cstdint>

namespace tutti::kernels {

// The Highway target bits this CPU and OS support (among SSE4, AVX2, AVX3), plus the portable
// EMU128 and SCALAR fallbacks.
int64_t detectHwyTargets() {
  int64_t bits = HWY_SCALAR | HWY_EMU128;
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return bits;
  const unsigned maxLeaf = a;
  unsigned ecx1 = 0, edx1 = 0, ebx7 = 0, ecx81 = 0;
  __cpuid_count(1, 0, a, b, ecx1, edx1);
  if (maxLeaf >= 7) __cpuid_count(7, 0, a, ebx7, c, d);
  if (__get_cpuid(0x80000001u, &a, &b, &c, &d)) ecx81 = c;
  auto has = [](unsigned reg, int bit) { return (reg >> bit) & 1u; };

  const bool sse4 = has(edx1, 25) && has(edx1, 26)                    // SSE, SSE2
                    && has(ecx1, 0) && has(ecx1, 9)                   // SSE3, SSSE3
                    && has(ecx1, 19) && has(ecx1, 20)                 // SSE4.1, SSE4.2
                    && has(ecx1, 1) && has(ecx1, 25);                 // PCLMULQDQ, AES
  const bool avx2 = sse4 && has(ecx1, 28) && has(ebx7, 5)             // AVX, AVX2
                    && has(ecx81, 5)                                  // LZCNT
                    && has(ebx7, 3) && has(ebx7, 8) && has(ecx1, 12)  // BMI1, BMI2, FMA
                    && has(ecx1, 29);                                 // F16C
  const bool avx3 = avx2 && has(ebx7, 16) && has(ebx7, 31)            // AVX512F, VL
                    && has(ebx7, 17) && has(ebx7, 30)                 // DQ, BW
                    && has(ebx7, 28);                                 // CD
  // Registers the OS saves across context switches (XCR0; readable when OSXSAVE is set).
  unsigned xcr0 = 0;
  if (has(ecx1, 27)) {
    unsigned hi = 0;
    __asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(hi) : "c"(0));
  }
  const bool ymm = (xcr0 & 0x6u) == 0x6u;     // XMM and YMM state
  const bool zmm = (xcr0 & 0xe0u) == 0xe0u;   // opmask, ZMM_Hi256, Hi16_ZMM state
  if (sse4) bits |= HWY_SSE4;
  if (avx2 && ymm) bits |= HWY_AVX2;
  if (avx3 && ymm && zmm) bits |= HWY_AVX3;
#endif
  return bits;
}

}  // namespace tutti::kernels

#ifndef TUTTI_HWY_RUNTIME_DETECT_ONLY  // the test compiles only detectHwyTargets (beside libhwy)
namespace hwy {
namespace {
std::atomic<int64_t> gForTest{0};
}  // namespace

int64_t SupportedTargets() {
  const int64_t forced = gForTest.load();
  if (forced != 0) return forced;
  static const int64_t detected = tutti::kernels::detectHwyTargets();
  return detected;
}

void SetSupportedTargetsForTest(int64_t targets) {
  gForTest.store(targets);
  GetChosenTarget().DeInit();  // the next dispatch picks again, as with Highway's own
}

ChosenTarget& GetChosenTarget() {
  static ChosenTarget chosen;
  return chosen;
}
}  // namespace hwy
#endif
