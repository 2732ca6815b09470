// File: kernels/peer_cuda.h
// Host side of the peer kernels (kernels/cuda/peer_kernels.cuh): enqueues one rank's peer
// program on a stream. No CUDA types (a stream is a void*). Built only when TUTTI_HAVE_CUDA;
// link tutti_cuda_kernels.
#pragma once

#include "base/status.h"
#include "kernels/peer_program.h"

namespace tutti::kernels::cuda {

/// Enqueues ncclDevKernel_Peer for `launch` on `stream` (the current device's): one CTA of 512
/// threads per channel of the program (`header`: a host copy of launch.program's header, which
/// lives in device memory). Every pointer of `launch` must be addressable by the device: the
/// program, the user's buffers, every arena (peer access or CUDA IPC mappings) and the abort
/// flag (device or mapped host memory). Returns without waiting; the kernel's failure is in
/// the rank's ErrorRecord (peer::Failure), not in the stream's error state.
/// Errors: InvalidArgument for a header that is not a peer program or has an invalid dtype;
/// UnhandledCudaError when the launch fails. Thread-safe.
Status launchPeer(const peer::Launch& launch, const peer::ProgramHeader& header, void* stream);

}  // namespace tutti::kernels::cuda
