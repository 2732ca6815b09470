// File: core/device/stream_ops.h
// The stream operations the device executors use, behind an interface: CUDA's
// (cuda_stream_ops.cc) or an emulation on CPU threads (tests/unit/clique_test.cc), so that the
// executors' protocols run and are tested on machines without a GPU, under ThreadSanitizer too.
// Streams and events are opaque handles (a cudaStream_t / cudaEvent_t for CUDA); a null stream
// is the legacy default stream.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "kernels/program.h"

namespace tutti::device {

using Stream = void*;
using Event = void*;

class StreamOps {
 public:
  virtual ~StreamOps() = default;
  /// Makes `device` the calling thread's current device (events and launches use it).
  virtual Status setDevice(int device) = 0;
  /// An event for record/wait (no timing). Created once, ahead of the calls that use it.
  virtual Result<Event> createEvent() = 0;
  virtual void destroyEvent(Event e) = 0;
  /// Records `e` on `s`: a later wait(.., e) waits for the work enqueued on `s` before this.
  virtual Status record(Event e, Stream s) = 0;
  /// Work enqueued on `s` after this call waits for `e`'s last record before this call (a
  /// later record of `e` does not affect it).
  virtual Status wait(Stream s, Event e) = 0;
  /// Whether the work before `e`'s last record has run (cudaEventQuery); true for an event never
  /// recorded. Errors read as true.
  virtual bool finished(Event e) = 0;
  /// Enqueues the program on `s` (kernels/cuda_program.h's launchProgram).
  virtual Status launch(const kernels::program::Program& p, const kernels::program::Buffers& b,
                        Stream s) = 0;
  /// The id of the graph capture `s` takes part in; 0 when `s` is not being captured.
  virtual Result<uint64_t> captureId(Stream s) = 0;

  // ---- for ranks that are processes (core/device/process_clique.h) ----

  /// Enqueues a write of `value` to the 32-bit word at device address `addr` (device memory or
  /// mapped host memory), after the stream's earlier work and with its writes visible first
  /// (cuStreamWriteValue32 with its default memory barrier).
  virtual Status writeValue(Stream s, uint32_t* addr, uint32_t value) = 0;
  /// Enqueues a wait until the 64-bit word at device address `addr` has a bit of `mask` set
  /// (cuStreamWaitValue64, AND). Nothing bounds it: whatever sets the bit must come.
  virtual Status waitAny(Stream s, uint64_t* addr, uint64_t mask) = 0;
  /// Makes host memory [p, p + bytes) (page aligned) usable by the device and returns its
  /// device address (cudaHostRegister, mapped and portable).
  virtual Result<void*> registerHost(void* p, size_t bytes) = 0;
  virtual void unregisterHost(void* p) = 0;

  /// What another process needs to map the device allocation holding `p`: the allocation's IPC
  /// handle (cudaIpcGetMemHandle of its base), `p`'s offset in it, and an id that changes when
  /// the allocation is freed and another one made at the same address.
  struct Export {
    std::array<std::byte, 64> handle{};
    uint64_t offset = 0;
    uint64_t allocation = 0;
  };
  /// InvalidUsage when the memory cannot be shared this way (not cudaMalloc'd device memory: a
  /// stream-ordered pool, cuMem allocations, host memory).
  virtual Result<Export> exportBuffer(const void* p) = 0;
  /// Maps an exported allocation into this process (cudaIpcOpenMemHandle); returns its base.
  virtual Result<void*> openBuffer(const std::array<std::byte, 64>& handle) = 0;
  virtual void closeBuffer(void* base) = 0;
};

/// CUDA's stream operations (the process-wide instance); nullptr in builds without CUDA.
StreamOps* cudaStreamOps();

}  // namespace tutti::device
