// File: core/selection.h
// Selection: how a communicator chooses algorithms. At init every rank's topology summary is
// allgathered over the bootstrap (or TUTTI_TOPO_FILE's placement is used when it describes this
// job's ranks), the link model is built from it (plus TUTTI_LINK_FILE and, with
// TUTTI_CALIBRATE=1, parameters the communicator measures: core/calibrate.cc), and TUTTI_ALGO /
// NCCL_ALGO are parsed. Per call shape the selector (algorithms/selector.h) picks the algorithm,
// honouring the communicator's override (setAlgorithm, schedule files); the decision is cached
// per shape and override (512 entries, then the cache starts over) and logged (TUNING).
// Thread-safety: decide() may run on the executing thread and in Communicator::algorithmFor at
// once; init and setOverride run under the owner's rules (init once; setOverride under its
// execution mutex).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/selector.h"
#include "core/peers.h"

namespace tutti::detail {

class Selection {
 public:
  /// Collective over the bootstrap of `net`: topology, link model, overrides. `calibrate` fits
  /// the model to measurements when TUTTI_CALIBRATE asks (collective), given each rank's host
  /// (named by its first rank). Errors: a TUTTI_TOPO_FILE, TUTTI_LINK_FILE or override that does
  /// not parse, and the bootstrap's errors.
  Status init(PeerSet& net, int rank, int nranks,
              const std::function<Status(const std::vector<int>& hostOfRank)>& calibrate);

  /// The algorithm for a call of this shape (the same on every rank: chosen for rank 0 out of
  /// place). Errors from the selector name `api`.
  Result<algo::Decision> decide(const algo::CollShape& shape, const char* api);
  /// Forces `name` for `coll` ("" releases it). Decisions are cached per override, so that
  /// going back to one (tutti-perf's --algo all, an autotuner) costs no new simulation.
  void setOverride(Coll coll, const std::string& name);
  /// Forgets the cached decisions (a loaded schedule joined the registry: TUTTI_ALGO may name it).
  void forgetDecisions();

  /// The link model (calibration refines it during init).
  algo::LinkModel& model() { return model_; }
  /// Each rank's hierarchy group (algo::CollShape::hostOf); empty when there is no hierarchy.
  const std::vector<int>& hostOf() const { return hostOf_; }
  /// Output bytes per rank from which Plan::streaming is set; 0: never.
  size_t streamBytes() const { return streamBytes_; }
  /// How ranks of one host are joined: "shm", "tcp", "mixed", "" (one rank per host).
  const std::string& onHostTransport() const { return onHostTransport_; }

 private:
  algo::LinkModel model_;
  std::string onHostTransport_;
  std::vector<int> hostOf_;
  size_t streamBytes_ = 0;
  algo::AlgoOverrides envAlgo_;  // TUTTI_ALGO, then NCCL_ALGO
  std::map<Coll, std::string> forced_;  // setOverride
  // collective, count, dtype, op, root, the override in force for the collective ("" = none)
  using DecisionKey = std::tuple<int, size_t, int, int, int, std::string>;
  std::map<DecisionKey, algo::Decision> decisions_;
  std::mutex mu_;  // forced_, decisions_
};

}  // namespace tutti::detail
