#include "api/plan.h"

#include <fmt/format.h>

#include "core/error.h"
#include "cost/yaml_reader.h"
#include "plan/plan_json.h"
#include "schedules/registry.h"

namespace ppsim::api {

void parse_shard(const std::string& text, int& index, int& count) {
  const std::size_t slash = text.find('/');
  auto bad = [&]() {
    return InputError(fmt::format("--shard: expected i/n with 0 <= i < n (e.g. 3/16), got '{}'", text), {}, kExitUsage);
  };
  if (slash == std::string::npos) throw bad();
  try {
    std::size_t a = 0, b = 0;
    const std::string left = text.substr(0, slash), right = text.substr(slash + 1);
    index = std::stoi(left, &a);
    count = std::stoi(right, &b);
    if (a != left.size() || b != right.size()) throw bad();
  } catch (const std::logic_error&) {
    throw bad();
  }
  if (count < 1 || index < 0 || index >= count) throw bad();
}

PlanResult plan(const PlanRequest& a) {
  if (a.top < 0) throw InputError(fmt::format("--top must be >= 1, got {}", a.top), {}, kExitUsage);
  if (a.jobs < 0) throw InputError(fmt::format("--jobs must be >= 1 (or 0: every core), got {}", a.jobs), {}, kExitUsage);
  if (a.max_ops < 0) throw InputError(fmt::format("--max-ops: expected a count >= 1, got {}", a.max_ops), {}, kExitUsage);
  if (a.max_ops > 0) limits().max_ops = a.max_ops;
  if (!a.merge.empty()) {
    if (!a.config.empty() || a.loaded_config)
      throw InputError("give a config or --merge shard files, not both", {}, kExitUsage);
    if (!a.shard.empty() || !a.sets.empty())
      throw InputError("--merge takes shard files only (no --shard, no --set)", {}, kExitUsage);
    std::vector<PlanResult> shards;
    for (const auto& path : a.merge) shards.push_back(plan_from_json(read_yaml_file(path), path));
    return merge_plans(std::move(shards), a.merge, a.top);
  }
  if (a.config.empty() && !a.loaded_config)
    throw InputError("plan needs a config file (or --merge shard files)", {}, kExitUsage);
  PlanOptions opt;
  opt.jobs = a.jobs;
  opt.top_k = a.top;
  if (!a.shard.empty()) parse_shard(a.shard, opt.shard_index, opt.shard_count);
  opt.sets = a.sets;
  const ModelConfig cfg = a.loaded_config ? *a.loaded_config : load_config(a.config, a.sets);
  opt.progress = a.progress;
  return run_plan(cfg, opt);
}

}  // namespace ppsim::api
