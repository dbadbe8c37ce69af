// Model keys as the importers write them (a config.json, Megatron-LM arguments, a torchtitan TOML):
// one spelling of a per-layer list and of the MoE layers' places, read back by cost/config.cc.
#pragma once
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <vector>

namespace ppsim {

// A list of counts as one flow-style YAML sequence ([1, 0, 1]), as a config writes it.
inline YAML::Node flow_list(const std::vector<int>& v) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (int x : v) list.push_back(x);
  list.SetStyle(YAML::EmitterStyle::Flow);
  return list;
}

// The MoE layers of a 0/1 mask (one entry per layer) as model keys: nothing when every layer is
// MoE, dense_layers_first when they are the layers after a dense prefix, else moe_layers.
inline void write_moe_layer_keys(YAML::Node model, const std::vector<int>& mask) {
  std::size_t dense = 0;
  while (dense < mask.size() && mask[dense] == 0) ++dense;
  const auto moe = static_cast<std::size_t>(std::count(mask.begin(), mask.end(), 1));
  if (dense + moe == mask.size()) {
    if (dense > 0) model["dense_layers_first"] = static_cast<long long>(dense);
    return;
  }
  model["moe_layers"] = flow_list(mask);
}

}  // namespace ppsim
