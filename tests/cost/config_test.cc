// Config loading (src/cost/config.cc): defaults, --set, and one exact one-line error per class
// of bad input, at the offending node's line:col (1-based). Hostile input never crashes.
#include <random>
#include <string>
#include <vector>

#include "catch.h"
#include "cost/config.h"
#include "cost/cost_model.h"
#include "cost/derive.h"

using namespace ppsim;

namespace {

const char* kOk = R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}
hardware: {name: h100}
parallel: {pp: 2, microbatches: 4}
)";

ModelConfigData load(const std::string& text, const std::vector<std::string>& sets = {}) {
  return parse_config(text, "t.yaml", "", sets);
}

// The CLI's one line for the error `text` (with `sets`) raises; "" when it loads.
std::string error_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  try {
    (void)load(text, sets);
  } catch (const InputError& e) {
    return e.one_line();
  }
  return "";
}

}  // namespace

TEST_CASE("a minimal config loads with documented defaults", "[cost]") {
  const ModelConfigData c = load(kOk);
  CHECK(c.name == "t");
  CHECK(c.model.kv_heads == 4);
  CHECK(c.model.head_dim == 16);  // hidden / heads
  CHECK(c.model.micro_batch_size == 1);
  CHECK(c.model.mlp == MlpKind::swiglu);
  CHECK(c.model.flash_attention);
  CHECK(c.precision.gemm == Dtype::bf16);
  CHECK(c.precision.optimizer_bytes_per_param() == 12.0);  // 2 fp32 moments + fp32 master
  CHECK(c.hardware.peak_bf16_tflops == 989);             // the h100 preset
  CHECK(c.hardware.nvlink_gbps == 900);
  CHECK(c.parallel.dp == 1);
  CHECK(c.parallel.schedule == "all");
  CHECK(c.parallel.layer_split.empty());
  CHECK_FALSE(c.times.present);
  CHECK_FALSE(c.plan.IsMap());

  const ModelConfig cfg = load_config_text(kOk, "t.yaml", {"parallel.vpp=2", "parallel.schedule=zbv,1f1b"});
  int pp = 0, m = 0, v = 0;
  apply_config_parallel(cfg, pp, m, v);
  CHECK(pp == 2);
  CHECK(m == 4);
  CHECK(v == 2);
  CHECK(config_schedules(cfg) == "zbv,1f1b");
}

TEST_CASE("dp follows from the GPU count, and cluster.gpus is the same figure", "[cost]") {
  CHECK(load(kOk, {"hardware.gpus=16"}).parallel.dp == 8);
  CHECK(load(kOk, {"cluster.gpus=16", "parallel.tp=2"}).parallel.dp == 4);
}

TEST_CASE("set overrides: --set replaces keys, creates sections, and parses flow values", "[cost]") {
  const ModelConfigData c = load(kOk, {"model.hidden=128", "times={F: 2, B: 4, W: 1}", "parallel.layer_split=[1, 3]",
                                       "plan.whatif.h800={hardware.nvlink_gbps: 400}"});
  CHECK(c.model.hidden == 128);
  CHECK(c.times.present);
  CHECK(c.times.share.f == ms(2));
  CHECK(c.times.share.w == ms(1));
  CHECK(c.parallel.layer_split == std::vector<int>{1, 3});
  REQUIRE(c.plan.IsMap());
  CHECK(c.plan["whatif"]["h800"]["hardware.nvlink_gbps"].as<int>() == 400);
  // The tree after --set is kept for what-if variants.
  CHECK(c.tree["model"]["hidden"].as<int>() == 128);
}

TEST_CASE("the plan section is kept raw, only required to be a map", "[cost]") {
  const ModelConfigData c = load(std::string(kOk) + "plan:\n  whatif:\n    h100: {hardware.nvlink_gbps: 900}\n  anything: [1, 2]\n");
  REQUIRE(c.plan.IsMap());
  CHECK(c.plan["anything"].size() == 2);
  CHECK(error_of(std::string(kOk) + "plan: [1]\n") == "t.yaml:4:7: plan must be a map, got a list");
}

TEST_CASE("unknown keys: one line with the key's position and a suggestion", "[cost]") {
  CHECK(error_of("model:\n  layers: 4\n  hiden: 64\n") == "t.yaml:3:3: unknown key 'hiden' in 'model', did you mean 'hidden'?");
  CHECK(error_of("modle:\n  layers: 4\n") == "t.yaml:1:1: unknown top-level key 'modle', did you mean 'model'?");
  CHECK(error_of(std::string(kOk) + "times: {F: 1, B: 2, w: 1}\n") ==
        "t.yaml:4:21: unknown key 'w' in 'times', did you mean 'W'?");
  CHECK(error_of("model:\n  layers: 4\n  layers: 5\n") == "t.yaml:3:3: duplicate key 'layers' in 'model'");
}

TEST_CASE("wrong types: one line naming the key and what was found", "[cost]") {
  CHECK(error_of("model:\n  layers: many\n") == "t.yaml:2:11: model.layers must be an integer, got 'many'");
  CHECK(error_of("model:\n  layers: 4.5\n") == "t.yaml:2:11: model.layers must be an integer, got '4.5'");
  // An empty value is reported at its key (yaml-cpp marks it at the start of the next line).
  CHECK(error_of("model:\n  layers:\n") == "t.yaml:2:3: model.layers must be an integer, got nothing");
  CHECK(error_of("model: [4]\n") == "t.yaml:1:8: model must be a map, got a list");
  CHECK(error_of(R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32, dropout: maybe}
)") == "t.yaml:1:94: model.dropout must be true or false, got 'maybe'");
  CHECK(error_of(std::string(kOk) + "times: {F: fast, B: 2}\n") == "t.yaml:4:12: times.F must be a number, got 'fast'");
  CHECK(error_of("hello\n") == "t.yaml:1:1: the config must be a map, got 'hello'");
}

TEST_CASE("out-of-range values and enumerations", "[cost]") {
  CHECK(error_of("model:\n  layers: 0\n") == "t.yaml:2:11: model.layers must be in [1, 65536], got 0");
  CHECK(error_of("model:\n  layers: 99999999999999999999999\n") ==
        "t.yaml:2:11: model.layers must be in [1, 65536], got 99999999999999999999999");
  CHECK(error_of(R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}
hardware:
  name: h100
  efficiency: {gemm: 1.5}
parallel: {pp: 2, microbatches: 4}
)") == "t.yaml:4:22: hardware.efficiency.gemm must be in [0.01, 1], got 1.5");
  CHECK(error_of(std::string(kOk) + "precision: {gemm: fp4}\n") ==
        "t.yaml:4:19: precision.gemm must be one of bf16|fp8, got 'fp4', did you mean 'fp8'?");
  CHECK(error_of(R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}
hardware: {name: h100}
parallel:
  pp: 2
  microbatches: 4
  recompute: ful
)") == "t.yaml:6:14: parallel.recompute must be one of none|selective|full, got 'ful', did you mean 'full'?");
  CHECK(error_of(std::string(kOk) + "times: {F: 1, B: 2, W: 3}\n") ==
        "t.yaml:4:24: times.W is part of the full backward times.B, so W <= B is needed");
  CHECK(error_of(R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}
hardware: {name: h10}
parallel: {pp: 2, microbatches: 4}
)") == "t.yaml:2:18: hardware.name 'h10' is not a preset (h100, h800, h200, a100) and hardware.peak_tflops is not given, did you "
       "mean 'h100'?");
  CHECK(error_of(R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}
parallel: {pp: 2, microbatches: 4}
)") == "t.yaml:1:1: hardware is required (peak FLOP/s, memory and link bandwidths), or name a GPU type in cluster.gpu");
  CHECK(error_of("model: {layers: 4}\n") == "t.yaml:1:8: model.hidden is required (an integer)");
  CHECK(error_of(R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}
hardware: {name: h100}
parallel: {pp: 2, microbatches: 4, schedule: "1f1b,zb-h3"}
)") == "t.yaml:3:46: parallel.schedule: unknown schedule 'zb-h3', did you mean 'zb-h1'?");
}

TEST_CASE("memory keys: recompute op classes, caches, placements", "[cost]") {
  const ModelConfigData c = load(std::string(kOk) + "precision: {gemm: fp8, gemm_input_cache: fp8, ema: host}\n",
                                 {"parallel.recompute_ops=[norm, act_fn]", "parallel.recompute=selective"});
  CHECK(c.parallel.recompute_ops == (kRecomputeNorm | kRecomputeActFn | kRecomputeAttnCore));
  CHECK(c.precision.gemm_input_cache == CacheType::fp8);
  CHECK(c.precision.ema == StateLocation::host);
  CHECK(c.precision.optimizer_location == StateLocation::device);
  CHECK(error_of(kOk, {"parallel.recompute_ops=[norms]"}) ==
        "--set: parallel.recompute_ops[0]: unknown op class 'norms' (norm, mla_up_proj, act_fn, attn_core), did you mean 'norm'?");
  CHECK(error_of("model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}\nhardware: {name: h100}\n"
                 "parallel:\n  pp: 2\n  microbatches: 4\n  recompute_ops: [norm, act]\n")
            .starts_with("t.yaml:6:18: parallel.recompute_ops[1]: unknown op class 'act'"));
  CHECK(error_of(kOk, {"precision.gemm_input_cache=fp8"}) ==
        "--set: precision.gemm_input_cache: fp8 caches the inputs of FP8 GEMMs; it needs precision.gemm: fp8");
  CHECK(error_of(kOk, {"parallel.recompute_layers=2"}) ==
        "--set: parallel.recompute_layers counts fully recomputed layers per stage; it needs parallel.recompute: full");
  CHECK(error_of(kOk, {"precision.ema=gpu"}).find("precision.ema") != std::string::npos);
}

TEST_CASE("inconsistent parallelism: one line at the key that disagrees", "[cost]") {
  const std::string moe_model =
      "model: {layers: 4, hidden: 64, heads: 4, vocab: 1000, seq_len: 32, moe: {experts: 4, top_k: 2, expert_ffn_hidden: 32}}\n"
      "hardware: {name: h100}\n";
  CHECK(error_of(moe_model + "parallel:\n  pp: 2\n  microbatches: 4\n  dp: 3\n  ep: 3\n") ==
        "t.yaml:7:7: parallel.ep=3 must divide model.moe.experts=4");
  CHECK(error_of(moe_model + "parallel:\n  pp: 2\n  microbatches: 4\n  dp: 2\n  ep: 4\n") ==
        "t.yaml:7:7: parallel.ep=4 must divide parallel.dp=2 (expert parallelism is carved out of the data-parallel ranks)");
  // The context-parallel ranks hold the same experts (Megatron-LM folds cp into its expert grid's data-parallel
  // dimension; torchtitan's efsdp = dp_shard x cp x tp / (etp x ep)): ep 4 over dp 2 x cp 2 is 1 expert replica.
  const std::string moe8 =
      "model: {layers: 4, hidden: 64, heads: 4, vocab: 1000, seq_len: 32, moe: {experts: 8, top_k: 2, "
      "expert_ffn_hidden: 32}}\n"
      "hardware: {name: h100}\n";
  CHECK(error_of(moe8 + "parallel:\n  pp: 2\n  microbatches: 4\n  dp: 2\n  cp: 2\n  ep: 4\n").empty());
  CHECK(error_of(moe8 + "parallel:\n  pp: 2\n  microbatches: 4\n  dp: 1\n  cp: 4\n  ep: 8\n") ==
        "t.yaml:8:7: parallel.ep=8 must divide parallel.dp x cp = 1 x 4 (expert parallelism is carved out of the data- "
        "and context-parallel ranks)");
  CHECK(error_of(R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}
hardware:
  name: h100
  gpus: 16
parallel: {pp: 2, dp: 4, microbatches: 4}
)") == "t.yaml:4:9: parallel.pp*tp*dp = 2*1*4 = 8 GPUs, but hardware.gpus = 16");
  CHECK(error_of(R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}
hardware: {name: h100}
cluster:
  gpus: 12
parallel: {pp: 8, microbatches: 8}
)") == "t.yaml:4:9: cluster.gpus = 12 GPUs is not a multiple of parallel.pp*tp = 8*1 = 8");
  CHECK(error_of(R"(model: {layers: 5, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}
hardware: {name: h100}
parallel:
  microbatches: 4
  pp: 2
)") == "t.yaml:5:7: model.layers=5 cannot be split uniformly into pp*vpp = 2*1 = 2 stages; give parallel.layer_split as a "
       "list of 2 layer counts");
  // 4 layers, the embedding on the first stage and the head on the last: at most 6 stages, so pp 8
  // is refused for that, not sent to a layer_split no list of 8 could satisfy.
  CHECK(error_of(R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}
hardware: {name: h100}
parallel:
  microbatches: 8
  pp: 8
)") == "t.yaml:5:7: pp*vpp = 8*1 = 8 stages for model.layers=4: a stage needs a layer, the embedding or the head, "
       "so at most 6 stages; lower parallel.pp (or vpp)");
  CHECK(error_of(std::string(kOk), {"parallel.layer_split=[1, 2]"}) ==
        "--set: parallel.layer_split sums to 3 layers, but model.layers = 4");
  CHECK(error_of(R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}
hardware: {name: h100}
parallel:
  pp: 2
  microbatches: 4
  layer_split: [1, 1, 2]
)") == "t.yaml:6:16: parallel.layer_split has 3 entries, but pp*vpp = 2*1 = 2 stages need one each");
  CHECK(error_of(R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}
hardware: {name: h100}
parallel:
  pp: 2
  microbatches: 4
  tp: 3
)") == "t.yaml:6:7: parallel.tp=3 must divide model.heads=4");
  CHECK(error_of(std::string(kOk), {"parallel.ep=2"}) == "--set: parallel.ep=2 needs a model.moe section (a dense model has no experts)");
}

TEST_CASE("bad --set: unknown key with a suggestion, bad syntax, bad value", "[cost]") {
  CHECK(error_of(kOk, {"model.hiden=3"}) == "--set: unknown key 'model.hiden', did you mean 'model.hidden'?");
  CHECK(error_of(kOk, {"modle.hidden=3"}) == "--set: unknown key 'modle.hidden', did you mean 'model'?");
  CHECK(error_of(kOk, {"model.layers"}) == "--set: expected key.path=value, got 'model.layers'");
  CHECK(error_of(kOk, {"parallel.pp=two"}) == "--set: parallel.pp must be an integer, got 'two'");
  CHECK(error_of(kOk, {"model.layers.x=1"}) == "--set: 'model.layers' is a value, not a section, in 'model.layers.x'");
  CHECK(error_of(kOk, {"model.moe={experts: 4, top_k: 9, expert_ffn_hidden: 8}"}) ==
        "--set: model.moe.top_k must be in [1, 4], got 9");
  CHECK(error_of(kOk, {"times.F=1"}) == "--set: times.B is required (a number)");
  CHECK(error_of(kOk, {"model.hidden=[1"}).rfind("--set: cannot parse the value of 'model.hidden': ", 0) == 0);
  CHECK(error_of(kOk, {"plan.anything.at.all=1"}).empty());
}

TEST_CASE("invalid YAML and hostile input become one InputError, never a crash", "[cost]") {
  CHECK(error_of("model: [1, 2\n") == "t.yaml:2:1: invalid YAML: end of sequence flow not found");
  CHECK(error_of("").rfind("t.yaml: model is required", 0) == 0);
  CHECK(error_of("a: 1\n---\nb: 2\n").rfind("t.yaml:3:1: expected one YAML document", 0) == 0);
  CHECK(error_of("? [a, b]\n: 1\n") == "t.yaml:1:3: keys must be plain names, got a list as a key");
  const std::vector<std::string> hostile = {
      std::string(100000, '['),
      "a: " + std::string(5000, '{'),
      std::string("\0\xff\xfe garbage\x01", 12),
      "model: &m {layers: *m}\n",
      "model: {layers: *undefined}\n",
      "model:\n\tlayers: 4\n",
      "model: !!binary AAAA\n",
      "model: {layers: 1e309, hidden: -0}\n",
      "model: {layers: 4, hidden: .nan}\n",
      "<<: {model: 1}\n",
  };
  for (const auto& text : hostile) {
    INFO(text.substr(0, 40));
    CHECK_THROWS_AS(load(text), InputError);
  }
}

TEST_CASE("mutated configs: InputError or a valid config, nothing else", "[cost]") {
  const std::string base = R"(model: {layers: 8, hidden: 64, ffn_hidden: 256, heads: 4, kv_heads: 2, vocab: 1000, seq_len: 32,
        moe: {experts: 4, top_k: 2, shared_experts: 1, expert_ffn_hidden: 32}, dense_layers_first: 2}
hardware: {name: h800, gpus: 8, efficiency: {gemm: 0.5}}
parallel: {pp: 4, ep: 2, microbatches: 8, layer_split: [2, 2, 2, 2], recompute: full}
times: {F: 1, B: 2, W: 1}
)";
  const std::string alphabet = "{}[],:- \n\"'&*!|>#0123456789.eabxyz";
  std::mt19937 rng(12345);
  int loaded = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t pos = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[pos] = alphabet[rng() % alphabet.size()]; break;
        case 1: text.erase(pos, 1 + rng() % 8); break;
        default: text.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
      }
    }
    try {
      const ModelConfigData c = load(text);
      (void)cost_figures(c, c.parallel.pp);
      ++loaded;
    } catch (const InputError&) {
    }
  }
  CHECK(loaded > 0);
}

TEST_CASE("cluster.gpu: a misspelt type is named, another GPU is told how to describe it", "[cost]") {
  const std::string text = R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}
cluster: {gpu: X, gpus: 2}
parallel: {pp: 2, microbatches: 4}
)";
  auto with = [&](const std::string& gpu) {
    std::string t = text;
    t.replace(t.find("gpu: X"), 6, "gpu: " + gpu);
    return error_of(t);
  };
  const std::string types = "(a100-40gb, a100-80gb, h100, h800, h200)";
  // One character off, same letter and model number: the type it meant.
  CHECK(with("hh100") == "t.yaml:2:16: cluster.gpu 'hh100' is not a GPU type " + types + ", did you mean 'h100'?");
  CHECK(with("H200x") == "t.yaml:2:16: cluster.gpu 'H200x' is not a GPU type " + types + ", did you mean 'h200'?");
  // Another product, however close its name: no type offered, the hardware figures asked for.
  for (const std::string gpu : {"b200", "h20", "a800", "H100 PCIe"}) {
    INFO(gpu);
    const std::string e = with(gpu);
    CHECK(e.find("did you mean") == std::string::npos);
    CHECK(e.find("drop cluster.gpu and give its figures under hardware:") != std::string::npos);
  }
  // A name that stands for several types: which.
  CHECK(with("a100") == "t.yaml:2:16: cluster.gpu 'a100' is not a GPU type " + types +
                            "; 'a100' names a100-40gb or a100-80gb: say which");
  CHECK(with("H100 SXM5").empty());
  // As nvidia-smi and spec sheets write them: the form factor, the HBM generation and the one
  // memory size a type has are dropped; the A100's two sizes are told apart.
  for (const std::string gpu : {"NVIDIA H100 80GB HBM3", "H100-SXM5-80GB", "H200 SXM 141GB", "NVIDIA H200",
                                "NVIDIA A100-SXM4-80GB", "a100-sxm4-40gb", "H800 80GB"}) {
    INFO(gpu);
    CHECK(with(gpu).empty());
  }
  std::string a100 = text;
  a100.replace(a100.find("gpu: X"), 6, "gpu: NVIDIA A100-SXM4-40GB");
  CHECK(load_config_text(a100, "t.yaml", {}).data->gpu_type == "a100-40gb");
  // Other products stay refused: another form factor, another memory size.
  for (const std::string gpu : {"H100 NVL", "H100 PCIe 80GB", "H100 94GB", "NVIDIA"}) {
    INFO(gpu);
    CHECK(with(gpu).find("is not a GPU type") != std::string::npos);
  }
  // The same rule for hardware.name's presets.
  CHECK(error_of(std::string(kOk), {"hardware.name=b200"}).find("did you mean") == std::string::npos);
  CHECK(error_of(std::string(kOk), {"hardware.name=h10"}).find("did you mean 'h100'?") != std::string::npos);
}
