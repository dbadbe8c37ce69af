// ZB-H1 (Zero Bubble, handcrafted 1): 1F1B with the full backward split into I and W, and W
// deferred. Rank r: warm-up w = min(P-1-r, M) forwards; steady (F, I) pairs, adding the oldest
// pending W from steady iteration r on; cool-down (I, oldest W); then every W still pending.
// Activations as 1F1B. Published bubble (P-1)(F+B-2W), exact when W <= min(F, b).
// generate_zb_h1_deferral: rank r defers at most max_pending[r] W's (<= r), so that ZB-H1 holds no
// more than 1F1B where a deferred W holds more than its forward kept (cost/w_deferral.h).
#include <algorithm>

#include "schedules/generators.h"

namespace ppsim {

Schedule generate_zb_h1(const ScheduleParams& p) { return generate_zb_h1_deferral(p, {}); }

Schedule generate_zb_h1_deferral(const ScheduleParams& p, const std::vector<int>& max_pending) {
  const int m = p.microbatches;
  return linear_schedule("zb-h1", p, 3, [&](int r, RankEmitter& e) {  // F, I and W per micro-batch
    const int warmup = std::min(p.pp - 1 - r, m);
    // W's deferred on rank r: r (the paper's), or fewer where the caller caps it.
    const int defer = max_pending.empty() ? r : std::clamp(max_pending[static_cast<std::size_t>(r)], 0, r);
    int next_f = 0, next_i = 0;
    // Phase 1, warm-up forwards.                           count = min(P-1-r, M)
    for (int i = 0; i < warmup; ++i) e.f(r, next_f++);
    // Phase 2, steady: F, I, and W from iteration d on.    count = M - w
    for (int i = 0; i < m - warmup; ++i) {
      e.f(r, next_f++);
      e.i(r, next_i++);
      if (i >= defer) e.w();
    }
    // Phase 3, cool-down: I, then the oldest W.           count = w
    for (int i = 0; i < warmup; ++i) {
      e.i(r, next_i++);
      e.w();
    }
    // Phase 4, flush the deferred W.                       count = pending
    while (e.w()) {
    }
  });
}

}  // namespace ppsim
