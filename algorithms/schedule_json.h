// File: algorithms/schedule_json.h
// Loadable schedules: a JSON form of the IR (docs/SCHEDULES.md) that users write or generate.
// A file describes one collective for a fixed number of ranks, with ranges in CHUNKS so that one
// file serves every count: each count-sized block of a buffer is cut into `chunks` even chunks
// (patterns::evenChunk), and chunk c of a buffer is chunk c % chunks of block c / chunks.
// Loaded schedules are registered as algorithms and verified before first use.
#pragma once

#include <string>
#include <vector>

#include "algorithms/algorithm.h"

namespace tutti::algo {

/// One step of a loaded schedule, in chunk units.
struct JsonStep {
  Op op = Op::kCopy;
  int peer = -1;
  int sendPeer = -1;
  Buf src = Buf::kInput;
  size_t srcChunk = 0;
  Buf dst = Buf::kOutput;
  size_t dstChunk = 0;
  size_t chunks = 1;  ///< consecutive chunks the step covers
};

struct LoadedSchedule {
  std::string name;
  std::string summary;
  Coll coll = Coll::kAllReduce;
  int nranks = 0;
  size_t chunks = 1;         ///< chunks per count-sized block
  size_t scratchBlocks = 0;  ///< scratch holds this many count-sized blocks
  std::vector<std::vector<std::vector<JsonStep>>> ranks;  ///< [rank][round][step]

  /// Rank shape.rank's schedule for shape.count elements. InvalidArgument when shape.nranks or
  /// shape.coll differ from the file's, or when a step's source and destination ranges differ
  /// in size for this count.
  Result<Schedule> build(const CollShape& shape) const;
};

/// Parses a schedule from JSON text. InvalidArgument naming the JSON path and the problem
/// ("ranks[2].rounds[0][1].op: unknown op 'sned'"). `origin` names the text in messages.
Result<LoadedSchedule> parseSchedule(const std::string& jsonText, const std::string& origin);
/// Reads and parses a file.
Result<LoadedSchedule> loadScheduleFile(const std::string& path);
/// The JSON text of a schedule (round-trips through parseSchedule).
std::string toJson(const LoadedSchedule& s);

/// Registers a loaded schedule as an algorithm (loaded = true, supports() true only for the
/// file's nranks). InvalidArgument when the name is taken for that collective.
Status registerLoaded(LoadedSchedule s);

}  // namespace tutti::algo
