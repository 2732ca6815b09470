// File: kernels/cuda/reduce_float.cu
// Reduce kernels for float32 and float64, and the divide (avg) kernels of every dtype.
#include "kernels/cuda/reduce_kernels.cuh"

namespace tutti::kernels::cuda::detail {

int launchReduceFloat(DataType dtype, const ReduceLaunch& l) {
  switch (dtype) {
    case DataType::kFloat32:
      return launchReduceTyped<float>(l);
    case DataType::kFloat64:
      return launchReduceTyped<double>(l);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

namespace {
template <typename T>
int divideTyped(void* buf, size_t count, int divisor, int blocks, int threads, void* stream) {
  ncclDevKernel_Divide<T><<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<T*>(buf), count, divisor);
  return static_cast<int>(cudaGetLastError());
}
}  // namespace

int launchDivide(DataType dtype, void* buf, size_t count, int divisor, int blocks, int threads,
                 void* stream) {
  switch (dtype) {
    case DataType::kInt8:
      return divideTyped<int8_t>(buf, count, divisor, blocks, threads, stream);
    case DataType::kUint8:
      return divideTyped<uint8_t>(buf, count, divisor, blocks, threads, stream);
    case DataType::kInt32:
      return divideTyped<int32_t>(buf, count, divisor, blocks, threads, stream);
    case DataType::kUint32:
      return divideTyped<uint32_t>(buf, count, divisor, blocks, threads, stream);
    case DataType::kInt64:
      return divideTyped<int64_t>(buf, count, divisor, blocks, threads, stream);
    case DataType::kUint64:
      return divideTyped<uint64_t>(buf, count, divisor, blocks, threads, stream);
    case DataType::kFloat16:
      return divideTyped<Half>(buf, count, divisor, blocks, threads, stream);
    case DataType::kFloat32:
      return divideTyped<float>(buf, count, divisor, blocks, threads, stream);
    case DataType::kFloat64:
      return divideTyped<double>(buf, count, divisor, blocks, threads, stream);
    case DataType::kBfloat16:
      return divideTyped<BFloat16>(buf, count, divisor, blocks, threads, stream);
    case DataType::kFp8E4M3:
      return divideTyped<Fp8E4M3>(buf, count, divisor, blocks, threads, stream);
    case DataType::kFp8E5M2:
      return divideTyped<Fp8E5M2>(buf, count, divisor, blocks, threads, stream);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace tutti::kernels::cuda::detail
