// The searched schedule for fidelity's `schedule: searched` results (fidelity_search.cc): apart
// from fidelity.cc because search/search.h and cost/config.h each declare a ppsim::Placement.
#pragma once
#include "core/schedule.h"
#include "cost/cost_model.h"

namespace ppsim::api {

// ppsim's schedule search (linear placement) on the config's costs, activations capped at
// cap_shares micro-batch shares per rank; deterministic. span: minimise the longest rank's own span
// (the step period under parallel.post_validation) instead of the makespan.
Schedule searched_schedule(const ModelConfig& cfg, int pp, int microbatches, double cap_shares, bool span);

}  // namespace ppsim::api
