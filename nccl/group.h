// File: nccl/group.h
// Recorded operations and the group layer: what a collective or send/recv call leaves behind,
// how the outermost ncclGroupEnd runs it (per communicator: collectives in issue order with
// small-allreduce fusion, then every send and receive together; several communicators
// concurrently), and the entry used by calls made outside a group.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/batch.h"
#include "nccl/internal.h"

namespace tutti::nccl {

/// One recorded operation on one communicator (base/batch_op.h).
using tutti::BatchOp;

/// Submits `op` on `comm`: recorded when this thread is inside a group, else run now (blocking
/// communicator: on this thread; nonblocking: on its worker, returning ncclInProgress).
ncclResult_t submit(const std::shared_ptr<CommState>& comm, BatchOp op);
/// submit() of a task of this layer (BatchOp::Kind::kTask: init, split, finalize, windows), named
/// `api` in its errors.
ncclResult_t submitTask(const std::shared_ptr<CommState>& comm, const char* api,
                        std::function<Status()> task);

/// Whether this thread is inside ncclGroupStart/End.
bool inGroup();
/// Records an argument error of a call inside the group (ncclGroupEnd then returns it).
void noteGroupError(ncclResult_t r);
/// fail() for an argument error of an entry point: also noted for the enclosing group.
ncclResult_t failArg(const Status& s, CommState* comm = nullptr);

/// Runs one communicator's operations in order (what a group does per communicator). Used by the
/// group layer and by tests of fusion. `fusionBytes` 0 disables fusion.
Status runBatch(CommState& comm, std::vector<BatchOp>& ops, size_t fusionBytes);

/// Sum over the group's collectives of the simulator's prediction (microseconds).
double predictGroup(const std::vector<std::pair<CommState*, BatchOp>>& ops);

}  // namespace tutti::nccl
