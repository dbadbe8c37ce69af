// GPipe: every rank runs all M forwards, then all M full backwards.
// Published bubble (P-1)(F+B) on every rank, exact for uniform stages without latency;
// activations M per rank. Checked in tests/sim/published_test.cc.
#include "schedules/generators.h"

namespace ppsim {

Schedule generate_gpipe(const ScheduleParams& p) {
  return linear_schedule("gpipe", p, 2, [&](int r, RankEmitter& e) {  // F and B per micro-batch
    // Phase 1, fill: M forwards.
    for (int m = 0; m < p.microbatches; ++m) e.f(r, m);
    // Phase 2, drain: M full backwards.
    for (int m = 0; m < p.microbatches; ++m) e.b(r, m);
  });
}

}  // namespace ppsim
