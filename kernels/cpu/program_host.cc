// File: kernels/cpu/program_host.cc
// validate, checkBuffers and the CPU emulator of kernels/program_host.h. Built with
// -ffp-contract=off (kernels/CMakeLists.txt): the premultiplication and the ops must not fuse.
#include "kernels/program_host.h"

#include <cstdint>

#include "kernels/convert.h"
#include "kernels/program_eval.h"

namespace tutti::kernels::program {
namespace {

constexpr const char* kValidate = "program::validate";

bool isProgramOp(RedOp op) {
  return op == RedOp::kSum || op == RedOp::kProd || op == RedOp::kMax || op == RedOp::kMin;
}

// The op's code: lengths, bytes and the stack discipline.
Status validateCode(const Program& prog, const Op& op, int index) {
  if (op.code + op.ncode > prog.ncode) {
    return invalidArgument("{}: op {}'s code is outside the program's code (code={}, ncode={}, "
                           "program ncode={})",
                           kValidate, index, op.code, op.ncode, prog.ncode);
  }
  if (op.ncode != 2 * op.nleaves - 1) {
    return invalidArgument("{}: op {} has ncode={}, not 2 * nleaves - 1 (nleaves={})", kValidate,
                           index, op.ncode, op.nleaves);
  }
  int depth = 0;
  for (int c = 0; c < op.ncode; ++c) {
    const uint8_t byte = prog.code[op.code + c];
    if (byte == kApply) {
      if (depth < 2) {
        return invalidArgument("{}: op {}'s code underflows the stack at byte {} (kApply with "
                               "depth={})",
                               kValidate, index, c, depth);
      }
      --depth;
    } else if (byte >= op.nleaves) {
      return invalidArgument("{}: op {}'s code byte {} is {}, neither a leaf below nleaves={} "
                             "nor kApply",
                             kValidate, index, c, byte, op.nleaves);
    } else if (++depth > kMaxDepth) {
      return invalidArgument("{}: op {}'s code exceeds the stack depth at byte {} (depth={}, "
                             "kMaxDepth={})",
                             kValidate, index, c, depth, kMaxDepth);
    }
  }
  if (depth != 1) {
    return invalidArgument("{}: op {}'s code leaves {} values on the stack, not 1", kValidate,
                           index, depth);
  }
  return Status::ok();
}

Status validateRefs(const Program& prog, int index, const char* what, int first, int n) {
  if (first + n > prog.nrefs) {
    return invalidArgument("{}: op {}'s {} refs are out of range ({}={}, n={}, nrefs={})",
                           kValidate, index, what, what, first, n, prog.nrefs);
  }
  for (int r = first; r < first + n; ++r) {
    if (prog.refs[r].buf() >= kMaxBuffers) {
      return invalidArgument("{}: op {}'s ref {} names buffer {} (kMaxBuffers={})", kValidate,
                             index, r, prog.refs[r].buf(), kMaxBuffers);
    }
  }
  return Status::ok();
}

Status validateOp(const Program& prog, int index) {
  const Op& op = prog.ops[index];
  if (op.nleaves < 1 || op.nleaves > kMaxLeaves) {
    return invalidArgument("{}: op {} has nleaves={} (must be 1..{})", kValidate, index,
                           op.nleaves, kMaxLeaves);
  }
  if (op.ndsts < 1) {
    return invalidArgument("{}: op {} has ndsts=0 (must be at least 1)", kValidate, index);
  }
  if (op.flags & ~kDivide) {
    return invalidArgument("{}: op {} has unknown flag bits (flags={:#x})", kValidate, index,
                           op.flags);
  }
  if ((op.flags & kDivide) && prog.divisor < 1) {
    return invalidArgument("{}: op {} divides but divisor={} (must be at least 1)", kValidate,
                           index, prog.divisor);
  }
  if (op.count >= (uint64_t{1} << 56)) {
    return invalidArgument("{}: op {} has count={} (must be below 2^56)", kValidate, index,
                           op.count);
  }
  TUTTI_TRY(validateRefs(prog, index, "leaves", op.leaves, op.nleaves));
  TUTTI_TRY(validateRefs(prog, index, "dsts", op.dsts, op.ndsts));
  return validateCode(prog, op, index);
}

template <typename T, RedOp R>
void runTyped(const Program& prog, const Buffers& bufs) {
  for (int o = 0; o < prog.nops; ++o) {
    const Op& op = prog.ops[o];
    for (uint64_t i = 0; i < op.count; ++i) evalElement<T, R>(prog, op, bufs, i);
  }
}

template <typename T>
void runWithOp(const Program& prog, const Buffers& bufs) {
  switch (prog.op) {
    case RedOp::kSum:
      return runTyped<T, RedOp::kSum>(prog, bufs);
    case RedOp::kProd:
      return runTyped<T, RedOp::kProd>(prog, bufs);
    case RedOp::kMax:
      return runTyped<T, RedOp::kMax>(prog, bufs);
    case RedOp::kMin:
      return runTyped<T, RedOp::kMin>(prog, bufs);
    case RedOp::kAvg:
      break;  // refused by validate
  }
}

}  // namespace

Status validate(const Program& prog) {
  if (prog.nops > kMaxOps) {
    return invalidArgument("{}: nops={} exceeds kMaxOps={}", kValidate, prog.nops, kMaxOps);
  }
  if (prog.nrefs > kMaxRefs) {
    return invalidArgument("{}: nrefs={} exceeds kMaxRefs={}", kValidate, prog.nrefs, kMaxRefs);
  }
  if (prog.ncode > kMaxCode) {
    return invalidArgument("{}: ncode={} exceeds kMaxCode={}", kValidate, prog.ncode, kMaxCode);
  }
  if (!isValid(prog.dtype)) {
    return invalidArgument("{}: dtype is invalid (dtype={})", kValidate,
                           static_cast<int>(prog.dtype));
  }
  if (!isProgramOp(prog.op)) {
    return invalidArgument("{}: op must be sum, prod, max or min (op={})", kValidate,
                           static_cast<int>(prog.op));
  }
  for (int o = 0; o < prog.nops; ++o) TUTTI_TRY(validateOp(prog, o));
  return Status::ok();
}

Status checkBuffers(const Program& prog, const Buffers& bufs) {
  for (int o = 0; o < prog.nops; ++o) {
    const Op& op = prog.ops[o];
    if (op.count == 0) continue;
    for (int k = 0; k < op.nleaves + op.ndsts; ++k) {
      const bool leaf = k < op.nleaves;
      const int r = leaf ? op.leaves + k : op.dsts + (k - op.nleaves);
      const int b = prog.refs[r].buf();
      if (bufs.ptr[b] == nullptr) {
        return invalidArgument(
            "program::checkBuffers: buffer {} is null but op {} uses it as {} {} (ref={}, "
            "count={})",
            b, o, leaf ? "leaf" : "destination", leaf ? k : k - op.nleaves, r, op.count);
      }
    }
  }
  return Status::ok();
}

Status runOnHost(const Program& prog, const Buffers& bufs) {
  TUTTI_TRY(validate(prog));
  TUTTI_TRY(checkBuffers(prog, bufs));
  detail::withElementType(prog.dtype, [&]<typename T>(T) { runWithOp<T>(prog, bufs); });
  return Status::ok();
}

}  // namespace tutti::kernels::program
