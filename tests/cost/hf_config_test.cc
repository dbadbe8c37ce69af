// Hugging Face config.json -> model keys (src/cost/hf_config.cc): each family's mapping, keys
// beside hf_config overriding, and one located line per bad input.
#include "cost/hf_config.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "catch.h"
#include "cost/config.h"

using namespace ppsim;

namespace {

const std::string kHf = std::string(PPSIM_SOURCE_DIR) + "/configs/hf/";

// A ppsim config around one config.json.
ModelConfigData load_hf(const std::string& json_file, const std::string& beside = "") {
  const std::string text = "model: {hf_config: " + json_file + (beside.empty() ? "" : ", " + beside) +
                           "}\nhardware: {name: h100}\nparallel: {pp: 1, microbatches: 4}\n";
  return parse_config(text, "t.yaml", kHf, {});
}

std::string hf_error(const std::string& json) {
  try {
    (void)hf_model_keys_from_text(json, "c.json");
  } catch (const InputError& e) {
    return e.one_line();
  }
  return "no error";
}

}  // namespace

TEST_CASE("hf_config: llama, mistral, qwen2, qwen3 map to a dense SwiGLU/RMSNorm model", "[cost][hf]") {
  const ModelSpec m = load_hf("llama-3-8b.json").model;
  CHECK(m.layers == 32);
  CHECK(m.hidden == 4096);
  CHECK(m.ffn_hidden == 14336);
  CHECK(m.heads == 32);
  CHECK(m.kv_heads == 8);
  CHECK(m.head_dim == 4096 / 32);
  CHECK(m.vocab == 128256);
  // Not max_position_embeddings (8192, the context): ppsim's stated default training length.
  CHECK(m.seq_len == kHfDefaultSeqLen);
  CHECK(m.mlp == MlpKind::swiglu);
  CHECK(m.norm == NormKind::rmsnorm);
  CHECK(!m.tied_embeddings);
  CHECK(!m.moe.enabled());
  // Qwen3 gives head_dim (128), not hidden / heads (4096 / 32 = 128 too); Qwen2's kv heads 4.
  CHECK(load_hf("qwen3-8b.json").model.head_dim == 128);
  CHECK(load_hf("qwen2-7b.json").model.kv_heads == 4);
  CHECK(load_hf("mistral-7b-v0.1.json").model.vocab == 32000);
}

TEST_CASE("hf_config: MoE families (mixtral, qwen2_moe, qwen3_moe, deepseek)", "[cost][hf]") {
  const ModelSpec mx = load_hf("mixtral-8x7b.json").model;
  CHECK(mx.moe.experts == 8);
  CHECK(mx.moe.top_k == 2);
  CHECK(mx.moe.expert_ffn_hidden == 14336);
  CHECK(mx.moe.shared_experts == 0);
  CHECK(mx.dense_layers_first == 0);
  // Qwen1.5-MoE: one shared expert 5632 wide beside routed experts 1408 wide.
  const ModelSpec q = load_hf("qwen1.5-moe-a2.7b.json").model;
  CHECK(q.moe.experts == 60);
  CHECK(q.moe.top_k == 4);
  CHECK(q.moe.shared_experts == 1);
  CHECK(q.moe.shared_width() == 5632);
  CHECK(q.moe.expert_ffn_hidden == 1408);
  const ModelSpec q3 = load_hf("qwen3-235b-a22b.json").model;
  CHECK(q3.moe.experts == 128);
  CHECK(q3.kv_heads == 4);
  CHECK(q3.head_dim == 128);
  // DeepSeek-V3: MLA ranks, 3 dense layers first, 1 shared expert, MTP depth 1.
  const ModelSpec d = load_hf("deepseek-v3.json").model;
  CHECK(d.mla.enabled);
  CHECK(d.mla.q_lora_rank == 1536);
  CHECK(d.mla.kv_lora_rank == 512);
  CHECK(d.mla.qk_nope_head_dim == 128);
  CHECK(d.mla.qk_rope_head_dim == 64);
  CHECK(d.mla.v_head_dim == 128);
  CHECK(d.dense_layers_first == 3);
  CHECK(d.moe.shared_experts == 1);
  CHECK(d.moe.experts == 256);
  CHECK(d.moe.top_k == 8);
  CHECK(d.mtp_depth == 1);
  CHECK(d.kv_heads == d.heads);
  // DeepSeek-V2-Lite: q_lora_rank null -> queries projected directly.
  const ModelSpec v2 = load_hf("deepseek-v2-lite.json").model;
  CHECK(v2.mla.q_lora_rank == 0);
  CHECK(v2.dense_layers_first == 1);
  CHECK(v2.moe.shared_experts == 2);
  CHECK(v2.mtp_depth == 0);
}

TEST_CASE("hf_config: gpt2 and gpt_neox are LayerNorm + GELU; gpt2 ties its embeddings", "[cost][hf]") {
  const ModelSpec g = load_hf("gpt2.json").model;
  CHECK(g.layers == 12);
  CHECK(g.hidden == 768);
  CHECK(g.ffn_hidden == 4 * 768);  // n_inner absent: 4 * n_embd
  CHECK(g.seq_len == 1024);
  CHECK(g.mlp == MlpKind::gelu);
  CHECK(g.norm == NormKind::layernorm);
  CHECK(g.tied_embeddings);
  const ModelSpec n = load_hf("gpt-neox-20b.json").model;
  CHECK(n.ffn_hidden == 24576);
  CHECK(n.norm == NormKind::layernorm);
  CHECK(!n.tied_embeddings);
}

TEST_CASE("hf_config: keys beside it override, sections merged key by key", "[cost][hf]") {
  const ModelSpec m =
      load_hf("deepseek-v3.json", "seq_len: 4096, layers: 4, dense_layers_first: 1, moe: {top_k: 2}").model;
  CHECK(m.seq_len == 4096);
  CHECK(m.layers == 4);
  CHECK(m.dense_layers_first == 1);
  CHECK(m.moe.top_k == 2);
  CHECK(m.moe.experts == 256);  // the rest of moe: from the file
}

TEST_CASE("configs/deepseek-v3.yaml through hf_config: the same model as its explicit keys", "[cost][hf]") {
  const ModelConfigData c = parse_config(
      [] {
        std::ifstream in(std::string(PPSIM_SOURCE_DIR) + "/configs/deepseek-v3.yaml");
        return std::string(std::istreambuf_iterator<char>(in), {});
      }(),
      "deepseek-v3.yaml", std::string(PPSIM_SOURCE_DIR) + "/configs", {});
  // The keys configs/deepseek-v3.yaml wrote out before it named the config.json.
  const ModelSpec& m = c.model;
  CHECK(m.layers == 61);
  CHECK(m.dense_layers_first == 3);
  CHECK(m.hidden == 7168);
  CHECK(m.ffn_hidden == 18432);
  CHECK(m.heads == 128);
  CHECK(m.kv_heads == 128);
  CHECK(m.head_dim == 7168 / 128);
  CHECK(m.vocab == 129280);
  CHECK(m.seq_len == 4096);
  CHECK(m.micro_batch_size == 1);
  CHECK(m.mtp_depth == 1);
  CHECK(m.mla.q_lora_rank == 1536);
  CHECK(m.mla.kv_lora_rank == 512);
  CHECK(m.mla.qk_nope_head_dim == 128);
  CHECK(m.mla.qk_rope_head_dim == 64);
  CHECK(m.mla.v_head_dim == 128);
  CHECK(m.moe.experts == 256);
  CHECK(m.moe.top_k == 8);
  CHECK(m.moe.shared_experts == 1);
  CHECK(m.moe.expert_ffn_hidden == 2048);
  CHECK(m.moe.capacity_factor == 1.0);
  CHECK(!m.moe.keep_expert_output);
  CHECK(m.mlp == MlpKind::swiglu);
  CHECK(m.norm == NormKind::rmsnorm);
  CHECK(!m.tied_embeddings);
}

TEST_CASE("hf_config: one located line per bad input", "[cost][hf]") {
  // An unknown model_type is read by its fields: here the layers are missing, named with their other names.
  CHECK(hf_error("{\n  \"model_type\": \"lama\",\n  \"hidden_size\": 8\n}") ==
        "c.json: missing key 'num_hidden_layers' (the layers; also read as n_layer, n_layers, num_layers) "
        "(model_type lama)");
  CHECK(hf_error("{\"model_type\": \"llama\", \"num_hidden_layers\": 2}") ==
        "c.json: missing key 'hidden_size' (the hidden size; also read as n_embd, d_model, model_dim, dim) "
        "(model_type llama)");
  CHECK(hf_error("{\"hidden_size\": 8}") ==
        "c.json: missing key 'model_type' (a Hugging Face config.json names its architecture)");
  CHECK(hf_error("{\"model_type\": \"llama\",\n\"num_hidden_layers\": \"32\"}") ==
        "c.json:2:22: 'num_hidden_layers' must be a count (an integer >= 0), got \"32\"");
  CHECK(hf_error("{\"model_type\": \"llama\", ") == "c.json:1:25: not valid JSON (a Hugging Face config.json)");
  CHECK(hf_error("{\"model_type\": \"llama\", \"num_hidden_layers\": 4, \"hidden_size\": 8, "
                 "\"num_attention_heads\": 2,\n\"vocab_size\": 10, \"intermediate_size\": 8, \"num_experts\": 4, "
                 "\"num_experts_per_tok\": 1, \"mlp_only_layers\": [0, 7]}") ==
        "c.json:2:106: mlp_only_layers (model_type llama): 7 is not a layer index (0..3)");
  // From a config: a missing file is an I/O error at the hf_config key.
  try {
    (void)parse_config("model: {hf_config: nope.json}\nhardware: {name: h100}\nparallel: {pp: 1, microbatches: 1}\n",
                       "t.yaml", "/nonexistent", {});
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.one_line() == "t.yaml:1:20: cannot open the hf_config file '/nonexistent/nope.json'");
    CHECK(e.exit_code() == kExitIo);
  }
}

TEST_CASE("hf_config: a layer count beside the file's per-layer MoE pattern is refused, dense_layers_first wins",
          "[cost][hf]") {
  const std::string dir = std::filesystem::temp_directory_path().string();
  std::ofstream(dir + "/ppsim_hf_pattern.json")
      << R"({"model_type": "x", "num_hidden_layers": 4, "hidden_size": 8, "num_attention_heads": 2,
            "intermediate_size": 16, "vocab_size": 10, "num_experts": 4, "num_experts_per_tok": 1,
            "moe_intermediate_size": 4, "moe_layers": [1, 3]})";
  auto parse = [&](const std::string& beside) {
    return parse_config("model: {hf_config: ppsim_hf_pattern.json, " + beside +
                            "}\nhardware: {name: h100}\nparallel: {pp: 1, microbatches: 1}\n",
                        "t.yaml", dir, {});
  };
  CHECK(parse("seq_len: 64").model.moe_layer_count() == 2);  // layers 1 and 3
  try {
    (void)parse("layers: 2");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.one_line() ==
          "t.yaml:1:51: model.layers is 2 beside hf_config, whose ppsim_hf_pattern.json per-layer pattern has 4 "
          "entries; give model.moe_layers for 2 layers");
  }
  // dense_layers_first written beside replaces the file's pattern: the first layer dense, the rest MoE.
  CHECK(parse("dense_layers_first: 1").model.moe_layer_count() == 3);
}
