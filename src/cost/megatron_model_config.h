// Megatron-LM's functional-test model_config.yaml (NVIDIA/Megatron-LM d98e8a6,
// tests/functional_tests/test_cases/<model>/<test>/model_config.yaml) as a megatron_args file: its
// MODEL_ARGS map (`--num-layers: 32`, `--swiglu: true`) is the argument list, turned into the words
// the tests' runner (tests/functional_tests/shell_test_utils/_run_training.sh) builds and evals:
// `true` a bare flag; a value wrapped in ( ), or holding a space, '|', '(' or ')', one quoted word;
// one wrapped in [ ] its words; "" leaves the flag out; others as written, $VARIABLES expanded as
// bash would. A YAML list is its items, one word each. `false` (argparse refuses a value after a
// switch) and an empty value are refused at the value. ENV_VARS are the environment (the user's
// variables win). Each flag keeps its line and column in the YAML, so errors point there.
#pragma once
#include <string>

#include "cost/megatron_args.h"

namespace ppsim {

// Whether the file `name` holding `text` is YAML to read this way: its name ends in .yaml or .yml,
// or a line starts with `MODEL_ARGS:`.
bool is_model_config_yaml(const std::string& text, const std::string& name);

// The MODEL_ARGS of `text` as an argument list (one flag a line, at its YAML line and column);
// ENV_VARS added to `env` where it has no value. InputError at the YAML's line:col for malformed
// YAML, a file that is not a map with MODEL_ARGS, and the refused values above.
std::string model_config_args(const std::string& text, const std::string& name, ScriptEnv& env);

}  // namespace ppsim
