// `ppsim model FILE`: what ppsim understood of a model. Parameters, total and active per token,
// by part; FLOPs per token at the config's sequence length; with a pipeline size, the parameters
// each stage holds. FILE is a ppsim YAML config or a Hugging Face config.json.
//
// Not obvious: the counts are cost/memory's own (layer_param_parts), the ones every memory
// figure uses, so a wrong count here is a wrong memory figure there. "Active" counts, per token,
// the routed experts it visits (top_k of them), every shared expert and the router, and both the
// embedding and the head (untied); the MTP modules are reported apart, outside the totals.
#pragma once
#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cost/config.h"

namespace ppsim::api {

struct ModelRequest {
  std::string path;                     // a ppsim YAML or a config.json
  std::optional<int> pp;                // unset: a YAML's parallel.pp; a config.json: no stage table
  std::vector<int> layer_split;         // layers per stage (pp entries); empty: the config's, else even
  std::optional<std::int64_t> seq_len;  // overrides the config's
  std::vector<std::string> sets;        // --set key=value on a YAML
};

struct ModelPart {
  std::string name;  // embedding, attention, dense_mlp, routed_experts, shared_experts, router, norms, head, mtp
  double total = 0;
  double active = 0;
  std::string made_of;  // how the count is made, e.g. "32 layers x 41.94M"
};

// What one pipeline rank holds: with the config's vpp (or ZB-V's and DualPipeV's two stages) its
// stages as the schedule places them, each a chunk of consecutive layers.
struct StageParams {
  int stage = 0;                           // the pipeline rank
  int first_layer = 0;                     // of its first chunk
  int layers = 0;                          // over its chunks
  std::vector<std::array<int, 2>> chunks;  // {first layer, layers} per stage, in stage order
  bool embedding = false;
  bool head = false;  // and the MTP modules, when any
  double params = 0;  // everything the stage holds (no parallel sharding)
  double expert_params = 0;
};

struct ModelReport {
  std::string source;
  ModelConfigData config;
  std::vector<ModelPart> parts;  // in the order above; mtp last (outside total and active)
  double total = 0;              // every part but mtp
  double active = 0;
  int dense_layers = 0;
  int moe_layers = 0;
  std::int64_t seq_len = 0;
  std::string seq_len_why;  // where seq_len came from
  // A config.json: the rules that read it (a YAML's megatron_args: those of its launch file),
  // what was read but not counted, and the parts beside the language model (a vision tower:
  // other_params, approximate; or why it is not counted).
  std::vector<std::string> read_as;
  std::vector<std::string> not_counted;
  std::string other;
  double other_params = 0;
  double forward_flops_per_token = 0;   // whole model, at seq_len
  double backward_flops_per_token = 0;  // input grad + weight grad
  std::vector<StageParams> stages;      // with a pipeline size
};

ModelReport model_report(const ModelRequest& req);
// 8030261248 -> "8.03B", 525336576 -> "525.34M".
std::string short_count(double x);
// {source, model, read_as, not_counted, parameters: {total, active, by_part, other}, mtp, flops_per_token, stages}
nlohmann::json model_json(const ModelReport& r);

}  // namespace ppsim::api
