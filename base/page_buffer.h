// File: base/page_buffer.h
// PageBuffer: a growable byte buffer that starts on a page boundary, for the library's own
// buffers that the kernel copies into or out of (tcp staging, scratch, bounce buffers).
//
// Why not std::vector<std::byte>: glibc serves large allocations with mmap and returns the page's
// start plus 16 bytes, and the kernel's copy to user memory (recvmsg, process_vm_readv) into a
// destination 16 bytes past a cache line ran about 2x slower than into an aligned one on the
// development VM (AMD EPYC; a 2-rank allreduce over loopback tcp reducing through the staging
// buffer: 64 KiB 63 -> 33 us, 1 MiB 484 -> 333 us, docs/PERFORMANCE.md).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include <sys/mman.h>

namespace tutti {

class PageBuffer {
 public:
  static constexpr size_t kAlign = 4096;
  /// From this size the pages come from mmap and go back with munmap, not through malloc:
  /// glibc raises its mmap threshold to the size of each large block freed (up to 32 MiB), so
  /// that freeing one 512 KiB buffer sent later allocations of that size to the heap, where they
  /// fragmented it; a communicator created and destroyed 1,000 times (each calibrating, which
  /// grows and frees a 512 KiB buffer) grew its RSS by 7-31 MiB (tests/mp/comm_churn_test.cc).
  static constexpr size_t kMapBytes = 128 << 10;

  PageBuffer() = default;
  ~PageBuffer() { reset(); }
  PageBuffer(PageBuffer&& o) noexcept : p_(o.p_), size_(o.size_) {
    o.p_ = nullptr;
    o.size_ = 0;
  }
  PageBuffer& operator=(PageBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      std::swap(p_, o.p_);
      std::swap(size_, o.size_);
    }
    return *this;
  }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  std::byte* data() { return p_; }
  const std::byte* data() const { return p_; }
  /// Bytes usable from data() (0 before the first grow()).
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  /// Makes size() at least `bytes`: keeps the contents, zeroes the new bytes, never shrinks.
  /// Throws std::bad_alloc when the memory cannot be had (the buffer is then unchanged).
  void grow(size_t bytes) {
    if (bytes <= size_) return;
    const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    if (rounded < bytes) throw std::bad_alloc();
    std::byte* p = allocate(rounded);
    if (size_ > 0) std::memcpy(p, p_, size_);
    if (rounded < kMapBytes) std::memset(p + size_, 0, rounded - size_);  // mmap's are zero
    release(p_, size_);
    p_ = p;
    size_ = rounded;
  }
  /// Frees the memory; size() is 0 again.
  void reset() {
    release(p_, size_);
    p_ = nullptr;
    size_ = 0;
  }

 private:
  static std::byte* allocate(size_t bytes) {
    void* p = nullptr;
    if (bytes >= kMapBytes) {
      p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) p = nullptr;
    } else {
      p = std::aligned_alloc(kAlign, bytes);
    }
    if (!p) throw std::bad_alloc();
    return static_cast<std::byte*>(p);
  }
  static void release(std::byte* p, size_t bytes) {
    if (!p) return;
    if (bytes >= kMapBytes) ::munmap(p, bytes);
    else std::free(p);
  }

  std::byte* p_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tutti
