// Megatron-LM arguments (src/cost/megatron_args.cc): flags to model/parallel/precision keys,
// Megatron's defaults, the pipeline layout grammar, ignored flags listed, located errors; the
// DeepSeek-V3 and Llama-3-70B argument lists give the same results as the YAML configs.
#include <string>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "catch.h"
#include "cost/config.h"
#include "cost/megatron_args.h"
#include "../robustness/run_ppsim.h"

using namespace ppsim;

namespace {
std::string error_of(const std::string& text) {
  try {
    (void)megatron_args_from_text(text, "a.sh");
  } catch (const InputError& e) {
    return e.one_line();
  }
  return "no error";
}
}  // namespace

TEST_CASE("megatron: flags to model keys, with Megatron's defaults", "[cost][megatron]") {
  const MegatronArgs a = megatron_args_from_text(
      "torchrun --nproc-per-node 8 pretrain_gpt.py \\\n"
      "  --num-layers 4 --hidden-size 64 --num-attention-heads 4 --ffn-hidden-size 256 \\\n"
      "  --seq-length 128 --vocab-size 1000   # a comment\n"
      "  --group-query-attention --num-query-groups 2 --lr 1e-4 --micro-batch-size 2 --global-batch-size 64\n",
      "a.sh");
  CHECK(a.model["layers"].as<int>() == 4);
  CHECK(a.model["hidden"].as<int>() == 64);
  CHECK(a.model["kv_heads"].as<int>() == 2);
  CHECK(a.model["micro_batch_size"].as<int>() == 2);
  // No --swiglu, --normalization, --untie..., dropout flags: GELU, LayerNorm, tied, dropout 0.1.
  CHECK(a.model["mlp"].as<std::string>() == "gelu");
  CHECK(a.model["norm"].as<std::string>() == "layernorm");
  CHECK(a.model["tied_embeddings"].as<bool>());
  CHECK(a.model["dropout"].as<bool>());
  CHECK(a.global_batch_size == 64);
  CHECK(a.ignored == std::vector<std::string>{"--lr"});
}

TEST_CASE("megatron: --pipeline-model-parallel-layout", "[cost][megatron]") {
  // The example: E + 3 layers, 29 chunks of 2, an MTP chunk, a loss chunk: 32 chunks.
  const PipelineLayout l = parse_pipeline_layout("Et*3|(tt|)*29,m|L", SourceLoc{"a.sh", 1, 1});
  REQUIRE(l.layers.size() == 1 + 29 + 1 + 1);
  CHECK(l.layers[0] == 3);
  CHECK(l.layers[1] == 2);
  CHECK(l.layers[29] == 2);
  CHECK(l.layers[30] == 0);
  CHECK(l.layers[31] == 0);
  CHECK(l.mtp == 1);
  int sum = 0;
  for (int x : l.layers) sum += x;
  CHECK(sum == 3 + 58);
  // Megatron-MoE-ModelZoo's DeepSeek-V3 layout on PP8 x VPP4: 1 + 22 + 1 + 7 + 1 = 32 chunks, 61 layers.
  const PipelineLayout z = parse_pipeline_layout("Et*2|(tt|)*22t|(tt|)*7mL", SourceLoc{});
  CHECK(z.layers.size() == 32);
  sum = 0;
  for (int x : z.layers) sum += x;
  CHECK(sum == 2 + 44 + 1 + 14);
  CHECK(!parse_pipeline_layout("t|Et|L", SourceLoc{}).embedding_first);
  CHECK_THROWS_AS(parse_pipeline_layout("Et*3|(tt|*2", SourceLoc{}), InputError);
  // In an argument list: layer_split and vpp (chunks / pp).
  const MegatronArgs a = megatron_args_from_text(
      "--num-layers 8 --pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et|(ttt|)*2tL'", "a.sh");
  std::vector<int> split;
  for (const auto& n : a.parallel["layer_split"]) split.push_back(n.as<int>());
  CHECK(split == std::vector<int>{1, 3, 3, 1});  // Et | ttt | ttt | tL
  CHECK(a.parallel["vpp"].as<int>() == 4 / 2);
}

TEST_CASE("megatron: located errors", "[cost][megatron]") {
  CHECK(error_of("--num-layers $NL --hidden-size 8") == "a.sh:1:14: --num-layers $NL: a shell variable; write its value");
  CHECK(error_of("--num-layers 4\n--num-layers 5") == "a.sh:2:1: --num-layers is given twice (first at line 1)");
  CHECK(error_of("--num-layers four") == "a.sh:1:14: --num-layers: expected an integer >= 1, got 'four'");
  CHECK(error_of("--num-experts 8 --moe-layer-freq 2") ==
        "a.sh:1:34: --moe-layer-freq 2: only 1 or ([0]*k+[1]*n) (the first k layers dense) are modelled");
  CHECK(error_of("--context-parallel-size 2") == "a.sh:1:25: --context-parallel-size > 1: context parallelism is not modelled");
  CHECK(error_of("python train.py") == "a.sh: no Megatron-LM arguments (--flag value) in the file");
}

TEST_CASE("megatron: the DeepSeek-V3 and Llama-3-70B argument lists give the YAML configs' results", "[cost][megatron][cli]") {
  ppsim::robust::Scratch s("megatron");
  const std::string dir = std::string(PPSIM_SOURCE_DIR) + "/configs/";
  for (const char* name : {"deepseek-v3", "llama3-70b"}) {
    INFO(name);
    auto a = ppsim::robust::run_ppsim(s, "compare " + dir + name + ".yaml --format json");
    auto b = ppsim::robust::run_ppsim(s, "compare " + dir + "megatron/" + name + ".yaml --format json");
    REQUIRE(a.code == 0);
    REQUIRE(b.code == 0);
    auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
    ja.erase("config");
    jb.erase("config");
    CHECK(ja == jb);
  }
}
