// The planner: every candidate of the plan's search space (per what-if variant) is checked
// against the constraints, then evaluated with the cost model and the simulator; the feasible
// ones are ranked by the objective. docs/PLAN.md describes the output.
//
// Not obvious:
// - Results are the same for any thread count and any sharding: each candidate's outcome is
//   written to its own slot, and the ranking is a total order (objective, then candidate id).
//   tests/plan/planner_test.cc checks --jobs 1 == --jobs 2 and shard+merge == unsharded.
// - A rejected candidate is counted under the first constraint it breaks, in the order of
//   Reason below (cheap checks first; memory last, since it needs the simulated activations).
// - Schedules are generated without the Boost.Graph validator (make_schedule's last step): the
//   generators are checked by tests/schedules/invariants_test.cc over every family, and the
//   simulator still throws on a schedule that cannot finish.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/time.h"
#include "cost/cost_model.h"
#include "plan/candidate_config.h"
#include "plan/search_space.h"

namespace ppsim {

enum class Reason : int {
  gpu_count,             // the GPU budget is not a multiple of pp * tp
  expert_parallel,       // ep does not divide the experts or dp, or the model has no experts
  global_batch,          // microbatches * mbs * dp outside the batch constraint
  schedule_constraint,   // the family's rule (chimera: P even, M mod P = 0, ...)
  layers_not_divisible,  // the layers cannot be cut into the schedule's slices
  invalid_config,        // the config loader refused the layout, or a derived time is absurd
  resource_limit,        // over --max-ops
  memory_cap,            // peak memory per GPU over the cap
  simulation_failed,     // the simulator could not finish the schedule (a bug)
};
inline constexpr int kReasons = 9;
const char* reason_name(Reason r);

// One feasible (evaluated) candidate. Times in ns, memory in bytes.
struct PlanRow {
  std::uint64_t id = 0;
  int variant = 0;
  std::string schedule;
  int pp = 0, v = 1, microbatches = 0, mbs = 1, ep = 1;
  Recompute recompute = Recompute::none;
  int dp = 1, gpus = 0;
  Time step_ns = 0;
  double tokens_per_second = 0;
  double mfu = 0;
  double bubble_ratio = 0;
  Time exposed_comm_ns = 0;     // the worst rank's
  double peak_memory_bytes = 0; // the worst rank's
  LayoutKey layout() const { return LayoutKey{variant, pp, v, mbs, ep, recompute}; }
};

// The candidate rejected for memory that needed the least: the nearest change that makes a plan
// feasible when none is (the report names it).
struct NearestPlan {
  bool any = false;
  std::uint64_t id = 0;
  std::string candidate;  // that candidate, as the rejection examples describe one
  double need_bytes = 0;  // its peak memory per GPU
  // false: rejected before any simulation, on its weights, gradients and optimizer states alone,
  // so need_bytes is a lower bound (its activations come on top). A simulated peak comes first.
  bool simulated = true;
  bool before(const NearestPlan& o) const {
    if (!o.any) return true;
    if (simulated != o.simulated) return simulated;
    return need_bytes < o.need_bytes || (need_bytes == o.need_bytes && id < o.id);
  }
};

struct Rejections {
  std::uint64_t count = 0;
  std::uint64_t example_id = 0;  // the lowest id rejected for this reason
  std::string example;           // that candidate and why
};

// The outcome for one variant. `feasible` holds every feasible candidate (a shard keeps them so
// that --merge can rank them all); the rest is derived from it by finalize_plan().
struct VariantResult {
  std::string name;               // "base" or the what-if's name
  std::vector<std::string> overrides;  // key=value
  std::vector<std::string> given_sets;  // the command line's --set as given: in every reproduce command
  std::vector<std::string> space;      // "pp: 4, 8" ..., for the report
  std::uint64_t candidates = 0;   // in the whole space (all shards)
  std::uint64_t evaluated = 0;    // by this run (a shard: its slice)
  double memory_cap_bytes = 0;
  int gpus = 0;
  std::array<Rejections, kReasons> rejected{};
  NearestPlan nearest;  // among the candidates rejected for memory
  // Rejections per schedule family and reason, for "why no plan of this family".
  std::vector<std::pair<std::string, std::array<std::uint64_t, kReasons>>> rejected_by_schedule;
  std::vector<PlanRow> feasible;
  // The layout overrides of every layout with a feasible row: with the variant's overrides,
  // parallel.schedule and parallel.microbatches they reproduce a row with `ppsim compare`.
  std::map<LayoutKey, std::vector<std::string>> layout_sets;
  // Derived (finalize_plan): the top k, and the best plan of each family in ranking order.
  std::vector<PlanRow> ranking;
  std::vector<PlanRow> best_per_schedule;
};

// Work done by one run, for benchmarks; never printed in the report (the memo of identical
// simulations is per schedule, so these differ between a sharded and an unsharded run).
struct PlanStats {
  std::uint64_t candidates = 0;   // in this run (this shard)
  std::uint64_t simulated = 0;    // candidates that reached the simulator
  std::uint64_t simulations = 0;  // simulate() calls (candidates with identical costs share one)
  std::uint64_t configs = 0;      // layout configs built and validated
  std::uint64_t schedules = 0;    // schedules generated
};

struct PlanResult {
  std::string config_name;
  std::string config_file;
  std::string fingerprint;  // of the config tree and the plan: shards must agree on it
  Objective objective = Objective::step_time;
  int top_k = 10;
  std::string constraints;  // one line for the report
  int shard_index = 0;
  int shard_count = 1;      // 1: not sharded (or merged)
  std::vector<VariantResult> variants;  // base first
  PlanStats stats;
};

struct PlanOptions {
  int jobs = 0;           // 0: every core
  int shard_index = 0;
  int shard_count = 1;
  int top_k = 0;          // 0: the plan's top_k
  std::vector<std::string> sets;  // the command line's --set (key=value): error locations, reproduce commands
  // Called on the calling thread about every 100 ms: candidates done, candidates in this run.
  std::function<void(std::uint64_t, std::uint64_t)> progress;
};

PlanResult run_plan(const ModelConfig& cfg, const PlanOptions& opt);

// Sorts `feasible` (objective, then id), fills ranking (top k) and best_per_schedule.
void finalize_plan(PlanResult& r);

// Merges shard results (every index 0..n-1 exactly once, same fingerprint) into the result of
// an unsharded run. `names` label the inputs in errors. top_k > 0 overrides the shards'.
PlanResult merge_plans(std::vector<PlanResult> shards, const std::vector<std::string>& names, int top_k);

// The --set flags that reproduce `row` with `ppsim compare config.yaml`.
std::vector<std::string> reproduce_sets(const VariantResult& v, const PlanRow& row);

// True when a ranks before b under the objective (ties: lower id first).
bool ranks_before(const PlanRow& a, const PlanRow& b, Objective o);

}  // namespace ppsim
