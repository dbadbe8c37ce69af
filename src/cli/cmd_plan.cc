// `ppsim plan`: placeholder until the planner lands.
#include "cli/commands.h"
#include "core/error.h"

namespace ppsim::cli {

Runner setup_plan(CLI::App& sub) {
  auto config = std::make_shared<std::string>();
  sub.add_option("config", *config, "YAML config with a plan: section");
  return [config]() -> int { throw InputError("plan is not implemented yet", {}, kExitUsage); };
}

}  // namespace ppsim::cli
