// Shared by the search tests: unit costs for a schedule (F, B, W per rank's share, split over its
// chunks), the same arithmetic as ppsim's --times.
#pragma once
#include <algorithm>
#include <random>
#include <vector>

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

// Random per-slice costs in tenths of a unit, 16 slices (the random-profile tests): F 3..20, I
// 2..20, W 0..20; with `pairs` a pair saving of up to 80% of the smaller of F and I; with
// `bytes` 1000..8000 bytes each way.
inline std::vector<SliceCosts> random_slices(std::mt19937_64& rng, bool pairs, bool bytes) {
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1)); };
  const Time tenth = kTicksPerUnit / 10;
  std::vector<SliceCosts> base(16);
  for (SliceCosts& s : base) {
    s.f = pick(3, 20) * tenth;
    const Time i = pick(2, 20) * tenth;
    s.w = pick(0, 20) * tenth;
    s.b = i + s.w;
    if (pairs) s.fb = s.f + s.b - pick(0, 8) * std::min(s.f, i) / 10;
    if (bytes) s.act_bytes = s.grad_bytes = pick(1, 8) * 1000;
  }
  return base;
}

}  // namespace ppsim::test
