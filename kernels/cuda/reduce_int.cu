// File: kernels/cuda/reduce_int.cu
// Reduce kernels for the integer dtypes (one file per dtype family so that they compile in
// parallel).
#include "kernels/cuda/reduce_kernels.cuh"

namespace tutti::kernels::cuda::detail {

int launchReduceInt(DataType dtype, const ReduceLaunch& l) {
  switch (dtype) {
    case DataType::kInt8:
      return launchReduceTyped<int8_t>(l);
    case DataType::kUint8:
      return launchReduceTyped<uint8_t>(l);
    case DataType::kInt32:
      return launchReduceTyped<int32_t>(l);
    case DataType::kUint32:
      return launchReduceTyped<uint32_t>(l);
    case DataType::kInt64:
      return launchReduceTyped<int64_t>(l);
    case DataType::kUint64:
      return launchReduceTyped<uint64_t>(l);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace tutti::kernels::cuda::detail
