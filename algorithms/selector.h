// File: algorithms/selector.h
// The per-call algorithm choice. A pure function of (call shape, link model, overrides): every
// registered algorithm that supports the call is costed by the simulator (algorithms/simulator.h)
// and the cheapest wins, unless an override narrows or forces the choice. Overrides use NCCL_ALGO's
// syntax (docs/TOPOLOGY.md): a list of names ("ring,recursive_doubling"), an exclusion
// ("^bruck"), per collective ("allreduce:ring;allgather:^bruck"); names are ours or NCCL's
// (Ring, Tree, PAT, ...), mapped per collective by ncclAlgoNames().
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/simulator.h"

namespace tutti::algo {

/// One collective's override: the algorithms allowed (or, with exclude, those not allowed).
struct AlgoRule {
  std::vector<std::string> names;  ///< our algorithm names (NCCL names already mapped)
  bool exclude = false;            ///< "^a,b": every algorithm but these
  std::string source;              ///< for the log: "TUTTI_ALGO=allreduce:ring"
  bool allows(std::string_view name) const;
};

/// Overrides by collective (a collective without an entry is free).
using AlgoOverrides = std::map<Coll, AlgoRule>;

/// Parses NCCL_ALGO syntax: items separated by ';', each "coll:list" or a bare "list" that
/// applies to every collective; a list is comma-separated names, optionally starting with '^'.
/// Names match our algorithms of the collective first, then NCCL's names (case-insensitive) via
/// ncclAlgoNames(); a bare list keeps, per collective, the names that exist for it.
/// `varName` ("TUTTI_ALGO", "NCCL_ALGO") prefixes messages and sources. InvalidArgument for an
/// unknown collective, or (strict) for a name that matches nothing for a named collective;
/// without strict such names are dropped and listed in `ignored` (when given).
Result<AlgoOverrides> parseAlgoOverrides(std::string_view text, std::string_view varName,
                                         bool strict, std::vector<std::string>* ignored = nullptr);

/// Our algorithms that an NCCL algorithm name (case-insensitive: "ring", "tree", "pat",
/// "collnetdirect", "collnetchain", "nvls", "nvlstree") stands for in collective `coll`; empty
/// when there is no counterpart (CollNet and NVLS need switch hardware).
std::vector<std::string> ncclAlgoNames(std::string_view ncclName, Coll coll);

struct Candidate {
  const AlgorithmInfo* algo = nullptr;
  double predictedUs = -1;  ///< -1: not simulated (forced choice without TUNING logging)
  bool allowed = true;      ///< passes the override
  std::string error;        ///< the simulator's error, when it failed
};

struct Decision {
  const AlgorithmInfo* algo = nullptr;
  double predictedUs = -1;      ///< the winner's prediction (-1 when it could not be simulated)
  std::string reason;           ///< "model", "override TUTTI_ALGO=...", ...
  std::vector<Candidate> candidates;  ///< every algorithm of the collective that supports the call
};

struct SelectOptions {
  /// Forced by name (Communicator::setAlgorithm, a schedule file): used when it supports the
  /// call; `forcedSource` names where it came from.
  std::string forced, forcedSource;
  /// Simulate every candidate even when the choice is forced (for the TUNING log).
  bool costAll = false;
};

/// Chooses the algorithm for `shape` (shape.rank is ignored: the decision is the same on every
/// rank). Order: the forced name when it supports the call; else the cheapest allowed candidate
/// (ties: higher AlgorithmInfo::priority, then name); else, when the override allows nothing
/// that supports the call, the cheapest candidate (reason says so). Loaded schedules compete only
/// when forced or named by an override. A candidate whose simulation fails is skipped (its error
/// kept). InternalError when no algorithm supports the call. Pure; thread-compatible.
Result<Decision> select(const CollShape& shape, const LinkModel& model,
                        const AlgoOverrides& overrides, const SelectOptions& options = {});

/// One line for the TUNING log: "allreduce bytes=1024 nranks=4: ring=5.1 recursive_doubling=2.0*
/// ... -> recursive_doubling (model)".
std::string describe(const CollShape& shape, const Decision& d);

}  // namespace tutti::algo
