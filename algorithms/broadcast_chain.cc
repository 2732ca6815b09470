// File: algorithms/broadcast_chain.cc
// Pipelined chain broadcast: the ranks form a chain root, root+1, ..., root-1. The root sends its
// input to the next rank; every middle rank receives and forwards (recvCopySend), the last one
// only receives. Everything is one round: the engine cuts the range into slices, so a rank
// forwards slice i while slice i+1 arrives (Thakur, Rabenseifner, Gropp, IJHPCA 2005, pipelined
// broadcast).
// Cost: (n-2+k) (alpha + S/k beta) for k slices: about S beta for large S. Any n, any count.
#include "algorithms/algorithm.h"

namespace tutti::algo {
namespace {

Result<Schedule> build(const CollShape& s) {
  ScheduleBuilder b(s);
  const int n = s.nranks, r = s.rank;
  const int pos = patterns::mod(r - s.root, n);
  const int next = patterns::ringNext(r, n), prev = patterns::ringPrev(r, n);
  if (pos == 0) {
    b.copy(Buf::kInput, 0, Buf::kOutput, 0, s.count);
    if (n > 1) b.send(next, Buf::kInput, 0, s.count);
  } else if (pos < n - 1) {
    b.recvCopySend(prev, next, Buf::kOutput, 0, s.count);
  } else {
    b.recv(prev, Buf::kOutput, 0, s.count);
  }
  return b.finish();
}

}  // namespace

TUTTI_REGISTER_ALGORITHM({.name = "chain",
                          .coll = Coll::kBroadcast,
                          .summary = "pipelined chain from the root; S beta for large messages",
                          .build = build,
                          .priority = 10});

}  // namespace tutti::algo
