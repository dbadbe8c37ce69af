// Hugging Face `config.json` -> ppsim's model keys, so that `model: {hf_config: config.json}`
// (and `ppsim model config.json`) read the architecture users already have.
//
// Families: llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, deepseek_v2,
// deepseek_v3, gpt2, gpt_neox. Not obvious: the result is a YAML map of the same keys a config's
// `model:` section holds, so that keys written beside `hf_config` override it by a plain merge
// and one reader (config.cc's read_model) validates both. seq_len defaults to the file's
// context length (max_position_embeddings, n_positions); give `seq_len` beside it for training.
#pragma once
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/error.h"

namespace ppsim {

// The model_type values understood.
const std::vector<std::string>& hf_model_types();

// Reads `path` (referenced from `where`: the hf_config key; empty when given directly) and returns
// the model keys. Errors: InputError with the JSON file's line:col (an unknown model_type, a key
// of the wrong type or an architecture option ppsim cannot model), or the file alone (a missing key).
YAML::Node hf_model_keys(const std::string& path, const SourceLoc& where = {});
// The same from text (`name` in errors).
YAML::Node hf_model_keys_from_text(const std::string& text, const std::string& name);

// Whether `path` looks like a Hugging Face config.json (a JSON object with "model_type").
bool is_hf_config_file(const std::string& path);

}  // namespace ppsim
