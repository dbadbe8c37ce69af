// Hugging Face config.json read by its fields (src/cost/hf_config.cc) through `ppsim model`
// (src/api/model.cc): small configs written here, each count derived part by part.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "api/model.h"
#include "catch.h"
#include "model_part.h"
#include "core/error.h"
#include "cost/hf_config.h"
#include "cost/memory.h"

using namespace ppsim;
using ppsim::test::part;
using json = nlohmann::json;

namespace {

// The base: 4 layers, h 64, 4 heads of 16 (2 kv heads), SwiGLU 96, vocab 100.
constexpr double L = 4, h = 64, a = 4, g = 2, d = 16, f = 96, V = 100;
constexpr double kAttn = h * (a + 2 * g) * d + a * d * h;  // q, k, v, o
constexpr double kMlp = 3 * h * f;                          // gate, up, down
constexpr double kBase = L * (kAttn + kMlp + 2 * h) + 2 * V * h + h;

json base(const char* type = "llama") {
  return json{{"model_type", type},      {"num_hidden_layers", 4},   {"hidden_size", 64},
              {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
              {"intermediate_size", 96},  {"vocab_size", 100},        {"max_position_embeddings", 512},
              {"hidden_act", "silu"},     {"rms_norm_eps", 1e-6},     {"tie_word_embeddings", false}};
}

std::string write(const json& j, const std::string& name) {
  const std::string path = (std::filesystem::temp_directory_path() / ("ppsim_hf_" + name + ".json")).string();
  std::ofstream(path) << j.dump(2);
  return path;
}

api::ModelReport report(const json& j, const std::string& name, std::int64_t seq_len = 0) {
  api::ModelRequest req;
  req.path = write(j, name);
  if (seq_len > 0) req.seq_len = seq_len;
  return api::model_report(req);
}

bool has_rule(const api::ModelReport& r, const std::string& text) {
  for (const auto& s : r.read_as)
    if (s.find(text) != std::string::npos) return true;
  return false;
}

std::string error_of(const json& j, const std::string& name) {
  try {
    (void)report(j, name);
  } catch (const InputError& e) {
    return e.one_line();
  }
  return "no error";
}

}  // namespace

TEST_CASE("hf fields: an unknown model_type whose fields suffice is read, with the rules that read it", "[api][hf]") {
  const api::ModelReport r = report(base("my_new_arch"), "unknown");
  CHECK(r.total == kBase);
  CHECK(part(r, "attention") == L * kAttn);
  CHECK(part(r, "dense_mlp") == L * kMlp);
  CHECK(has_rule(r, "gated MLP (hidden_act silu)"));
  CHECK(has_rule(r, "GQA, 2 kv heads (num_key_value_heads), head_dim 16 (head_dim)"));
  CHECK(has_rule(r, "RMSNorm"));
  CHECK(r.total == model_params(r.config.model));  // the count every memory figure uses
  // The GPT-2 spellings of the same quantities.
  json gpt = {{"model_type", "my_gpt"}, {"n_layer", 4},     {"n_embd", 64},   {"n_head", 4},
              {"vocab_size", 100},      {"n_positions", 128}, {"n_inner", 96}, {"activation_function", "gelu_new"},
              {"layer_norm_epsilon", 1e-5}};
  const api::ModelReport g2 = report(gpt, "gpt_like");
  // Plain MLP, LayerNorm (2h), learned positions (128 rows), untied (not gpt2's default).
  CHECK(part(g2, "dense_mlp") == L * 2 * h * f);
  CHECK(part(g2, "norms") == L * 2 * 2 * h + 2 * h);
  CHECK(part(g2, "embedding") == (V + 128) * h);
  CHECK(has_rule(g2, "plain MLP"));
}

TEST_CASE("hf fields: a missing field is named with its other names; hybrids are refused by their field", "[api][hf]") {
  json j = base();
  j.erase("hidden_size");
  CHECK(error_of(j, "missing").find("ppsim_hf_missing.json: missing key 'hidden_size' (the hidden size; also read as "
                                     "n_embd, d_model, model_dim, dim) (model_type llama)") != std::string::npos);
  json hybrid = base("jamba");
  hybrid["attn_layer_period"] = 8;
  const std::string e = error_of(hybrid, "hybrid");
  CHECK(
      e.find(
          "attn_layer_period (model_type jamba): state-space, recurrent or linear-attention layers are not modelled") !=
      std::string::npos);
  CHECK(e.find(".json:") != std::string::npos);  // at the key's line:col
  json lt = base();
  lt["layer_types"] = {"full_attention", "linear_attention", "full_attention", "full_attention"};
  CHECK(error_of(lt, "linear").find("layer 1 is 'linear_attention'") != std::string::npos);
}

TEST_CASE("hf fields: head_dim as given, tied embeddings, biases, q/k norms", "[api][hf]") {
  json j = base();
  j["head_dim"] = 32;  // not hidden / heads = 16
  const double attn32 = h * (a + 2 * g) * 32 + a * 32 * h;
  CHECK(part(report(j, "head_dim"), "attention") == L * attn32);

  j = base();
  j["tie_word_embeddings"] = true;
  const api::ModelReport tied = report(j, "tied");
  CHECK(part(tied, "head") == 0);
  CHECK(tied.total == kBase - V * h);
  j.erase("tie_word_embeddings");
  j["model_type"] = "gemma";  // Gemma ties by default and its MLP is GeGLU
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j.erase("hidden_act");
  const api::ModelReport gemma = report(j, "gemma");
  CHECK(gemma.total == kBase - V * h);
  CHECK(part(gemma, "dense_mlp") == L * kMlp);

  j = base();
  j["attention_bias"] = true;  // q, k, v and o
  j["mlp_bias"] = true;        // gate and up (f each), down (h)
  const api::ModelReport b = report(j, "bias");
  CHECK(part(b, "attention") == L * (kAttn + (a + 2 * g) * d + h));
  CHECK(part(b, "dense_mlp") == L * (kMlp + 2 * f + h));
  // Qwen2: q, k, v biases, not in the file.
  const api::ModelReport q2 = report(base("qwen2"), "qwen2");
  CHECK(part(q2, "attention") == L * (kAttn + (a + 2 * g) * d));
  // Qwen3: q and k norms over one head (2d); OLMo-2: over all heads ((a+g)d).
  CHECK(part(report(base("qwen3"), "qwen3"), "attention") == L * (kAttn + 2 * d));
  CHECK(part(report(base("olmo2"), "olmo2"), "attention") == L * (kAttn + (a + g) * d));
}

TEST_CASE("hf fields: routed and shared experts, moe_intermediate_size against intermediate_size", "[api][hf]") {
  json j = base("my_moe");
  j["num_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  j["moe_intermediate_size"] = 24;  // the experts' width; intermediate_size (96) is the dense layers'
  j["n_shared_experts"] = 1;        // of the experts' width
  const double fe = 24, E = 8, k = 2, expert = 3 * h * fe;
  const api::ModelReport r = report(j, "moe");
  const double rest = L * (kAttn + 2 * h + h * E + expert) + 2 * V * h + h;
  CHECK(r.total == rest + L * E * expert);
  CHECK(r.active == rest + L * k * expert);
  CHECK(part(r, "dense_mlp") == 0);
  CHECK(r.moe_layers == 4);
  // Qwen2-MoE's spelling: one shared expert of its own width (shared_expert_intermediate_size).
  j.erase("n_shared_experts");
  j["shared_expert_intermediate_size"] = 40;
  CHECK(part(report(j, "moe_shared_width"), "shared_experts") == L * 3 * h * 40);
  // Mixtral's: no moe_intermediate_size, the experts are intermediate_size wide.
  j = base("my_mixtral");
  j["num_local_experts"] = 4;
  j["num_experts_per_tok"] = 1;
  CHECK(part(report(j, "mixtral_like"), "routed_experts") == L * 4 * kMlp);
}

TEST_CASE("hf fields: every MoE layer-place key", "[api][hf]") {
  auto moe = [] {
    json j = base("my_moe");
    j["num_experts"] = 4;
    j["num_experts_per_tok"] = 1;
    j["moe_intermediate_size"] = 24;
    return j;
  };
  const double expert_layer = 4 * 3 * h * 24 + h * 4, dense_layer = kMlp;
  auto check = [&](json j, const std::string& name, int moe_layers) {
    const api::ModelReport r = report(j, name);
    CHECK(r.moe_layers == moe_layers);
    CHECK(r.dense_layers == 4 - moe_layers);
    CHECK(r.total == kBase - L * kMlp + moe_layers * expert_layer + (4 - moe_layers) * dense_layer);
  };
  json j = moe();
  j["first_k_dense_replace"] = 1;
  j["moe_layer_freq"] = 2;  // DeepSeek: i >= 1 and i % 2 == 0 -> layer 2
  check(j, "freq", 1);
  j = moe();
  j["decoder_sparse_step"] = 2;  // Qwen: (i + 1) % 2 == 0 -> 1, 3
  check(j, "step", 2);
  j["mlp_only_layers"] = {3};  // -> 1
  check(j, "mlp_only", 1);
  j = moe();
  j["interleave_moe_layer_step"] = 2;  // Llama-4 Maverick: 1, 3
  check(j, "interleave", 2);
  // Alternate layers are told once per kind: 2 layers of 4 experts x 3 h 24 = 18.43K (not "1 layers x
  // 18.43K + 1 layers x 18.43K"), and the dense MLP's 2 layers of 3 h 96 = 18.43K.
  const api::ModelReport alt = report(j, "interleave");
  for (const auto& p : alt.parts) {
    if (p.name == "routed_experts") CHECK(p.made_of.rfind("2 layers x 18.43K", 0) == 0);
    if (p.name == "dense_mlp") CHECK(p.made_of == "2 layers x 18.43K");
  }
  j = moe();
  j["moe_layers"] = {0, 2, 3};
  check(j, "list", 3);
  j = moe();
  j["mlp_layer_types"] = {"dense", "sparse", "sparse", "sparse"};
  check(j, "types", 3);
  j = moe();
  j["first_k_dense_replace"] = 2;  // a prefix: read as dense_layers_first
  const api::ModelReport r = report(j, "prefix");
  CHECK(r.config.model.dense_layers_first == 2);
  CHECK(r.config.model.moe_layers.empty());
}

TEST_CASE("hf fields: local attention changes the FLOPs, not the parameters", "[api][hf]") {
  const double s = 256, w = 64;
  const api::ModelReport full = report(base(), "full", 256);
  // Per token, a layer's attention core is 2 a pairs (dqk + dv) / s: causal s^2/2 pairs, a
  // window of w keys s w - w^2/2.
  const double saved_per_layer = 2 * a * ((s * s / 2) - (s * w - w * w / 2)) * (2 * d) / s;
  json j = base();
  j["sliding_window"] = 64;
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  const api::ModelReport alt = report(j, "layer_types", 256);
  CHECK(alt.total == full.total);
  CHECK(alt.forward_flops_per_token == Approx(full.forward_flops_per_token - 2 * saved_per_layer).epsilon(1e-12));
  j.erase("layer_types");
  j["sliding_window_pattern"] = 2;  // Gemma-3: every 2nd layer global -> 0 and 2 local
  CHECK(report(j, "pattern", 256).forward_flops_per_token == Approx(alt.forward_flops_per_token).epsilon(1e-12));
  j.erase("sliding_window_pattern");  // Mistral-7B-v0.1: every layer
  CHECK(report(j, "every", 256).forward_flops_per_token ==
        Approx(full.forward_flops_per_token - 4 * saved_per_layer).epsilon(1e-12));
  j["use_sliding_window"] = false;  // Qwen2: written but off
  CHECK(report(j, "off", 256).forward_flops_per_token == Approx(full.forward_flops_per_token).epsilon(1e-12));
}

TEST_CASE("hf fields: gpt-oss sinks, router and expert biases; DBRX's nested sections", "[api][hf]") {
  json j = base("gpt_oss");
  j["num_local_experts"] = 4;
  j["experts_per_token"] = 2;
  j["attention_bias"] = true;
  const double E = 4, expert = 3 * h * f + 2 * f + h;
  const api::ModelReport r = report(j, "gpt_oss");
  CHECK(part(r, "attention") == L * (kAttn + (a + 2 * g) * d + h + a));  // biases and a sink per head
  CHECK(part(r, "router") == L * (h * E + E));
  CHECK(part(r, "routed_experts") == L * E * expert);

  json dbrx = {{"model_type", "dbrx"},
               {"d_model", 64},
               {"n_heads", 4},
               {"n_layers", 4},
               {"vocab_size", 100},
               {"max_seq_len", 512},
               {"attn_config", {{"kv_n_heads", 2}}},
               {"ffn_config", {{"ffn_hidden_size", 24}, {"moe_num_experts", 4}, {"moe_top_k", 2},
                               {"ffn_act_fn", {{"name", "silu"}}}}}};
  const api::ModelReport db = report(dbrx, "dbrx");
  // head_dim 64 / 4 = 16, 2 kv heads; gated experts 24 wide; LayerNorm without bias (h); untied.
  CHECK(db.total == L * (kAttn + 2 * h + h * 4 + 4 * 3 * h * 24) + 2 * V * h + h);
  CHECK(db.active == L * (kAttn + 2 * h + h * 4 + 2 * 3 * h * 24) + 2 * V * h + h);
}

TEST_CASE("hf fields: StarCoder2's plain MLP with biases and LayerNorm; Gemma-2's four norms", "[api][hf]") {
  json j = base("starcoder2");
  j.erase("rms_norm_eps");
  j["norm_epsilon"] = 1e-5;
  j["use_bias"] = true;
  j["hidden_act"] = "gelu_pytorch_tanh";
  const api::ModelReport r = report(j, "starcoder2");
  CHECK(part(r, "dense_mlp") == L * (2 * h * f + f + h));
  CHECK(part(r, "attention") == L * (kAttn + (a + 2 * g) * d + h));
  CHECK(part(r, "norms") == L * 2 * 2 * h + 2 * h);
  json g2 = base("gemma2");
  g2["hidden_activation"] = "gelu_pytorch_tanh";
  g2.erase("hidden_act");
  CHECK(part(report(g2, "gemma2"), "norms") == L * 4 * h + h);
}

TEST_CASE("hf fields: a multimodal wrapper counts its text_config, the vision tower apart", "[api][hf]") {
  json j = {{"model_type", "my_vlm"},
            {"text_config", base("my_text")},
            {"vision_config",
             {{"hidden_size", 32}, {"num_hidden_layers", 2}, {"intermediate_size", 64}, {"patch_size", 4},
              {"image_size", 16}, {"num_channels", 3}}}};
  const api::ModelReport r = report(j, "vlm");
  CHECK(r.total == kBase);
  // ViT: per layer 4 vh^2 + 4 vh (q, k, v, o and biases) + 2 vh vf + vf + vh (MLP) + 4 vh (two
  // LayerNorms); the patch embedding c p^2 vh + vh, (16/4)^2 positions, the final LayerNorm.
  const double vh = 32, vf = 64;
  const double vit = 2 * (4 * vh * vh + 4 * vh + 2 * vh * vf + vf + vh + 4 * vh) + 3 * 16 * vh + vh + 16 * vh + 2 * vh;
  CHECK(r.other_params == vit);
  CHECK(r.other.find("vision_config") != std::string::npos);
  CHECK(has_rule(r, "the language model is text_config"));
  // A text_config without its sizes (transformers would fill in a class's defaults): named there.
  j["text_config"].erase("num_hidden_layers");
  CHECK(error_of(j, "vlm_missing").find("missing key 'text_config.num_hidden_layers'") != std::string::npos);
}

TEST_CASE("hf fields: Llama-4's text_config is Llama-4, never a plain llama", "[api][hf]") {
  // Experts and the shared expert intermediate_size wide (48), dense layers intermediate_size_mlp (96).
  json t = base("llama4_text");
  t["intermediate_size"] = 48;
  t["intermediate_size_mlp"] = 96;
  t["num_local_experts"] = 4;
  t["num_experts_per_tok"] = 1;
  t["interleave_moe_layer_step"] = 2;
  const api::ModelReport r = report(json{{"model_type", "llama4"}, {"text_config", t}}, "llama4");
  const double expert = 3 * h * 48;
  CHECK(r.moe_layers == 2);
  CHECK(part(r, "dense_mlp") == 2 * kMlp);
  CHECK(part(r, "shared_experts") == 2 * expert);
  CHECK(part(r, "routed_experts") == 2 * 4 * expert);
  CHECK(r.active == r.total - 2 * 3 * expert);
}

TEST_CASE("hf fields: the sequence length is a training length, and the report says which", "[api][hf]") {
  json j = base();
  j["max_position_embeddings"] = 131072;
  api::ModelReport r = report(j, "long");
  CHECK(r.seq_len == kHfDefaultSeqLen);
  CHECK(r.seq_len_why.find("not max_position_embeddings 131072") != std::string::npos);
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"original_max_position_embeddings", 8192}};
  r = report(j, "llama31");
  CHECK(r.seq_len == 8192);
  CHECK(r.seq_len_why.find("rope_scaling.original_max_position_embeddings") != std::string::npos);
  j = base();
  j["max_position_embeddings"] = 1024;  // short: the context itself
  CHECK(report(j, "short").seq_len == 1024);
  r = report(j, "given", 300);
  CHECK(r.seq_len == 300);
  CHECK(r.seq_len_why == "--seq-len");
}
