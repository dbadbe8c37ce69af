// The config of one candidate layout. Candidates that differ only in schedule family (of the
// same slice count) or in micro-batch count share it, so the planner builds and validates it
// once per layout key, not once per candidate.
//
// Not obvious: the candidate's config is the variant's tree with --set style overrides, checked
// by the same validator as any config (validate_config_tree), so the planner cannot accept a
// layout the loader would refuse. parallel.vpp is set to the schedule's chunks per rank v, so that
// layer_split has pp * v entries = exactly the schedule's slices; a layer_split list written for
// another stage count is first adapted by slice_layouts' rules (cost/layer_split.h).
#pragma once
#include <compare>
#include <string>
#include <vector>

#include "cost/config.h"

namespace ppsim {

struct LayoutKey {
  int variant = 0;
  int pp = 1;
  int v = 1;  // chunks per rank per pipe: the config's parallel.vpp
  int mbs = 1;
  int ep = 1;
  Recompute recompute = Recompute::none;
  auto operator<=>(const LayoutKey&) const = default;
};

// The --set overrides that turn `variant` into the layout's config. `dp` follows from the GPU
// budget; `layer_split` is the adapted list (empty: the config's uniform split is kept); `gpus`
// is written when the config or the plan names a GPU count (0: not written).
std::vector<std::string> layout_sets(const ModelConfigData& variant, const LayoutKey& k, int dp, int gpus,
                                     const std::vector<int>& layer_split);

// Applies `sets` to a copy of the variant's tree and validates it (InputError on failure).
// Not thread-safe with respect to `variant.tree` (yaml-cpp clones share nothing afterwards):
// call it from one thread, or give each thread its own variant tree.
YAML::Node layout_tree(const ModelConfigData& variant, const std::vector<std::string>& sets);
ModelConfigData validate_layout(const YAML::Node& tree, const ModelConfigData& variant, const std::vector<std::string>& sets);
// The key paths of `key=value` overrides (for locating errors under them at "--set").
std::vector<std::string> set_key_paths(const std::vector<std::string>& sets);

}  // namespace ppsim
