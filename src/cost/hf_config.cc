#include "cost/hf_config.h"

#include <cctype>
#include <cstdint>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ppsim {

namespace {

constexpr std::size_t kMaxBytes = 4u << 20;  // a config.json is a few KB

// Where key's value begins in the JSON text (first `"key"` followed by ':'), 1-based; the file
// alone when it cannot be found.
SourceLoc key_loc(const std::string& text, const std::string& name, const std::string& key) {
  const std::string quoted = "\"" + key + "\"";
  std::size_t at = 0;
  while ((at = text.find(quoted, at)) != std::string::npos) {
    std::size_t p = at + quoted.size();
    while (p < text.size() && std::isspace(static_cast<unsigned char>(text[p]))) ++p;
    if (p < text.size() && text[p] == ':') {
      ++p;
      while (p < text.size() && std::isspace(static_cast<unsigned char>(text[p]))) ++p;
      int line = 1, col = 1;
      for (std::size_t i = 0; i < p; ++i) {
        if (text[i] == '\n') {
          ++line;
          col = 1;
        } else {
          ++col;
        }
      }
      return SourceLoc{name, line, col};
    }
    at += quoted.size();
  }
  return SourceLoc{name, 0, 0};
}

class Reader {
 public:
  Reader(const nlohmann::json& j, const std::string& text, const std::string& name, const std::string& type)
      : j_(j), text_(text), name_(name), type_(type) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  std::int64_t integer(const char* key) const {
    if (!has(key)) throw InputError(SourceLoc{name_, 0, 0}, fmt::format("missing key '{}' (model_type {})", key, type_));
    const auto& v = j_.at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
      throw InputError(key_loc(text_, name_, key), fmt::format("'{}' must be a count (an integer >= 0), got {}", key, v.dump()));
    return v.get<std::int64_t>();
  }
  std::int64_t integer(const char* key, std::int64_t def) const { return has(key) ? integer(key) : def; }
  bool boolean(const char* key, bool def) const {
    if (!has(key)) return def;
    const auto& v = j_.at(key);
    if (!v.is_boolean()) throw InputError(key_loc(text_, name_, key), fmt::format("'{}' must be true or false, got {}", key, v.dump()));
    return v.get<bool>();
  }
  [[noreturn]] void refuse(const char* key, const std::string& why) const {
    throw InputError(key_loc(text_, name_, key), fmt::format("{} (model_type {}): {}", key, type_, why));
  }
  const nlohmann::json& at(const char* key) const { return j_.at(key); }

 private:
  const nlohmann::json& j_;
  const std::string& text_;
  const std::string& name_;
  const std::string& type_;
};

// The keys shared by the llama-like families (llama, mistral, mixtral, qwen*, deepseek*).
void llama_like(const Reader& r, YAML::Node& m, bool mla) {
  m["layers"] = r.integer("num_hidden_layers");
  m["hidden"] = r.integer("hidden_size");
  m["heads"] = r.integer("num_attention_heads");
  if (!mla) {
    m["kv_heads"] = r.integer("num_key_value_heads", r.integer("num_attention_heads"));
    if (r.has("head_dim")) m["head_dim"] = r.integer("head_dim");
  }
  m["vocab"] = r.integer("vocab_size");
  m["seq_len"] = r.integer("max_position_embeddings");
  m["mlp"] = "swiglu";
  m["norm"] = "rmsnorm";
  m["tied_embeddings"] = r.boolean("tie_word_embeddings", false);
}

// Qwen's MoE layer pattern: every layer sparse (decoder_sparse_step 1, no mlp_only_layers).
void qwen_every_layer_moe(const Reader& r) {
  if (r.integer("decoder_sparse_step", 1) != 1) r.refuse("decoder_sparse_step", "MoE on every k-th layer is not modelled (only 1)");
  if (r.has("mlp_only_layers") && !(r.at("mlp_only_layers").is_array() && r.at("mlp_only_layers").empty()))
    r.refuse("mlp_only_layers", "dense layers between MoE layers are not modelled (only an empty list)");
}

YAML::Node convert(const nlohmann::json& j, const std::string& text, const std::string& name) {
  if (!j.is_object()) throw InputError(SourceLoc{name, 1, 1}, "a Hugging Face config.json is a JSON object");
  if (!j.contains("model_type") || !j.at("model_type").is_string())
    throw InputError(SourceLoc{name, 0, 0}, "missing key 'model_type' (a Hugging Face config.json names its architecture)");
  const std::string type = j.at("model_type").get<std::string>();
  const Reader r(j, text, name, type);
  YAML::Node m(YAML::NodeType::Map);
  if (type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3") {
    llama_like(r, m, false);
    m["ffn_hidden"] = r.integer("intermediate_size");
  } else if (type == "mixtral") {
    llama_like(r, m, false);
    YAML::Node moe(YAML::NodeType::Map);
    moe["experts"] = r.integer("num_local_experts");
    moe["top_k"] = r.integer("num_experts_per_tok");
    moe["expert_ffn_hidden"] = r.integer("intermediate_size");
    m["moe"] = moe;
  } else if (type == "qwen2_moe" || type == "qwen3_moe") {
    llama_like(r, m, false);
    qwen_every_layer_moe(r);
    if (r.has("intermediate_size")) m["ffn_hidden"] = r.integer("intermediate_size");
    YAML::Node moe(YAML::NodeType::Map);
    moe["experts"] = r.integer("num_experts");
    moe["top_k"] = r.integer("num_experts_per_tok");
    const std::int64_t fe = r.integer("moe_intermediate_size");
    moe["expert_ffn_hidden"] = fe;
    const std::int64_t shared = r.integer("shared_expert_intermediate_size", 0);
    if (shared % fe != 0)
      r.refuse("shared_expert_intermediate_size",
               fmt::format("a shared expert {} wide is not a whole number of experts {} wide", shared, fe));
    if (shared > 0) moe["shared_experts"] = shared / fe;
    m["moe"] = moe;
  } else if (type == "deepseek_v2" || type == "deepseek_v3") {
    llama_like(r, m, true);
    m["ffn_hidden"] = r.integer("intermediate_size");
    if (r.has("n_routed_experts")) {
      if (r.integer("moe_layer_freq", 1) != 1) r.refuse("moe_layer_freq", "MoE on every k-th layer is not modelled (only 1)");
      YAML::Node moe(YAML::NodeType::Map);
      moe["experts"] = r.integer("n_routed_experts");
      moe["top_k"] = r.integer("num_experts_per_tok");
      moe["shared_experts"] = r.integer("n_shared_experts", 0);
      moe["expert_ffn_hidden"] = r.integer("moe_intermediate_size");
      m["moe"] = moe;
      m["dense_layers_first"] = r.integer("first_k_dense_replace", 0);
    }
    YAML::Node mla(YAML::NodeType::Map);
    mla["q_lora_rank"] = r.integer("q_lora_rank", 0);  // null: queries projected directly (V2-Lite)
    mla["kv_lora_rank"] = r.integer("kv_lora_rank");
    mla["qk_nope_head_dim"] = r.integer("qk_nope_head_dim");
    mla["qk_rope_head_dim"] = r.integer("qk_rope_head_dim");
    mla["v_head_dim"] = r.integer("v_head_dim");
    m["mla"] = mla;
    const std::int64_t mtp = r.integer("num_nextn_predict_layers", 0);
    if (mtp > 0) m["mtp_depth"] = mtp;
  } else if (type == "gpt2") {
    m["layers"] = r.integer("n_layer");
    m["hidden"] = r.integer("n_embd");
    m["heads"] = r.integer("n_head");
    m["ffn_hidden"] = r.integer("n_inner", 4 * r.integer("n_embd"));
    m["vocab"] = r.integer("vocab_size");
    m["seq_len"] = r.integer("n_positions");
    m["mlp"] = "gelu";
    m["norm"] = "layernorm";
    m["tied_embeddings"] = r.boolean("tie_word_embeddings", true);
  } else if (type == "gpt_neox") {
    m["layers"] = r.integer("num_hidden_layers");
    m["hidden"] = r.integer("hidden_size");
    m["heads"] = r.integer("num_attention_heads");
    m["ffn_hidden"] = r.integer("intermediate_size");
    m["vocab"] = r.integer("vocab_size");
    m["seq_len"] = r.integer("max_position_embeddings");
    m["mlp"] = "gelu";
    m["norm"] = "layernorm";
    m["tied_embeddings"] = r.boolean("tie_word_embeddings", false);
  } else {
    std::string list;
    for (const auto& t : hf_model_types()) list += (list.empty() ? "" : ", ") + t;
    throw InputError(key_loc(text, name, "model_type"), fmt::format("unknown model_type '{}' (known: {})", type, list),
                     closest_match(type, hf_model_types()));
  }
  return m;
}

}  // namespace

const std::vector<std::string>& hf_model_types() {
  static const std::vector<std::string> kTypes = {"llama",     "mistral",     "mixtral",     "qwen2", "qwen2_moe", "qwen3",
                                                  "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt2",  "gpt_neox"};
  return kTypes;
}

YAML::Node hf_model_keys_from_text(const std::string& text, const std::string& name) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // byte offset -> line:col
    int line = 1, col = 1;
    for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw InputError(SourceLoc{name, line, col}, "not valid JSON (a Hugging Face config.json)");
  }
  return convert(j, text, name);
}

YAML::Node hf_model_keys(const std::string& path, const SourceLoc& where) {
  std::ifstream in(path, std::ios::binary);
  const SourceLoc at = where.file.empty() ? SourceLoc{path, 0, 0} : where;
  if (!in) throw InputError(at, fmt::format("cannot open the hf_config file '{}'", path), {}, kExitIo);
  std::string text;
  char buf[1 << 14];
  while (text.size() <= kMaxBytes && in.read(buf, sizeof buf).gcount() > 0) text.append(buf, static_cast<std::size_t>(in.gcount()));
  if (in.bad()) throw InputError(at, fmt::format("cannot read the hf_config file '{}'", path), {}, kExitIo);
  if (text.size() > kMaxBytes) throw InputError(at, fmt::format("'{}' is over 4 MiB: not a config.json", path), {}, kExitLimit);
  return hf_model_keys_from_text(text, path);
}

bool is_hf_config_file(const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) return true;
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  while (in.get(c))
    if (!std::isspace(static_cast<unsigned char>(c))) return c == '{';
  return false;
}

}  // namespace ppsim
