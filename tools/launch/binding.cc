// File: tools/launch/binding.cc
// Rank-to-CPU binding for the single-host launcher (binding.h).
#include "tools/launch/binding.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <utility>

#include <fmt/format.h>

namespace tutti::launch {

namespace {

// An integer from a sysfs file, or `fallback`.
int readInt(const std::string& path, int fallback) {
  std::ifstream in(path);
  int v = fallback;
  if (!(in >> v)) return fallback;
  return v;
}

}  // namespace

std::vector<Cpu> allowedCpus() {
  std::vector<Cpu> cpus;
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int id = 0; id < CPU_SETSIZE; ++id) {
    if (!CPU_ISSET(id, &set)) continue;
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu{}/topology/", id);
    // Without sysfs every CPU is a core of its own (core id = CPU id).
    cpus.push_back({id, readInt(dir + "physical_package_id", 0), readInt(dir + "core_id", id)});
  }
#endif
  return cpus;
}

std::vector<std::vector<int>> bindByCore(const std::vector<Cpu>& cpus, int nranks,
                                         std::string* why) {
  std::vector<std::vector<int>> out;
  if (cpus.empty() || nranks < 1) {
    if (why) *why = "the CPUs this process may use are unknown";
    return out;
  }
  // Cores in the order of their first CPU; each core's CPUs in increasing id.
  std::vector<Cpu> sorted = cpus;
  std::sort(sorted.begin(), sorted.end(), [](const Cpu& a, const Cpu& b) { return a.id < b.id; });
  std::map<std::pair<int, int>, size_t> coreIndex;  // (package, core) -> position in `cores`
  std::vector<std::vector<int>> cores;
  for (const Cpu& c : sorted) {
    auto [it, added] = coreIndex.emplace(std::make_pair(c.package, c.core), cores.size());
    if (added) cores.emplace_back();
    cores[it->second].push_back(c.id);
  }
  const size_t n = static_cast<size_t>(nranks), c = cores.size();
  if (n <= c) {
    // Rank r: cores [r c / n, (r + 1) c / n), contiguous, with all their CPUs.
    for (size_t r = 0; r < n; ++r) {
      std::vector<int> ids;
      for (size_t k = r * c / n; k < (r + 1) * c / n; ++k)
        ids.insert(ids.end(), cores[k].begin(), cores[k].end());
      std::sort(ids.begin(), ids.end());
      out.push_back(std::move(ids));
    }
    if (why)
      *why = c % n == 0 ? fmt::format("{} ranks on {} cores: {} each", n, c, c / n)
                        : fmt::format("{} ranks on {} cores: {} or {} each", n, c, c / n,
                                      c / n + 1);
    return out;
  }
  if (static_cast<size_t>(nranks) > sorted.size()) {
    if (why)
      *why = fmt::format("{} ranks outnumber the {} CPUs: not bound", nranks, sorted.size());
    return out;
  }
  // One CPU each: the first CPU of every core, then the second of every core, ...
  for (size_t k = 0; out.size() < static_cast<size_t>(nranks); ++k)
    for (const auto& core : cores)
      if (k < core.size() && out.size() < static_cast<size_t>(nranks)) out.push_back({core[k]});
  if (why)
    *why = fmt::format("{} ranks on {} CPUs of {} cores: one CPU each", nranks, sorted.size(),
                       cores.size());
  return out;
}

}  // namespace tutti::launch
