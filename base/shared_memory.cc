// File: base/shared_memory.cc
// POSIX shared memory by name (base/shared_memory.h).
#include "base/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tutti {

Result<void*> mapSharedMemory(const std::string& name, size_t bytes, bool create) {
  const int fd = shm_open(name.c_str(), create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) return systemError("shm_open({}) failed: {}", name, std::strerror(errno));
  if (create && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int e = errno;
    close(fd);
    shm_unlink(name.c_str());
    return systemError("ftruncate({}, {}) failed: {}", name, bytes, std::strerror(e));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  close(fd);
  if (p == MAP_FAILED) return systemError("mmap({}) failed: {}", name, std::strerror(e));
  return p;
}

}  // namespace tutti
