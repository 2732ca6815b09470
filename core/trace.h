// File: core/trace.h
// Chrome-trace (Perfetto) output: TUTTI_TRACE=file.json makes every communicator of the process
// append one complete ("X") event per collective call, and one per schedule round when the log
// level is TRACE. The file is valid JSON once the last communicator of the process is destroyed.
// Timestamps are CLOCK_MONOTONIC microseconds, comparable across the processes of one host.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tutti::trace {

using TimePoint = std::chrono::steady_clock::time_point;

/// TUTTI_TRACE's path for this rank: %r -> rank, %p -> pid, %h -> host; without any '%', ".<rank>"
/// goes before the extension when nranks > 1 ("t.json" -> "t.3.json").
std::string expandPath(const std::string& pattern, int rank, int nranks, const std::string& host);

/// Opens (first communicator) or joins the process's trace file when TUTTI_TRACE is set; returns
/// the track id of this communicator, or -1 when tracing is off or the file cannot be written (a
/// WARN names it).
int attach(int rank, int nranks, const std::string& host);
/// Leaves; the last communicator to leave closes the JSON array and the file.
void detach(int track);

/// An event's "args": integer and text fields.
struct Args {
  std::vector<std::pair<const char*, int64_t>> ints;
  std::vector<std::pair<const char*, std::string>> texts;
};
/// One complete event on the communicator's track.
void complete(int track, const char* category, const std::string& name, TimePoint start,
              TimePoint end, const Args& args);

}  // namespace tutti::trace
