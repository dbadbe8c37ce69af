// GPipe: every rank runs all M forwards, then all M full backwards.
// Published bubble (P-1)(F+B) on every rank, exact for uniform stages without latency;
// activations M per rank. Checked in tests/sim/published_test.cc.
#include "schedules/generators.h"

namespace ppsim {

Schedule generate_gpipe(const ScheduleParams& p) {
  Schedule s;
  s.family = "gpipe";
  s.microbatches = p.microbatches;
  layout_linear(s, p.pp, 1);
  for (int r = 0; r < p.pp; ++r) {
    s.ranks[r].reserve(2 * static_cast<std::size_t>(p.microbatches));  // F and B per micro-batch
    RankEmitter e(s.ranks[r]);
    // Phase 1, fill: M forwards.
    for (int m = 0; m < p.microbatches; ++m) e.f(r, m);
    // Phase 2, drain: M full backwards.
    for (int m = 0; m < p.microbatches; ++m) e.b(r, m);
  }
  return s;
}

}  // namespace ppsim
