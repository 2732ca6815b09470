// File: kernels/cuda/reduce_narrow.cu
// Reduce kernels for float16, bfloat16 and the fp8 formats (computed in float).
#include "kernels/cuda/reduce_kernels.cuh"

namespace tutti::kernels::cuda::detail {

int launchReduceNarrow(DataType dtype, const ReduceLaunch& l) {
  switch (dtype) {
    case DataType::kFloat16:
      return launchReduceTyped<Half>(l);
    case DataType::kBfloat16:
      return launchReduceTyped<BFloat16>(l);
    case DataType::kFp8E4M3:
      return launchReduceTyped<Fp8E4M3>(l);
    case DataType::kFp8E5M2:
      return launchReduceTyped<Fp8E5M2>(l);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace tutti::kernels::cuda::detail
