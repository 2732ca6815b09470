// File: kernels/host_device.h
// TUTTI_HD marks a function that g++ compiles for the host and nvcc for both the host and the
// device: the code the CPU emulators and the CUDA kernels share (program_eval.h, peer_interp.h).
#pragma once

#ifndef TUTTI_HD
#if defined(__CUDACC__)
#define TUTTI_HD __host__ __device__
#else
#define TUTTI_HD
#endif
#endif
