// File: kernels/cuda/program_narrow.cu
// The Program kernels for float16, bfloat16 and fp8 e4m3/e5m2 (kernels/cuda/program_kernels.cuh):
// computed in float, rounded to the type at every stored value.
#include "kernels/cuda/program_kernels.cuh"

namespace tutti::kernels::cuda::prog {

int launchProgramNarrow(const Program& prog, const Buffers& bufs, int blocks, void* stream) {
  switch (prog.dtype) {
    case DataType::kFloat16:
      return launchTyped<Half>(prog, bufs, blocks, stream);
    case DataType::kBfloat16:
      return launchTyped<BFloat16>(prog, bufs, blocks, stream);
    case DataType::kFp8E4M3:
      return launchTyped<Fp8E4M3>(prog, bufs, blocks, stream);
    case DataType::kFp8E5M2:
      return launchTyped<Fp8E5M2>(prog, bufs, blocks, stream);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

int launchSmallNarrow(const SmallProgram& sp, const SmallLaunch& l) {
  switch (l.dtype) {
    case DataType::kFloat16:
      return launchTypedSmall<Half>(sp, l);
    case DataType::kBfloat16:
      return launchTypedSmall<BFloat16>(sp, l);
    case DataType::kFp8E4M3:
      return launchTypedSmall<Fp8E4M3>(sp, l);
    case DataType::kFp8E5M2:
      return launchTypedSmall<Fp8E5M2>(sp, l);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace tutti::kernels::cuda::prog
