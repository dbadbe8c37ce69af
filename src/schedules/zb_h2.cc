// ZB-H2 (Zero Bubble, handcrafted 2): more warm-up forwards fill the start-up bubble, and W
// fills the drain. Rank r: warm-up min(2(P-r)-1, M) forwards; then for k < M: I(k), the oldest
// W once k >= 2r, the next F if any; then the remaining W. Activations 2P-1 on rank 0.
// Published bubble zero within each rank's own span, exact when F = b = W and M >= 2P-1.
#include <algorithm>

#include "schedules/generators.h"

namespace ppsim {

Schedule generate_zb_h2(const ScheduleParams& p) {
  const int m = p.microbatches;
  return linear_schedule("zb-h2", p, 3, [&](int r, RankEmitter& e) {  // F, I and W per micro-batch
    const int warmup = std::min(2 * (p.pp - r) - 1, m);
    int next_f = 0;
    // Phase 1, warm-up forwards.                          count = min(2(P-r)-1, M)
    for (int i = 0; i < warmup; ++i) e.f(r, next_f++);
    // Phase 2, steady: I, W once k >= 2r, next F.         count = M
    for (int k = 0; k < m; ++k) {
      e.i(r, k);
      if (k >= 2 * r) e.w();
      if (next_f < m) e.f(r, next_f++);
    }
    // Phase 3, the remaining W.                           count = pending
    while (e.w()) {
    }
  });
}

}  // namespace ppsim
