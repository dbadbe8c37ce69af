// Hugging Face config.json -> model keys (src/cost/hf_config.cc): each family's mapping, keys
// beside hf_config overriding, and one located line per bad input.
#include "cost/hf_config.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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

namespace {

// A small llama-style file with `extra` fields added (a JSON fragment starting with a comma).
std::string small_hf(const std::string& type, const std::string& extra, int layers = 8) {
  return "{\"model_type\": \"" + type + "\", \"num_hidden_layers\": " + std::to_string(layers) +
         ", \"hidden_size\": 64, \"num_attention_heads\": 4,\n\"intermediate_size\": 128, \"vocab_size\": 100" + extra +
         "}";
}

}  // namespace

TEST_CASE("hf_config: layers that differ in a way ppsim does not read are refused at their key", "[cost][hf]") {
  // A per-layer list ppsim does not read (OpenELM's heads per layer), located at its value.
  CHECK(hf_error(small_hf("openelm", ",\n\"num_query_heads\": [4, 4, 8, 8]", 4)) ==
        "c.json:3:20: num_query_heads (model_type openelm): a list of 4 entries, one per layer, that ppsim does not "
        "read: its layers would differ from one another in a way ppsim does not model (if it changes no layer's "
        "shape, remove it from a copy of the file)");
  // Lists of another length, token ids and the lists ppsim reads are not per-layer shapes.
  CHECK(hf_error(small_hf("llama",
                          ", \"eos_token_id\": [1, 2, 3, 4], \"architectures\": [\"a\", \"b\", \"c\", \"d\"], "
                          "\"no_rope_layers\": [1, 1, 1, 0], \"foo\": [1, 2]",
                          4)) == "no error");
  CHECK_THAT(hf_error(small_hf("nemotron-nas", ", \"block_configs\": [{}, {}]", 2)),
             PPSIM_CONTAINS("c.json:2:63: block_configs (model_type nemotron-nas): layers with their own shapes"));
  CHECK_THAT(hf_error(small_hf("deepseek_v32", ", \"index_topk\": 2048")),
             PPSIM_CONTAINS("c.json:2:60: index_topk (model_type deepseek_v32): DeepSeek Sparse Attention"));
  CHECK_THAT(
      hf_error(small_hf("mimo_v2_flash", ", \"swa_num_key_value_heads\": 8")),
      PPSIM_CONTAINS("swa_num_key_value_heads (model_type mimo_v2_flash): sliding-window layers with their own heads"));
  CHECK_THAT(hf_error(small_hf("hunyuan", ", \"use_cla\": true")), PPSIM_CONTAINS("cross-layer attention"));
  CHECK(hf_error(small_hf("hunyuan", ", \"use_cla\": false")) == "no error");
  // v wider or narrower than q/k without MLA: 16 = 64 / 4 heads is head_dim, 32 is not.
  CHECK(hf_error(small_hf("x", ", \"head_dim\": 16, \"v_head_dim\": 32")) ==
        "c.json:2:76: v_head_dim (model_type x): values 32 wide beside queries and keys 16 wide (head_dim) are "
        "modelled only with MLA (kv_lora_rank)");
  CHECK(hf_error(small_hf("x", ", \"head_dim\": 16, \"v_head_dim\": 16")) == "no error");
}

TEST_CASE("hf_config: Python's Infinity and NaN are read as null, so the real reason is named", "[cost][hf]") {
  // Nemotron-H writes time_step_limit [0.0, Infinity]: not a JSON error, but its SSM layers refused.
  CHECK(hf_error(small_hf("nemotron_h", ", \"time_step_limit\": [0.0, Infinity],\n\"ssm_state_size\": 128")) ==
        "c.json:3:19: ssm_state_size (model_type nemotron_h): state-space, recurrent or linear-attention layers are "
        "not modelled (attention + MLP layers only)");
  CHECK(hf_error(small_hf("llama", ", \"a\": -Infinity, \"b\": NaN, \"c\": \"Infinity NaN\"")) == "no error");
  // A parse error after an Infinity keeps its column (the word is padded to its length).
  CHECK(hf_error("{\"a\": Infinity, ]") == "c.json:1:17: not valid JSON (a Hugging Face config.json)");
}

TEST_CASE("hf_config: Llama 4 without no_rope_layers has every 4th layer global, as Llama4TextConfig", "[cost][hf]") {
  // transformers: no_rope_layers None or [] -> [int((i + 1) % no_rope_layer_interval != 0)], interval 4:
  // layers 3 and 7 (0-based) NoPE and global, the other six chunked (local).
  const std::string chunk = ", \"attention_chunk_size\": 8192";
  for (const std::string& extra : {chunk, chunk + ", \"no_rope_layers\": []"}) {
    const YAML::Node m = hf_model_keys_from_text(small_hf("llama4_text", extra), "c.json");
    REQUIRE(m["local_layers"]);
    std::vector<int> local;
    for (const auto& v : m["local_layers"]) local.push_back(v.as<int>());
    CHECK(local == std::vector<int>{1, 1, 1, 0, 1, 1, 1, 0});
    CHECK(m["sliding_window"].as<int>() == 8192);
  }
  // An interval of 2: every other layer global.
  const YAML::Node m2 =
      hf_model_keys_from_text(small_hf("llama4_text", chunk + ", \"no_rope_layer_interval\": 2"), "c.json");
  std::vector<int> local2;
  for (const auto& v : m2["local_layers"]) local2.push_back(v.as<int>());
  CHECK(local2 == std::vector<int>{1, 0, 1, 0, 1, 0, 1, 0});
}

TEST_CASE("hf_config: MiniMax's MTP modules of one layer are DeepSeek-V3's, deeper ones refused", "[cost][hf]") {
  const std::string mtp = ", \"use_mtp\": true, \"num_mtp_modules\": 3";
  CHECK(hf_model_keys_from_text(small_hf("minimax_m2", mtp + ", \"mtp_transformer_layers\": 1"), "c.json")["mtp_depth"]
            .as<int>() == 3);
  CHECK(hf_model_keys_from_text(small_hf("minimax_m2", mtp), "c.json")["mtp_depth"].as<int>() == 3);
  CHECK_THAT(hf_error(small_hf("minimax_m2", mtp + ", \"mtp_transformer_layers\": 2")),
             PPSIM_CONTAINS("mtp_transformer_layers (model_type minimax_m2): MTP modules of 2 transformer layers"));
  const HfReading off =
      read_hf_config_text(small_hf("minimax_m2", ", \"use_mtp\": false, \"num_mtp_modules\": 3"), "c.json");
  CHECK_FALSE(off.keys["mtp_depth"]);
  REQUIRE(off.not_counted.size() == 1);
  CHECK(off.not_counted[0] == "3 MTP module(s) (num_mtp_modules; use_mtp false)");
}
