// File: kernels/cuda/program_int.cu
// The Program kernels for the six integer types (kernels/cuda/program_kernels.cuh).
#include "kernels/cuda/program_kernels.cuh"

namespace tutti::kernels::cuda::prog {

int launchProgramInt(const Program& prog, const Buffers& bufs, int blocks, void* stream) {
  switch (prog.dtype) {
    case DataType::kInt8:
      return launchTyped<int8_t>(prog, bufs, blocks, stream);
    case DataType::kUint8:
      return launchTyped<uint8_t>(prog, bufs, blocks, stream);
    case DataType::kInt32:
      return launchTyped<int32_t>(prog, bufs, blocks, stream);
    case DataType::kUint32:
      return launchTyped<uint32_t>(prog, bufs, blocks, stream);
    case DataType::kInt64:
      return launchTyped<int64_t>(prog, bufs, blocks, stream);
    case DataType::kUint64:
      return launchTyped<uint64_t>(prog, bufs, blocks, stream);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

int launchSmallInt(const SmallProgram& sp, const SmallLaunch& l) {
  switch (l.dtype) {
    case DataType::kInt8:
      return launchTypedSmall<int8_t>(sp, l);
    case DataType::kUint8:
      return launchTypedSmall<uint8_t>(sp, l);
    case DataType::kInt32:
      return launchTypedSmall<int32_t>(sp, l);
    case DataType::kUint32:
      return launchTypedSmall<uint32_t>(sp, l);
    case DataType::kInt64:
      return launchTypedSmall<int64_t>(sp, l);
    case DataType::kUint64:
      return launchTypedSmall<uint64_t>(sp, l);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace tutti::kernels::cuda::prog
