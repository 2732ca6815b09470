// File: kernels/cuda/program_launch.cc
// Host side of kernels/cuda_program.h: the checks (validate, null and misaligned buffers), the
// choice of kernel (small or grid, typed or copy), the launch geometry (small: one unit per
// thread; grid: blocks from the work, one wave, the SM count cached per device) and the
// translation of CUDA errors into Status. Compiled as C++ against the CUDA runtime API.
//
// Why two families. A launch of a few bytes is latency: the grid kernels spend it planning in
// shared memory (lane 0 of warp 0 walks an op's code and refs through the 4 KiB parameter bank,
// dependent loads one after the other, then a barrier), which grows with the leaves: 8 leaves x
// 8 destinations of 8 bytes took 7.0 us a call in a replayed graph, 2 x 2 took 4.4. The small
// kernels get that plan from the host, resolved into addresses in a 1.2 KiB parameter block,
// and run one unit per thread with no barrier; the grid kernels keep large work, where their
// batched loads and one-wave grid-stride loops give 0.91 of cudaMemcpy.
#include "kernels/cuda_program.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/cuda/program_launch.h"
#include "kernels/program_eval.h"
#include "kernels/program_host.h"

namespace tutti::kernels::cuda {
namespace {

using detail::ProgramPath;
using prog::kSmallAddrs;
using prog::kSmallOps;
using prog::kThreads;
using prog::SmallOp;
using prog::SmallProgram;
using program::Buffers;
using program::Program;

constexpr const char* kApi = "kernels::cuda::launchProgram";
// Blocks per SM at most: what fits at once, so that the grid is one wave and walks the work
// grid-stride. The typed kernels take up to 128 registers per thread (eight 16-byte leaf slots
// per thread plus the stack), so one block of 512 fits an SM; the copy kernel takes up to 64
// (two fit). Measured on an H200 (8 leaves x 8 destinations, 64 MiB float32): 3.80 TB/s with one
// block per SM, 3.62 with four (waves).
constexpr int kTypedBlocksPerSm = 1;
constexpr int kCopyBlocksPerSm = 2;

Status cudaFailure(const char* call, cudaError_t e) {
  return makeStatus(Code::kUnhandledCudaError, "{}: {} failed: {} ({})", kApi, call,
                    cudaGetErrorString(e), static_cast<int>(e));
}

// The current device's SM count, queried once per device. cudaGetDevice and
// cudaDeviceGetAttribute are legal while a stream is being captured.
Result<int> smCount() {
  int dev = 0;
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) {
    return cudaFailure("cudaGetDevice", e);
  }
  static std::mutex mu;
  static std::vector<std::pair<int, int>> cache;  // (device, SMs)
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& [d, sms] : cache) {
    if (d == dev) return sms;
  }
  int sms = 0;
  if (const cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
      e != cudaSuccess) {
    return cudaFailure("cudaDeviceGetAttribute", e);
  }
  sms = std::max(sms, 1);
  cache.emplace_back(dev, sms);
  return sms;
}

// Element accesses of a non-copy program need every buffer it uses aligned to the element.
Status checkAlignment(const Program& p, const Buffers& bufs) {
  const size_t elemBytes = dataTypeBytes(p.dtype);
  for (int o = 0; o < p.nops; ++o) {
    const program::Op& op = p.ops[o];
    if (op.count == 0) continue;
    for (int k = 0; k < op.nleaves + op.ndsts; ++k) {
      const int r = k < op.nleaves ? op.leaves + k : op.dsts + (k - op.nleaves);
      const int b = p.refs[r].buf();
      if (reinterpret_cast<uintptr_t>(bufs.ptr[b]) % elemBytes != 0) {
        return invalidArgument("{}: buffer {} is not aligned to its {}-byte elements (ptr={}, "
                               "op={}, ref={}, dtype={})",
                               kApi, b, elemBytes, bufs.ptr[b], o, r, dataTypeName(p.dtype));
      }
    }
  }
  return Status::ok();
}

// The compact form of a program for the small kernels, and the largest op's units (packs plus
// head plus tail). nullopt when it does not fit: more than kSmallOps ops with count > 0, more
// than kSmallAddrs leaves and destinations among them, or an op of 2^32 units or more.
struct SmallForm {
  SmallProgram sp;
  uint64_t maxUnits = 0;
};

std::optional<SmallForm> compact(const Program& p, const Buffers& bufs, bool copy) {
  const size_t elemBytes = dataTypeBytes(p.dtype);
  std::optional<SmallForm> out(std::in_place);
  SmallProgram& sp = out->sp;
  static_assert(sizeof(sp.scalar) == sizeof(p.scalar));
  std::copy(std::begin(p.scalar), std::end(p.scalar), std::begin(sp.scalar));
  sp.divisor = p.divisor;
  sp.preMul = p.preMul;
  int naddr = 0;
  for (int o = 0; o < p.nops; ++o) {
    const program::Op& op = p.ops[o];
    if (op.count == 0) continue;
    if (sp.nops == kSmallOps) return std::nullopt;
    // A valid code pushes each of its nleaves leaves once (ncode == 2 * nleaves - 1).
    if (naddr + (copy ? 1 : op.nleaves) + op.ndsts > kSmallAddrs) return std::nullopt;
    SmallOp& s = sp.ops[sp.nops++];
    s.leaf = static_cast<uint8_t>(naddr);
    uint64_t head = 0, packs = 0, tail = 0;
    if (copy) {
      const program::CopyLayout l = program::copyLayout(p, op, bufs, elemBytes);
      head = l.headBytes;
      packs = l.units;
      tail = l.tailBytes;
      s.unitBytes = static_cast<uint8_t>(l.unitBytes);
      sp.addr[naddr++] = program::refAddress(p, bufs, op.leaves, elemBytes);
    } else {
      const program::OpLayout l = program::opLayout(p, op, bufs, elemBytes);
      head = l.head;
      packs = l.packs;
      tail = l.tail;
      for (int c = 0; c < op.ncode; ++c) {
        const uint8_t byte = p.code[op.code + c];
        if (byte == program::kApply) {
          s.applyMask |= 1u << c;
        } else {
          sp.addr[naddr++] = program::refAddress(p, bufs, op.leaves + byte, elemBytes);
        }
      }
      s.nleaves = op.nleaves;
      s.ncode = op.ncode;
      s.divide = (op.flags & program::kDivide) ? 1 : 0;
    }
    if (head + packs + tail > UINT32_MAX) return std::nullopt;
    s.head = static_cast<uint32_t>(head);
    s.packs = static_cast<uint32_t>(packs);
    s.tail = static_cast<uint32_t>(tail);
    s.dsts = static_cast<uint8_t>(naddr);
    s.ndsts = op.ndsts;
    for (int d = 0; d < op.ndsts; ++d) {
      sp.addr[naddr++] = program::refAddress(p, bufs, op.dsts + d, elemBytes);
    }
    out->maxUnits = std::max(out->maxUnits, head + packs + tail);
  }
  return out;
}

// The small kernels' geometry: one unit per thread, whole warps, at most kThreads a block, and
// blocks small enough to spread the work over every SM (a few bytes: one warp; an op of 16K
// units: 128 blocks of 128 threads rather than 32 of 512, which would load through 32 SMs).
prog::SmallLaunch smallGeometry(const Program& p, const SmallForm& f, int sms, void* stream) {
  constexpr uint64_t kWarp = 32;
  const uint64_t perSm = (f.maxUnits * f.sp.nops + sms - 1) / sms;
  const uint64_t threads =
      (std::min<uint64_t>({kThreads, perSm, f.maxUnits}) + kWarp - 1) / kWarp * kWarp;
  prog::SmallLaunch l;
  l.dtype = p.dtype;
  l.op = p.op;
  l.threads = static_cast<int>(threads);
  l.blocksPerOp = static_cast<int>((f.maxUnits + threads - 1) / threads);
  l.stream = stream;
  return l;
}

int launchSmallFamily(const SmallProgram& sp, const prog::SmallLaunch& l, bool copy) {
  if (copy) return prog::launchSmallCopy(sp, l);
  switch (l.dtype) {
    case DataType::kFloat32:
    case DataType::kFloat64:
      return prog::launchSmallFloat(sp, l);
    case DataType::kFloat16:
    case DataType::kBfloat16:
    case DataType::kFp8E4M3:
    case DataType::kFp8E5M2:
      return prog::launchSmallNarrow(sp, l);
    default:
      return prog::launchSmallInt(sp, l);
  }
}

int launchTypedFamily(const Program& p, const Buffers& bufs, int blocks, void* stream) {
  switch (p.dtype) {
    case DataType::kFloat32:
    case DataType::kFloat64:
      return prog::launchProgramFloat(p, bufs, blocks, stream);
    case DataType::kFloat16:
    case DataType::kBfloat16:
    case DataType::kFp8E4M3:
    case DataType::kFp8E5M2:
      return prog::launchProgramNarrow(p, bufs, blocks, stream);
    default:
      return prog::launchProgramInt(p, bufs, blocks, stream);
  }
}

// The grid kernels: every op spread over the whole grid, each op starting where the previous
// one's work ends (program_kernels.cuh), so the grid covers the sum of the ops' work.
Status launchGrid(const Program& p, const Buffers& bufs, bool copy, void* stream) {
  const size_t elemBytes = dataTypeBytes(p.dtype);
  uint64_t units = 0;
  for (int o = 0; o < p.nops; ++o) {
    const program::Op& op = p.ops[o];
    if (op.count == 0) continue;
    units += copy ? program::workUnits(program::copyLayout(p, op, bufs, elemBytes))
                  : program::workUnits(program::opLayout(p, op, bufs, elemBytes));
  }
  TUTTI_TRY_ASSIGN(const int sms, smCount());
  const uint64_t want = (units + kThreads - 1) / kThreads;
  const uint64_t cap =
      static_cast<uint64_t>(sms) * (copy ? kCopyBlocksPerSm : kTypedBlocksPerSm);
  const int blocks = static_cast<int>(std::max<uint64_t>(1, std::min(want, cap)));
  const int e = copy ? prog::launchProgramCopy(p, bufs, blocks, stream)
                     : launchTypedFamily(p, bufs, blocks, stream);
  if (e != 0) return cudaFailure("kernel launch", static_cast<cudaError_t>(e));
  return Status::ok();
}

}  // namespace

namespace detail {

Result<bool> launchProgramOn(ProgramPath path, const Program& p, const Buffers& bufs,
                             void* stream) {
  TUTTI_TRY(program::validate(p));
  TUTTI_TRY(program::checkBuffers(p, bufs));
  const bool copy = program::copyOnly(p);
  if (!copy) TUTTI_TRY(checkAlignment(p, bufs));
  bool work = false;
  for (int o = 0; o < p.nops && !work; ++o) work = p.ops[o].count > 0;
  if (!work) return true;
  if (path != ProgramPath::kGrid) {
    const std::optional<SmallForm> small = compact(p, bufs, copy);
    if (!small) {
      if (path == ProgramPath::kSmall) return false;
    } else {
      TUTTI_TRY_ASSIGN(const int sms, smCount());
      const prog::SmallLaunch l = smallGeometry(p, *small, sms, stream);
      // kAuto: no more threads than one wave of the grid kernels; beyond, their batched
      // grid-stride loops win.
      const uint64_t threads =
          static_cast<uint64_t>(l.blocksPerOp) * small->sp.nops * static_cast<uint64_t>(l.threads);
      const int perSm = copy ? kCopyBlocksPerSm : kTypedBlocksPerSm;
      const bool take =
          path == ProgramPath::kSmall || threads <= static_cast<uint64_t>(sms) * perSm * kThreads;
      if (take) {
        const int e = launchSmallFamily(small->sp, l, copy);
        if (e != 0) return cudaFailure("kernel launch", static_cast<cudaError_t>(e));
        return true;
      }
    }
  }
  TUTTI_TRY(launchGrid(p, bufs, copy, stream));
  return true;
}

}  // namespace detail

Status launchProgram(const Program& p, const Buffers& bufs, void* stream) {
  return detail::launchProgramOn(ProgramPath::kAuto, p, bufs, stream).status();  // always taken
}

}  // namespace tutti::kernels::cuda
