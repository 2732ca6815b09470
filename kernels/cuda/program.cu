// File: kernels/cuda/program.cu
// The Program kernels for float32 and float64, the copy kernels of copy-only programs (grid and
// small), and their launchers (kernels/cuda/program_launch.h). The integer and narrow-float
// instantiations are in program_int.cu and program_narrow.cu, so that the three files compile in
// parallel.
#include "kernels/cuda/program_kernels.cuh"

// Copy-only programs (kernels/program.h's copyOnly): bytes, whatever the dtype. Each op moves in
// units of the widest power of two up to 16 bytes modulo which all its refs agree
// (program_eval.h's copyLayout), with single bytes before the first and after the last unit.
// Few registers: four blocks of 512 threads fit on an SM.
__global__ void __launch_bounds__(tutti::kernels::cuda::prog::kThreads, 2)
    ncclDevKernel_ProgramCopy(const __grid_constant__ tutti::kernels::program::Program prog,
                              const __grid_constant__ tutti::kernels::program::Buffers bufs) {
  using namespace tutti::kernels::cuda::prog;
  namespace program = tutti::kernels::program;
  __shared__ uintptr_t addr[kMaxRefs];
  __shared__ CopyPlan plans[kMaxOps];
  const uint64_t nthreads = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const uint64_t tid = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t elemBytes = tutti::dataTypeBytes(prog.dtype);
  for (int r = static_cast<int>(threadIdx.x); r < prog.nrefs; r += blockDim.x) {
    addr[r] = program::refAddress(prog, bufs, r, elemBytes);
  }
  if (threadIdx.x < 32) {
    const int lane = static_cast<int>(threadIdx.x);
    uint64_t units = 0;
    if (lane < prog.nops) {
      const program::Op& op = prog.ops[lane];
      const program::CopyLayout l = program::copyLayout(prog, op, bufs, elemBytes);
      CopyPlan& plan = plans[lane];
      plan.src = program::refAddress(prog, bufs, op.leaves, elemBytes);
      plan.headBytes = l.headBytes;
      plan.units = l.units;
      plan.tailBytes = l.tailBytes;
      plan.unitBytes = l.unitBytes;
      plan.dsts = op.dsts;
      plan.ndsts = op.ndsts;
      units = program::workUnits(l);
    }
    const uint64_t before = warpExclusiveSum(units, lane);
    if (lane < prog.nops) plans[lane].rotate = before % nthreads;
  }
  __syncthreads();
#pragma unroll 1
  for (int o = 0; o < prog.nops; ++o) {
    const CopyPlan& plan = plans[o];
    const uintptr_t* dsts = addr + plan.dsts;
    const uint64_t vt = virtualThread(tid, plan.rotate, nthreads);
    const uint64_t tailStart = plan.headBytes + plan.units * plan.unitBytes;
#pragma unroll 1
    for (int d = 0; d < plan.ndsts; ++d) {
      if (dsts[d] == plan.src) continue;
      if (vt < plan.headBytes) stGlobalBits<1>(dsts[d] + vt, ldGlobalBits<1>(plan.src + vt));
      if (vt < plan.tailBytes) {
        stGlobalBits<1>(dsts[d] + tailStart + vt, ldGlobalBits<1>(plan.src + tailStart + vt));
      }
    }
    if (vt >= plan.units) continue;
    switch (plan.unitBytes) {
      case 16:
        copyUnits<16>(plan, dsts, vt, nthreads);
        break;
      case 8:
        copyUnits<8>(plan, dsts, vt, nthreads);
        break;
      case 4:
        copyUnits<4>(plan, dsts, vt, nthreads);
        break;
      case 2:
        copyUnits<2>(plan, dsts, vt, nthreads);
        break;
      default:
        copyUnits<1>(plan, dsts, vt, nthreads);
        break;
    }
  }
}

namespace tutti::kernels::cuda::prog {

// One unit of kBytes at byte `offset` of the source to every destination but one at the
// source's address (as copyUnits).
template <int kBytes>
__device__ __forceinline__ void copyOneUnit(uintptr_t src, const uintptr_t* dsts, int ndsts,
                                            uint64_t offset) {
  using W = std::conditional_t<kBytes == 16, uint4, uint64_t>;
  W v;
  if constexpr (kBytes == 16) {
    v = ldGlobal16(src + offset);
  } else {
    v = ldGlobalBits<kBytes>(src + offset);
  }
#pragma unroll 1
  for (int d = 0; d < ndsts; ++d) {
    if (dsts[d] == src) continue;
    if constexpr (kBytes == 16) {
      stGlobal16(dsts[d] + offset, v);
    } else {
      stGlobalBits<kBytes>(dsts[d] + offset, v);
    }
  }
}

}  // namespace tutti::kernels::cuda::prog

// The small path of copy-only programs (program_launch.h's SmallProgram, laid out by copyLayout
// on the host): block (x, y) takes units [x * blockDim.x, (x + 1) * blockDim.x) of op y, one per
// thread: the op's units of unitBytes first, then its head bytes, then its tail bytes.
__global__ void __launch_bounds__(tutti::kernels::cuda::prog::kThreads, 2)
    ncclDevKernel_ProgramCopySmall(
        const __grid_constant__ tutti::kernels::cuda::prog::SmallProgram sp) {
  using namespace tutti::kernels::cuda::prog;
  const SmallOp& op = sp.ops[blockIdx.y];
  const uint64_t vt = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const uintptr_t src = sp.addr[op.leaf];
  const uintptr_t* dsts = sp.addr + op.dsts;
  const int ndsts = op.ndsts;
  const uint64_t units = op.packs;
  const uint32_t unitBytes = op.unitBytes;
  if (vt < units) {
    const uint64_t offset = op.head + vt * unitBytes;
    switch (unitBytes) {
      case 16:
        copyOneUnit<16>(src, dsts, ndsts, offset);
        break;
      case 8:
        copyOneUnit<8>(src, dsts, ndsts, offset);
        break;
      case 4:
        copyOneUnit<4>(src, dsts, ndsts, offset);
        break;
      case 2:
        copyOneUnit<2>(src, dsts, ndsts, offset);
        break;
      default:
        copyOneUnit<1>(src, dsts, ndsts, offset);
        break;
    }
    return;
  }
  uint64_t offset = vt - units;  // a head byte, else a tail byte, else nothing
  if (offset >= op.head) {
    offset -= op.head;
    if (offset >= op.tail) return;
    offset += op.head + units * unitBytes;
  }
  copyOneUnit<1>(src, dsts, ndsts, offset);
}

namespace tutti::kernels::program {
// evalElement is the element-wise reference of these kernels and must stay callable on the
// device: instantiating it here compiles it for both sides.
template __host__ __device__ void evalElement<float, RedOp::kSum>(const Program&, const Op&,
                                                                   const Buffers&, uint64_t);
template __host__ __device__ void evalElement<Half, RedOp::kMax>(const Program&, const Op&,
                                                                  const Buffers&, uint64_t);
template __host__ __device__ void evalElement<Fp8E5M2, RedOp::kProd>(const Program&, const Op&,
                                                                      const Buffers&, uint64_t);
template __host__ __device__ void evalElement<int8_t, RedOp::kMin>(const Program&, const Op&,
                                                                    const Buffers&, uint64_t);
}  // namespace tutti::kernels::program

namespace tutti::kernels::cuda::prog {

int launchProgramCopy(const Program& prog, const Buffers& bufs, int blocks, void* stream) {
  ncclDevKernel_ProgramCopy<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(prog,
                                                                                       bufs);
  return static_cast<int>(cudaGetLastError());
}

int launchSmallCopy(const SmallProgram& sp, const SmallLaunch& l) {
  const dim3 grid(static_cast<unsigned>(l.blocksPerOp), sp.nops);
  const auto s = static_cast<cudaStream_t>(l.stream);
  ncclDevKernel_ProgramCopySmall<<<grid, l.threads, 0, s>>>(sp);
  return static_cast<int>(cudaGetLastError());
}

int launchSmallFloat(const SmallProgram& sp, const SmallLaunch& l) {
  switch (l.dtype) {
    case DataType::kFloat32:
      return launchTypedSmall<float>(sp, l);
    case DataType::kFloat64:
      return launchTypedSmall<double>(sp, l);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

int launchProgramFloat(const Program& prog, const Buffers& bufs, int blocks, void* stream) {
  switch (prog.dtype) {
    case DataType::kFloat32:
      return launchTyped<float>(prog, bufs, blocks, stream);
    case DataType::kFloat64:
      return launchTyped<double>(prog, bufs, blocks, stream);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace tutti::kernels::cuda::prog
