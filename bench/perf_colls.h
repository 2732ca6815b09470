// File: bench/perf_colls.h
// The collectives tutti-perf measures, one table entry each, in the shape of nccl-tests'
// `testColl`: {name, byteCounts(), initData(), check()} plus the call itself; its root, reduction
// and busbw factor come from the table of collectives (base/collectives.h).
// Patterns make every reduction exact in every dtype, so results are compared exactly (integer
// types) or within a few ulps (avg of floating types) against a reference computed in double.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <tutti/tutti.hpp>

#include "base/collectives.h"

namespace tutti::bench {

// Element counts of one case, as nccl-tests' getCollByteCount: `count` is the API count (per rank
// for allgather, reducescatter, alltoall, gather and scatter); send/recv are the totals this
// rank's buffers hold. The printed size is max(send, recv) * element bytes.
struct ByteCounts {
  size_t count = 0;
  size_t sendCount = 0;
  size_t recvCount = 0;
};

// One measured case on this rank.
struct CaseShape {
  int rank = 0;
  int nranks = 1;
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;  // ignored by collectives without reduction
  int root = 0;            // ignored by collectives without root
  size_t count = 0;        // API count (ByteCounts::count)
  bool inPlace = false;
  uint32_t seed = 0;  // varies the pattern between validation iterations
};

// Pointers handed to the call; derived from the two base allocations and the in-place rule.
struct CallBuffers {
  void* send = nullptr;
  void* recv = nullptr;
};

struct PerfColl {
  std::string_view name;      // "allreduce" (--coll)
  std::string_view ncclName;  // "all_reduce_perf" (nccl-tests binary, accepted by --coll too)
  Coll coll;     // what it is (root, reduction, busbw factor): collInfo(coll), base/collectives.h
  bool inPlace;  // an in-place variant exists (else the in-place columns read N/A)
  ByteCounts (*byteCounts)(size_t bytes, size_t eltBytes, int nranks);
  // Send/recv pointers for the case, inside the base allocations (in-place offsets applied).
  CallBuffers (*buffers)(const CaseShape& s, void* sendBase, void* recvBase);
  // Writes this rank's input pattern and fills the outputs with the 0xA5 sentinel.
  void (*initData)(const CaseShape& s, const CallBuffers& b);
  // Number of wrong elements in this rank's output (0 on ranks whose output is undefined).
  size_t (*check)(const CaseShape& s, const CallBuffers& b);
  Status (*run)(Communicator& comm, const CaseShape& s, const CallBuffers& b);
};

// Every collective, in --help order.
std::span<const PerfColl> perfColls();
// By name ("allreduce", also nccl-tests' "all_reduce" / "all_reduce_perf"); nullptr if unknown.
const PerfColl* findPerfColl(std::string_view name);

}  // namespace tutti::bench
