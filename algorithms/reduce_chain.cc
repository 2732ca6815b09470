// File: algorithms/reduce_chain.cc
// Pipelined chain reduce: the chain runs root+1, root+2, ..., root-1, root. The first rank sends
// its input; every middle rank receives the partial, reduces it with its input into scratch and
// forwards it (recvReduceSend, sliced by the engine so reduction and forwarding overlap); the
// root reduces the last partial with its input into its output. Non-root ranks never touch their
// recv buffer (NCCL allows it to be null). One round.
// Cost: (n-2+k)(alpha + S/k (beta + gamma)) for k slices. Any n, any count.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank;
  const int pos = patterns::mod(r - s.root - 1, n);  // root is at position n-1
  const int next = patterns::ringNext(r, n), prev = patterns::ringPrev(r, n);
  if (n == 1) {
    b.copy(Buf::kInput, 0, Buf::kOutput, 0, s.count);
  } else if (pos == 0) {
    b.send(next, Buf::kInput, 0, s.count);
  } else if (pos < n - 1) {
    const size_t partial = b.scratch(s.count);
    b.recvReduceSend(prev, next, Buf::kInput, 0, Buf::kScratch, partial, s.count);
  } else {
    b.recvReduce(prev, Buf::kInput, 0, Buf::kOutput, 0, s.count);
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "chain",
                          .coll = Coll::kReduce,
                          .summary = "pipelined chain ending at the root; reduce while forwarding",
                          .build = build,
                          .priority = 10});

}  // namespace tutti::algo
