// What-if variants: the base config with plan.whatif overrides applied the way --set applies
// them (same key check, same validation), then validated as a whole.
//
// Not obvious: the override's value node from the file is put into the variant's tree as it is
// (not re-parsed from text), so a bad value is reported at its own file:line:col inside
// plan.whatif, and an unknown key at the key, with the --set suggestion.
#pragma once
#include <string>
#include <vector>

#include "cost/config.h"
#include "plan/search_space.h"

namespace ppsim {

// The validated config of variant `w` (errors: InputError at file:line:col, prefixed with the
// variant's name). `set_paths`: the command line's --set keys (their errors point at --set).
ModelConfigData build_variant(const ModelConfigData& base, const WhatIf& w, const std::vector<std::string>& set_paths);

// A YAML value as one line of flow YAML: scalars as written, lists [a, b], maps {k: v}.
std::string flow_text(const YAML::Node& n);

// The overrides as --set arguments: "hardware.nvlink_gbps=400".
std::vector<std::string> whatif_sets(const WhatIf& w);

// The directory profile paths are relative to: the config file's folder.
std::string config_dir(const ModelConfigData& c);

}  // namespace ppsim
