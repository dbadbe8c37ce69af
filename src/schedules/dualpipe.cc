// DualPipe (DeepSeek-V3): micro-batches enter from both ends; rank r holds stage r of the
// forward pipe and the mirrored stage of the reverse pipe (2x parameters). The eight phases of
// DeepSeek's dualpipe.py step(), with h = min(r, P-1-r), Ph = P/2. "Near" is the pipe that
// enters at this rank's end (forward pipe for r < P/2), "far" the other.
// Published bubble (PP/2-1)(F&B+B-3W) on the worst rank, exact when F = b and W <= b;
// peak activations PP+1. Figure case P=8, M=20, F=1, B=2, W=1, F&B=3: makespan 66, bubble 6
// and 9 activations on every rank (tests/sim/published_test.cc).
#include "schedules/generators.h"

namespace ppsim {

void emit_dualpipe_phases(std::vector<Action>& out, const DualPipeRankPlan& plan) {
  RankEmitter e(out);
  const int near = 0, far = 1;
  int next_f[2] = {0, 0}, next_b[2] = {0, 0};
  auto F = [&](int c) { e.f(plan.stage[c], next_f[c]++); };
  auto B = [&](int c, bool zb) {
    if (zb) e.i(plan.stage[c], next_b[c]++);
    else e.b(plan.stage[c], next_b[c]++);
  };
  auto FB = [&](int cf, int cb) {
    e.fb(Op{OpKind::F, plan.stage[cf], next_f[cf]++}, Op{OpKind::B, plan.stage[cb], next_b[cb]++});
  };
  const int h = plan.h, ph = plan.half_ranks;
  // Phase 1: near forwards.                                    count = 2(Ph-h-1)
  for (int i = 0; i < 2 * (ph - h - 1); ++i) F(near);
  // Phase 2: (F near, F far).                                  count = h+1
  for (int i = 0; i < h + 1; ++i) { F(near); F(far); }
  // Phase 3: (I far, W, F far), zero-bubble style.             count = Ph-h-1
  for (int i = 0; i < ph - h - 1; ++i) { B(far, true); e.w(); F(far); }
  // Phase 4, main: (F near & B far, F far & B near).           count = M/2-P+h+1
  //   on the middle ranks the first pair is not overlapped.
  for (int i = 0; i < plan.half_microbatches - 2 * ph + h + 1; ++i) {
    if (i == 0 && plan.is_middle) { F(near); B(far, false); }
    else FB(near, far);
    FB(far, near);
  }
  // Phase 5: (B far, F far & B near).                          count = Ph-h-1
  for (int i = 0; i < ph - h - 1; ++i) { B(far, false); FB(far, near); }
  // Phase 6: (B far, B near), deferring W from half-way on.    count = h+1
  bool zb = false;
  for (int i = 0; i < h + 1; ++i) {
    if (i == (h + 1) / 2 && h % 2 == 1) zb = true;
    B(far, zb);
    if (i == (h + 1) / 2 && h % 2 == 0) zb = true;
    B(near, zb);
  }
  // Phase 7: (W, I near).                                      count = Ph-h-1
  for (int i = 0; i < ph - h - 1; ++i) { e.w(); B(near, true); }
  // Phase 8: the deferred W.                                   count = h+1
  for (int i = 0; i < h + 1; ++i) e.w();
  PPSIM_CHECK(e.pending_w() == 0, "dualpipe rank left {} weight-grads pending", e.pending_w());
}

Schedule generate_dualpipe(const ScheduleParams& p) {
  Schedule s = new_schedule("dualpipe", p, 2);
  layout_bidirectional(s, p.pp);
  const int P = p.pp;
  for (int r = 0; r < P; ++r) {
    DualPipeRankPlan plan;
    const int fwd_stage = r, rev_stage = P + (P - 1 - r);
    const bool second_half = r >= P / 2;
    plan.stage[0] = second_half ? rev_stage : fwd_stage;  // near
    plan.stage[1] = second_half ? fwd_stage : rev_stage;  // far
    plan.h = std::min(r, P - 1 - r);
    plan.half_ranks = P / 2;
    plan.half_microbatches = p.microbatches / 2;
    plan.is_middle = (r == P / 2 - 1) || (r == P / 2);
    emit_dualpipe_phases(s.ranks[r], plan);
  }
  return s;
}

}  // namespace ppsim
