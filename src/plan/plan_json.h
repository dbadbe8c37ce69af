// The planner's JSON: the report (`ppsim plan --format json`) and the shard files that
// `ppsim plan --merge` reads back. docs/PLAN.md documents the fields; they are added, never
// renamed.
//
// Not obvious: a shard file also carries every feasible candidate of its slice
// ("feasible_plans") and the layouts' --set overrides, so that the merge ranks exactly the set an
// unsharded run ranks. Raw figures (ns, bytes, doubles at full precision) round-trip exactly;
// the ms / GB fields beside them are for people.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "plan/planner.h"

namespace ppsim {

nlohmann::json plan_to_json(const PlanResult& r);
std::string render_plan_json(const PlanResult& r);

// Reads a shard file's JSON (InputError naming `name` when it is not one).
PlanResult plan_from_json(const std::string& text, const std::string& name);

}  // namespace ppsim
