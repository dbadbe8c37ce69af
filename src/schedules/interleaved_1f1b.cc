// Interleaved 1F1B (Megatron's virtual pipeline). Rank r holds stages c*P + r, c < v.
// Micro-batches go in groups of G; the virtual order lists, group by group, every chunk of
// every micro-batch of the group (chunks ascending for forwards, descending for backwards).
// Warm-up min(2(P-1-r) + (v-1)G, vM), then 1F1B over the virtual micro-batches.
// Published bubble (P-1)(f+b) in per-chunk times; peak activations on rank 0 with G = P:
// 2(P-1) + (v-1)P + 1 chunks. The overlap variant (Megatron's EP all-to-all overlap) below.
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

namespace {

// Both orders: `extra` more warm-up forwards, and each steady step's forward and backward as one
// overlapped pair (`paired`) or two actions.
Schedule interleaved(const char* family, const ScheduleParams& p, int extra, bool paired) {
  Schedule s = new_schedule(family, p);
  const int v = p.vpp, m = p.microbatches, g = p.group_size;
  layout_linear(s, p.pp, v);
  const VirtualOrder order{p.pp, v, m, g};
  const int total = v * m;
  for (int r = 0; r < p.pp; ++r) {
    auto& out = s.ranks[r];
    const int warmup = std::min(2 * (p.pp - 1 - r) + (v - 1) * g + extra, total);
    int next_f = 0, next_b = 0;
    // Phase 1, warm-up.                     count = min(2(P-1-r) + (v-1)G + extra, vM)
    for (int i = 0; i < warmup; ++i) out.push_back(Action::single(order.at(next_f++, r, false)));
    // Phase 2, steady 1F1B over chunks.     count = vM - warm-up
    for (int i = 0; i < total - warmup; ++i) {
      const Op f = order.at(next_f++, r, false), b = order.at(next_b++, r, true);
      if (paired) {
        out.push_back(Action::pair(f, b));
      } else {
        out.push_back(Action::single(f));
        out.push_back(Action::single(b));
      }
    }
    // Phase 3, cool-down.                   count = warm-up
    for (int i = 0; i < warmup; ++i) out.push_back(Action::single(order.at(next_b++, r, true)));
  }
  return s;
}

}  // namespace

Schedule generate_interleaved_1f1b(const ScheduleParams& p) { return interleaved("interleaved-1f1b", p, 0, false); }

// Megatron-LM's EP all-to-all overlap (--overlap-moe-expert-parallel-comm, combined 1F1B,
// megatron/core/pipeline_parallel/schedules.py and combined_1f1b.py): one more warm-up forward,
// so that every steady step runs a forward and a backward of different micro-batches as one
// combined step, each one's all-to-all under the other's compute. With P = 1, v = 1: F0, then
// (F k, B k-1) pairs, then the last B, as combined_1f1b_schedule_for_no_pipelining runs them.
Schedule generate_interleaved_1f1b_overlap(const ScheduleParams& p) {
  return interleaved("interleaved-1f1b-overlap", p, 1, true);
}

}  // namespace ppsim
