// File: kernels/cuda/peer_narrow.cu
// The peer kernels for float16, bfloat16 and the two fp8 types (kernels/cuda/peer_kernels.cuh):
// computed in float, rounded to nearest even at every stored value.
#include "kernels/cuda/peer_kernels.cuh"

namespace tutti::kernels::cuda::peer_dev {

int launchPeerNarrow(const Launch& l, DataType dtype, RedOp op, int blocks, void* stream) {
  switch (dtype) {
    case DataType::kFloat16:
      return launchTyped<Half>(l, op, blocks, stream);
    case DataType::kBfloat16:
      return launchTyped<BFloat16>(l, op, blocks, stream);
    case DataType::kFp8E4M3:
      return launchTyped<Fp8E4M3>(l, op, blocks, stream);
    case DataType::kFp8E5M2:
      return launchTyped<Fp8E5M2>(l, op, blocks, stream);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace tutti::kernels::cuda::peer_dev
