// File: kernels/cuda/peer_launch.h
// Internal interface between the host side of the peer kernels (peer_cuda.cc, C++) and their
// launchers in the .cu files: plain types only, CUDA errors as the int value of cudaError_t.
#pragma once

#include <tutti/types.hpp>

#include "kernels/peer_program.h"

namespace tutti::kernels::cuda::peer_dev {

/// Enqueues ncclDevKernel_Peer<T, op> with `blocks` CTAs on `stream` for the dtype of the
/// family; returns cudaGetLastError() after the launch (cudaErrorInvalidValue for a dtype of
/// another family). `op` is the program's (kSum, kProd, kMax, kMin).
int launchPeerInt(const peer::Launch& l, DataType dtype, RedOp op, int blocks, void* stream);
int launchPeerFloat(const peer::Launch& l, DataType dtype, RedOp op, int blocks, void* stream);
int launchPeerNarrow(const peer::Launch& l, DataType dtype, RedOp op, int blocks, void* stream);
/// Programs without arithmetic (no reduce, divide or premultiply): one kernel for every dtype,
/// data moved as bytes (peer_int.cu).
int launchPeerBytes(const peer::Launch& l, int blocks, void* stream);

}  // namespace tutti::kernels::cuda::peer_dev
