// File: kernels/cuda/peer_int.cu
// The peer kernels for the six integer types, and the byte-moving kernel of programs without
// arithmetic (kernels/cuda/peer_kernels.cuh).
#include "kernels/cuda/peer_kernels.cuh"

namespace tutti::kernels::cuda::peer_dev {

int launchPeerInt(const Launch& l, DataType dtype, RedOp op, int blocks, void* stream) {
  switch (dtype) {
    case DataType::kInt8:
      return launchTyped<int8_t>(l, op, blocks, stream);
    case DataType::kUint8:
      return launchTyped<uint8_t>(l, op, blocks, stream);
    case DataType::kInt32:
      return launchTyped<int32_t>(l, op, blocks, stream);
    case DataType::kUint32:
      return launchTyped<uint32_t>(l, op, blocks, stream);
    case DataType::kInt64:
      return launchTyped<int64_t>(l, op, blocks, stream);
    case DataType::kUint64:
      return launchTyped<uint64_t>(l, op, blocks, stream);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

int launchPeerBytes(const Launch& l, int blocks, void* stream) {
  return launchWith<uint8_t, RedOp::kSum>(l, blocks, stream);
}

}  // namespace tutti::kernels::cuda::peer_dev
