// File: kernels/cuda/peer_cuda.cc
// Host side of kernels/peer_cuda.h: the kernel for the program's dtype and op (or the byte
// mover for programs without arithmetic), CUDA errors as Status.
#include "kernels/peer_cuda.h"

#include <cuda_runtime.h>

#include "base/collectives.h"
#include "kernels/cuda/peer_launch.h"

namespace tutti::kernels::cuda {

Status launchPeer(const peer::Launch& launch, const peer::ProgramHeader& header, void* stream) {
  if (header.magic != peer::kMagic)
    return invalidArgument("launchPeer: header is not a peer program (magic={:#x})", header.magic);
  if (!isValid(header.dtype))
    return invalidArgument("launchPeer: invalid dtype {}", static_cast<int>(header.dtype));
  const int blocks = static_cast<int>(header.nchannels);
  int err = 0;
  if (!collInfo(header.coll).reduces) {
    err = peer_dev::launchPeerBytes(launch, blocks, stream);
  } else if (isFloating(header.dtype) && dataTypeBytes(header.dtype) >= 4) {
    err = peer_dev::launchPeerFloat(launch, header.dtype, header.op, blocks, stream);
  } else if (isFloating(header.dtype)) {
    err = peer_dev::launchPeerNarrow(launch, header.dtype, header.op, blocks, stream);
  } else {
    err = peer_dev::launchPeerInt(launch, header.dtype, header.op, blocks, stream);
  }
  if (err != 0) {
    return makeStatus(Code::kUnhandledCudaError,
                      "launchPeer: ncclDevKernel_Peer launch failed: "
                      "{} ({})",
                      cudaGetErrorString(static_cast<cudaError_t>(err)), err);
  }
  return Status::ok();
}

}  // namespace tutti::kernels::cuda
