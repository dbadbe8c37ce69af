// The subcommand table (ninja's kTools[] style): adding a subcommand is adding a row here and a
// file cmd_<name>.cc that defines its setup function.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace ppsim::cli {

// A command's setup adds its options to `sub` and returns the function that runs it; the
// function returns the process exit code.
using Runner = std::function<int()>;
using Setup = Runner (*)(CLI::App& sub);

struct Command {
  const char* name;
  const char* help;
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

// `--calibration FILE` (cmd_calibrate.cc) on the commands that read a config: the option, and the
// `calibration=` set it becomes (nothing when not given).
void add_calibration_option(CLI::App& sub, std::string& path);
void add_calibration_set(const std::string& path, std::vector<std::string>& sets);

inline constexpr Command kCommands[] = {
    {"schedules", "list the schedule families, their constraints and published formulas", setup_schedules},
    {"show", "print one schedule's per-rank op order (text, PyTorch CSV or JSON)", setup_show},
    {"compare", "simulate schedules side by side: makespan, bubbles, memory, throughput", setup_compare},
    {"simulate", "simulate one schedule and write its timeline", setup_simulate},
    {"plan", "search schedules and layouts for a YAML config under memory and GPU limits", setup_plan},
    {"profile", "time a config's ops on the GPU and write a cost profile", setup_profile},
    {"validate", "replay a schedule on the GPUs and compare measured with predicted", setup_validate},
    {"import-trace", "read a PyTorch profiler (Kineto) trace and write a cost profile", setup_import_trace},
    {"search", "search per-rank op orders for your costs under a memory cap; beside the best family", setup_search},
    {"model", "parameters (total, active) by part, FLOPs per token, params per stage of a config or config.json", setup_model},
    {"fidelity", "predict every configs/published/ run and compare with its source (docs/FIDELITY.md)", setup_fidelity},
    {"calibrate", "fit a config's efficiencies to your run (traces or a step time); write a calibration",
     setup_calibrate},
};

}  // namespace ppsim::cli
