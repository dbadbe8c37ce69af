// The subcommand table (ninja's kTools[] style): a command's name, help and options are its row
// in src/api/options.cc; here it gets the function that sets it up (cmd_<name>.cc). Adding a
// command: a table there, a row here, the setup function.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace ppsim::cli {

// A command's setup adds its options to `sub` and returns the function that runs it; the
// function returns the process exit code.
using Runner = std::function<int()>;
using Setup = Runner (*)(CLI::App& sub);

struct Command {
  const char* name;  // as in api::command_specs(), whose help it shows
  Setup setup;
};

Runner setup_schedules(CLI::App& sub);
Runner setup_show(CLI::App& sub);
Runner setup_compare(CLI::App& sub);
Runner setup_simulate(CLI::App& sub);
Runner setup_plan(CLI::App& sub);
Runner setup_profile(CLI::App& sub);
Runner setup_validate(CLI::App& sub);
Runner setup_import_trace(CLI::App& sub);
Runner setup_search(CLI::App& sub);
Runner setup_model(CLI::App& sub);
Runner setup_fidelity(CLI::App& sub);
Runner setup_calibrate(CLI::App& sub);

inline constexpr Command kCommands[] = {
    {"schedules", setup_schedules}, {"show", setup_show},
    {"compare", setup_compare},     {"simulate", setup_simulate},
    {"plan", setup_plan},           {"profile", setup_profile},
    {"validate", setup_validate},   {"import-trace", setup_import_trace},
    {"search", setup_search},       {"model", setup_model},
    {"fidelity", setup_fidelity},   {"calibrate", setup_calibrate},
};

}  // namespace ppsim::cli
