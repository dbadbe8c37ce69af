// ZB-V (Zero Bubble V, handcrafted): two chunks per rank in a V. Chunk 0 = stage r, chunk 1 =
// stage 2P-1-r. Planned with n = max(2P-1, M) micro-batches per chunk; ops of micro-batches
// >= M are dropped. Activations 2P chunks; published bubble zero within each rank's own span
// when F = b = W per chunk and M >= 2P-1. Golden orders: PyTorch's ScheduleZBVZeroBubble.
#include <algorithm>

#include "schedules/generators.h"

namespace ppsim {

Schedule generate_zbv(const ScheduleParams& p) {
  Schedule s = new_schedule("zbv", p);
  layout_v_shape(s, p.pp);
  const int P = p.pp, m = p.microbatches;
  const int n = std::max(2 * P - 1, m);
  for (int r = 0; r < P; ++r) {
    RankEmitter e(s.ranks[r]);
    const int st[2] = {r, 2 * P - 1 - r};
    int next_f[2] = {0, 0}, next_i[2] = {0, 0};
    std::deque<int> pending_w[2];
    auto f = [&](int c) { if (next_f[c] < m) e.f(st[c], next_f[c]); ++next_f[c]; };
    auto i = [&](int c) {
      if (next_i[c] < m) {
        s.ranks[r].push_back(Action::single({OpKind::I, st[c], next_i[c]}));
        pending_w[c].push_back(next_i[c]);
      }
      ++next_i[c];
    };
    auto w = [&](int c) {
      if (pending_w[c].empty()) return;
      s.ranks[r].push_back(Action::single({OpKind::W, st[c], pending_w[c].front()}));
      pending_w[c].pop_front();
    };
    // Phase 1, warm-up: chunk-0 forwards.                      count = 2(P-r)-1
    for (int k = 0; k < 2 * (P - r) - 1; ++k) f(0);
    // Phase 2, the V turns: (F1, F0).                          count = r
    for (int k = 0; k < r; ++k) { f(1); f(0); }
    // Phase 3, chunk 1 reaches steady state: (F1, I1, W1).     count = P-r
    for (int k = 0; k < P - r; ++k) { f(1); i(1); w(1); }
    // Phase 4, steady: (F0, I0, W0, F1, I1, W1).               count = n-P
    for (int k = 0; k < n - P; ++k) { f(0); i(0); w(0); f(1); i(1); w(1); }
    // Phase 5, cool-down: (I0, I1).                            count = r
    for (int k = 0; k < r; ++k) { i(0); i(1); }
    // Phase 6, cool-down: (I0, W0).                            count = P-r
    for (int k = 0; k < P - r; ++k) { i(0); w(0); }
    // Phase 7, flush pending W1 then pending W0.
    while (!pending_w[1].empty()) w(1);
    while (!pending_w[0].empty()) w(0);
  }
  return s;
}

}  // namespace ppsim
