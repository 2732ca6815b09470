// File: tests/unit/page_buffer_test.cc
#include "base/page_buffer.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>

using tutti::PageBuffer;

namespace {
bool pageAligned(const std::byte* p) {
  return reinterpret_cast<uintptr_t>(p) % PageBuffer::kAlign == 0;
}
}  // namespace

TEST_CASE("PageBuffer starts on a page, keeps its bytes when it grows, zeroes the new ones",
          "[page_buffer]") {
  PageBuffer b;
  CHECK(b.empty());
  CHECK(b.data() == nullptr);
  b.grow(100);
  REQUIRE(b.size() >= 100);
  CHECK(b.size() % PageBuffer::kAlign == 0);
  CHECK(pageAligned(b.data()));
  for (size_t i = 0; i < b.size(); ++i) REQUIRE(b.data()[i] == std::byte{0});
  for (size_t i = 0; i < 100; ++i) b.data()[i] = std::byte(i + 1);

  const size_t before = b.size();
  b.grow(50);  // never shrinks
  CHECK(b.size() == before);

  b.grow(3 * PageBuffer::kAlign + 1);
  REQUIRE(b.size() == 4 * PageBuffer::kAlign);
  CHECK(pageAligned(b.data()));
  for (size_t i = 0; i < 100; ++i) REQUIRE(b.data()[i] == std::byte(i + 1));
  for (size_t i = 100; i < b.size(); ++i) REQUIRE(b.data()[i] == std::byte{0});

  b.reset();
  CHECK(b.empty());
  CHECK(b.data() == nullptr);
}

TEST_CASE("PageBuffer: a size it cannot have throws bad_alloc and leaves the buffer as it was",
          "[page_buffer]") {
  PageBuffer b;
  b.grow(10);
  b.data()[3] = std::byte{7};
  const std::byte* p = b.data();
  CHECK_THROWS_AS(b.grow(std::numeric_limits<size_t>::max() - 5), std::bad_alloc);
  CHECK(b.data() == p);
  CHECK(b.data()[3] == std::byte{7});
  CHECK(b.size() == PageBuffer::kAlign);
}

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#include <malloc.h>

#include <cstdlib>

// glibc raises its mmap threshold to the size of each mmapped block that free() returns; a large
// PageBuffer maps its own pages, so freeing it leaves later malloc calls of that size on mmap
// (where they do not fragment the heap). hblks counts malloc's mmapped blocks.
TEST_CASE("PageBuffer: a large buffer freed leaves malloc's mmap threshold where it was",
          "[page_buffer]") {
  {
    PageBuffer b;
    b.grow(PageBuffer::kMapBytes);
    CHECK(pageAligned(b.data()));
    CHECK(b.data()[PageBuffer::kMapBytes - 1] == std::byte{0});
    b.grow(4 * PageBuffer::kMapBytes);  // mapped to mapped: contents kept, new bytes zero
    CHECK(b.size() == 4 * PageBuffer::kMapBytes);
    CHECK(b.data()[4 * PageBuffer::kMapBytes - 1] == std::byte{0});
  }
  const size_t before = mallinfo2().hblks;
  void* p = std::malloc(2 * PageBuffer::kMapBytes);  // above glibc's initial 128 KiB threshold
  REQUIRE(p != nullptr);
  CHECK(mallinfo2().hblks == before + 1);
  std::free(p);
}
#endif
