// Chimera: two pipelines in opposite directions over D = P workers. Down pipe: stage i on
// worker i; up pipe: stage i (written P+i) on worker D-1-i; each worker holds two stages (2x
// parameters). Each pipe carries N/2 micro-batches in basic units of D/2. Micro-batch j of unit
// u enters at slot 2Du + 2j, runs F of stage t at slot +t (t < D) and the full backward of stage
// 2D-1-t at slot +t (D <= t < 2D). A worker's order is its ops sorted by slot (no two of a
// worker's ops share a slot, since D is even). Published bubble D-2 slots when F = B; peak
// activations D/2 + 1 + min(r, D-1-r) stages. The public reference generator drops ops when
// D >= 6 and N >= 3D; this rule does not (every op is checked by the validator).
#include <algorithm>
#include <utility>

#include "schedules/generators.h"

namespace ppsim {

Schedule generate_chimera(const ScheduleParams& p) {
  Schedule s = new_schedule("chimera", p, 2);
  layout_bidirectional(s, p.pp);
  const int D = p.pp;
  const int units = p.microbatches / D;  // per pipe: (N/2) / (D/2)
  std::vector<std::vector<std::pair<long long, Op>>> by_worker(D);
  for (int pipe = 0; pipe < 2; ++pipe) {
    for (int u = 0; u < units; ++u) {
      for (int j = 0; j < D / 2; ++j) {
        const long long base = 2LL * D * u + 2LL * j;
        const int mb = u * (D / 2) + j;
        for (int t = 0; t < 2 * D; ++t) {
          const int pos = t < D ? t : 2 * D - 1 - t;  // stage position within the pipe
          const int stage = pipe * D + pos;
          const int worker = s.stage_rank[stage];
          const Op op{t < D ? OpKind::F : OpKind::B, stage, mb};
          by_worker[worker].emplace_back(base + t, op);
        }
      }
    }
  }
  for (int w = 0; w < D; ++w) {
    auto& ops = by_worker[w];
    std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [slot, op] : ops) s.ranks[w].push_back(Action::single(op));
  }
  return s;
}

}  // namespace ppsim
