// torchtitan TOML job configs (src/cost/torchtitan.cc): [parallelism] and [training] to config
// keys, the model from [model]'s config.json; configs/torchtitan/llama3-8b-pp.yaml simulates.
#include "cost/torchtitan.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "catch.h"
#include "cost/config.h"
#include "cost/torchtitan_model.h"

using namespace ppsim;

namespace {
// Skips (returns false) when ppsim was built without toml++.
bool have_toml() {
  try {
    (void)torchtitan_from_text("", "t.toml", "", 0);
  } catch (const InputError& e) {
    if (e.message().find("without toml++") != std::string::npos) return false;
  }
  return true;
}
std::string error_of(const std::string& text) {
  try {
    (void)torchtitan_from_text(text, "t.toml", "", 8);
  } catch (const InputError& e) {
    return e.one_line();
  }
  return "no error";
}
}  // namespace

TEST_CASE("torchtitan: [parallelism] and [training] keys", "[cost][torchtitan]") {
  if (!have_toml()) PPSIM_SKIP("built without toml++ (libtomlplusplus-dev)");
  const TorchtitanKeys k = torchtitan_from_text(
      "[training]\nlocal_batch_size = 16\nseq_len = 4096\n"
      "[parallelism]\npipeline_parallel_degree = 2\ntensor_parallel_degree = 2\ndata_parallel_shard_degree = -1\n"
      "pipeline_parallel_schedule = \"ZBVZeroBubble\"\npipeline_parallel_microbatch_size = 2\n"
      "[activation_checkpoint]\nmode = \"full\"\n",
      "t.toml", "", 16);
  CHECK(k.parallel["pp"].as<int>() == 2);
  CHECK(k.parallel["tp"].as<int>() == 2);
  CHECK(k.parallel["dp"].as<int>() == 16 / (2 * 2));  // shard -1: the GPUs left
  CHECK(k.parallel["microbatches"].as<int>() == 16 / 2);
  CHECK(k.parallel["schedule"].as<std::string>() == "zbv");
  CHECK(k.parallel["recompute"].as<std::string>() == "full");
  CHECK(k.model["seq_len"].as<int>() == 4096);
  CHECK(k.model["micro_batch_size"].as<int>() == 2);
  CHECK(torchtitan_schedule("Interleaved1F1B") == "interleaved-1f1b");
  CHECK(torchtitan_schedule("LoopedBFS").empty());
}

TEST_CASE("torchtitan: located errors", "[cost][torchtitan]") {
  if (!have_toml()) PPSIM_SKIP("built without toml++ (libtomlplusplus-dev)");
  CHECK(error_of("[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_schedule = \"LoopedBFS\"\n") ==
        "t.toml:3:30: [parallelism] pipeline_parallel_schedule 'LoopedBFS' has no ppsim family (GPipe, 1F1B, "
        "Interleaved1F1B, ZBVZeroBubble, DualPipeV); its CSV can be simulated with --schedule-file");
  CHECK(error_of("[parallelism]\ncontext_parallel_degree = 0\n") == "t.toml:2:27: [parallelism] degrees must be >= 1");
  CHECK(error_of("[parallelism]\npipeline_parallel_first_stage_less_layers = -1\n") ==
        "t.toml:2:45: [parallelism] pipeline_parallel_first/last_stage_less_layers must be >= 0");
  CHECK(error_of("[training]\nlocal_batch_size = 7\n[parallelism]\npipeline_parallel_microbatch_size = 2\n") ==
        "t.toml:2:20: [training] local_batch_size 7 is not a multiple of [parallelism] "
        "pipeline_parallel_microbatch_size 2");
  CHECK(error_of("[parallelism\n").rfind("t.toml:1:", 0) == 0);
}

TEST_CASE("torchtitan: the 2024 layout, a world other than the degrees', a global batch torchtitan refuses",
          "[cost][torchtitan]") {
  if (!have_toml()) PPSIM_SKIP("built without toml++ (libtomlplusplus-dev)");
  // 2024: tensor_parallel_degree under [training], the pipeline under [experimental]; read as today's
  // layout they would be dropped (TP 1, PP 1), so refused at the first such key.
  CHECK(error_of("[training]\nbatch_size = 8\ntensor_parallel_degree = 2\n[experimental]\n"
                 "pipeline_parallel_degree = 2\n") ==
        "t.toml:3:26: [training] tensor_parallel_degree: torchtitan's 2024 layout, which ppsim does not read; "
        "today's torchtitan (and ppsim) take the degrees and the pipeline under [parallelism] "
        "(data_parallel_shard_degree, tensor_parallel_degree, pipeline_parallel_degree, pipeline_parallel_schedule, "
        "pipeline_parallel_microbatch_size)");
  CHECK(PPSIM_CONTAINS("t.toml:2:28: [experimental] pipeline_parallel_degree")
            .match(error_of("[experimental]\npipeline_parallel_degree = 2\n")));
  // 8 GPUs (error_of's world): replicate 2 x shard 1 is 2, not 8; shard -1 would take 4.
  CHECK(error_of("[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 1\n") ==
        "t.toml:3:30: [parallelism] pipeline x tensor x context x data_parallel_replicate x data_parallel_shard = 1 "
        "x 2 x 1 = 2 GPUs, but the config has 8 (torchtitan requires the world size; data_parallel_shard_degree -1 "
        "takes the rest)");
  CHECK(error_of("[parallelism]\ndata_parallel_replicate_degree = 2\n") == "no error");  // shard -1: 4
  // dp 8 (shard -1 on 8 GPUs), local 4: global must be a multiple of 32.
  CHECK(error_of("[training]\nlocal_batch_size = 4\nglobal_batch_size = 16\n") ==
        "t.toml:3:21: [training] global_batch_size 16 is not a multiple of local_batch_size 4 x data-parallel "
        "degree 8 = 32 (torchtitan asserts it)");
  CHECK(error_of("[training]\nlocal_batch_size = 4\nglobal_batch_size = 64\n") == "no error");
  CHECK(error_of("[training]\nlocal_batch_size = 4\nglobal_batch_size = -1\n") == "no error");
}

TEST_CASE("torchtitan: configs/torchtitan/llama3-8b-pp.yaml (Llama 3 8B, PP4 interleaved)", "[cost][torchtitan]") {
  if (!have_toml()) PPSIM_SKIP("built without toml++ (libtomlplusplus-dev)");
  const std::string dir = std::string(PPSIM_SOURCE_DIR) + "/configs/torchtitan";
  const ModelConfigData c =
      parse_config("torchtitan: llama3-8b-pp.toml\nhardware: {name: h100, gpus: 8}\n", "t.yaml", dir, {});
  CHECK(c.model.layers == 32);  // from hf-llama-3-8b/config.json
  CHECK(c.model.seq_len == 8192);
  CHECK(c.parallel.pp == 4);
  CHECK(c.parallel.vpp == 32 / 4 / 4);  // layers / layers_per_stage / pp
  CHECK(c.parallel.microbatches == 8);
  CHECK(c.parallel.dp == 8 / 4);
  CHECK(c.parallel.schedule == "interleaved-1f1b");
  CHECK(c.parallel.recompute == Recompute::none);
}

TEST_CASE("torchtitan: context parallelism and the split with the first/last stage less layers", "[cost][torchtitan]") {
  // torchtitan's generate_llm_fqn_per_model_part: 32 layers + 1 + 1 = 34 effective over 8 stages:
  // 4 each, the 2 left over to stages 0 and 1; stage 0 gives 1 to the embedding, stage 7 1 to
  // the output: 4 5 4 4 4 4 4 3.
  CHECK(torchtitan_layer_split(32, 8, 1, 1) == std::vector<int>{4, 5, 4, 4, 4, 4, 4, 3});
  CHECK(torchtitan_layer_split(32, 8, 0, 0) == std::vector<int>{4, 4, 4, 4, 4, 4, 4, 4});
  CHECK(torchtitan_layer_split(30, 8, 2, 2) == std::vector<int>{3, 5, 4, 4, 4, 4, 4, 2});  // 34: 4 each + 2 extra; 5-2, 4-2
  CHECK(torchtitan_layer_split(32, 1, 1, 1) == std::vector<int>{32});
  CHECK(torchtitan_layer_split(4, 8, 1, 1).empty());  // 6 effective < 8 stages
  CHECK(torchtitan_layer_split(10, 4, 4, 1).empty());  // the embedding's weight 4 over a share of 3
  if (!have_toml()) PPSIM_SKIP("built without toml++ (libtomlplusplus-dev)");
  const std::string dir = std::string(PPSIM_SOURCE_DIR) + "/configs/torchtitan";
  // The example TOML sets 0, 0: an even split, left to ppsim's default.
  const ModelConfigData even = parse_config("torchtitan: llama3-8b-pp.toml\nhardware: {name: h100, gpus: 8}\n", "t.yaml", dir, {});
  CHECK(even.parallel.layer_split.empty());
  // torchtitan's defaults (1, 1), 1F1B on 8 ranks (Llama 3 8B's 32 layers): the split above.
  const std::filesystem::path tmp = std::filesystem::temp_directory_path() / ("ppsim_titan_split_test_" + std::to_string(::getpid()) + ".toml");
  {
    std::ofstream f(tmp);
    f << "[model]\nname = \"llama3\"\nflavor = \"8B\"\nhf_assets_path = \"" << dir
      << "/hf-llama-3-8b\"\n[training]\nlocal_batch_size = 8\n"
      << "[parallelism]\npipeline_parallel_degree = 8\npipeline_parallel_schedule = \"1F1B\"\n";
  }
  const ModelConfigData c = parse_config("torchtitan: " + tmp.string() + "\nhardware: {name: h100, gpus: 8}\n", "t.yaml", dir, {});
  std::filesystem::remove(tmp);
  CHECK(c.parallel.pp == 8);
  CHECK(c.parallel.layer_split == std::vector<int>{4, 5, 4, 4, 4, 4, 4, 3});
  // No [activation_checkpoint]: torchtitan's default, selective every 2nd block a rank wraps: 2 of
  // the stages of 4 and 5 layers, 1 of the last's 3; ppsim recomputes the most, 2, in every stage.
  CHECK(c.parallel.recompute == Recompute::full);
  CHECK(c.parallel.recompute_layers == 2);
  // context_parallel_degree 2 is parallel.cp, with PyTorch's ring backward (cp_runtime: torch).
  const TorchtitanKeys k = torchtitan_from_text("[parallelism]\ncontext_parallel_degree = 2\npipeline_parallel_degree = 2\n",
                                                "t.toml", "", 8);
  CHECK(k.parallel["cp"].as<int>() == 2);
  CHECK(k.parallel["cp_runtime"].as<std::string>() == "torch");
  CHECK(k.parallel["dp"].as<int>() == 8 / (2 * 2));
  CHECK(k.first_less == 1);
  CHECK(k.last_less == 1);
}

TEST_CASE("torchtitan: FSDP and HSDP as ZeRO-3, JobConfig's meanings, a missing asset named", "[cost][torchtitan]") {
  if (!have_toml()) PPSIM_SKIP("built without toml++ (libtomlplusplus-dev)");
  // data_parallel_shard_degree -1 on 8 GPUs with tp 2: FSDP over 8 / 2 = 4 ranks: ZeRO-3 in
  // FSDP2's layout, the DP traffic counted.
  const TorchtitanKeys f = torchtitan_from_text("[parallelism]\ntensor_parallel_degree = 2\n", "t.toml", "", 8);
  CHECK(f.parallel["dp"].as<int>() == 4);
  CHECK(f.parallel["zero"].as<int>() == 3);
  CHECK(f.parallel["fsdp"].as<bool>());
  CHECK(!f.parallel["zero_shard"]);
  CHECK(f.costs["dp_comm"].as<bool>());
  // HSDP: replicate 2 x shard 4 = dp 8, ZeRO over the 4; shard 1 with replicate 8: plain DDP.
  const TorchtitanKeys h = torchtitan_from_text(
      "[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 4\n", "t.toml", "", 8);
  CHECK(h.parallel["dp"].as<int>() == 8);
  CHECK(h.parallel["zero_shard"].as<int>() == 4);
  const TorchtitanKeys d = torchtitan_from_text(
      "[parallelism]\ndata_parallel_replicate_degree = 8\ndata_parallel_shard_degree = 1\n", "t.toml", "", 8);
  CHECK(d.parallel["dp"].as<int>() == 8);
  CHECK(!d.parallel["zero"]);
  // pp 1: torchtitan builds no pipeline: an interleaved schedule is not two chunks, and the
  // local batch 8 is one micro-batch of 8.
  const TorchtitanKeys one = torchtitan_from_text(
      "[training]\nlocal_batch_size = 8\n[parallelism]\npipeline_parallel_schedule = \"Interleaved1F1B\"\n", "t.toml",
      "", 8);
  CHECK(one.parallel["schedule"].as<std::string>() == "1f1b");
  CHECK(!one.parallel["vpp"]);
  CHECK(one.stages_per_rank == 1);
  CHECK(one.parallel["microbatches"].as<int>() == 1);
  CHECK(one.model["micro_batch_size"].as<int>() == 8);
  // Expert tensor parallelism: JobConfig's default 1 with tp 2 and ep 2 splits no expert by tp
  // (parallel.etp 1); another value than 1 or tp is refused at its key.
  CHECK(torchtitan_from_text("[parallelism]\ntensor_parallel_degree = 2\nexpert_parallel_degree = 2\n", "t.toml", "", 8)
            .parallel["etp"]
            .as<int>() == 1);
  CHECK(error_of("[parallelism]\ntensor_parallel_degree = 4\nexpert_parallel_degree = 2\n"
                 "expert_tensor_parallel_degree = 2\n") ==
        "t.toml:4:33: [parallelism] expert_tensor_parallel_degree 2 with tensor_parallel_degree 4: torchtitan takes 1 "
        "(whole experts) or tp");
  CHECK(torchtitan_from_text("[parallelism]\ntensor_parallel_degree = 2\nexpert_parallel_degree = 2\n"
                             "expert_tensor_parallel_degree = 2\n",
                             "t.toml", "", 8)
            .parallel["ep"]
            .as<int>() == 2);
  // A missing asset: the path looked at, in the error at the torchtitan key.
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("ppsim_titan_asset_" + std::to_string(::getpid()) + ".toml");
  std::ofstream(tmp) << "[model]\nhf_assets_path = \"./nowhere/Model-X\"\n";
  try {
    (void)parse_config("torchtitan: " + tmp.string() + "\nhardware: {name: h100, gpus: 8}\n", "t.yaml", "", {});
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK_THAT(e.one_line(), PPSIM_CONTAINS("[model] hf_assets_path = \"./nowhere/Model-X\": no config.json at " +
                                            (tmp.parent_path() / "nowhere/Model-X/config.json").string()));
  }
  std::filesystem::remove(tmp);
}

TEST_CASE("torchtitan: [activation_checkpoint] as torchtitan applies it, op-level SAC stated by the config",
          "[cost][torchtitan]") {
  if (!have_toml()) PPSIM_SKIP("built without toml++ (libtomlplusplus-dev)");
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("ppsim_titan_ac_" + std::to_string(::getpid()) + ".toml");
  // ZB-V on 2 ranks, 8 layers, no first/last stage less layers: 4 stages of 2; rank 0 builds
  // stages 0 and 3 (blocks 1-2, 3-4 of its count), rank 1 stages 1 and 2.
  auto parse = [&](const std::string& ac, const std::string& parallel = "") {
    std::ofstream(tmp)
        << "[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_schedule = \"ZBVZeroBubble\"\n"
        << "pipeline_parallel_first_stage_less_layers = 0\npipeline_parallel_last_stage_less_layers = 0\n"
        << "[activation_checkpoint]\n"
        << ac;
    return parse_config("torchtitan: " + tmp.string() +
                            "\nmodel: {layers: 8, hidden: 64, heads: 4, ffn_hidden: 128, vocab: 100, seq_len: 64}\n"
                            "hardware: {name: h100, gpus: 2}\n" +
                            (parallel.empty() ? "" : "parallel: {" + parallel + "}\n"),
                        "t.yaml", "", {});
  };
  // Every 3rd of each rank's 4 blocks: its 3rd, the first of its second stage: 1 per stage at most.
  const ModelConfigData third = parse("mode = \"selective\"\nselective_ac_option = \"3\"\n");
  CHECK(third.parallel.recompute == Recompute::full);
  CHECK(third.parallel.recompute_layers == 1);
  // Every 5th of 4 blocks: none; every 1st (and 0): every block.
  CHECK(parse("mode = \"selective\"\nselective_ac_option = \"5\"\n").parallel.recompute == Recompute::none);
  const ModelConfigData all = parse("mode = \"selective\"\nselective_ac_option = \"1\"\n");
  CHECK(all.parallel.recompute == Recompute::full);
  CHECK(all.parallel.recompute_layers == -1);  // -1: every layer
  // Op-level SAC: what it saves depends on torchtitan's version and model; the config says it.
  try {
    (void)parse("mode = \"selective\"\nselective_ac_option = \"op\"\n");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK_THAT(e.one_line(),
               PPSIM_CONTAINS(".toml:8:23: [activation_checkpoint] selective_ac_option \"op\": torchtitan's "
                              "op-level SAC"));
    CHECK_THAT(e.one_line(), PPSIM_CONTAINS("write parallel.recompute"));
  }
  CHECK(parse("mode = \"selective\"\nselective_ac_option = \"op\"\n", "recompute: selective").parallel.recompute ==
        Recompute::selective);
  try {
    (void)parse("mode = \"memory_budget\"\n");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK_THAT(e.one_line(), PPSIM_CONTAINS(".toml:7:8: [activation_checkpoint] mode memory_budget"));
  }
  try {
    (void)parse("mode = \"selective\"\nselective_ac_option = \"every\"\n");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK_THAT(e.one_line(),
               PPSIM_CONTAINS(".toml:8:23: [activation_checkpoint] selective_ac_option 'every': \"op\" or a "
                              "positive integer N (every Nth block recomputed)"));
  }
  std::filesystem::remove(tmp);
}

namespace {
// A TOML naming `model_section` under [model], with the repository's Llama 3 8B config.json as its
// hf_assets_path, loaded through a YAML with `yaml_extra`; the config's error line, or "".
std::string titan_error(const std::string& model_section, const std::string& yaml_extra = "",
                        const std::string& after = "") {
  const std::string dir = std::string(PPSIM_SOURCE_DIR) + "/configs/torchtitan";
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("ppsim_titan_model_test_" + std::to_string(::getpid()) + ".toml");
  std::ofstream(tmp) << "[model]\n"
                     << model_section << "hf_assets_path = \"" << dir
                     << "/hf-llama-3-8b\"\n[training]\nlocal_batch_size = 8\n"
                     << "[parallelism]\npipeline_parallel_degree = 2\n"
                     << after;
  std::string out;
  try {
    (void)parse_config("torchtitan: " + tmp.string() + "\nhardware: {name: h100, gpus: 8}\n" + yaml_extra, "t.yaml",
                       dir, {});
  } catch (const InputError& e) {
    out = e.one_line();
    const std::string file = tmp.string() + ":";
    if (out.rfind(file, 0) == 0) out = "TOML:" + out.substr(file.size());
  }
  std::filesystem::remove(tmp);
  return out;
}
}  // namespace

TEST_CASE("torchtitan: the model is the [model] flavor torchtitan builds, checked against the config.json",
          "[cost][torchtitan]") {
  if (!have_toml()) PPSIM_SKIP("built without toml++ (libtomlplusplus-dev)");
  // torchtitan 238fa99 builds train_spec.model_args[flavor]: llama3 "8B" is 32 layers of 4096 with
  // 32 heads, as the repository's Llama-3-8B config.json.
  CHECK(titan_error("name = \"llama3\"\nflavor = \"8B\"\n").empty());
  CHECK(torchtitan_flavor("deepseek_v3", "16B")->layers == 27);
  CHECK(torchtitan_flavor("deepseek_v3", "16B")->mla == 1);
  CHECK(torchtitan_flavor("llama3", "8b") == nullptr);  // flavors are case-sensitive, as torchtitan's dict
  // "70B" is 80 layers of 8192: the 8B config.json is not it, refused at the flavor.
  CHECK(titan_error("name = \"llama3\"\nflavor = \"70B\"\n") ==
        "TOML:3:10: [model] flavor \"70B\" of llama3 is 80 layers x 8192, 64 heads, no MLA, dense; hf_assets_path's "
        "config.json is 32 layers x 4096, 32 heads, no MLA, dense: torchtitan builds the flavor from its own table; "
        "give the model in the YAML (model.hf_config of the flavor's config.json, or its keys)");
  // No flavor: JobConfig's default, debugmodel (6 layers of 256), said so, at the [model] table.
  CHECK_THAT(titan_error(""),
             PPSIM_CONTAINS("flavor \"debugmodel\" (JobConfig's default: the TOML names none) of llama3"));
  // A flavor ppsim's table lacks cannot be checked: refused, naming the way out.
  CHECK_THAT(titan_error("name = \"llama3\"\nflavor = \"9B\"\n"),
             PPSIM_CONTAINS("TOML:3:10: [model] name = \"llama3\", flavor = \"9B\" is not in ppsim's table"));
  // The YAML's own config.json is the model: no check.
  CHECK(
      titan_error("name = \"llama3\"\nflavor = \"70B\"\n", "model: {hf_config: hf-llama-3-8b/config.json}\n").empty());
}

TEST_CASE("torchtitan: [model] converters: float8 tensorwise priced, what ppsim has no figure for refused",
          "[cost][torchtitan]") {
  if (!have_toml()) PPSIM_SKIP("built without toml++ (libtomlplusplus-dev)");
  const std::string llama = "name = \"llama3\"\nflavor = \"8B\"\n";
  // torchao's float8 on the linear layers, no recipe_name: tensorwise, one scale per tensor.
  const TorchtitanKeys k = torchtitan_from_text("[model]\nconverters = [\"float8\"]\n", "t.toml", "", 8);
  CHECK(k.precision["gemm"].as<std::string>() == "fp8");
  CHECK(k.precision["fp8_recipe"].as<std::string>() == "tensor");
  CHECK(titan_error(llama + "converters = [\"quantize.linear.float8\"]\n").empty());
  // rowwise scaling has no figure: refused at its recipe_name, unless the YAML states the precision.
  const std::string rowwise = "\n[quantize.linear.float8]\nrecipe_name = \"rowwise\"\n";
  CHECK(titan_error(llama + "converters = [\"float8\"]\n", "", rowwise) ==
        "TOML:12:15: [model] converters: float8 with recipe_name \"rowwise\" (ppsim prices per-tensor scaling, "
        "tensorwise) has no figure in ppsim; write precision.gemm (bf16 or fp8, with precision.fp8_recipe) in the YAML "
        "for the precision to price");
  CHECK(titan_error(llama + "converters = [\"float8\"]\n", "precision: {gemm: fp8, fp8_recipe: tensor}\n", rowwise)
            .empty());
  // MX (Blackwell's block scaling) and unknown converters: refused at the list.
  CHECK_THAT(titan_error(llama + "converters = [\"mx\"]\n"),
             PPSIM_CONTAINS("TOML:4:14: [model] converters: \"mx\" has no figure"));
  CHECK_THAT(titan_error(llama + "converters = [\"float8\", \"quantize.grouped_mm.float8\"]\n"),
             PPSIM_CONTAINS("\"quantize.grouped_mm.float8\" has no figure"));
  CHECK(error_of("[model]\nconverters = \"float8\"\n") == "t.toml:2:14: [model] converters must be a list of strings");
}
