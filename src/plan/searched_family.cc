// `searched` as a plan candidate (searched_family.h).
#include "plan/searched_family.h"

#include <fmt/format.h>

#include "core/error.h"
#include "search/search.h"

namespace ppsim {

const Family& searched_family() {
  static const Family f = [] {
    Family x;
    x.name = "searched";
    x.description = "schedule search on the linear placement for the candidate's costs (docs/SEARCH.md)";
    x.constraints = "P >= 2";
    x.activation_formula = "<= P (the cap it is searched under)";
    x.parameter_copies = 1;
    x.default_vpp = 1;
    x.check = [](const ScheduleParams& p) {
      return p.pp >= 2 ? std::string{} : fmt::format("searched needs P >= 2, got {}", p.pp);
    };
    // The layout alone; the planner searches per candidate (search_for_candidate).
    x.generate = [](const ScheduleParams& p) { return placement_layout(Placement::linear, p.pp, p.microbatches); };
    x.published = [](const ScheduleParams&, const UniformTimes&) { return PublishedBubble{}; };
    x.published_activations = [](const ScheduleParams&, int) { return -1; };
    return x;
  }();
  return f;
}

bool is_searched(const Family* f) { return f == &searched_family(); }

const Family& plan_family(const std::string& name) {
  if (name == "searched") return searched_family();
  return find_family(name);
}

Schedule search_for_candidate(const ModelConfig& cfg, int pp, int microbatches) {
  SearchRequest req;
  req.pp = pp;
  req.microbatches = microbatches;
  req.placements = {Placement::linear};
  req.memory_cap = pp;  // 1F1B's rank 0
  req.costs = [&cfg](const Schedule& s) { return derive_costs(cfg, s); };
  req.seed = 1;
  req.threads = 1;         // the planner runs candidates in parallel
  req.time_limit_s = 1e6;  // bounded by the trial counts, so that plans stay deterministic
  req.swap_rounds = 200;
  Schedule s = search_schedule(req).best.schedule;
  s.family = "searched";
  return s;
}

}  // namespace ppsim
