// Placeholder until the cost model lands (issue: cost model and configs).
#include "core/error.h"
#include "cost/cost_model.h"

namespace ppsim {
ModelConfig load_config(const std::string&, const std::vector<std::string>&) { throw InputError("config files are not implemented yet", {}, kExitUsage); }
ModelConfig load_config_text(const std::string&, const std::string&, const std::vector<std::string>&) { throw InputError("config files are not implemented yet", {}, kExitUsage); }
void apply_config_parallel(const ModelConfig&, int&, int&, int&) {}
std::string config_schedules(const ModelConfig&) { return "all"; }
SimCosts derive_costs(const ModelConfig&, const Schedule&) { return {}; }
PhysicalResult physical_result(const ModelConfig&, const Schedule&, const SimResult&) { return {}; }
}  // namespace ppsim
