// Time intervals [start, end) of a trace: their union, used by the import's stream figures and
// the pipeline run's per-action and per-rank figures.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "core/time.h"

namespace ppsim::trace {

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

}  // namespace ppsim::trace
