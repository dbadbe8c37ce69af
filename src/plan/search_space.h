// The planner's input: the `plan:` section of a config (docs/CONFIG.md, "plan") read into typed
// lists with file:line:col errors, the search space resolved against one config variant, and the
// candidates it enumerates.
//
// Not obvious: a list that is absent means "the config's own value", resolved per what-if
// variant, so a variant that sets parallel.recompute searches its own recompute. Candidate ids
// are positions in one fixed enumeration order (variant, schedule, v, pp, microbatches, mbs, ep,
// recompute): they are the same on every machine and for any thread count, which is what
// --shard i/n (id % n == i) and the ranking's tie-break rely on.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/error.h"
#include "cost/config.h"

namespace ppsim {

struct Family;

enum class Objective { step_time, tokens_per_second };
const char* objective_name(Objective o);
const char* recompute_name(Recompute r);

struct PlanConstraints {
  std::optional<double> memory_gb;     // a fixed cap per GPU
  SourceLoc memory_gb_at;              // where memory_gb was written
  double reserve_gb = 0;               // else cap = hardware.hbm_gb - reserve_gb (per variant)
  std::int64_t global_batch_min = 0;   // sequences per step = microbatches * mbs * dp; 0 = no bound
  std::int64_t global_batch_max = 0;
  int gpus = 0;                        // GPU budget; 0 = the config's (hardware.gpus, or pp*tp*dp)
  bool has_global_batch() const { return global_batch_max > 0; }
};

// The lists as written; empty = the config's own value.
struct SearchLists {
  std::vector<std::string> schedules;  // registry names
  std::vector<int> pp, vpp, microbatches, micro_batch_size, ep;
  std::vector<Recompute> recompute;
};

// One override of a what-if variant: `key` is a --set style key path; `value` is the YAML node
// from the file (so that errors about it point into plan.whatif).
struct WhatIfOverride {
  std::string key;
  YAML::Node value;
  SourceLoc key_loc;
};

struct WhatIf {
  std::string name;
  SourceLoc loc;
  std::vector<WhatIfOverride> overrides;
};

struct PlanSpec {
  SearchLists search;
  PlanConstraints constraints;
  Objective objective = Objective::step_time;
  int top_k = 10;
  std::vector<WhatIf> whatif;
};

// Reads cfg.plan (null or absent: every default). `set_paths` are key paths given with --set:
// errors about them point at "--set". Unknown keys get a suggestion.
PlanSpec read_plan_spec(const ModelConfigData& cfg, const std::vector<std::string>& set_paths);

// The search space of one variant: every list non-empty.
struct SearchSpace {
  std::vector<const Family*> families;
  std::vector<int> pp, vpp, microbatches, micro_batch_size, ep;
  std::vector<Recompute> recompute;
  std::uint64_t size() const;  // candidates it enumerates
};
SearchSpace resolve_space(const SearchLists& lists, const ModelConfigData& variant);

// One point of the space. `v` is chunks per rank per pipe: the interleaved vpp, 2 for the
// V-shaped families, else 1; the schedule has v * pp slices.
struct PlanCandidate {
  std::uint64_t id = 0;
  int variant = 0;
  const Family* family = nullptr;
  int pp = 0;
  int v = 1;
  int microbatches = 0;
  int mbs = 1;
  int ep = 1;
  Recompute recompute = Recompute::none;
};

// Appends the candidates of `space` for `variant`; each one's id is its position in `out`.
void enumerate_candidates(const SearchSpace& space, int variant, std::vector<PlanCandidate>& out);

// "1f1b pp=8 v=1 M=32 mbs=1 ep=8 recompute=full"
std::string describe_candidate(const PlanCandidate& c);

}  // namespace ppsim
