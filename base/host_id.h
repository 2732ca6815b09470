// File: base/host_id.h
// Host identity: hostname + boot id + network-namespace inode, or TUTTI_HOSTID. Ranks with equal
// identities share memory (shm); ranks in different network namespaces count as different hosts.
#pragma once

#include <string>

namespace tutti {
/// The identity string (cached after the first call; the environment is read once).
const std::string& hostId();
/// The running kernel's boot id (/proc/sys/kernel/random/boot_id, cached; empty when unreadable):
/// equal on two processes exactly when they run under the same kernel, on the same machine, even
/// in different network namespaces.
const std::string& bootId();
/// gethostname().
std::string hostName();
}  // namespace tutti
