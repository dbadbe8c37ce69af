// What the options table gives besides the parser: `ppsim --completion bash|zsh` (a completion
// script) and `ppsim --dump-options json` (every command's table, and the options its CLI11
// parser really has: tools/gen_options.py writes docs/CLI.md's tables and the Python stubs from it,
// python/tests/test_options.py checks the CLI against Python with it).
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

namespace ppsim::cli {

// The script for `shell` (bash or zsh); InputError (exit 2) for another shell.
std::string completion_script(const std::string& shell);
// Every command's table rows, and under "cli" the options of its subcommand in `app` as CLI11
// holds them (name, default shown, flag or not, declared in the table or not).
nlohmann::json dump_options(const CLI::App& app);

}  // namespace ppsim::cli
