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

namespace tutti {

class PageBuffer {
 public:
  static constexpr size_t kAlign = 4096;

  PageBuffer() = default;

  std::byte* data() { return p_.get(); }
  const std::byte* data() const { return p_.get(); }
  /// Bytes usable from data() (0 before the first grow()).
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  /// Makes size() at least `bytes`: keeps the contents, zeroes the new bytes, never shrinks.
  /// Throws std::bad_alloc when the memory cannot be had (the buffer is then unchanged).
  void grow(size_t bytes) {
    if (bytes <= size_) return;
    const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    if (rounded < bytes) throw std::bad_alloc();
    std::unique_ptr<std::byte[], Free> p(
        static_cast<std::byte*>(std::aligned_alloc(kAlign, rounded)));
    if (!p) throw std::bad_alloc();
    if (size_ > 0) std::memcpy(p.get(), p_.get(), size_);
    std::memset(p.get() + size_, 0, rounded - size_);
    p_ = std::move(p);
    size_ = rounded;
  }
  /// Frees the memory; size() is 0 again.
  void reset() {
    p_.reset();
    size_ = 0;
  }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte[], Free> p_;
  size_t size_ = 0;
};

}  // namespace tutti
