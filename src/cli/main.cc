// ppsim's entry point: the CLI lives in cli/run_main.cc, which returns the exit code
// (docs/CLI.md) rather than exiting, so that it can also run in-process (fuzz/fuzz_cli.cc).
#include "cli/run_main.h"

int main(int argc, char** argv) { return ppsim::cli::run_main(argc, argv); }
