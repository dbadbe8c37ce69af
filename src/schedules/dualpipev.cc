// DualPipeV: DualPipe "cut in half". P ranks hold 2P stages in a V (as ZB-V): chunk 0 = stage
// r, chunk 1 = stage 2P-1-r; one pipe of M micro-batches. The same eight phases as DualPipe with
// Ph -> P, h -> r, M/2 -> M, near -> chunk 0, far -> chunk 1; the rank at the V's tip (r = P-1)
// runs its first main-phase pair without overlap. Golden orders: PyTorch's ScheduleDualPipeV.
// Published bubble (PP/2-1)(F&B+B-3W) with PP = 2P and per-chunk times; peak activations 2P+1.
#include "schedules/generators.h"

namespace ppsim {

Schedule generate_dualpipev(const ScheduleParams& p) {
  Schedule s = new_schedule("dualpipev", p);
  layout_v_shape(s, p.pp);
  const int P = p.pp;
  for (int r = 0; r < P; ++r) {
    DualPipeRankPlan plan;
    plan.stage[0] = r;
    plan.stage[1] = 2 * P - 1 - r;
    plan.h = r;
    plan.half_ranks = P;
    plan.half_microbatches = p.microbatches;
    plan.is_middle = r == P - 1;
    emit_dualpipe_phases(s.ranks[r], plan);
  }
  return s;
}

}  // namespace ppsim
