// File: tests/gpu/program_test_util.h
// Helpers the Program kernel tests share (cuda_program_test.cc, cuda_program_perf_test.cc):
// device memory that frees itself, the kernel path names, one op of N leaves and M destinations.
#pragma once

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <algorithm>
#include <utility>

#include "kernels/cuda_program.h"
#include "kernels/program.h"

#define CUDA_REQUIRE(call) REQUIRE((call) == cudaSuccess)

namespace tutti::kernels::program {

inline const char* pathName(cuda::detail::ProgramPath path) {
  switch (path) {
    case cuda::detail::ProgramPath::kAuto:
      return "auto";
    case cuda::detail::ProgramPath::kGrid:
      return "grid";
    case cuda::detail::ProgramPath::kSmall:
      return "small";
  }
  return "?";
}

struct DeviceMemory {
  explicit DeviceMemory(size_t bytes) { CUDA_REQUIRE(cudaMalloc(&p, std::max<size_t>(bytes, 1))); }
  ~DeviceMemory() { cudaFree(p); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  void* p = nullptr;
};

// Op `op` of `p` becomes a chain over its `nleaves` leaves: ((l0 l1 op) l2 op) ...
inline void appendChain(Program& p, Op& op) {
  op.code = p.ncode;
  p.code[p.ncode++] = 0;
  for (int k = 1; k < op.nleaves; ++k) {
    p.code[p.ncode++] = static_cast<uint8_t>(k);
    p.code[p.ncode++] = kApply;
  }
  op.ncode = static_cast<uint8_t>(p.ncode - op.code);
}

// One op of `nleaves` leaves (a chain) and `ndsts` destinations of `count` elements, every ref
// at element 0 of its own buffer, buffers 0, 1, ... at the addresses of `mem` in that order.
inline std::pair<Program, Buffers> oneOp(DataType dtype, int nleaves, int ndsts, uint64_t count,
                                  void* const* mem) {
  Program p;
  p.dtype = dtype;
  p.op = RedOp::kSum;
  p.nops = 1;
  Op& op = p.ops[0];
  op.count = count;
  op.nleaves = static_cast<uint8_t>(nleaves);
  op.ndsts = static_cast<uint8_t>(ndsts);
  op.leaves = 0;
  op.dsts = static_cast<uint16_t>(nleaves);
  Buffers bufs;
  for (int k = 0; k < nleaves + ndsts; ++k) {
    p.refs[k] = Ref::make(k, 0);
    bufs.ptr[k] = mem[k];
  }
  p.nrefs = static_cast<uint16_t>(nleaves + ndsts);
  appendChain(p, op);
  return {p, bufs};
}

}  // namespace tutti::kernels::program
