// File: kernels/cuda_program.h
// Host-side API of the CUDA kernels that execute a kernels::program::Program (kernels/program.h)
// on device memory: one kernel launch per Program, bit for bit the results of the CPU emulator
// (kernels/program_host.h's runOnHost). No CUDA types appear here: a stream is a void* (a
// cudaStream_t; nullptr is the legacy default stream). Built only when TUTTI_HAVE_CUDA
// (base/config.h); link tutti_cuda_kernels.
#pragma once

#include "base/status.h"
#include "kernels/program.h"

namespace tutti::kernels::cuda {

/// Enqueues `prog` on `stream` for the current device: at most one kernel launch, and nothing
/// else: no allocation, no copy, no synchronisation, so it may be called while `stream` is being
/// captured into a CUDA graph (the kernel's parameters are copied into the graph node). Returns
/// without waiting; faults of the kernel itself surface on the stream. The kernel:
/// - small programs: at most 16 ops with work and 96 leaves and destinations among them, whose
///   units (each op's 16-byte packs plus its single head and tail elements), one per thread, need
///   no more threads than one wave of the grid kernels (on an H200: 67584 typed, 135168 copy;
///   about 1 MiB per ref for one op): ncclDevKernel_ProgramSmall<T, Op>, or
///   ncclDevKernel_ProgramCopySmall when copyOnly(prog), from a 1168-byte parameter block of
///   addresses and layouts resolved on the host;
/// - otherwise ncclDevKernel_Program<T, Op>, or ncclDevKernel_ProgramCopy when copyOnly(prog),
///   with the Program and Buffers (3.9 KiB) as parameters.
/// Both compute the same bits (those of runOnHost).
/// - `bufs` holds device-accessible addresses of the current device. Unless the program is
///   copy-only, every buffer an op with count > 0 uses must be aligned to the dtype's size (CUDA
///   faults on misaligned element accesses); copy-only programs take any alignment. When every
///   ref of an op has the same address modulo 16, the op runs on 16-byte loads and stores
///   (elements one by one up to the first 16-byte boundary and after the last); otherwise
///   element by element.
/// - A program without ops, or whose ops all have count 0, enqueues nothing.
/// - Errors: InvalidArgument (kernels/program_host.h's validate and checkBuffers, and a
///   misaligned buffer, naming the op, the buffer and the values) with nothing enqueued;
///   UnhandledCudaError with the CUDA runtime's text when the device cannot be queried or the
///   launch fails.
/// Thread-safe: the device's SM count is cached per device on first use.
Status launchProgram(const program::Program& prog, const program::Buffers& bufs, void* stream);

namespace detail {

/// The kernel families of launchProgram (kernels/cuda/program_launch.cc).
enum class ProgramPath {
  kAuto,   ///< launchProgram's choice
  kGrid,   ///< ncclDevKernel_Program / ncclDevKernel_ProgramCopy, whatever the size
  kSmall,  ///< ncclDevKernel_ProgramSmall / ncclDevKernel_ProgramCopySmall, whatever the size
};

/// launchProgram on a forced path, for tests and benchmarks: the same checks, errors and rules.
/// kSmall ignores the one-wave limit of kAuto but needs the compact form: false, with nothing
/// enqueued, when the program has more than 16 ops with work or more than 96 leaves and
/// destinations in them. true otherwise (launched, or nothing to do).
Result<bool> launchProgramOn(ProgramPath path, const program::Program& prog,
                             const program::Buffers& bufs, void* stream);

}  // namespace detail

}  // namespace tutti::kernels::cuda
