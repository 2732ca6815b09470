// File: kernels/cuda/peer_float.cu
// The peer kernels for float32 and float64 (kernels/cuda/peer_kernels.cuh).
#include "kernels/cuda/peer_kernels.cuh"

namespace tutti::kernels::cuda::peer_dev {

int launchPeerFloat(const Launch& l, DataType dtype, RedOp op, int blocks, void* stream) {
  switch (dtype) {
    case DataType::kFloat32:
      return launchTyped<float>(l, op, blocks, stream);
    case DataType::kFloat64:
      return launchTyped<double>(l, op, blocks, stream);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace tutti::kernels::cuda::peer_dev
