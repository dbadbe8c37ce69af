// The page's engine reads no YAML config (its controls are unit times): the config entry points
// of cost/cost_model.h, which api::run calls only when a config is given, refuse here.
#include "core/error.h"
#include "api/config_answer.h"
#include "cost/cost_model.h"
#include "cost/invariants.h"

namespace ppsim {

namespace {
[[noreturn]] void no_config() {
  throw InputError("the page's engine reads no config; run `ppsim compare CONFIG --html FILE` instead");
}
}  // namespace

ModelConfig load_config(const std::string&, const std::vector<std::string>&) { no_config(); }
ModelConfig load_config_text(const std::string&, const std::string&, const std::vector<std::string>&) { no_config(); }
void apply_config_parallel(const ModelConfig&, int&, int&, int&) { no_config(); }
std::string config_schedules(const ModelConfig&) { no_config(); }
SimCosts derive_costs(const ModelConfig&, const Schedule&) { no_config(); }
Schedule as_run(const ModelConfig&, const Schedule&) { no_config(); }
bool post_validation(const ModelConfig&) { no_config(); }
SimResult simulate_config(const ModelConfig&, const Schedule&, SimCosts&, const SimOptions&) { no_config(); }
PhysicalResult physical_result(const ModelConfig&, const Schedule&, const SimResult&) { no_config(); }
void check_config_answer(const ModelConfig&, const Schedule&, const SimResult&, const PhysicalResult&,
                         const AnswerSource&) {
  no_config();
}
AnswerSource source_of(const ModelConfig&) { no_config(); }
std::vector<MemoryBreakdown> predicted_memory(const ModelConfig&, const Schedule&, const SimResult*) { no_config(); }

}  // namespace ppsim

namespace ppsim::api {
nlohmann::json calibration_notes(const ModelConfig&, const std::vector<ScheduleAt>&) { return nullptr; }
}  // namespace ppsim::api
