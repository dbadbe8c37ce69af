// The searched schedule behind fidelity's `schedule: searched` results (api/fidelity.h): kept in
// its own file because search/search.h and cost/config.h each declare a ppsim::Placement.
#include "api/fidelity_search.h"

#include <algorithm>
#include <thread>

#include "search/search.h"

namespace ppsim::api {

// Zero Bubble's automatic schedules (ZB-1p, ZB-2p) as ppsim's schedule search on the config's
// costs: linear placement, activations capped at cap_shares micro-batch shares per rank (the
// paper's M_limit: p M_B or 2p M_B), deterministic (seed 1, bounded rounds: the same result on
// any thread count, docs/SEARCH.md).
Schedule searched_schedule(const ModelConfig& cfg, int pp, int microbatches, double cap_shares, bool span) {
  SearchRequest sr;
  sr.pp = pp;
  sr.microbatches = microbatches;
  sr.placements = {Placement::linear};
  sr.memory_cap = cap_shares;
  sr.costs = [&cfg](const Schedule& s) { return derive_costs(cfg, s); };
  sr.seed = 1;
  sr.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));  // the result does not depend on it
  sr.time_limit_s = 1e6;
  sr.swap_rounds = 20;
  // Under Zero Bubble's optimizer post-validation the step period is the longest rank's own span
  // (cost/derive.cc physical_result), which is what the paper's scheduler minimises too.
  sr.objective_span = span;
  Schedule s = search_schedule(sr).best.schedule;
  s.family = "searched";
  return s;
}

}  // namespace ppsim::api
