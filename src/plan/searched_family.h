// `searched` as a plan candidate (docs/PLAN.md, docs/SEARCH.md): a Family entry that is not in
// the registry (so `ppsim schedules`, `compare all` and the invariant suite keep the nine), found
// by plan_family() beside the registry's names.
//
// Not obvious: its schedule depends on each candidate's costs, so the planner does not share
// one schedule across a group for it: search_for_candidate() runs the search (linear placement,
// 1F1B's activation cap of P per rank, one thread, seed 1) per candidate, and the planner's
// byte-level memory check then applies as for every family.
#pragma once
#include <string>

#include "core/schedule.h"
#include "cost/cost_model.h"
#include "schedules/registry.h"

namespace ppsim {

const Family& searched_family();
bool is_searched(const Family* f);
// The registry's family, or searched_family() for "searched"; InputError as find_family.
const Family& plan_family(const std::string& name);
// The searched schedule for (P, M) under this candidate's config costs.
Schedule search_for_candidate(const ModelConfig& cfg, int pp, int microbatches);

}  // namespace ppsim
