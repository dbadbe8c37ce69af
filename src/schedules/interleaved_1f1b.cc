// Interleaved 1F1B (Megatron's virtual pipeline). Rank r holds stages c*P + r, c < v.
// Micro-batches go in groups of G; the virtual order lists, group by group, every chunk of
// every micro-batch of the group (chunks ascending for forwards, descending for backwards).
// Warm-up min(2(P-1-r) + (v-1)G, vM), then 1F1B over the virtual micro-batches.
// Published bubble (P-1)(f+b) in per-chunk times; peak activations on rank 0 with G = P:
// 2(P-1) + (v-1)P + 1 chunks.
#include <algorithm>

#include "schedules/generators.h"

namespace ppsim {

namespace {
// The k-th entry of the virtual order: (chunk, micro-batch). Groups have G micro-batches,
// the last one M mod G when that is not zero.
struct VirtualOrder {
  int p, v, m, g;
  Op at(int k, int rank, bool backward) const {
    const int group_span = g * v;
    const int group = k / group_span;
    const int first_mb = group * g;
    const int size = std::min(g, m - first_mb);
    const int idx = k - group * group_span;
    int chunk = idx / size;
    const int mb = first_mb + idx % size;
    if (backward) chunk = v - 1 - chunk;
    return Op{backward ? OpKind::B : OpKind::F, chunk * p + rank, mb};
  }
};
}  // namespace

Schedule generate_interleaved_1f1b(const ScheduleParams& p) {
  Schedule s = new_schedule("interleaved-1f1b", p);
  const int v = p.vpp, m = p.microbatches, g = p.group_size;
  layout_linear(s, p.pp, v);
  const VirtualOrder order{p.pp, v, m, g};
  const int total = v * m;
  for (int r = 0; r < p.pp; ++r) {
    auto& out = s.ranks[r];
    const int warmup = std::min(2 * (p.pp - 1 - r) + (v - 1) * g, total);
    int next_f = 0, next_b = 0;
    // Phase 1, warm-up.                     count = min(2(P-1-r) + (v-1)G, vM)
    for (int i = 0; i < warmup; ++i) out.push_back(Action::single(order.at(next_f++, r, false)));
    // Phase 2, steady 1F1B over chunks.     count = vM - warm-up
    for (int i = 0; i < total - warmup; ++i) {
      out.push_back(Action::single(order.at(next_f++, r, false)));
      out.push_back(Action::single(order.at(next_b++, r, true)));
    }
    // Phase 3, cool-down.                   count = warm-up
    for (int i = 0; i < warmup; ++i) out.push_back(Action::single(order.at(next_b++, r, true)));
  }
  return s;
}

}  // namespace ppsim
