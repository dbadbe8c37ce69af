// 1F1B (Megatron's non-interleaved schedule). Rank r: warm-up w = min(P-1-r, M) forwards,
// then M-w (F, B) pairs, then w backwards. Published bubble (P-1)(F+B); activations
// min(P-r, M) on rank r.
#include <algorithm>

#include "schedules/generators.h"

namespace ppsim {

Schedule generate_1f1b(const ScheduleParams& p) {
  const int m = p.microbatches;
  return linear_schedule("1f1b", p, 2, [&](int r, RankEmitter& e) {  // F and B per micro-batch
    const int warmup = std::min(p.pp - 1 - r, m);
    int next_f = 0, next_b = 0;
    // Phase 1, warm-up: w forwards.                count = min(P-1-r, M)
    for (int i = 0; i < warmup; ++i) e.f(r, next_f++);
    // Phase 2, steady: one forward, one backward.  count = M - w
    for (int i = 0; i < m - warmup; ++i) {
      e.f(r, next_f++);
      e.b(r, next_b++);
    }
    // Phase 3, cool-down: the remaining backwards. count = w
    for (int i = 0; i < warmup; ++i) e.b(r, next_b++);
  });
}

}  // namespace ppsim
