// File: base/host_id.h
// Host identity: hostname + boot id + network-namespace inode, or TUTTI_HOSTID. Ranks with equal
// identities share memory (shm); ranks in different network namespaces count as different hosts.
#pragma once

#include <string>

namespace tutti {
/// The identity string (cached after the first call; the environment is read once).
const std::string& hostId();
/// gethostname().
std::string hostName();
}  // namespace tutti
