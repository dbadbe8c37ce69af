// The planner behind `ppsim plan` and ppsim.plan(): a config (or a loaded one) searched under its
// plan: section, one shard of it (--shard i/n), or shard results merged (--merge).
//
// Not obvious: a config and merge files exclude each other, and --merge takes neither --shard nor
// --set, because a merged ranking is only the unsharded one when every shard ran the same config.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cost/cost_model.h"
#include "plan/planner.h"

namespace ppsim::api {

struct PlanRequest {
  std::string config;                        // YAML config with a plan: section
  std::vector<std::string> sets;             // "key.path=value" overrides
  std::optional<ModelConfig> loaded_config;  // wins over `config`
  std::vector<std::string> merge;            // shard JSON files to merge instead
  std::string shard;                         // "i/n": evaluate candidates with id % n == i
  int top = 0;                               // plans per variant (0: plan.top_k, else 10)
  int jobs = 0;                              // threads (0: every core)
  long long max_ops = 0;                     // > 0: limits().max_ops
  std::function<void(std::uint64_t, std::uint64_t)> progress;  // candidates done, total
};

PlanResult plan(const PlanRequest& req);

// "i/n" with 0 <= i < n; InputError (exit 2) naming --shard otherwise.
void parse_shard(const std::string& text, int& index, int& count);

}  // namespace ppsim::api
