// File: algorithms/fusion.cc
// Fused allreduce schedules (algorithms/fusion.h).
#include "algorithms/fusion.h"

#include <algorithm>

namespace tutti::algo {

Schedule fuseSchedules(std::span<const FusePart> parts) {
  // Per fused round: the plain parts' steps (in part order), then the one forwarding part's.
  std::vector<std::vector<Step>> plain, forwarding;
  std::vector<uint8_t> taken;  // the fused round already holds a forwarding part
  size_t scratch = 0;
  for (const FusePart& part : parts) {
    const auto& rounds = part.schedule->rounds;
    auto fwd = [&](size_t r) { return r < part.forwardRounds.size() && part.forwardRounds[r]; };
    // The first start round at which none of its forwarding rounds meets another part's.
    size_t start = 0;
    for (bool clash = true; clash;) {
      clash = false;
      for (size_t r = 0; r < rounds.size() && !clash; ++r)
        clash = fwd(r) && start + r < taken.size() && taken[start + r];
      if (clash) ++start;
    }
    const size_t end = start + rounds.size();
    if (plain.size() < end) {
      plain.resize(end);
      forwarding.resize(end);
      taken.resize(end, 0);
    }
    for (size_t r = 0; r < rounds.size(); ++r) {
      auto& into = fwd(r) ? forwarding[start + r] : plain[start + r];
      for (Step st : rounds[r]) {
        if (part.inPlace) {  // alone, input and output are one buffer: keep them one
          if (st.src == Buf::kInput) st.src = Buf::kOutput;
          if (st.dst == Buf::kInput) st.dst = Buf::kOutput;
        }
        st.srcOffset += st.src == Buf::kScratch ? scratch : part.offset;
        st.dstOffset += st.dst == Buf::kScratch ? scratch : part.offset;
        into.push_back(st);
      }
      if (fwd(r)) taken[start + r] = 1;
    }
    scratch += part.schedule->scratchCount;
  }
  Schedule fused;
  fused.scratchCount = scratch;
  fused.rounds.resize(plain.size());
  for (size_t r = 0; r < plain.size(); ++r) {
    fused.rounds[r] = std::move(plain[r]);
    fused.rounds[r].insert(fused.rounds[r].end(), forwarding[r].begin(), forwarding[r].end());
  }
  return fused;
}

Result<std::vector<uint8_t>> forwardRounds(const AlgorithmInfo& algo, CollShape shape) {
  std::vector<uint8_t> out;
  for (int r = 0; r < shape.nranks; ++r) {
    shape.rank = r;
    TUTTI_TRY_ASSIGN(Schedule s, algo.build(shape));
    if (out.size() < s.rounds.size()) out.resize(s.rounds.size(), 0);
    for (size_t k = 0; k < s.rounds.size(); ++k)
      for (const Step& st : s.rounds[k])
        if (forwards(st.op) && st.count > 0) out[k] = 1;
  }
  return out;
}

}  // namespace tutti::algo
