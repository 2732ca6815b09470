// File: tests/unit/program_fixtures.h
// A small valid Program for the tests of its evaluators (tests/unit/program_eval_test.cc, the CPU
// emulator; tests/gpu/cuda_program_test.cc, the kernels): one op summing buffer 0 and buffer 2
// into buffer 1, float32, `count` elements.
#pragma once

#include <cstdint>

#include "kernels/program.h"

namespace tutti::kernels::program {

inline Program validProgram(uint64_t count = 4) {
  Program p;
  p.dtype = DataType::kFloat32;
  p.op = RedOp::kSum;
  p.nops = 1;
  p.ops[0] = Op{.count = count, .leaves = 0, .dsts = 2, .code = 0, .nleaves = 2, .ndsts = 1,
                .ncode = 3, .flags = 0};
  p.refs[0] = Ref::make(0, 0);
  p.refs[1] = Ref::make(2, 0);
  p.refs[2] = Ref::make(1, 0);
  p.nrefs = 3;
  p.code[0] = 0;
  p.code[1] = 1;
  p.code[2] = kApply;
  p.ncode = 3;
  return p;
}

}  // namespace tutti::kernels::program
