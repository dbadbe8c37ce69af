// What a torchtitan TOML trains, checked against the model ppsim read for it: the [model] flavor's
// dimensions (torchtitan's own table of flavors, pytorch/torchtitan 238fa99) against hf_assets_path's
// config.json, and [model] converters against the model (FP8 linear layers beside experts whose
// grouped GEMMs stay BF16 are two precisions; ppsim prices one).
#pragma once
#include <yaml-cpp/yaml.h>

#include "cost/torchtitan.h"

namespace ppsim {

// The flavor's dimensions as torchtitan 238fa99's model_args give them; -1: not checked (the
// debug models' defaults). nullptr when the (model, flavor) pair is not in the table.
struct TorchtitanFlavor {
  const char* model;
  const char* flavor;
  int layers, dim, heads;
  int mla;      // 1: multi-head latent attention, 0: not, -1: not checked
  int experts;  // routed experts, 0 for a dense model, -1: not checked
};
const TorchtitanFlavor* torchtitan_flavor(const std::string& model, const std::string& flavor);

// InputError at the TOML's key when the model (the config tree's `model` node, after its
// config.json was read) is not the one torchtitan trains, or its converters are not what ppsim can
// price for it. Nothing when the YAML gives the model or states precision.gemm itself.
void check_torchtitan_model(const TorchtitanKeys& keys, const YAML::Node& model);

}  // namespace ppsim
