// File: core/hang_report.h
// Hang reports: one line per pending operation of a communicator (sequence number, collective,
// round, peers waited on, bytes moved). Written on a collective timeout, and on SIGUSR1 when
// TUTTI_HANG_SIGNAL=1: the signal handler only writes a byte to a pipe; a watcher thread reads it
// and asks every live communicator of the process for its report.
#pragma once

#include <string>

namespace tutti::hang {

/// A communicator that can report its pending operations. requestReport() is called from the
/// watcher thread and must write its lines (writeLine) before returning, within about 1 s.
class Source {
 public:
  virtual ~Source() = default;
  virtual void requestReport() = 0;
};

/// Registers a source; the first registration installs the SIGUSR1 handler and starts the watcher
/// thread when TUTTI_HANG_SIGNAL=1. remove() waits for a report in progress on that source.
void add(Source* s);
void remove(Source* s);

/// Writes one report line, prefixed "tutti hang report: ", to the log (WARN, any subsystem) or,
/// when the log is off, to stderr. Thread-safe.
void writeLine(const std::string& line);

/// Asks every registered source for its report now (what the SIGUSR1 watcher does). For tests
/// and tools.
void reportAll();

}  // namespace tutti::hang
