// Hugging Face `config.json` -> ppsim's model keys, so that `model: {hf_config: config.json}`
// (and `ppsim model config.json`) read the architecture users already have.
//
// Read by the fields, not by a list of model_type names: each quantity has the names the
// architectures in transformers give it (num_hidden_layers, n_layer, n_layers, d_model, ...),
// the language model of a multimodal wrapper is its `text_config`, and the MoE layers' places,
// the local-attention layers, biases, q/k norms and the rest come from their own keys. What
// transformers' code fixes for a model_type and its file does not say (Qwen2's q/k/v biases,
// Gemma-2's four norms per layer, Llama-4's shared expert, gpt-oss's sinks) is a short table of
// traits; every rule used is listed in HfReading::read_as so that the user can check it.
//
// Not obvious: the result is a YAML map of the same keys a config's `model:` section holds, so
// that keys written beside `hf_config` override it by a plain merge and one reader (config.cc's
// read_model) validates both. seq_len is a training length, never the inference context: the
// pre-extension context (rope_scaling.original_max_position_embeddings) or `seq_length` when the
// file has one, else the context when it is at most kHfDefaultSeqLen, else kHfDefaultSeqLen.
#pragma once
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace ppsim {

inline constexpr std::int64_t kHfDefaultSeqLen = 4096;

struct HfReading {
  YAML::Node keys;                       // the model keys
  std::string model_type;                // the language model's (text_config's when nested)
  std::vector<std::string> read_as;      // the rules that read it ("gated MLP (hidden_act silu)", ...)
  std::vector<std::string> not_counted;  // fields read but not modelled, each with its size
  std::string seq_len_why;               // where keys["seq_len"] came from
  double other_params = 0;               // the parts beside the language model (a vision tower), approximate
  std::string other;                     // what other_params is, or why such a part is not counted; "" when none
};

// Reads `path` (referenced from `where`: the hf_config key; empty when given directly). Errors:
// InputError with the JSON file's line:col (a key of the wrong type, an architecture ppsim cannot
// model), or the file alone (a missing key, named with the other names it goes by).
HfReading read_hf_config(const std::string& path, const SourceLoc& where = {});
HfReading read_hf_config_text(const std::string& text, const std::string& name);

// The model keys alone.
YAML::Node hf_model_keys(const std::string& path, const SourceLoc& where = {});
YAML::Node hf_model_keys_from_text(const std::string& text, const std::string& name);

// Whether `path` looks like a Hugging Face config.json (a JSON object with "model_type").
bool is_hf_config_file(const std::string& path);

}  // namespace ppsim
