// Candidate layouts as config overrides (candidate_config.h).
#include "plan/candidate_config.h"

#include <fmt/format.h>

#include "plan/search_space.h"
#include "plan/whatif.h"

namespace ppsim {

std::vector<std::string> layout_sets(const ModelConfigData& variant, const LayoutKey& k, int dp, int gpus,
                                     const std::vector<int>& layer_split) {
  std::vector<std::string> sets;
  sets.push_back(fmt::format("parallel.pp={}", k.pp));
  sets.push_back(fmt::format("parallel.vpp={}", k.v));
  sets.push_back(fmt::format("parallel.dp={}", dp));
  if (gpus > 0) {
    sets.push_back(fmt::format("hardware.gpus={}", gpus));
    for (auto it = variant.tree.begin(); it != variant.tree.end(); ++it)
      if (it->first.IsScalar() && it->first.Scalar() == "cluster" && it->second.IsMap())
        for (auto jt = it->second.begin(); jt != it->second.end(); ++jt)
          if (jt->first.IsScalar() && jt->first.Scalar() == "gpus") sets.push_back(fmt::format("cluster.gpus={}", gpus));
  }
  sets.push_back(fmt::format("parallel.ep={}", k.ep));
  sets.push_back(fmt::format("parallel.recompute={}", recompute_name(k.recompute)));
  sets.push_back(fmt::format("model.micro_batch_size={}", k.mbs));
  if (!layer_split.empty()) {
    std::string list;
    for (int n : layer_split) list += (list.empty() ? "" : ", ") + std::to_string(n);
    sets.push_back(fmt::format("parallel.layer_split=[{}]", list));
  }
  return sets;
}

YAML::Node layout_tree(const ModelConfigData& variant, const std::vector<std::string>& sets) {
  YAML::Node tree = YAML::Clone(variant.tree);
  for (const auto& s : sets) apply_set(tree, s);
  return tree;
}

ModelConfigData validate_layout(const YAML::Node& tree, const ModelConfigData& variant, const std::vector<std::string>& sets) {
  return validate_config_tree(tree, variant.file, config_dir(variant), set_key_paths(sets));
}

std::vector<std::string> set_key_paths(const std::vector<std::string>& sets) {
  std::vector<std::string> paths;
  for (const auto& s : sets) paths.push_back(s.substr(0, s.find('=')));
  return paths;
}

}  // namespace ppsim
