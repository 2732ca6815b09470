// File: tools/launch/binding.h
// Which CPUs each rank of a single-host job is bound to: tutti-run binds every rank to its own
// share of the cores by default, as Open MPI's mpirun binds (to a core for 2 ranks, to a socket
// beyond), because a
// rank that the kernel moves between CPUs, or that shares one with another process, waits longer
// for its peers (docs/PERFORMANCE.md "On a busy machine": 2 ranks beside a busy loop, 8-byte
// allreduce 0.14 us bound against 3.1 us unbound; idle, no difference).
#pragma once

#include <string>
#include <vector>

namespace tutti::launch {

/// One CPU (logical processor) and the core it belongs to.
struct Cpu {
  int id = -1;
  int package = 0;  ///< /sys/devices/system/cpu/cpuN/topology/physical_package_id
  int core = 0;     ///< .../core_id (unique within a package)
};

/// The CPUs this process may run on (sched_getaffinity), in increasing id, with their package
/// and core from sysfs (each CPU its own core when sysfs does not say). Empty when the affinity
/// cannot be read.
std::vector<Cpu> allowedCpus();

/// Per rank, the CPU ids it is bound to, mapping ranks by core over `cpus`:
///  - nranks <= cores: rank r gets an equal, contiguous share of the cores (cores in order of
///    their first CPU id; cores r C / N up to (r + 1) C / N for C cores and N ranks) with all
///    their CPUs, so that its compute threads (torch's intra-op pool, OpenMP) keep the CPUs the
///    other ranks do not use, and SMT siblings stay with their rank;
///  - cores < nranks <= CPUs: rank r gets one CPU: the first CPU of every core, then the second
///    of every core, and so on;
///  - more ranks than CPUs (or no CPUs known): empty (no binding: ranks that outnumber the CPUs
///    share them as the kernel sees fit), and `why` says so.
/// Pure.
std::vector<std::vector<int>> bindByCore(const std::vector<Cpu>& cpus, int nranks,
                                         std::string* why);

}  // namespace tutti::launch
