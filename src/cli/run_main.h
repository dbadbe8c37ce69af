// The CLI as a function: parses argv, runs the subcommand, and returns the process exit code
// (docs/CLI.md) instead of exiting, so that tests and the fuzz target (fuzz/fuzz_cli.cc) can
// drive it in-process. main() is one call to it.
#pragma once

namespace ppsim::cli {

// Not re-entrant across threads: the resource limits (schedules/registry.h) are process-wide,
// and --max-ops changes them for the rest of the process.
int run_main(int argc, char** argv);

}  // namespace ppsim::cli
