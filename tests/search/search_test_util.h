// Shared by the search tests: unit costs for a schedule (F, B, W per rank's share, split over its
// chunks), the same arithmetic as ppsim's --times.
#pragma once
#include "core/schedule.h"
#include "core/time.h"
#include "search/search.h"
#include "sim/costs.h"

namespace ppsim::test {

inline SimCosts unit_costs(const Schedule& s, double f, double b, double w) {
  SliceCosts c;
  c.f = static_cast<Time>(f * kTicksPerUnit / s.chunks_per_rank);
  c.b = static_cast<Time>(b * kTicksPerUnit / s.chunks_per_rank);
  c.w = static_cast<Time>(w * kTicksPerUnit / s.chunks_per_rank);
  return uniform_costs(s.stages_per_pipe, c);
}

// A small case for the exact method: the placement, P, M, the cap in chunks (0: none), one
// rank's F, B, W (unit_costs) and the link latency, in units.
struct SmallCase {
  Placement p;
  int pp, m, cap_chunks;
  double f, b, w, latency;
};

}  // namespace ppsim::test
