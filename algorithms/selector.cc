// File: algorithms/selector.cc
// The selector (algorithms/selector.h): override parsing (NCCL_ALGO syntax, NCCL names mapped to
// ours), costing every candidate with the simulator, and the TUNING log line.
#include "algorithms/selector.h"
#include "base/strings.h"

#include <algorithm>
#include <cctype>

namespace tutti::algo {

namespace {

// The trimmed fields of `s` between separators.
std::vector<std::string> splitOn(std::string_view s, char sep) {
  std::vector<std::string> out = split(s, sep);
  for (std::string& f : out) f = trim(f);
  return out;
}

// Our names (for coll) that one token of an override list stands for.
std::vector<std::string> resolve(const std::string& token, Coll coll) {
  for (const auto& a : registry())
    if (a.coll == coll && lower(a.name) == lower(token)) return {std::string(a.name)};
  return ncclAlgoNames(token, coll);
}

}  // namespace

bool AlgoRule::allows(std::string_view name) const {
  const bool listed = std::find(names.begin(), names.end(), name) != names.end();
  return exclude ? !listed : listed;
}

std::vector<std::string> ncclAlgoNames(std::string_view ncclName, Coll coll) {
  const std::string n = lower(ncclName);
  // NCCL's Ring is a pipelined ring for reductions and gathers and a chain for rooted
  // collectives; Tree exists only for allreduce (a double binary tree); PAT (parallel
  // aggregated trees) serves allgather and reducescatter with log-depth exchanges.
  if (n == "ring") {
    switch (coll) {
      case Coll::kAllReduce:
      case Coll::kAllGather:
      case Coll::kReduceScatter:
        return {"ring"};
      case Coll::kBroadcast:
      case Coll::kReduce:
        return {"chain"};
      default:
        return {};
    }
  }
  if (n == "tree") return coll == Coll::kAllReduce ? std::vector<std::string>{"double_binary_tree"}
                                                   : std::vector<std::string>{};
  if (n == "pat") {
    if (coll == Coll::kAllGather) return {"bruck", "recursive_doubling"};
    if (coll == Coll::kReduceScatter) return {"recursive_halving"};
    return {};
  }
  return {};  // collnetdirect, collnetchain, nvls, nvlstree: switch hardware, no counterpart
}

Result<AlgoOverrides> parseAlgoOverrides(std::string_view text, std::string_view varName,
                                         bool strict, std::vector<std::string>* ignored) {
  AlgoOverrides out;
  static const char* const kNcclNames[] = {"ring", "tree", "pat", "collnetdirect",
                                           "collnetchain", "nvls", "nvlstree"};
  for (const std::string& item : splitOn(text, ';')) {
    if (item.empty()) continue;
    std::vector<Coll> colls;
    std::string list = item;
    const size_t colon = item.find(':');
    if (colon != std::string::npos) {
      auto coll = parseColl(lower(trim(item.substr(0, colon))));
      if (!coll)
        return invalidArgument("{}: unknown collective '{}' in '{}'", varName,
                               trim(item.substr(0, colon)), item);
      colls.push_back(*coll);
      list = trim(item.substr(colon + 1));
    } else {
      for (int c = 0; c < kNumColls; ++c) colls.push_back(static_cast<Coll>(c));
    }
    const bool exclude = !list.empty() && list[0] == '^';
    if (exclude) list = trim(list.substr(1));
    const std::vector<std::string> tokens = splitOn(list, ',');
    for (Coll coll : colls) {
      AlgoRule rule{.exclude = exclude,
                    .source = fmt::format("{}={}", varName, item)};
      for (const std::string& token : tokens) {
        if (token.empty()) continue;
        std::vector<std::string> names = resolve(token, coll);
        const bool ncclName =
            std::find(std::begin(kNcclNames), std::end(kNcclNames), lower(token)) !=
            std::end(kNcclNames);
        if (names.empty() && colon != std::string::npos) {
          if (strict && !ncclName) {
            std::string known;
            for (const auto& a : registry())
              if (a.coll == coll) known += (known.empty() ? "" : ", ") + std::string(a.name);
            return invalidArgument("{}: no algorithm '{}' for {} (available: {})", varName, token,
                                   collName(coll), known);
          }
          if (ignored) ignored->push_back(fmt::format("{} for {}", token, collName(coll)));
        }
        for (auto& n : names)
          if (std::find(rule.names.begin(), rule.names.end(), n) == rule.names.end())
            rule.names.push_back(std::move(n));
      }
      // A bare list names algorithms of some collectives only; leave the others free.
      if (colon == std::string::npos && rule.names.empty()) continue;
      out[coll] = std::move(rule);
    }
  }
  return out;
}

Result<Decision> select(const CollShape& shape, const LinkModel& model,
                        const AlgoOverrides& overrides, const SelectOptions& options) {
  Decision d;
  const AlgoRule* rule = nullptr;
  if (auto it = overrides.find(shape.coll); it != overrides.end()) rule = &it->second;
  const AlgorithmInfo* forced = nullptr;
  for (const auto& a : registry()) {
    if (a.coll != shape.coll || (a.supports && !a.supports(shape))) continue;
    const bool named = rule && !rule->exclude && rule->allows(a.name);
    if (a.loaded && a.name != options.forced && !named) continue;
    d.candidates.push_back({.algo = &a, .allowed = !rule || rule->allows(a.name)});
    if (!options.forced.empty() && a.name == options.forced) forced = &a;
  }
  if (d.candidates.empty())
    return internalError("select: no {} algorithm supports nranks={} count={}",
                         collName(shape.coll), shape.nranks, shape.count);
  std::sort(d.candidates.begin(), d.candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.algo->name < b.algo->name; });

  const bool costAll = !forced || options.costAll;
  for (Candidate& c : d.candidates) {
    if (!costAll && c.algo != forced) continue;
    auto t = predict(*c.algo, shape, model);
    if (t.isOk())
      c.predictedUs = t.value();
    else
      c.error = t.status().message();
  }
  auto better = [](const Candidate* a, const Candidate& b) {
    if (!a) return true;
    if (b.predictedUs != a->predictedUs) return b.predictedUs < a->predictedUs;
    if (b.algo->priority != a->algo->priority) return b.algo->priority > a->algo->priority;
    return b.algo->name < a->algo->name;
  };
  auto cheapest = [&](bool allowedOnly) {
    const Candidate* best = nullptr;
    for (const Candidate& c : d.candidates)
      if (c.predictedUs >= 0 && (!allowedOnly || c.allowed) && better(best, c)) best = &c;
    return best;
  };

  if (forced) {
    auto it = std::find_if(d.candidates.begin(), d.candidates.end(),
                           [&](const Candidate& c) { return c.algo == forced; });
    d.algo = forced;
    d.predictedUs = it->predictedUs;
    d.reason = "forced by " + options.forcedSource;
    return d;
  }
  std::string declined;
  if (!options.forced.empty())
    declined = fmt::format("; forced '{}' ({}) declines this call", options.forced,
                           options.forcedSource);
  const Candidate* best = cheapest(true);
  if (best) {
    d.reason = rule ? "model among those allowed by " + rule->source : "model";
  } else {
    best = cheapest(false);
    if (rule) d.reason = fmt::format("model ({} allows no algorithm that supports this call)",
                                     rule->source);
  }
  if (!best) {
    // Nothing could be simulated (should not happen for registered algorithms): fall back to
    // the static preference so that the call still runs.
    const Candidate* pick = nullptr;
    for (const Candidate& c : d.candidates)
      if (!pick || c.algo->priority > pick->algo->priority) pick = &c;
    d.algo = pick->algo;
    d.reason = "priority (no candidate could be simulated: " + pick->error + ")";
    return d;
  }
  d.algo = best->algo;
  d.predictedUs = best->predictedUs;
  d.reason += declined;
  return d;
}

std::string describe(const CollShape& shape, const Decision& d) {
  const size_t elem = shape.coll == Coll::kBarrier ? 1 : dataTypeBytes(shape.dtype);
  std::string line = fmt::format("{} bytes={} count={} nranks={}{}:", collName(shape.coll),
                                 shape.count * elem, shape.count, shape.nranks,
                                 shape.hostOf.empty() ? "" : " hierarchy=yes");
  for (const Candidate& c : d.candidates) {
    line += fmt::format(" {}=", c.algo->name);
    if (c.predictedUs >= 0)
      line += fmt::format("{:.2f}", c.predictedUs);
    else
      line += c.error.empty() ? "-" : "error";
    if (!c.allowed) line += "(excluded)";
  }
  line += fmt::format(" -> {} {:.2f}us ({})", d.algo ? d.algo->name : "none", d.predictedUs,
                      d.reason);
  return line;
}

}  // namespace tutti::algo
