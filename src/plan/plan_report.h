// The planner's report as a table (for people) and CSV (one row per ranked plan), and the
// what-if comparison both use: the best plan per variant next to the base's.
#pragma once
#include <string>
#include <vector>

#include "plan/planner.h"

namespace ppsim {

struct WhatIfRow {
  std::size_t index = 0;          // into PlanResult::variants
  std::string variant;
  const PlanRow* best = nullptr;  // null: no feasible plan
  double delta_pct = 0;           // step time vs the base's best, percent
  bool schedule_changed = false;
  bool layout_changed = false;    // pp, v, microbatches, mbs, ep or recompute
};
std::vector<WhatIfRow> whatif_rows(const PlanResult& r);

std::string render_plan_table(const PlanResult& r);
std::string render_plan_csv(const PlanResult& r);

}  // namespace ppsim
