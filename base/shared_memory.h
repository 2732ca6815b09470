// File: base/shared_memory.h
// POSIX shared memory by name, mapped read-write (MAP_SHARED): the regions that several
// processes of one host map (the device process clique's flags and mailboxes, the peer
// executor's shared state).
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"

namespace tutti {

/// Maps the shared memory object `name` ("/..."), `bytes` long. create: makes it (O_CREAT |
/// O_EXCL, mode 0600, sized to `bytes`, so zeroed); else opens an existing one. SystemError
/// naming the call, the name and errno's text (EEXIST when creating a name that exists). The
/// mapping is undone with munmap(p, bytes); the name stays until shm_unlink.
Result<void*> mapSharedMemory(const std::string& name, size_t bytes, bool create);

}  // namespace tutti
