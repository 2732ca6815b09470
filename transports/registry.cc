// File: transports/registry.cc
// The transport registry filled by TUTTI_REGISTER_TRANSPORT.
#include "transports/transport.h"

namespace tutti::transport {

std::vector<TransportEntry>& transportRegistry() {
  static std::vector<TransportEntry> r;
  return r;
}

}  // namespace tutti::transport
