// Hugging Face config.json -> model keys, by the fields (hf_config.h).
#include "cost/hf_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/text_file.h"
#include "cost/model_keys.h"

namespace ppsim {

namespace {

using json = nlohmann::json;
using Keys = std::initializer_list<const char*>;

constexpr std::size_t kMaxBytes = 4u << 20;  // a config.json is a few KB

SourceLoc offset_loc(const std::string& text, const std::string& name, std::size_t p) {
  int line = 1, col = 1;
  for (std::size_t i = 0; i < p && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return SourceLoc{name, line, col};
}

// Where key's value begins in the JSON text (the first `"key"` followed by ':' at or after
// `from`), 1-based; the file alone when it cannot be found.
SourceLoc key_loc(const std::string& text, const std::string& name, const std::string& key, std::size_t from = 0) {
  const std::string quoted = "\"" + key + "\"";
  std::size_t at = from;
  while ((at = text.find(quoted, at)) != std::string::npos) {
    std::size_t p = at + quoted.size();
    while (p < text.size() && std::isspace(static_cast<unsigned char>(text[p]))) ++p;
    if (p < text.size() && text[p] == ':') {
      ++p;
      while (p < text.size() && std::isspace(static_cast<unsigned char>(text[p]))) ++p;
      return offset_loc(text, name, p);
    }
    at += quoted.size();
  }
  return SourceLoc{name, 0, 0};
}

// The fields of the language model's JSON object (the file's, or its text_config), located in
// the file's text from `from` on. A key may be dotted ("attn_config.kv_n_heads": DBRX's nesting).
class Fields {
 public:
  Fields(const json& j, const json& outer, const std::string& text, const std::string& name, std::size_t from,
         std::string type, std::string section)
      : j_(j),
        outer_(outer),
        text_(text),
        name_(name),
        from_(from),
        type_(std::move(type)),
        section_(std::move(section)) {}

  const json* find(const std::string& key) const {
    const json* at = &j_;
    std::size_t start = 0;
    while (true) {
      const std::size_t dot = key.find('.', start);
      const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (!at->is_object() || !at->contains(part) || at->at(part).is_null()) return nullptr;
      at = &at->at(part);
      if (dot == std::string::npos) return at;
      start = dot + 1;
    }
  }
  bool has(const std::string& key) const { return find(key) != nullptr; }
  // The first of `keys` the file has; nullptr when none.
  const char* which(Keys keys) const {
    for (const char* k : keys)
      if (has(k)) return k;
    return nullptr;
  }
  SourceLoc loc(const std::string& key) const {
    const std::size_t dot = key.rfind('.');
    return key_loc(text_, name_, dot == std::string::npos ? key : key.substr(dot + 1), from_);
  }
  std::int64_t count(const std::string& key) const {
    const json& v = *find(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
      throw InputError(loc(key), fmt::format("'{}' must be a count (an integer >= 0), got {}", key, v.dump()));
    return v.get<std::int64_t>();
  }
  std::optional<std::int64_t> maybe(Keys keys) const {
    const char* k = which(keys);
    if (k == nullptr) return std::nullopt;
    return count(k);
  }
  // A required count: the error names the first key and the other names it goes by.
  std::int64_t need(Keys keys, const char* what) const {
    if (const auto v = maybe(keys)) return *v;
    std::string others;
    for (auto it = keys.begin() + 1; it != keys.end(); ++it) others += (others.empty() ? "" : ", ") + std::string(*it);
    throw InputError(SourceLoc{name_, 0, 0},
                     fmt::format("missing key '{}{}' ({}{}) (model_type {})", section_, *keys.begin(), what,
                                 others.empty() ? "" : "; also read as " + others, type_));
  }
  std::optional<bool> flag(Keys keys) const {
    const char* k = which(keys);
    if (k == nullptr) return std::nullopt;
    const json& v = *find(k);
    if (!v.is_boolean()) throw InputError(loc(k), fmt::format("'{}' must be true or false, got {}", k, v.dump()));
    return v.get<bool>();
  }
  std::string str(Keys keys) const {
    const char* k = which(keys);
    return k != nullptr && find(k)->is_string() ? find(k)->get<std::string>() : "";
  }
  // A key of the language model, else of the wrapper around it (tie_word_embeddings).
  std::optional<bool> flag_or_outer(const char* key) const {
    if (const auto v = flag({key})) return v;
    if (&outer_ != &j_ && outer_.contains(key) && outer_.at(key).is_boolean()) return outer_.at(key).get<bool>();
    return std::nullopt;
  }
  [[noreturn]] void refuse(const std::string& key, const std::string& why) const {
    throw InputError(loc(key), fmt::format("{} (model_type {}): {}", key, type_, why));
  }
  const std::string& type() const { return type_; }
  const json& object() const { return j_; }

 private:
  const json& j_;
  const json& outer_;
  const std::string& text_;
  const std::string& name_;
  std::size_t from_;
  std::string type_;
  std::string section_;  // "text_config." when the language model is nested
};

// What transformers' code fixes for a model_type and its config.json does not say.
struct Traits {
  bool qkv_bias = false;    // biases on q, k, v only (Qwen2)
  bool all_bias = false;    // every linear layer (GPT-2, GPT-NeoX, BLOOM, Phi-1/2)
  bool mlp_bias = false;    // the MLP's (gpt-oss's experts, GPT-J)
  bool gated_gelu = false;  // gated whatever hidden_act says (Gemma's GeGLU; ChatGLM writes none)
  bool half_ffn = false;    // intermediate_size counts gate and up together (Qwen-1)
  int norms = 2;            // per layer
  const char* qk_norm = "none";
  bool layernorm = false;         // LayerNorm with a bias whatever the eps key says (PhiMoE)
  bool rmsnorm = false;           // RMSNorm whatever the eps key says (Qwen-1)
  bool weight_only_norm = false;  // LayerNorm without a bias: h weights (Cohere, DBRX)
  bool sinks = false;
  bool router_bias = false;
  int shared_experts = 0;        // a shared expert of the routed width (Llama-4)
  bool alternate_local = false;  // even layers local (Gemma-2, gpt-oss)
  bool learned_positions = false;
  bool tied_default = false;  // tie_word_embeddings when absent
};

Traits traits_of(const std::string& t) {
  auto in = [&](Keys names) { return std::any_of(names.begin(), names.end(), [&](const char* n) { return t == n; }); };
  Traits r;
  r.qkv_bias = in({"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text", "qwen"});
  r.all_bias = in({"gpt2", "gpt_bigcode", "gpt_neox", "bloom", "phi", "phi-msft"});
  r.half_ffn = in({"qwen"});
  r.mlp_bias = in({"gpt_oss", "gptj"});
  r.gated_gelu = in({"gemma", "gemma2", "gemma3", "gemma3_text", "chatglm"});
  r.norms = in({"gemma2", "gemma3", "gemma3_text"}) ? 4 : in({"cohere", "cohere2", "phi", "phi-msft", "gptj"}) ? 1 : 2;
  r.qk_norm = in({"qwen3", "qwen3_moe", "gemma3", "gemma3_text", "qwen3_vl_text", "qwen3_vl_moe_text"}) ? "per_head"
              : in({"olmo2", "olmoe"})                                                                  ? "full"
                                                                                                        : "none";
  r.layernorm = in({"phimoe"});
  r.rmsnorm = in({"qwen"});
  r.weight_only_norm = in({"cohere", "cohere2", "dbrx"});
  r.sinks = r.router_bias = in({"gpt_oss"});
  r.shared_experts = in({"llama4", "llama4_text"}) ? 1 : 0;
  r.alternate_local = in({"gemma2", "gpt_oss"});
  r.learned_positions = in({"gpt2", "gpt_bigcode"});
  r.tied_default = in({"gpt2", "gpt_bigcode", "gemma", "gemma2", "gemma3", "gemma3_text", "cohere", "cohere2",
                       "starcoder2", "bloom", "falcon"});
  return r;
}

struct Ctx {
  const Fields& f;
  const Traits& tr;
  HfReading& out;
  YAML::Node& m;
  int layers = 0;
  void rule(std::string s) const { out.read_as.push_back(std::move(s)); }
};

// Per-layer lists ppsim reads (or that change no layer's shape: no_rope_layers marks RoPE or NoPE).
constexpr Keys kPerLayerRead = {"layer_types", "mlp_layer_types", "moe_layer_freq",
                                "moe_layers",  "mlp_only_layers", "no_rope_layers"};

// Hybrid, heterogeneous, sparse-attention and encoder-decoder models: named, not read as something
// else. Any other list with one entry per layer says that the layers differ in a way ppsim does
// not read (OpenELM's per-layer heads, MiniMax-Text's attn_type_list, NAS block_configs).
void refuse_unmodelled(const Fields& f, int layers) {
  for (const char* k :
       {"ssm_state_size", "mamba_d_state", "attn_layer_period", "linear_num_key_heads", "state_size", "mamba_expand",
        "hybrid_override_pattern", "block_types", "attention_hidden_size", "head_size_divisor", "linear_attn_config"})
    if (f.has(k))
      f.refuse(k, "state-space, recurrent or linear-attention layers are not modelled (attention + MLP layers only)");
  if (f.flag({"is_encoder_decoder"}).value_or(false))
    f.refuse("is_encoder_decoder", "encoder-decoder models are not modelled (decoder-only)");
  if (f.has("block_configs"))
    f.refuse("block_configs",
             "layers with their own shapes (block_configs: a NAS model's per-layer attention and MLP) "
             "are not modelled; ppsim's layers share one shape");
  for (const char* k : {"index_topk", "index_n_heads"})
    if (f.has(k))
      f.refuse(k,
               "DeepSeek Sparse Attention (a lightning indexer choosing the keys each query attends) is not "
               "modelled: its indexer and its sparse attention would be priced as dense attention; for the dense "
               "attention it starts from, remove the index_* keys from a copy of the file");
  for (const char* k : {"swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim", "swa_v_head_dim"})
    if (f.has(k))
      f.refuse(k,
               "sliding-window layers with their own heads are not modelled; ppsim's local layers have the "
               "global layers' heads");
  if (f.flag({"use_cla"}).value_or(false))
    f.refuse("use_cla", "cross-layer attention (K and V shared by several layers) is not modelled");
  if (!f.has("kv_lora_rank") && f.has("v_head_dim") && f.has("head_dim") &&
      f.count("v_head_dim") != f.count("head_dim"))
    f.refuse("v_head_dim", fmt::format("values {} wide beside queries and keys {} wide (head_dim) are modelled only "
                                       "with MLA (kv_lora_rank)",
                                       f.count("v_head_dim"), f.count("head_dim")));
  for (const auto& item : f.object().items()) {
    const std::string key = item.key();  // a named copy: clang 14 cannot capture a structured binding
    const json& value = item.value();
    if (!value.is_array() || static_cast<int>(value.size()) != layers || layers < 2) continue;
    if (std::any_of(kPerLayerRead.begin(), kPerLayerRead.end(), [&](const char* k) { return key == k; })) continue;
    if (key == "architectures" || key.find("token") != std::string::npos) continue;  // names, token ids
    f.refuse(key, fmt::format("a list of {} entries, one per layer, that ppsim does not read: its layers would differ "
                              "from one another in a way ppsim does not model (if it changes no layer's shape, remove "
                              "it from a copy of the file)",
                              layers));
  }
}

// Layers, widths, heads, vocabulary.
void read_dims(const Ctx& c) {
  const Fields& f = c.f;
  c.m["layers"] = c.layers;
  const std::int64_t h = f.need({"hidden_size", "n_embd", "d_model", "model_dim", "dim"}, "the hidden size");
  c.m["hidden"] = h;
  const std::int64_t a = f.need({"num_attention_heads", "n_head", "n_heads", "num_heads"}, "the attention heads");
  c.m["heads"] = a;
  std::int64_t g = a;
  std::string kv_rule = "multi-head attention";
  if (const char* k = f.which(
          {"num_key_value_heads", "num_kv_heads", "n_kv_heads", "attn_config.kv_n_heads", "multi_query_group_num"})) {
    g = f.count(k);
    kv_rule = fmt::format("GQA, {} kv heads ({})", g, k);
  } else if (f.flag({"multi_query"}).value_or(false) && !f.flag({"new_decoder_architecture"}).value_or(false)) {
    g = 1;
    kv_rule = "multi-query attention (multi_query)";
  }
  if (g == 0) g = a;  // some files write 0 for "as many as heads"
  if (!f.has("kv_lora_rank")) {
    c.m["kv_heads"] = g;
    if (const char* k = f.which({"head_dim", "kv_channels", "attention_head_dim"})) {
      c.m["head_dim"] = f.count(k);
      kv_rule += fmt::format(", head_dim {} ({})", f.count(k), k);
    } else if (h % a == 0) {
      kv_rule += fmt::format(", head_dim {} (hidden / heads)", h / a);
    }
    c.rule(kv_rule);
  }
  c.m["vocab"] = f.need({"vocab_size", "padded_vocab_size", "n_vocab"}, "the vocabulary size");
}

// The MLP's kind, the norms, biases, q/k norms, sinks, position embeddings, tied head.
void read_block(const Ctx& c) {
  const Fields& f = c.f;
  const Traits& tr = c.tr;
  std::string act = f.str(
      {"hidden_act", "hidden_activation", "activation_function", "ffn_config.ffn_act_fn.name", "activation", "act_fn"});
  std::transform(act.begin(), act.end(), act.begin(), [](unsigned char ch) { return std::tolower(ch); });
  // No activation written: LlamaConfig's lineage (an intermediate_size) defaults to SiLU, gated;
  // the GPT lineage (n_inner, ffn_hidden_size, 4h) to GELU, plain.
  const bool llama_default = act.empty() && f.has("intermediate_size");
  const bool gated = act.find("silu") != std::string::npos || act.find("swish") != std::string::npos ||
                     act.find("glu") != std::string::npos || tr.gated_gelu || llama_default;
  c.m["mlp"] = gated ? "swiglu" : "gelu";
  const std::string why_act = tr.gated_gelu   ? f.type() + "'s, not in the file"
                              : llama_default ? "no hidden_act: SiLU, the default beside intermediate_size"
                              : act.empty()   ? "no hidden_act: GELU assumed"
                                              : "hidden_act " + act;
  c.rule(fmt::format("{} ({})", gated ? "gated MLP" : "plain MLP, 2 matrices", why_act));
  const bool ln = tr.layernorm || (!tr.weight_only_norm && !tr.rmsnorm && !f.has("rms_norm_eps") &&
                                   f.which({"layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"}) != nullptr);
  c.m["norm"] = ln ? "layernorm" : "rmsnorm";
  c.rule(ln ? "LayerNorm with bias" : tr.weight_only_norm ? "LayerNorm without bias (h weights)" : "RMSNorm");
  if (tr.norms != 2) {
    c.m["norms_per_layer"] = tr.norms;
    c.rule(fmt::format("{} norms per layer ({}'s)", tr.norms, f.type()));
  }
  if (f.has("parallel_attn") && f.flag({"parallel_attn"}).value_or(false) &&
      !f.flag({"new_decoder_architecture"}).value_or(false)) {
    c.m["norms_per_layer"] = 1;
    c.rule("1 norm per layer (parallel_attn)");
  }
  // Biases: the file's keys, else the architecture's.
  const auto all = f.flag({"use_bias", "bias", "add_bias_linear"});
  const bool no_bias = f.flag({"no_bias"}).value_or(false);
  const bool qkv = f.flag({"attention_bias", "qkv_bias", "use_qkv_bias", "add_qkv_bias"})
                       .value_or(no_bias ? tr.qkv_bias : all.value_or(tr.qkv_bias || tr.all_bias));
  const bool out = !no_bias && f.flag({"attention_bias", "o_bias"}).value_or(all.value_or(tr.all_bias));
  const bool mlp = !no_bias && f.flag({"mlp_bias"}).value_or(all.value_or(tr.all_bias || tr.mlp_bias));
  if (qkv) c.m["qkv_bias"] = true;
  if (out) c.m["out_bias"] = true;
  if (mlp) c.m["mlp_bias"] = true;
  if (qkv || out || mlp)
    c.rule(fmt::format("biases on {}{}{}", qkv ? "q/k/v " : "", out ? "attention out " : "", mlp ? "MLP" : ""));
  std::string qk = tr.qk_norm;
  if (f.flag({"use_qk_norm", "qk_layernorm", "qk_norm"}).value_or(false) && qk == "none")
    qk = f.type().rfind("llama4", 0) == 0 ? "none" : f.type().rfind("cohere", 0) == 0 ? "full" : "per_head";
  if (qk != "none") {
    c.m["qk_norm"] = qk;
    c.rule(fmt::format("q/k norms ({})", qk == "full" ? "over all heads" : "over one head"));
  }
  if (tr.sinks) {
    c.m["attention_sinks"] = true;
    c.rule("attention sinks, one per head");
  }
  if (tr.learned_positions || (f.has("n_positions") && !f.which({"rotary_dim", "rope_theta", "rotary_pct"}))) {
    c.m["learned_positions"] = f.need({"n_positions", "max_position_embeddings"}, "the learned positions");
    c.rule("learned position embeddings (n_positions)");
  }
  const auto tied = f.flag_or_outer("tie_word_embeddings");
  c.m["tied_embeddings"] = tied.value_or(tr.tied_default);
  c.rule(tied ? (*tied ? "tied embeddings" : "untied head")
              : fmt::format("{} (no tie_word_embeddings: {}'s default)",
                            tr.tied_default ? "tied embeddings" : "untied head", f.type()));
  if (f.which({"scale_emb", "embedding_multiplier", "scale_embeddings"}) || f.type().rfind("gemma", 0) == 0)
    c.out.not_counted.push_back("embedding scaling (no parameters)");
}

// A per-layer mask from an explicit list of layer indices.
std::vector<bool> mask_of_indices(const Fields& f, const char* key, int layers) {
  std::vector<bool> m(static_cast<std::size_t>(layers), false);
  const json& v = *f.find(key);
  if (!v.is_array()) f.refuse(key, "expected a list of layer indices");
  for (const json& x : v) {
    if (!x.is_number_integer() || x.get<std::int64_t>() < 0 || x.get<std::int64_t>() >= layers)
      f.refuse(key, fmt::format("{} is not a layer index (0..{})", x.dump(), layers - 1));
    m[x.get<std::size_t>()] = true;
  }
  return m;
}

// Which layers are MoE: every rule the file has, together (a layer is MoE when all say so).
std::vector<bool> moe_mask(const Ctx& c, std::string& why) {
  const Fields& f = c.f;
  const int L = c.layers;
  std::vector<bool> m(static_cast<std::size_t>(L), true);
  auto apply = [&](const char* key, auto&& is_moe) {
    if (!f.has(key)) return;
    why += (why.empty() ? "" : ", ") + std::string(key);
    for (int i = 0; i < L; ++i) m[i] = m[i] && is_moe(i);
  };
  if (f.has("moe_layers")) {
    const std::vector<bool> listed = mask_of_indices(f, "moe_layers", L);
    apply("moe_layers", [&](int i) { return listed[i]; });
  } else {
    const std::int64_t step = f.has("interleave_moe_layer_step") ? f.count("interleave_moe_layer_step") : 1;
    apply("interleave_moe_layer_step", [&](int i) { return step > 0 && (i + 1) % step == 0; });
  }
  if (f.has("mlp_layer_types")) {
    const json& t = *f.find("mlp_layer_types");
    if (!t.is_array() || static_cast<int>(t.size()) != L)
      f.refuse("mlp_layer_types", fmt::format("expected a list of {} entries", L));
    apply("mlp_layer_types", [&](int i) { return t[i].is_string() && t[i].get<std::string>() != "dense"; });
  }
  const std::int64_t sparse_step = f.has("decoder_sparse_step") ? f.count("decoder_sparse_step") : 1;
  apply("decoder_sparse_step", [&](int i) { return sparse_step > 0 && (i + 1) % sparse_step == 0; });
  if (f.has("mlp_only_layers")) {
    const std::vector<bool> dense = mask_of_indices(f, "mlp_only_layers", L);
    apply("mlp_only_layers", [&](int i) { return !dense[i]; });
  }
  const std::int64_t first = f.has("first_k_dense_replace") ? f.count("first_k_dense_replace") : 0;
  apply("first_k_dense_replace", [&](int i) { return i >= first; });
  if (f.has("moe_layer_freq") && f.find("moe_layer_freq")->is_array()) {
    const json& t = *f.find("moe_layer_freq");
    if (static_cast<int>(t.size()) != L) f.refuse("moe_layer_freq", fmt::format("expected a list of {} entries", L));
    apply("moe_layer_freq", [&](int i) { return t[i] == 1; });
  } else {
    const std::int64_t freq = f.has("moe_layer_freq") ? f.count("moe_layer_freq") : 1;
    apply("moe_layer_freq", [&](int i) { return freq > 0 && i % freq == 0; });
  }
  const std::int64_t start = f.has("moe_layer_start_index") ? f.count("moe_layer_start_index") : 0;
  apply("moe_layer_start_index", [&](int i) { return i >= start; });
  if (f.has("moe_layer_end_index")) {
    const json& e = *f.find("moe_layer_end_index");
    const std::int64_t end = e.is_number_integer() && e.get<std::int64_t>() >= 0 ? e.get<std::int64_t>() : L - 1;
    apply("moe_layer_end_index", [&](int i) { return i <= end; });
  }
  const std::int64_t interval = f.has("moe_layer_interval") ? f.count("moe_layer_interval") : 1;
  apply("moe_layer_interval", [&](int i) { return interval > 0 && (i + 1) % interval == 0; });
  return m;
}

// The places of the MoE layers as model keys (write_moe_layer_keys), and the rule that placed them.
void write_moe_layers(const Ctx& c, const std::vector<bool>& mask, const std::string& why) {
  const int L = c.layers;
  const int moe = static_cast<int>(std::count(mask.begin(), mask.end(), true));
  if (moe == 0) c.f.refuse(why.substr(0, why.find(',')), "no layer is left MoE");
  write_moe_layer_keys(c.m, std::vector<int>(mask.begin(), mask.end()));
  c.rule(fmt::format("MoE on {} of {} layers{}", moe, L, why.empty() ? " (every layer)" : " (" + why + ")"));
}

// Dense MLP width, and the MoE section when the file has routed experts.
void read_mlp(const Ctx& c) {
  const Fields& f = c.f;
  const std::int64_t h = c.m["hidden"].as<std::int64_t>();
  const bool gated = c.m["mlp"].as<std::string>() == "swiglu";
  const auto experts = f.maybe({"n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts",
                                "ffn_config.moe_num_experts", "num_routed_experts"});
  const char* dense_key = f.which({"intermediate_size_mlp", "intermediate_size", "n_inner", "ffn_hidden_size",
                                   "ffn_dim", "d_ff", "ffn_config.ffn_hidden_size"});
  if (dense_key != nullptr) {
    c.m["ffn_hidden"] = f.count(dense_key) / (c.tr.half_ffn ? 2 : 1);
    if (c.tr.half_ffn) c.rule(fmt::format("MLP width {} / 2 ({}'s counts gate and up together)", dense_key, f.type()));
  } else if (f.has("expansion_ratio") && f.find("expansion_ratio")->is_number()) {
    c.m["ffn_hidden"] = static_cast<std::int64_t>(f.find("expansion_ratio")->get<double>() * static_cast<double>(h));
    c.rule("MLP width expansion_ratio x hidden");
  } else if (!gated && !experts.value_or(0)) {
    c.m["ffn_hidden"] = 4 * h;
    c.rule("MLP width 4 x hidden (no intermediate_size / n_inner)");
  } else if (!experts.value_or(0)) {
    (void)f.need({"intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim"}, "the MLP width");
  }
  if (!experts.value_or(0)) return;
  const char* ew =
      f.which({"moe_intermediate_size", "expert_intermediate_size", "ffn_config.ffn_hidden_size", "intermediate_size"});
  if (ew == nullptr) (void)f.need({"moe_intermediate_size", "intermediate_size"}, "the experts' width");
  YAML::Node moe(YAML::NodeType::Map);
  moe["experts"] = *experts;
  const std::int64_t k = f.need({"num_experts_per_tok", "moe_top_k", "ffn_config.moe_top_k", "experts_per_token",
                                 "num_experts_per_token", "moe_k", "top_k"},
                                "the experts each token visits");
  moe["top_k"] = k;
  const std::int64_t fe = f.count(ew);
  moe["expert_ffn_hidden"] = fe;
  auto shared = f.maybe({"n_shared_experts", "num_shared_experts", "moe_num_shared_experts", "num_shared_expert"});
  const auto shared_width = f.maybe({"shared_expert_intermediate_size"});
  if (!shared && shared_width.value_or(0) > 0) shared = 1;
  if (!shared && c.tr.shared_experts > 0) shared = c.tr.shared_experts;
  std::string sh_rule;
  if (shared.value_or(0) > 0) {
    moe["shared_experts"] = *shared;
    if (shared_width.value_or(0) > 0 && *shared_width != fe) moe["shared_expert_ffn_hidden"] = *shared_width;
    sh_rule = fmt::format(
        ", {} shared of width {}{}", *shared, shared_width.value_or(fe),
        f.which({"n_shared_experts", "num_shared_experts", "moe_num_shared_experts", "shared_expert_intermediate_size"})
            ? ""
            : " (" + c.f.type() + "'s, not in the file)");
  }
  const bool router_bias = c.tr.router_bias || f.str({"topk_method"}) == "noaux_tc";
  if (router_bias) moe["router_bias"] = true;
  c.m["moe"] = moe;
  c.rule(fmt::format("MoE: {} experts top-{} of width {} ({}){}{}", *experts, k, fe, ew, sh_rule,
                     router_bias ? ", router bias" : ""));
  std::string why;
  write_moe_layers(c, moe_mask(c, why), why);
  if (dense_key == nullptr && c.m["dense_layers_first"]) (void)f.need({"intermediate_size"}, "the dense layers' width");
}

// DeepSeek's multi-head latent attention, when the file has kv_lora_rank.
void read_mla(const Ctx& c) {
  const Fields& f = c.f;
  if (!f.has("kv_lora_rank")) return;
  YAML::Node mla(YAML::NodeType::Map);
  mla["q_lora_rank"] = f.maybe({"q_lora_rank"}).value_or(0);  // null: queries projected directly (V2-Lite)
  mla["kv_lora_rank"] = f.count("kv_lora_rank");
  mla["qk_nope_head_dim"] = f.need({"qk_nope_head_dim"}, "MLA's per-head key width without rope");
  mla["qk_rope_head_dim"] = f.need({"qk_rope_head_dim"}, "MLA's rope width");
  mla["v_head_dim"] = f.need({"v_head_dim"}, "MLA's value width");
  c.m["mla"] = mla;
  c.rule(fmt::format("MLA (kv_lora_rank {}, q_lora_rank {})", f.count("kv_lora_rank"),
                     f.maybe({"q_lora_rank"}).value_or(0)));
}

// Local attention: which layers, and the window (FLOPs only).
void read_window(const Ctx& c) {
  const Fields& f = c.f;
  const int L = c.layers;
  std::vector<bool> local(static_cast<std::size_t>(L), true);
  std::string why;
  const char* win_key = f.which({"sliding_window", "attention_chunk_size", "attention_window"});
  if (f.has("layer_types")) {
    const json& t = *f.find("layer_types");
    if (!t.is_array() || static_cast<int>(t.size()) != L)
      f.refuse("layer_types", fmt::format("expected {} entries", L));
    for (int i = 0; i < L; ++i) {
      const std::string s = t[i].is_string() ? t[i].get<std::string>() : t[i].dump();
      if (s != "full_attention" && s != "sliding_attention" && s != "chunked_attention" && s != "attention")
        f.refuse("layer_types", fmt::format("layer {} is '{}': only attention layers are modelled", i, s));
      local[i] = s == "sliding_attention" || s == "chunked_attention";
    }
    why = "layer_types";
  } else if (const auto p = f.maybe({"sliding_window_pattern"})) {
    for (int i = 0; i < L; ++i) local[i] = *p > 0 && (i + 1) % *p != 0;
    why = fmt::format("sliding_window_pattern {}: every {}th layer global", *p, *p);
  } else if (f.has("no_rope_layers") && !f.find("no_rope_layers")->empty() && f.has("attention_chunk_size")) {
    const json& t = *f.find("no_rope_layers");
    for (int i = 0; i < L && t.is_array() && i < static_cast<int>(t.size()); ++i) local[i] = t[i] != 0;
    why = "no_rope_layers: chunked attention counted as a window of attention_chunk_size";
  } else if (f.type().rfind("llama4", 0) == 0 && f.has("attention_chunk_size")) {
    // Llama4TextConfig: no no_rope_layers (or []) is one NoPE (global) layer every
    // no_rope_layer_interval (4), the others RoPE with chunked attention.
    const std::int64_t every = f.maybe({"no_rope_layer_interval"}).value_or(4);
    for (int i = 0; i < L; ++i) local[i] = every <= 0 || (i + 1) % every != 0;
    why = fmt::format(
        "no no_rope_layers: every {}th layer global (no_rope_layer_interval, Llama4TextConfig's "
        "default); chunked attention counted as a window of attention_chunk_size",
        every);
  } else if (f.flag({"use_sliding_window"}).has_value()) {
    const bool on = *f.flag({"use_sliding_window"});
    const std::int64_t from = f.maybe({"max_window_layers"}).value_or(0);
    for (int i = 0; i < L; ++i) local[i] = on && i >= from;
    why = on ? "use_sliding_window, from max_window_layers" : "use_sliding_window false";
  } else if (c.tr.alternate_local) {
    for (int i = 0; i < L; ++i) local[i] = i % 2 == 0;
    why = "even layers, " + f.type() + "'s";
  }
  const int n = static_cast<int>(std::count(local.begin(), local.end(), true));
  if (win_key == nullptr || n == 0 || f.count(win_key) == 0) return;
  // A window as long as the context is no window (Phi-3's 262144, Qwen2's 131072).
  const auto context = f.maybe({"max_position_embeddings"});
  if (context && f.count(win_key) >= *context) return;
  c.m["sliding_window"] = f.count(win_key);
  if (n < L) c.m["local_layers"] = flow_list(std::vector<int>(local.begin(), local.end()));
  c.rule(fmt::format("local attention, window {} ({}), on {} of {} layers{} (FLOPs only)", f.count(win_key), win_key, n,
                     L, why.empty() ? "" : " (" + why + ")"));
}

// MTP modules written as MiniMax's (use_mtp, num_mtp_modules, mtp_transformer_layers): one
// transformer layer each is DeepSeek-V3's module, read as mtp_depth; deeper modules are refused.
void read_other_mtp(const Ctx& c) {
  const Fields& f = c.f;
  const auto modules = f.maybe({"num_mtp_modules"});
  if (!modules.value_or(0) || c.m["mtp_depth"]) return;
  if (!f.flag({"use_mtp"}).value_or(true)) {
    c.out.not_counted.push_back(fmt::format("{} MTP module(s) (num_mtp_modules; use_mtp false)", *modules));
    return;
  }
  const std::int64_t per = f.maybe({"mtp_transformer_layers"}).value_or(1);
  if (per != 1)
    f.refuse("mtp_transformer_layers", fmt::format("MTP modules of {} transformer layers are not modelled (ppsim's "
                                                   "MTP module is DeepSeek-V3's: a projection and one layer)",
                                                   per));
  c.m["mtp_depth"] = *modules;
  c.rule(
      fmt::format("{} MTP module(s) (num_mtp_modules) of one transformer layer each, as DeepSeek-V3's, apart "
                  "from the total",
                  *modules));
}

// The training sequence length: the file's own, else the context when short, else the default.
void read_seq_len(const Ctx& c) {
  const Fields& f = c.f;
  if (const char* k = f.which(
          {"rope_scaling.original_max_position_embeddings", "rope_parameters.original_max_position_embeddings"})) {
    c.m["seq_len"] = f.count(k);
    c.out.seq_len_why = fmt::format("{} {} (the context before its extension)", k, f.count(k));
    return;
  }
  if (const char* k = f.which({"seq_length", "max_sequence_length", "train_seq_len"})) {
    c.m["seq_len"] = f.count(k);
    c.out.seq_len_why = fmt::format("{} {}", k, f.count(k));
    return;
  }
  const char* ctx = f.which({"max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "seq_len"});
  const std::int64_t n = ctx != nullptr ? f.count(ctx) : 0;
  if (n > 0 && n <= kHfDefaultSeqLen) {
    c.m["seq_len"] = n;
    c.out.seq_len_why = fmt::format("{} {} (the longest the model takes)", ctx, n);
  } else {
    c.m["seq_len"] = kHfDefaultSeqLen;
    c.out.seq_len_why = fmt::format("ppsim's default for a config.json{}; give seq_len (--seq-len) for your training",
                                    ctx != nullptr ? fmt::format(", not {} {} (an inference context)", ctx, n) : "");
  }
}

// A vision tower beside the language model (vision_config): a ViT of its sizes, approximate
// (patch embedding, positions, per layer 4h^2 attention and a plain 2hf or gated 3hf MLP, with
// biases and two LayerNorms); the projector is not counted. A vision part whose sizes are not in
// the file is named as not counted.
void read_vision(const json& root, HfReading& out) {
  const char* key = root.contains("vision_config")  ? "vision_config"
                    : root.contains("audio_config") ? "audio_config"
                                                    : nullptr;
  if (key == nullptr) {
    for (const char* k : {"img_processor", "vision_tower", "mm_vision_tower", "visual", "vision_encoder"})
      if (root.contains(k) && !root.at(k).is_null())
        out.other = fmt::format("{}: a vision part, not counted (its sizes are not in the file)", k);
    return;
  }
  const json& v = root.at(key);
  auto num = [&](Keys keys) -> double {
    for (const char* k : keys)
      if (v.is_object() && v.contains(k) && v.at(k).is_number()) return v.at(k).get<double>();
    return 0;
  };
  const double h = num({"embed_dim", "hidden_size", "width"}),
               layers = num({"num_hidden_layers", "depth", "num_layers"});
  const double f =
      num({"intermediate_size", "mlp_dim"}) > 0 ? num({"intermediate_size", "mlp_dim"}) : num({"mlp_ratio"}) * h;
  if (h <= 0 || layers <= 0 || f <= 0) {
    out.other = fmt::format("{}: not counted (its sizes are not there: hidden, layers, MLP width)", key);
    return;
  }
  const std::string act =
      v.contains("hidden_act") && v.at("hidden_act").is_string() ? v.at("hidden_act").get<std::string>() : "";
  const bool gated = act.find("silu") != std::string::npos || act.find("swish") != std::string::npos;
  const double patch = num({"patch_size"}),
               chans = num({"num_channels", "in_channels"}) > 0 ? num({"num_channels", "in_channels"}) : 3;
  const double temporal = std::max(1.0, num({"temporal_patch_size"})), image = num({"image_size"});
  const double per_layer = 4 * h * h + 4 * h + (gated ? 3 : 2) * h * f + f + h + 4 * h;
  out.other_params = layers * per_layer + chans * patch * patch * temporal * h + h +
                     (image > 0 && patch > 0 ? (image / patch) * (image / patch) * h : 0) + 2 * h;
  out.other = fmt::format("{}: a ViT of {} layers, hidden {}, {} MLP {} (approximate; the projector not counted)", key,
                          layers, h, gated ? "gated" : "plain", f);
}

HfReading convert(const json& j, const std::string& text, const std::string& name) {
  if (!j.is_object()) throw InputError(SourceLoc{name, 1, 1}, "a Hugging Face config.json is a JSON object");
  // A multimodal wrapper: the language model is its text_config (llm_config, language_config).
  const json* lm = &j;
  std::size_t from = 0;
  std::string section;
  HfReading out;
  for (const char* k : {"text_config", "llm_config", "language_config"})
    if (j.contains(k) && j.at(k).is_object()) {
      lm = &j.at(k);
      section = std::string(k) + ".";
      from = text.find("\"" + std::string(k) + "\"");
      out.read_as.push_back(fmt::format("the language model is {} ({} counted apart)", k,
                                        j.contains("vision_config") ? "the vision tower" : "nothing else"));
      break;
    }
  const auto type_of = [](const json& o) {
    return o.contains("model_type") && o.at("model_type").is_string() ? o.at("model_type").get<std::string>() : "";
  };
  out.model_type = type_of(*lm).empty() ? type_of(j) : type_of(*lm);
  if (out.model_type.empty() && lm == &j)
    throw InputError(SourceLoc{name, 0, 0},
                     "missing key 'model_type' (a Hugging Face config.json names its architecture)");
  const Fields f(*lm, j, text, name, from == std::string::npos ? 0 : from, out.model_type, section);
  const Traits tr = traits_of(out.model_type);
  YAML::Node m(YAML::NodeType::Map);
  Ctx c{f, tr, out, m};
  c.layers = static_cast<int>(f.need({"num_hidden_layers", "n_layer", "n_layers", "num_layers"}, "the layers"));
  refuse_unmodelled(f, c.layers);
  read_dims(c);
  read_block(c);
  read_mlp(c);
  read_mla(c);
  read_window(c);
  read_seq_len(c);
  if (const auto mtp = f.maybe({"num_nextn_predict_layers"}); mtp.value_or(0) > 0) {
    m["mtp_depth"] = *mtp;
    c.rule(fmt::format("{} MTP module(s) (num_nextn_predict_layers), apart from the total", *mtp));
  }
  read_other_mtp(c);
  if (f.type() == "qwen2_moe" && m["moe"]["shared_experts"])
    out.not_counted.push_back("the shared expert's gate (hidden)");
  read_vision(j, out);
  out.keys = m;
  return out;
}

}  // namespace

// Python's json writes float('inf') and float('nan') as the bare words Infinity, -Infinity and
// NaN (Nemotron-H's time_step_limit); JSON has no such values. Outside strings they become null
// (the infinities padded to their length, so that the offsets of a parse error after them hold).
std::string without_python_floats(const std::string& text) {
  std::string out = text;
  bool in_string = false;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const char ch = out[i];
    if (in_string) {
      if (ch == '\\')
        ++i;
      else if (ch == '"')
        in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
      continue;
    }
    for (const char* word : {"-Infinity", "Infinity", "NaN"}) {
      const std::size_t n = std::char_traits<char>::length(word);
      if (out.compare(i, n, word) != 0) continue;
      const std::string null = "null" + std::string(n > 4 ? n - 4 : 0, ' ');
      out.replace(i, n, null);
      i += null.size() - 1;
      break;
    }
  }
  return out;
}

HfReading read_hf_config_text(const std::string& text, const std::string& name) {
  json j;
  try {
    j = json::parse(without_python_floats(text));
  } catch (const json::parse_error& e) {
    throw InputError(offset_loc(text, name, e.byte > 0 ? e.byte - 1 : 0),
                     "not valid JSON (a Hugging Face config.json)");
  }
  return convert(j, text, name);
}

HfReading read_hf_config(const std::string& path, const SourceLoc& where) {
  return read_hf_config_text(read_text_file(path, where, "hf_config file", kMaxBytes, ": not a config.json"), path);
}

YAML::Node hf_model_keys(const std::string& path, const SourceLoc& where) { return read_hf_config(path, where).keys; }

YAML::Node hf_model_keys_from_text(const std::string& text, const std::string& name) {
  return read_hf_config_text(text, name).keys;
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
