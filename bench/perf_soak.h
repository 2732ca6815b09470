// File: bench/perf_soak.h
// tutti-perf --soak SECONDS: random cases from --seed (collective, algorithm, dtype, op, root,
// size log-uniform up to -e bytes, in or out of place), each run once and checked element by
// element against the reference, until the time is up. The process's resident memory, open file
// descriptors and threads are sampled after a warm-up (the plan and decision caches have turned
// over) and at the end; growth fails the run, as does a wrong element or a failed call.
#pragma once

#include <tutti/tutti.hpp>

#include "bench/perf_setup.h"

namespace tutti::bench {

/// Runs the soak on every rank of `comm` (collective: every rank calls it with the same cfg).
/// Exit status: 0 when every case was right and nothing grew, 1 otherwise.
int runSoak(Communicator& comm, const Config& cfg);

}  // namespace tutti::bench
