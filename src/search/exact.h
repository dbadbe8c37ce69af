// The exact method for small P and M (docs/SEARCH.md, "Exact method"): a disjunctive MILP over
// one placement's ops, solved by CBC (COIN-OR) when ppsim was built with it
// (coinor-libcbc-dev; CMake finds it through pkg-config, else exact_none.cc says why not).
// It measures how far the search's heuristic is from optimal on small cases.
//
// Not obvious: the model has no link contention and no overlap model (op durations are the
// slices' F, b, W and hops are latency + bytes / bandwidth), and no F&B pairs (so the
// bidirectional placement is searched without them). The solver's order is then validated and
// simulated by the engine like every other candidate; where the engine's model and the MILP's
// agree (no bandwidth limit, no overlap model) a proven optimum of the MILP is the optimum.
#pragma once
#include <string>

#include "core/schedule.h"
#include "sim/costs.h"

namespace ppsim {

struct ExactResult {
  bool built = false;    // ppsim was built with CBC
  bool solved = false;   // the solver returned a schedule (feasible)
  bool optimal = false;  // and proved it optimal within the time limit
  Schedule schedule;     // per-rank order by the solver's start times
  Time objective = 0;    // the MILP's makespan (rounded back to ticks)
  // With `upper` given: proven that no schedule of the model reaches `upper` or less (the
  // search over C <= upper finished without a solution), so the optimum is above it.
  bool above_upper = false;
  std::string status;  // why not solved/optimal, or "optimal"
};

bool exact_available();
// cap_chunks: per-rank activation cap in chunks (0 = none). upper > 0: only schedules with a
// makespan of at most `upper` are sought (a smaller search space; when none exists the result is
// not solved and `above_upper` says that this is proven).
ExactResult exact_schedule(const Schedule& layout, const SimCosts& costs, int cap_chunks, double time_limit_s,
                           Time upper = 0);

}  // namespace ppsim
