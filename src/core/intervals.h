// Time intervals [start, end): their union and how much of a span it covers. Used by the trace
// import's stream figures, the pipeline run's per-action and per-rank figures, the p2p share
// (cost/derive.cc) and the co-run model (api/gpu_costs.cc).
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "core/time.h"

namespace ppsim {

using Intervals = std::vector<std::pair<Time, Time>>;

// The union of `v` as sorted, disjoint, non-empty intervals (empty ones dropped; touching ones joined).
inline Intervals merge_intervals(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first) continue;
    if (!out.empty() && iv.first <= out.back().second)
      out.back().second = std::max(out.back().second, iv.second);
    else
      out.push_back(iv);
  }
  return out;
}

// The time of [a, b) that `merged` (sorted and disjoint, as merge_intervals returns) covers.
inline Time covered(const Intervals& merged, Time a, Time b) {
  if (b <= a) return 0;
  Time t = 0;
  auto it = std::lower_bound(merged.begin(), merged.end(), a,
                             [](const std::pair<Time, Time>& m, Time x) { return m.second <= x; });
  for (; it != merged.end() && it->first < b; ++it) t += std::min(b, it->second) - std::max(a, it->first);
  return t;
}

}  // namespace ppsim
