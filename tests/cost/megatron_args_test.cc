// Megatron-LM arguments (src/cost/megatron_args.cc): flags to model/parallel/precision keys,
// Megatron's defaults, the pipeline layout grammar, ignored flags listed, located errors; the
// DeepSeek-V3 and Llama-3-70B argument lists give the same results as the YAML configs.
#include "cost/megatron_args.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "../robustness/run_ppsim.h"
#include "catch.h"
#include "cost/config.h"
#include "cost/memory.h"

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
std::string error_of_file(const std::string& text, const std::string& name) {
  try {
    (void)megatron_args_from_text(text, name);
  } catch (const InputError& e) {
    return e.one_line();
  }
  return "no error";
}
}  // namespace

TEST_CASE("megatron: flags to model keys, with Megatron's defaults", "[cost][megatron]") {
  const MegatronArgs a = megatron_args_from_text(
      "MODEL=(\n"
      "  --num-layers 4 --hidden-size 64 --num-attention-heads 4 --ffn-hidden-size 256  # a comment\n"
      "  --seq-length 128 --vocab-size 1000\n"
      ")\n"
      "torchrun --nproc-per-node 8 pretrain_gpt.py \"${MODEL[@]}\" \\\n"
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
  // The launcher's world size: torchrun --nproc-per-node 8, one node.
  CHECK(a.world_size == 8);
  // Absent flags: tp = pp = 1; --ffn-hidden-size 4h (GELU) or int(8h/3 / 64) x 64 (SwiGLU):
  // h = 4096: 16384 and int(10922.67 / 64) x 64 = 170 x 64 = 10880.
  const MegatronArgs d = megatron_args_from_text("--num-layers 2 --hidden-size 4096 --num-attention-heads 32", "a.sh");
  CHECK(d.parallel["tp"].as<int>() == 1);
  CHECK(d.parallel["pp"].as<int>() == 1);
  CHECK(d.model["ffn_hidden"].as<long long>() == 4 * 4096);
  const MegatronArgs g = megatron_args_from_text("--hidden-size 4096 --swiglu --num-experts 8", "a.sh");
  CHECK(g.model["ffn_hidden"].as<long long>() == 10880);
  CHECK(g.model["moe"]["expert_ffn_hidden"].as<long long>() == 10880);  // --moe-ffn-hidden-size's default
  CHECK(g.model["moe"]["top_k"].as<int>() == 2);
}

TEST_CASE("megatron: 2021's flags, as the SC'21 scripts pass them", "[cost][megatron]") {
  // Megatron-LM's examples/sc21 (CONFIG.sh): --checkpoint-activations and --fp16 without
  // --accumulate-allreduce-grads-in-fp32: every layer recomputed, fp16 gradients reduced in fp16.
  const MegatronArgs a = megatron_args_from_text(
      "--num-layers 40 --hidden-size 6144 --num-attention-heads 48 --micro-batch-size 8 --global-batch-size 1024 "
      "--checkpoint-activations --fp16 --loss-scale 8192",
      "a.sh");
  CHECK(a.parallel["recompute"].as<std::string>() == "full");
  CHECK(a.precision["params"].as<std::string>() == "fp16");
  CHECK(a.precision["grads"].as<std::string>() == "fp16");
  const MegatronArgs b = megatron_args_from_text(
      "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --fp16 --accumulate-allreduce-grads-in-fp32", "a.sh");
  CHECK(b.precision["grads"].as<std::string>() == "fp32");
  CHECK_FALSE(b.parallel["recompute"]);
  // --bf16 keeps the default (fp32 main grads); --recompute-activations is selective.
  const MegatronArgs c = megatron_args_from_text(
      "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --bf16 --recompute-activations", "a.sh");
  CHECK_FALSE(c.precision["grads"]);
  CHECK(c.parallel["recompute"].as<std::string>() == "selective");
  // Aug 2021 to mid-2022 (the SC'21 scripts since 6985e58): uniform re-runs every layer, block
  // the first --activations-checkpoint-num-layers of each stage.
  const std::string dims = "--num-layers 8 --hidden-size 64 --num-attention-heads 4 ";
  const MegatronArgs u = megatron_args_from_text(dims + "--activations-checkpoint-method uniform", "a.sh");
  CHECK(u.parallel["recompute"].as<std::string>() == "full");
  CHECK_FALSE(u.parallel["recompute_layers"]);
  const MegatronArgs k = megatron_args_from_text(
      dims + "--activations-checkpoint-method block --activations-checkpoint-num-layers 3", "a.sh");
  CHECK(k.parallel["recompute_layers"].as<int>() == 3);
  // --DDP-impl local: the gradients reduced after the backward (dp_overlap 0); torch: PyTorch DDP's
  // buckets under it (1); today's --overlap-grad-reduce (1); unstated: not written.
  CHECK(megatron_args_from_text(dims + "--DDP-impl local", "a.sh").costs["dp_overlap"].as<double>() == 0);
  CHECK(megatron_args_from_text(dims + "--DDP-impl torch", "a.sh").costs["dp_overlap"].as<double>() == 1);
  CHECK(megatron_args_from_text(dims + "--overlap-grad-reduce", "a.sh").costs["dp_overlap"].as<double>() == 1);
  CHECK_FALSE(megatron_args_from_text(dims, "a.sh").costs["dp_overlap"]);
  // No --sequence-parallel (2021 had none): false; Megatron-LM since 2022 passes it: true.
  CHECK_FALSE(a.parallel["sequence_parallel"].as<bool>());
  CHECK(megatron_args_from_text(dims + "--sequence-parallel", "a.sh").parallel["sequence_parallel"].as<bool>());
}

TEST_CASE("megatron: the attention core the script's Megatron ran", "[cost][megatron]") {
  const std::string dims = "--num-layers 8 --hidden-size 64 --num-attention-heads 4 ";
  auto flash = [&](const std::string& flags) {
    const MegatronArgs x = megatron_args_from_text(dims + flags, "a.sh");
    return x.model["flash_attention"] ? std::optional<bool>(x.model["flash_attention"].as<bool>()) : std::nullopt;
  };
  // Megatron-Core's --attention-backend: unfused and local materialize the scores, the rest do not.
  CHECK(flash("--attention-backend unfused") == false);
  CHECK(flash("--attention-backend local") == false);
  CHECK(flash("--attention-backend auto") == true);
  CHECK(flash("--attention-backend flash") == true);
  CHECK(flash("--attention-backend fused") == true);
  // 2021-2022 scripts had no FlashAttention in Megatron; --use-flash-attn (and Megatron-DeepSpeed's
  // variants) turn it on even beside the old recompute flags; --transformer-impl local: unfused.
  CHECK(flash("--checkpoint-activations") == false);
  CHECK(flash("--activations-checkpoint-method uniform") == false);
  CHECK(flash("--checkpoint-activations --use-flash-attn-v2") == true);
  CHECK(flash("--transformer-impl local") == false);
  CHECK(flash("--transformer-impl transformer_engine") == std::nullopt);  // not decided: the YAML's
  CHECK(flash("") == std::nullopt);
  // A value Megatron would refuse: at the flag's value, with the choices.
  try {
    megatron_args_from_text(dims + "--attention-backend sdpa", "a.sh");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.loc().line == 1);
    CHECK_THAT(e.message(), PPSIM_CONTAINS("flash, fused, unfused, local or auto"));
  }
}

TEST_CASE("megatron: Megatron-DeepSpeed's flags, as BLOOM's scripts pass them", "[cost][megatron]") {
  // --pp-partition-method 'type:transformer|embedding': DeepSpeed counts the first stage's
  // embedding and the last's tied one as layers: (10 + 2) / pp 3 = 4 a stage, so 3, 4, 3.
  const MegatronArgs a = megatron_args_from_text(
      "--num-layers 10 --hidden-size 64 --num-attention-heads 4 --pipeline-model-parallel-size 3 "
      "--pp-partition-method 'type:transformer|embedding' --pad-vocab-size-to 250880 --bf16 --deepspeed "
      "--zero-stage 0",
      "a.sh");
  std::vector<int> split;
  for (const auto& n : a.parallel["layer_split"]) split.push_back(n.as<int>());
  CHECK(split == std::vector<int>{3, 4, 3});
  CHECK(a.model["vocab"].as<int>() == 250880);
  CHECK(a.parallel["zero"].as<int>() == 1);  // bf16 at stage 0: DeepSpeed's BF16_Optimizer shards as stage 1
  const MegatronArgs b = megatron_args_from_text("--num-layers 4 --fp16 --deepspeed --zero-stage 2", "a.sh");
  CHECK(b.parallel["zero"].as<int>() == 2);
  // DeepSpeed ZeRO 2/3 reduce every micro-step (engine.py allreduce_gradients): dp_sync microbatch;
  // stage 0/1 reduce at the accumulation boundary: not written (the default, once a step).
  CHECK(b.parallel["dp_sync"].as<std::string>() == "microbatch");
  CHECK_FALSE(a.parallel["dp_sync"]);
  // Megatron FSDP reduces every backward with optim_grads(_params) (its no_sync does not stop it);
  // with optim, and Megatron's distributed optimizer, once a step (not written).
  CHECK(megatron_args_from_text("--num-layers 4 --use-megatron-fsdp", "a.sh").parallel["dp_sync"].as<std::string>() ==
        "microbatch");
  const std::string optim = "--num-layers 4 --use-megatron-fsdp --data-parallel-sharding-strategy optim";
  CHECK_FALSE(megatron_args_from_text(optim, "a.sh").parallel["dp_sync"]);
  // torch FSDP2 under Megatron: its no_sync does nothing (data_parallel_base.py), whatever the strategy.
  const std::string torch2 = "--num-layers 4 --use-torch-fsdp2 --data-parallel-sharding-strategy optim";
  CHECK(megatron_args_from_text(torch2, "a.sh").parallel["dp_sync"].as<std::string>() == "microbatch");
  CHECK_FALSE(megatron_args_from_text("--num-layers 4 --use-distributed-optimizer", "a.sh").parallel["dp_sync"]);
  // --num-experts 1 (EP_SIZE=1 in its dense scripts): the dense MLP, no MoE.
  CHECK_FALSE(megatron_args_from_text("--num-layers 4 --hidden-size 64 --num-experts 1", "a.sh").model["moe"]);
}

TEST_CASE("megatron: argparse's repeated flags, --flag=value, quoting and undecided branches", "[cost][megatron]") {
  // The last of a repeated flag wins; --flag=value; a quoted "--fp8-format hybrid" passed through an
  // unquoted $OPTS is two words (FP8 on).
  const MegatronArgs a = megatron_args_from_text(
      "OPTS=\"--fp8-format hybrid\"\n"
      "python pretrain_gpt.py --num-layers 4 --tensor-model-parallel-size=2 --num-layers 6 $OPTS --bf16\n",
      "a.sh");
  CHECK(a.model["layers"].as<int>() == 6);
  CHECK(a.parallel["tp"].as<int>() == 2);
  CHECK(a.precision["gemm"].as<std::string>() == "fp8");
  CHECK(a.precision["params"].as<std::string>() == "bf16");
  // A branch the script decides: one --data-cache-path, no "given twice"; a branch on the
  // environment that decides a flag ppsim uses is refused, naming it and the line.
  const MegatronArgs b = megatron_args_from_text(
      "USE_CACHE=1\nif [ \"$USE_CACHE\" -eq 1 ]; then C=\"--data-cache-path /c\"; else C=\"--data-cache-path /d\"; fi\n"
      "python pretrain_gpt.py --num-layers 4 $C\n",
      "a.sh");
  CHECK(b.ignored == std::vector<std::string>{"--data-cache-path"});
  CHECK(error_of("if [ -z \"$BIG\" ]; then L=4; else L=8; fi\npython pretrain_gpt.py --num-layers $L") ==
        "a.sh:2:37: --num-layers $L: $L is set under the condition '[ -z \"$BIG\" ]' at line 1, which the script's "
        "own values do not decide; set L in megatron_args env: (or --megatron-env L=...)");
  CHECK(error_of("if [ -f /x ]; then\n  python pretrain_gpt.py --num-layers 4\nfi") ==
        "a.sh:2:3: the training command (pretrain_gpt.py) runs only under the condition '[ -f /x ]' at line 1, which "
        "the script's own values do not decide");
}

TEST_CASE("megatron: --moe-layer-freq as Megatron evaluates it", "[cost][megatron]") {
  auto dense_first = [](const std::string& freq) {
    const MegatronArgs a = megatron_args_from_text(
        "--num-layers 16 --hidden-size 64 --num-experts 8 --moe-layer-freq '" + freq + "'", "a.sh");
    return a.model["dense_layers_first"] ? a.model["dense_layers_first"].as<int>() : 0;
  };
  CHECK(dense_first("([0]+[1]*15)") == 1);
  CHECK(dense_first("[0,0,0]+[1]*13") == 3);
  CHECK(dense_first("([1]*16)") == 0);
  CHECK(dense_first("1") == 0);  // every layer: i % 1 == 0
  // 2: experts on layers 0, 2, 4, ... (i % 2 == 0): a dense layer after an MoE one, written as
  // model.moe_layers (ModelSpec::layer_is_moe takes any 0/1 pattern).
  auto mask = [](const std::string& freq) {
    const MegatronArgs a = megatron_args_from_text(
        "--num-layers 4 --hidden-size 64 --num-experts 8 --moe-layer-freq '" + freq + "'", "a.sh");
    std::vector<int> out;
    for (const auto& n : a.model["moe_layers"]) out.push_back(n.as<int>());
    CHECK_FALSE(a.model["dense_layers_first"]);
    return out;
  };
  CHECK(mask("2") == std::vector<int>{1, 0, 1, 0});
  CHECK(mask("[0,1,1,0]") == std::vector<int>{0, 1, 1, 0});
  CHECK(error_of("--num-layers 4 --num-experts 8 --moe-layer-freq [0,2,1,1]") ==
        "a.sh:1:49: --moe-layer-freq [0,2,1,1]: layer 1 is 2, neither 0 (dense) nor 1 (MoE)");
  CHECK(error_of("--num-layers 4 --num-experts 8 --moe-layer-freq [1]*3") ==
        "a.sh:1:49: --moe-layer-freq [1]*3: 3 entries for --num-layers 4 (Megatron requires one per layer)");
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
  CHECK(error_of("--num-layers $NL --hidden-size 8") ==
        "a.sh:1:14: --num-layers $NL: $NL is not set in the script (from the environment?); set NL in megatron_args "
        "env: (or --megatron-env NL=...)");
  CHECK(error_of("--num-layers four") == "a.sh:1:14: --num-layers: expected an integer >= 1, got 'four'");
  CHECK(error_of("--tensor-model-parallel-size 4 --num-experts 4 --expert-tensor-parallel-size 2") ==
        "a.sh:1:78: --expert-tensor-parallel-size 2 with --tensor-model-parallel-size 4: ppsim splits the experts over "
        "tp (Megatron's default) or not at all (1) only");
  // 1 with tp above 1 (slime's MoE scripts): whole experts, parallel.etp 1; equal to tp: nothing written.
  CHECK(
      megatron_args_from_text("--tensor-model-parallel-size 2 --num-experts 4 --expert-tensor-parallel-size 1", "a.sh")
          .parallel["etp"]
          .as<int>() == 1);
  CHECK(
      !megatron_args_from_text("--tensor-model-parallel-size 2 --num-experts 4 --expert-tensor-parallel-size 2", "a.sh")
           .parallel["etp"]);
  CHECK(error_of("python train.py") == "a.sh: no Megatron-LM arguments (--flag value) in the file");
}

TEST_CASE("megatron: the DeepSeek-V3 and Llama-3-70B argument lists give the YAML configs' results",
          "[cost][megatron][cli]") {
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

TEST_CASE("megatron: dp before the global batch is split (the issue's 64 GPUs, TP2 PP4)", "[cost][megatron]") {
  // 64 GPUs / (tp 2 x pp 4 x cp 1) = dp 8; 512 sequences / (micro-batch 1 x dp 8) = 64 micro-batches
  // per pipeline, not 512. The world size from the YAML, or from the launcher when it has none.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ppsim_megatron_dp_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const char* name, const std::string& text) { std::ofstream(dir / name) << text; };
  const std::string model =
      "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --vocab-size 32000 "
      "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --global-batch-size 512";
  write("plain.sh", "python pretrain_gpt.py " + model + "\n");
  write("launch.sh", "torchrun --nproc-per-node 8 --nnodes $((4*2)) pretrain_gpt.py " + model + "\n");
  write("cp.sh", "python pretrain_gpt.py " + model + " --context-parallel-size 2 --micro-batch-size 2\n");
  auto load = [&](const std::string& yaml) { return parse_config(yaml, "t.yaml", dir.string(), {}); };
  const ModelConfigData a = load("megatron_args: plain.sh\nhardware: {name: h100, gpus: 64}\n");
  CHECK(a.parallel.dp == 8);
  CHECK(a.parallel.microbatches == 64);
  CHECK(a.parallel.microbatches * a.model.micro_batch_size * a.parallel.dp == 512);
  const ModelConfigData b = load("megatron_args: launch.sh\ncluster: {gpu: h100}\n");  // 8 x 8 = 64 from torchrun
  CHECK(b.parallel.dp == 8);
  CHECK(b.parallel.microbatches == 64);
  // The YAML's own micro-batch count: dp is still torchrun's 64 / (2 x 4) = 8, not 1 (one replica).
  const ModelConfigData m = load("megatron_args: launch.sh\ncluster: {gpu: h100}\nparallel: {microbatches: 16}\n");
  CHECK(m.parallel.dp == 8);
  CHECK(m.parallel.microbatches == 16);
  // cp 2: dp = 64 / (2 x 4 x 2) = 4; micro-batch 2: 512 / (2 x 4) = 64.
  const ModelConfigData c = load("megatron_args: cp.sh\nhardware: {name: h100, gpus: 64}\n");
  CHECK(c.parallel.cp == 2);
  CHECK(c.parallel.dp == 4);
  CHECK(c.parallel.microbatches == 64);
  // No world size anywhere: refused, naming what is missing.
  try {
    (void)load("megatron_args: plain.sh\ncluster: {gpu: h100}\n");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.one_line() ==
          "t.yaml:1:16: --global-batch-size 512 needs the world size to split it (Megatron's dp = GPUs "
          "/ (tp x pp x cp)): the script's launcher does not state it; give hardware.gpus or parallel.dp");
  }
  std::filesystem::remove_all(dir);
}

namespace {
// A launch-script set with the SC'21 scripts' structure (Megatron-LM examples/sc21): run.sh picks
// a model in an if/elif chain on MODEL, sources CONFIG.sh through `pwd`, which builds PARAMS
// (a quoted string with `\` continuations and a placeholder) and sources SBATCH.sh, which submits
// SRUN.sh; SRUN.sh's #SBATCH line gives the tasks per node and it runs srun ... sh -c "${CMD}".
struct ScriptSet {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ppsim_megatron_set_" + std::to_string(::getpid()));
  ScriptSet() {
    std::filesystem::create_directories(dir);
    write("run.sh",
          "#!/bin/bash\nMODEL=small\n\n"
          "if [ ${MODEL} == \"small\" ]; then\n    TP=2\n    PP=2\n    NLS=8\n    NNODES=2\n"
          "    EXTRA=\"--checkpoint-activations \"\n"
          "elif [ ${MODEL} = \"big\" ]; then\n    TP=4\n    PP=4\n    NLS=48\n    NNODES=8\n"
          "    EXTRA=\"--checkpoint-activations --num-layers-per-virtual-pipeline-stage 3\"\n"
          "else\n    echo \"Invalid configuration\"\n    exit 1\nfi\n"
          "export JOB_NAME=job_${MODEL}\n. `pwd`/CONFIG.sh\n. $(pwd)/SBATCH.sh\nexit 0\n");
    write("CONFIG.sh",
          "export CODE_DIR=<megatron source code directory>\n"
          "export PARAMS=\" ${EXTRA} \\\n\t--tensor-model-parallel-size ${TP} \\\n"
          "\t--pipeline-model-parallel-size ${PP} --num-layers ${NLS} \\\n"
          "        --hidden-size 1024 --num-attention-heads 16 --seq-length 512 --vocab-size 1000 \\\n"
          "        --micro-batch-size 2 --global-batch-size 256 --data-path <path to data> --fp16 \"\n");
    write("SBATCH.sh",
          "sbatch -p part --job-name=${JOB_NAME} --nodes=${NNODES} --export=CODE_DIR,PARAMS SRUN.sh\nexit 0\n");
    write(
        "SRUN.sh",
        "#!/bin/bash\n#SBATCH -t 0:30:00 --exclusive --ntasks-per-node=4\n\nTHIS_DIR=`pwd`\nmkdir -p ${THIS_DIR}/logs\n"
        "CMD=\"python -u ${CODE_DIR}/pretrain_gpt.py ${PARAMS}\"\n"
        "srun -l --output=${THIS_DIR}/logs/%x_%j.log sh -c \"${CMD}\"\n");
  }
  ~ScriptSet() { std::filesystem::remove_all(dir); }
  void write(const char* name, const std::string& text) const { std::ofstream(dir / name) << text; }
  std::string path(const char* name) const { return (dir / name).string(); }
};
}  // namespace

TEST_CASE("megatron: a launch-script set read as one (SC'21's structure)", "[cost][megatron]") {
  const ScriptSet s;
  // The script's own MODEL=small: TP 2, PP 2, 8 layers, 2 nodes x 4 tasks (#SBATCH) = 8 GPUs.
  const MegatronArgs a = read_megatron_args(s.path("run.sh"));
  CHECK(a.source.rfind(s.path("SRUN.sh") + ":", 0) == 0);
  CHECK(a.model["layers"].as<int>() == 8);
  CHECK(a.model["hidden"].as<int>() == 1024);
  CHECK(a.parallel["tp"].as<int>() == 2);
  CHECK(a.parallel["pp"].as<int>() == 2);
  CHECK_FALSE(a.parallel["vpp"]);
  CHECK(a.parallel["recompute"].as<std::string>() == "full");
  CHECK(a.precision["params"].as<std::string>() == "fp16");
  CHECK(a.global_batch_size == 256);
  CHECK(a.world_size == 2 * 4);
  // The user's MODEL=big replaces the script's: 48 layers / (3 per chunk x pp 4) = vpp 4; 8 x 4 GPUs.
  const MegatronArgs b = read_megatron_args(s.path("run.sh"), {}, {{"MODEL", "big"}});
  CHECK(b.model["layers"].as<int>() == 48);
  CHECK(b.parallel["tp"].as<int>() == 4);
  CHECK(b.parallel["vpp"].as<int>() == 48 / (3 * 4));
  CHECK(b.world_size == 8 * 4);
  // A variable the chain sets, pinned too: the user's value wins in every file.
  const MegatronArgs c = read_megatron_args(s.path("run.sh"), {}, {{"MODEL", "big"}, {"NLS", "96"}});
  CHECK(c.model["layers"].as<int>() == 96);
  CHECK(c.parallel["vpp"].as<int>() == 96 / (3 * 4));
  // Through a config, the YAML's map form: dp = 32 / (4 x 4) = 2; 256 / (micro-batch 2 x dp 2) = 64.
  const ModelConfigData cfg = parse_config("megatron_args: {script: run.sh, env: {MODEL: big}}\ncluster: {gpu: h100}\n",
                                           "t.yaml", s.dir.string(), {});
  CHECK(cfg.parallel.dp == 32 / (4 * 4));
  CHECK(cfg.parallel.microbatches == 256 / (2 * 2));
}

TEST_CASE("megatron: a launch-script set's errors, one line each", "[cost][megatron]") {
  const ScriptSet s;
  auto error = [&](const ScriptEnv& env, const char* file = "run.sh") {
    try {
      (void)read_megatron_args(s.path(file), {}, env);
    } catch (const InputError& e) {
      return e.one_line();
    }
    return std::string("no error");
  };
  // A MODEL the chain does not know: the script's own `exit 1` (run.sh line 18, column 5).
  CHECK(error({{"MODEL", "huge"}}) ==
        s.path("run.sh") +
            ":18:5: the script stops here (exit 1 after 'echo Invalid configuration'; the last condition "
            "decided: '[ ${MODEL} = \"big\" ]' at line 10) with the values it was read with, and its training command "
            "after it has ${EXTRA} ($EXTRA is not set in the script (from the "
            "environment?)); set the variables its conditions test in megatron_args env: (or --megatron-env "
            "NAME=value)");
  // A sourced file that is not there: the flag, and the file it may have come from.
  std::filesystem::remove(s.dir / "CONFIG.sh");
  const std::string missing = error({});
  CHECK(missing.find("no Megatron-LM arguments") != std::string::npos);
  CHECK_THAT(missing, PPSIM_CONTAINS(s.path("CONFIG.sh") + ", sourced at " + s.path("run.sh") + ":21 and not found"));
  // A loop the arguments depend on (`read` from a file): the flag, the line, and what to set.
  s.write("loop.sh", "while read -r L; do :; done < layers.txt\npython pretrain_gpt.py --num-layers $L\n");
  CHECK(error({}, "loop.sh") == s.path("loop.sh") +
                                    ":2:37: --num-layers $L: $L is set by 'read' at line 1 from its input; set "
                                    "L in megatron_args env: (or --megatron-env L=...)");
  // A script run as a program sees the exported variables only: H (not exported) is unset there.
  s.write("parent.sh", "H=64\nexport L=4\nbash child.sh\n");
  s.write("child.sh", "python pretrain_gpt.py --num-layers $L --hidden-size $H --num-attention-heads 4\n");
  CHECK(error({}, "parent.sh") == s.path("child.sh") +
                                      ":1:54: --hidden-size $H: $H is not set in the script (from the environment?); "
                                      "set H in megatron_args env: (or --megatron-env H=...)");
  CHECK(read_megatron_args(s.path("parent.sh"), {}, {{"H", "64"}}).model["hidden"].as<int>() == 64);
  // A used flag left as a placeholder.
  s.write("ph.sh", "python pretrain_gpt.py --num-layers <number of layers> --hidden-size 8\n");
  CHECK(error({}, "ph.sh") == s.path("ph.sh") +
                                  ":1:37: --num-layers <number of layers>: a placeholder the script leaves to "
                                  "its user; fill it in, or set the variable that holds it in megatron_args env:");
}

TEST_CASE("megatron: --megatron-env on the command line", "[cost][megatron][cli]") {
  const ScriptSet s;
  ppsim::robust::Scratch scratch("megatron_env");
  s.write("base.yaml", "name: base\ncluster: {gpu: h100}\n");
  const std::string head =
      "compare " + s.path("base.yaml") + " -s 1f1b --format json --megatron-args " + s.path("run.sh");
  // MODEL=big: 8 nodes x 4 tasks = 32 GPUs, dp = 32 / (4 x 4) = 2, 256 / (2 x 2) = 64 micro-batches.
  const auto big = ppsim::robust::run_ppsim(scratch, head + " --megatron-env MODEL=big");
  REQUIRE(big.code == 0);
  CHECK(nlohmann::json::parse(big.out)["results"][0]["microbatches"] == 256 / (2 * (32 / (4 * 4))));
  CHECK(nlohmann::json::parse(big.out)["results"][0]["bubble"]["per_rank"].size() == 4);  // pp 4
  // The script's own MODEL=small: 2 x 4 = 8 GPUs, dp = 8 / (2 x 2) = 2: 64 as well; pp 2, not 4.
  const auto small = ppsim::robust::run_ppsim(scratch, head);
  REQUIRE(small.code == 0);
  CHECK(nlohmann::json::parse(small.out)["results"][0]["bubble"]["per_rank"].size() == 2);
  const auto bad = ppsim::robust::run_ppsim(scratch, head + " --megatron-env MODEL");
  CHECK(bad.code == 3);
  CHECK(bad.one_error_line());
  CHECK(bad.err ==
        "ppsim: --megatron-env: expected NAME=value (a shell variable for the --megatron-args script), got 'MODEL'\n");
}

namespace {
// A folder of scripts for a test, removed at the end.
struct ScratchDir {
  std::filesystem::path dir;
  explicit ScratchDir(const char* tag)
      : dir(std::filesystem::temp_directory_path() / (std::string(tag) + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir);
  }
  ~ScratchDir() { std::filesystem::remove_all(dir); }
  std::string write(const char* name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
  // The one-line error of a config (named t.yaml) in this folder; "no error" when it loads.
  std::string config_error(const std::string& yaml) const {
    try {
      (void)parse_config(yaml, "t.yaml", dir.string(), {});
    } catch (const InputError& e) {
      return e.one_line();
    }
    return "no error";
  }
};
}  // namespace

TEST_CASE("megatron: Megatron-DeepSpeed's MoE flags with its defaults", "[cost][megatron][cli]") {
  // A script in the shape of Megatron-DeepSpeed's examples_deepspeed/MoE (1.3B + MoE-128): it
  // passes --deepspeed, so --num-experts, --topk, --expert-interval and --moe-expert-parallel-size
  // are the fork's (megatron/arguments.py at f4157be): top-1 by default, experts every 2nd layer.
  const ScratchDir d("ppsim_megatron_ds_moe_");
  d.write("moe.sh",
          "EP_SIZE=128\nNUM_GPUS=64\nEP_PARALLEL_SIZE=$NUM_GPUS\n"
          "ds_opts=\" --deepspeed --deepspeed_config ds.json\"\n"
          "deepspeed pretrain_gpt.py --num-layers 24 --hidden-size 2048 --num-attention-heads 16 \\\n"
          "  --seq-length 2048 --vocab-size 50304 --micro-batch-size 8 --global-batch-size 512 \\\n"
          "  --moe-expert-parallel-size ${EP_PARALLEL_SIZE} --num-experts ${EP_SIZE} \\\n"
          "  --moe-train-capacity-factor 1.0 --moe-eval-capacity-factor 1.0 --moe-min-capacity 4 ${ds_opts}\n");
  const MegatronArgs a = read_megatron_args((d.dir / "moe.sh").string());
  CHECK(a.model["moe"]["experts"].as<int>() == 128);
  CHECK(a.model["moe"]["top_k"].as<int>() == 1);  // --topk's default
  CHECK(a.model["moe"]["expert_ffn_hidden"].as<long long>() == 4 * 2048);
  CHECK(a.model["moe"]["capacity_factor"].as<double>() == 1.0);
  CHECK(a.parallel["ep"].as<int>() == 64);
  // get_num_experts_per_layer: layer i (0-based) is MoE when (i + 1) % 2 == 0: 1, 3, ..., 23.
  std::vector<int> mask;
  for (const auto& n : a.model["moe_layers"]) mask.push_back(n.as<int>());
  REQUIRE(mask.size() == 24);
  for (int i = 0; i < 24; ++i) CHECK(mask[static_cast<std::size_t>(i)] == ((i + 1) % 2 == 0 ? 1 : 0));
  // The eval capacity, the minimum capacity and DeepSpeed's JSON are not used: listed.
  CHECK(a.ignored ==
        std::vector<std::string>{"--moe-eval-capacity-factor", "--moe-min-capacity", "--deepspeed-config"});
  // Parameters (tied embedding, LayerNorm with bias, linear biases: no --disable-bias-linear),
  // h = 2048, f = 8192; an MLP 2hf + f + h = 33,564,672, attention 4h^2 + 3h + h = 16,785,408:
  //   12 MoE layers x 128 experts x 33,564,672           = 51,555,655,680
  //   12 dense MLPs x 33,564,672                         =    402,776,064
  //   24 x attention 16,785,408                          =    402,849,792
  //   12 routers x h x 128 (no bias)                     =      3,145,728
  //   embedding 50304 x h                                =    103,022,592
  //   (24 x 2 + 1) norms x 2h                            =        200,704
  //   total                                              = 52,467,331,072
  // about 52B as DeepSpeed-MoE (arXiv 2201.05596, Table 1) gives for 1.3B+MoE-128; read with
  // Megatron-LM's defaults (every layer MoE) it was 103.59B.
  const ModelConfigData c =
      parse_config("megatron_args: moe.sh\nhardware: {name: h100, gpus: 64}\n", "t.yaml", d.dir.string(), {});
  CHECK(c.model.moe_layer_count() == 12);
  CHECK_FALSE(c.model.layer_is_moe(0));
  CHECK(c.model.layer_is_moe(23));
  CHECK(model_params(c.model) == 52467331072.0);
  CHECK(c.parallel.ep == 64);
  CHECK(c.parallel.microbatches == 512 / (8 * 64));
  // `ppsim model` sums the every-other-layer parts by kind (12 layers, not 12 terms of 1).
  ppsim::robust::Scratch scratch("megatron_ds_model");
  d.write("t.yaml", "megatron_args: moe.sh\nhardware: {name: h100, gpus: 64}\n");
  const auto shown = ppsim::robust::run_ppsim(scratch, "model " + (d.dir / "t.yaml").string());
  REQUIRE(shown.code == 0);
  CHECK_THAT(shown.out, PPSIM_CONTAINS("12 layers x 4.30B; 128 experts each, top-1 active"));  // 128 x 33,564,672
  CHECK_THAT(shown.out, PPSIM_CONTAINS("12 layers x 33.56M\n"));
  // --topk, --expert-interval, --mlp-type residual (a dense MLP beside the experts: one shared).
  const MegatronArgs b = megatron_args_from_text(
      "--num-layers 6 --hidden-size 64 --num-experts 8 --topk 2 --expert-interval 3 --mlp-type residual "
      "--disable-moe-token-dropping --deepspeed",
      "a.sh");
  CHECK(b.model["moe"]["top_k"].as<int>() == 2);
  CHECK(b.model["moe"]["shared_experts"].as<int>() == 1);
  CHECK_FALSE(b.model["moe"]["capacity_factor"]);  // no capacity limit: ppsim's mean load
  mask.clear();
  for (const auto& n : b.model["moe_layers"]) mask.push_back(n.as<int>());
  CHECK(mask == std::vector<int>{0, 0, 1, 0, 0, 1});  // (i + 1) % 3 == 0
  // One count per MoE layer (4 layers / interval 2 = 2), all equal: read; differing (PR-MoE's
  // pyramid): refused at the first that differs.
  CHECK(megatron_args_from_text("--num-layers 4 --num-experts 8 8 --deepspeed", "a.sh")
            .model["moe"]["experts"]
            .as<int>() == 8);
  // "--num-layers 4 --num-experts 64 " is 32 characters: the 128 at column 33.
  CHECK(error_of("--num-layers 4 --num-experts 64 128 --deepspeed") ==
        "a.sh:1:33: --num-experts 64 128: the MoE layers' expert counts differ; ppsim models one expert count for "
        "every MoE layer");
  // Whole experts on every tp rank (no --enable-expert-tensor-parallelism): refused; with it, split over tp.
  CHECK_THAT(error_of("--num-layers 4 --num-experts 8 --tensor-model-parallel-size 2 --deepspeed"),
             PPSIM_CONTAINS("a.sh:1:61: --tensor-model-parallel-size 2 with DeepSpeed-MoE experts"));
  CHECK(megatron_args_from_text(
            "--num-layers 4 --num-experts 8 --tensor-model-parallel-size 2 --enable-expert-tensor-parallelism "
            "--deepspeed",
            "a.sh")
            .model["moe"]["experts"]
            .as<int>() == 8);
  // Without --deepspeed / --deepspeed_config: Megatron-LM's meaning (top-2, every layer).
  const MegatronArgs lm = megatron_args_from_text("--num-layers 4 --hidden-size 64 --num-experts 8", "a.sh");
  CHECK(lm.model["moe"]["top_k"].as<int>() == 2);
  CHECK_FALSE(lm.model["moe_layers"]);
}

TEST_CASE("megatron: DeepSpeed-Ulysses refused at its flag", "[cost][megatron]") {
  // --ds-sequence-parallel-size on line 3, column 3 (after two blanks): not read as sp 1.
  CHECK(error_of("SP=4\ndeepspeed pretrain_gpt.py --num-layers 4 --deepspeed \\\n"
                 "  --ds-sequence-parallel-size ${SP} --hidden-size 64\n") ==
        "a.sh:3:3: --ds-sequence-parallel-size 4: DeepSpeed-Ulysses sequence parallelism (all-to-all over the "
        "attention heads) is not modelled; ppsim's context parallelism is parallel.cp (ring/all-gather)");
  // 1 is its default (no Ulysses): read.
  CHECK(megatron_args_from_text("--num-layers 4 --deepspeed --ds-sequence-parallel-size 1", "a.sh")
            .model["layers"]
            .as<int>() == 4);
}

TEST_CASE("megatron: --normalization in either fork's spelling", "[cost][megatron]") {
  auto norm = [](const char* v) {
    return megatron_args_from_text(std::string("--num-layers 4 --normalization ") + v, "a.sh")
        .model["norm"]
        .as<std::string>();
  };
  CHECK(norm("RMSNorm") == "rmsnorm");  // Megatron-LM's choices
  CHECK(norm("rmsnorm") == "rmsnorm");  // Megatron-DeepSpeed's
  CHECK(norm("LayerNorm") == "layernorm");
  CHECK(norm("layernorm") == "layernorm");
  // "--num-layers 4 --normalization " is 31 characters: the value at column 32.
  CHECK(error_of("--num-layers 4 --normalization scalenorm") ==
        "a.sh:1:32: --normalization scalenorm: LayerNorm or RMSNorm (Megatron-LM), layernorm or rmsnorm "
        "(Megatron-DeepSpeed)");
  // Megatron-DeepSpeed's GQA flag.
  CHECK(megatron_args_from_text("--num-layers 4 --num-attention-heads 32 --num-key-value-heads 8", "a.sh")
            .model["kv_heads"]
            .as<int>() == 8);
}

TEST_CASE("megatron: flags inside $(...) and backticks are not the training command's", "[cost][megatron]") {
  // bash splits what the command outputs (unknown), not the words inside it.
  const MegatronArgs a = megatron_args_from_text(
      "num_gpus=$(($(ds_ssh nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)-2))\n"
      "per_node=`nvidia-smi --query-gpu=name --format=csv`\n"
      "name=\"run_g${num_gpus}_n${per_node}\"\n"
      "python pretrain_gpt.py --num-layers 4 --save /ckpt/${name} --tensorboard-dir /tb/${name}\n",
      "a.sh");
  CHECK(a.ignored == std::vector<std::string>{"--save", "--tensorboard-dir"});
}

TEST_CASE("megatron: errors about the script's values point at the script, not --set", "[cost][megatron][cli]") {
  const ScratchDir d("ppsim_megatron_loc_");
  ppsim::robust::Scratch scratch("megatron_loc");
  const std::string base = d.write("base.yaml", "name: base\ncluster: {gpu: h100, gpus: 8}\n");
  // No --vocab-size: at the training command (line 2, column 1).
  const std::string novocab =
      d.write("novocab.sh",
              "L=4\npython pretrain_gpt.py --num-layers $L --hidden-size 64 --num-attention-heads 4 "
              "--seq-length 128 --global-batch-size 16\n");
  const auto r1 = ppsim::robust::run_ppsim(scratch, "compare " + base + " -s 1f1b --megatron-args " + novocab);
  CHECK(r1.code == 3);
  CHECK_THAT(r1.err, PPSIM_CONTAINS("ppsim: " + novocab + ":2:1: no --vocab-size: Megatron takes the vocabulary"));
  CHECK_THAT(r1.err, !PPSIM_CONTAINS("--set"));
  // --global-batch-size 12 over micro-batch 1 x dp 8: at its value (line 2, column 136: the
  // text before it is 135 characters).
  const std::string gbs = d.write("gbs.sh",
                                  "L=4\npython pretrain_gpt.py --num-layers $L --hidden-size 64 "
                                  "--num-attention-heads 4 --seq-length 128 --vocab-size 1000 "
                                  "--global-batch-size 12\n");
  const auto r2 = ppsim::robust::run_ppsim(scratch, "compare " + base + " -s 1f1b --megatron-args " + gbs);
  CHECK(r2.code == 3);
  CHECK(r2.err.find("--set") == std::string::npos);
  CHECK_THAT(r2.err,
             PPSIM_CONTAINS(gbs + ":2:136: --global-batch-size 12 is not a multiple of --micro-batch-size 1 x dp 8"));
  // What the script and the config decide together (8 GPUs over tp 3): at --megatron-args.
  const std::string tp3 = d.write("tp3.sh",
                                  "python pretrain_gpt.py --num-layers 4 --hidden-size 66 "
                                  "--num-attention-heads 3 --seq-length 128 --vocab-size 1000 "
                                  "--tensor-model-parallel-size 3 --global-batch-size 12\n");
  const auto r3 = ppsim::robust::run_ppsim(scratch, "compare " + base + " -s 1f1b --megatron-args " + tp3);
  CHECK(r3.code == 3);
  CHECK_THAT(r3.err, PPSIM_CONTAINS("ppsim: --megatron-args: hardware.gpus = 8 GPUs is not a multiple of"));
}

TEST_CASE("megatron: --quick-geglu is gated; --window-size and --window-attn-skip-freq place the window",
          "[cost][megatron]") {
  // GPT-OSS's flags (Megatron-LM argument_utils: quick_geglu -> gated_linear_unit; utils.py
  // is_layer_window_attention: the 1-based layer l is full when l % N == 0): 4 layers, N 2 ->
  // layers 1 and 3 (0-based 0 and 2) local, 127 tokens before -> a window of 128.
  const MegatronArgs g = megatron_args_from_text(
      "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --quick-geglu --window-size 127,0 "
      "--window-attn-skip-freq 2",
      "a.sh");
  CHECK(g.model["mlp"].as<std::string>() == "swiglu");
  CHECK(g.model["sliding_window"].as<int>() == 128);
  std::vector<int> local;
  for (const auto& x : g.model["local_layers"]) local.push_back(x.as<int>());
  CHECK(local == std::vector<int>{1, 0, 1, 0});
  CHECK(g.ignored.empty());
  // A list: 1 = window, 0 = full, per layer. Unbounded (-1) is no window; a look-ahead is refused.
  const MegatronArgs l = megatron_args_from_text(
      "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --window-size 4095,0 --window-attn-skip-freq "
      "'[1,1,1,0]'",
      "a.sh");
  local.clear();
  for (const auto& x : l.model["local_layers"]) local.push_back(x.as<int>());
  CHECK(local == std::vector<int>{1, 1, 1, 0});
  CHECK(l.model["sliding_window"].as<int>() == 4096);
  CHECK_FALSE(
      megatron_args_from_text("--num-layers 4 --hidden-size 64 --num-attention-heads 4 --window-size -1,0", "a.sh")
          .model["sliding_window"]);
  CHECK(error_of("--num-layers 4 --hidden-size 64 --num-attention-heads 4 --window-size 127,3") ==
        "a.sh:1:71: --window-size 127,3: a window that sees 3 tokens ahead is not a causal decoder; ppsim models "
        "causal attention (R = 0)");
}

TEST_CASE("megatron: --vocab-size is padded as Megatron pads it", "[cost][megatron]") {
  // vocab_utils.py: a multiple of --make-vocab-size-divisible-by (128) x tp. 128256 at TP8: a
  // multiple of 1024, 125.25 -> 126 x 1024 = 129024; divisible by 3200 at TP8 (DeepSeek-V2-Lite's
  // script): 25600 x 6 = 153600; at TP1, 128256 = 1002 x 128 stays.
  auto vocab = [](const std::string& flags) {
    return megatron_args_from_text("--num-layers 2 --hidden-size 64 --num-attention-heads 4 " + flags, "a.sh")
        .model["vocab"]
        .as<long long>();
  };
  CHECK(vocab("--vocab-size 128256 --tensor-model-parallel-size 8") == 129024);
  CHECK(vocab("--vocab-size 128256 --tensor-model-parallel-size 8 --make-vocab-size-divisible-by 3200") == 153600);
  CHECK(vocab("--vocab-size 128256") == 128256);
  CHECK(vocab("--padded-vocab-size 128300") == 128300);  // already padded: as written
}

TEST_CASE("megatron: BigScience's --glu-activation is a gated MLP", "[cost][megatron]") {
  // bigscience-workshop/Megatron-DeepSpeed transformer.py ParallelMLP: dense_h_to_4h is
  // 2 x --ffn-hidden-size wide when --glu-activation is set, then dense_4h_to_h: 3 h x f
  // matrices. tr9-1B3-modeling-swiglu.slurm: h 2048, f 5456, 24 layers: 24 x 3 x 2048 x 5456 =
  // 804,519,936 MLP weights (2 matrices would be 536,346,624).
  const ScratchDir d("ppsim_megatron_glu_");
  d.write("tr9.sh",
          "python pretrain_gpt.py --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --ffn-hidden-size 5456 "
          "--seq-length 2048 --vocab-size 50257 --glu-activation swiglu --disable-bias-linear --global-batch-size 8\n");
  const ModelConfigData c =
      parse_config("megatron_args: tr9.sh\nhardware: {name: a100, gpus: 8}\n", "t.yaml", d.dir.string(), {});
  CHECK(c.model.mlp == MlpKind::swiglu);
  double mlp = 0;
  for (int l = 0; l < c.model.layers; ++l) mlp += layer_param_parts(c.model, l).dense_mlp;
  CHECK(mlp == 24.0 * 3 * 2048 * 5456);
  REQUIRE(c.read_as.size() == 1);
  CHECK(c.read_as[0] == "--glu-activation swiglu: a gated MLP (3 matrices of h x ffn)");
  // geglu, reglu, liglu: the same three matrices (only the elementwise function differs), named;
  // without --ffn-hidden-size the fork's default stays 4h (its arguments.py), not Megatron-LM's 8h/3.
  const MegatronArgs g = megatron_args_from_text(
      "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --glu-activation geglu", "a.sh");
  CHECK(g.model["mlp"].as<std::string>() == "swiglu");
  CHECK(g.model["ffn_hidden"].as<long long>() == 4 * 64);
  CHECK(g.read_as == std::vector<std::string>{"--glu-activation geglu: a gated MLP (3 matrices of h x ffn), priced "
                                              "as SwiGLU (the same FLOPs and parameters)"});
  // At the value: 15 + 17 + 24 + 17 = 73 characters before it, so column 74.
  CHECK(error_of("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --glu-activation gelu") ==
        "a.sh:1:74: --glu-activation gelu: geglu, liglu, reglu or swiglu (Megatron-DeepSpeed's choices)");
}

TEST_CASE("megatron: --fp8-recipe, default delayed, is per-tensor scaling", "[cost][megatron]") {
  // Megatron d98e8a6 TransformerConfig.fp8_recipe defaults to "delayed" (Transformer Engine's
  // delayed scaling: one scale per tensor): --fp8-format alone is precision.fp8_recipe tensor;
  // tensorwise (current scaling) is per tensor too; blockwise is the 1x128 / 128x128 tiles (block).
  const std::string dims = "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --bf16 ";
  auto recipe = [&](const std::string& flags) {
    return megatron_args_from_text(dims + flags, "a.sh").precision["fp8_recipe"].as<std::string>();
  };
  CHECK(recipe("--fp8-format hybrid") == "tensor");
  CHECK(recipe("--fp8-format e4m3 --fp8-recipe delayed") == "tensor");
  CHECK(recipe("--fp8-format hybrid --fp8-recipe tensorwise") == "tensor");
  CHECK(recipe("--fp8-format e4m3 --fp8-recipe blockwise") == "block");
  // No FP8 GEMMs: no recipe written (the flag alone changes nothing in Megatron; listed unused).
  const MegatronArgs off = megatron_args_from_text(dims + "--fp8-recipe blockwise", "a.sh");
  CHECK_FALSE(off.precision["fp8_recipe"]);
  CHECK(off.ignored == std::vector<std::string>{"--fp8-recipe"});
  // At the value: dims 15 + 17 + 24 + 7 = 63 characters, + 20 + 13 = 96 before it: column 97.
  CHECK(error_of(dims + "--fp8-format hybrid --fp8-recipe fp4") ==
        "a.sh:1:97: --fp8-recipe fp4: delayed, tensorwise, blockwise, mxfp8 or custom");
  // mxfp8 has no figure: refused at the flag, unless the config writes its own recipe (it wins).
  const ScratchDir d("ppsim_megatron_fp8_");
  d.write("mx.sh", "python pretrain_gpt.py " + dims +
                       "--seq-length 128 --vocab-size 1000 --fp8-format hybrid --fp8-recipe mxfp8\n");
  auto load = [&](const std::string& yaml) { return parse_config(yaml, "t.yaml", d.dir.string(), {}); };
  const std::string mx = d.config_error("megatron_args: mx.sh\nhardware: {name: h100, gpus: 1}\n");
  // 23 (python pretrain_gpt.py) + 63 + 17 + 18 + 20 + 13 = 154 characters before the value: column 155.
  CHECK_THAT(mx, PPSIM_CONTAINS("mx.sh:1:155: --fp8-recipe mxfp8: ppsim has no figure for MXFP8"));
  CHECK_THAT(mx, PPSIM_CONTAINS("delayed and tensorwise"));
  // The YAML's recipe wins: block keeps efficiency.gemm_fp8 as written (0 here: as gemm); the
  // script's default (delayed: tensor) prices FP8 GEMMs at gemm x 0.87 = 0.5 x 0.87 = 0.435.
  const std::string hw = "hardware: {name: h100, gpus: 1, efficiency: {gemm: 0.5}}\n";
  const ModelConfigData block = load("megatron_args: mx.sh\n" + hw + "precision: {fp8_recipe: block}\n");
  CHECK(block.precision.gemm == Dtype::fp8);
  CHECK(block.hardware.efficiency.gemm_fp8 == 0);
  d.write("delayed.sh", "python pretrain_gpt.py " + dims + "--seq-length 128 --vocab-size 1000 --fp8-format hybrid\n");
  const ModelConfigData delayed = load("megatron_args: delayed.sh\n" + hw);
  CHECK(delayed.hardware.efficiency.gemm_fp8 == Approx(0.5 * 0.87));
  CHECK(delayed.hardware.efficiency.gemm_fp8_wgrad == Approx(0.5 * 0.87));
}

TEST_CASE("megatron: --multi-latent-attention with Megatron's MLA defaults", "[cost][megatron]") {
  // Megatron d98e8a6 arguments.py _add_mla_args: --q-lora-rank None, --kv-lora-rank 32,
  // --qk-head-dim 128, --qk-pos-emb-head-dim 64, --v-head-dim 128.
  const MegatronArgs a = megatron_args_from_text(
      "--num-layers 8 --hidden-size 2048 --num-attention-heads 16 --multi-latent-attention --v-head-dim 128", "a.sh");
  const YAML::Node mla = a.model["mla"];
  CHECK(mla["q_lora_rank"].as<int>() == 0);
  CHECK(mla["kv_lora_rank"].as<int>() == 32);
  CHECK(mla["qk_nope_head_dim"].as<int>() == 128);
  CHECK(mla["qk_rope_head_dim"].as<int>() == 64);
  CHECK(mla["v_head_dim"].as<int>() == 128);
  CHECK(a.read_as == std::vector<std::string>{"--multi-latent-attention with Megatron's defaults --kv-lora-rank 32, "
                                              "--qk-head-dim 128, --qk-pos-emb-head-dim 64"});
  // --qk-head-dim without --qk-pos-emb-head-dim: the rope part is 64 wide, not 0.
  const MegatronArgs b = megatron_args_from_text(
      "--num-layers 8 --hidden-size 2048 --num-attention-heads 16 --multi-latent-attention --qk-head-dim 96", "a.sh");
  CHECK(b.model["mla"]["qk_nope_head_dim"].as<int>() == 96);
  CHECK(b.model["mla"]["qk_rope_head_dim"].as<int>() == 64);
  // The layer's attention weights (h 2048, a 16, RMSNorm): queries h a (128 + 64) = 6,291,456; the
  // kv down-projection h (32 + 64) = 196,608; its norm 32; the kv up-projection 32 a (128 + 128)
  // = 131,072; the output a 128 h = 4,194,304: 10,813,472 (no biases: --disable-bias-linear).
  const ScratchDir d("ppsim_megatron_mla_");
  d.write("mla.sh",
          "python pretrain_gpt.py --num-layers 8 --hidden-size 2048 --num-attention-heads 16 --seq-length 4096 "
          "--vocab-size 32000 --swiglu --normalization RMSNorm --disable-bias-linear --multi-latent-attention\n");
  const ModelConfigData c =
      parse_config("megatron_args: mla.sh\nhardware: {name: h100, gpus: 1}\n", "t.yaml", d.dir.string(), {});
  CHECK(layer_param_parts(c.model, 0).attention == 6291456.0 + 196608 + 32 + 131072 + 4194304);
  // Pai-Megatron-Patch's --qk-nope-head-dim / --qk-rope-head-dim: no training code reads them;
  // equal to what Megatron builds (Moonlight's 128 and 64): read; otherwise refused at the flag.
  const std::string dims = "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --multi-latent-attention ";
  const MegatronArgs pai = megatron_args_from_text(dims + "--qk-nope-head-dim 128 --qk-rope-head-dim 64", "a.sh");
  CHECK(pai.ignored.empty());
  CHECK(pai.unless_written.empty());
  const MegatronArgs odd = megatron_args_from_text(dims + "--qk-nope-head-dim 192", "a.sh");
  REQUIRE(odd.unless_written.size() == 1);
  CHECK(odd.unless_written[0].key == "model.mla.qk_nope_head_dim");
  CHECK(odd.unless_written[0].message ==
        "--qk-nope-head-dim 192: Pai-Megatron-Patch's flag, which its training code does not read: Megatron builds "
        "the attention from --qk-head-dim (128, its default); pass --qk-head-dim 192 if that is the run's, or write "
        "model.mla.qk_nope_head_dim");
  d.write("pai.sh", "python pretrain_gpt.py " + dims + "--seq-length 128 --vocab-size 1000 --qk-rope-head-dim 32\n");
  auto load = [&](const std::string& yaml) { return parse_config(yaml, "t.yaml", d.dir.string(), {}); };
  // 23 + 81 (dims: 15 + 17 + 24 + 25) + 17 + 18 + 19 = 158 characters before the value: column 159.
  CHECK_THAT(d.config_error("megatron_args: pai.sh\nhardware: {name: h100, gpus: 1}\n"),
             PPSIM_CONTAINS("pai.sh:1:159: --qk-rope-head-dim 32: Pai-Megatron-Patch's flag"));
  const ModelConfigData y =
      load("megatron_args: pai.sh\nhardware: {name: h100, gpus: 1}\nmodel: {mla: {qk_rope_head_dim: 32}}\n");
  CHECK(y.model.mla.qk_rope_head_dim == 32);
}

TEST_CASE("megatron: linear biases as Megatron's add_bias_linear sets them", "[cost][megatron]") {
  // TransformerConfig.add_bias_linear defaults to True (--disable-bias-linear turns it off):
  // biases on q/k/v, the attention output and both MLP layers; --add-qkv-bias keeps q/k/v's.
  const std::string dims = "--num-layers 2 --hidden-size 64 --num-attention-heads 4 ";
  auto biases = [&](const std::string& flags) {
    const MegatronArgs x = megatron_args_from_text(dims + flags, "a.sh");
    return std::vector<bool>{x.model["qkv_bias"].as<bool>(), x.model["out_bias"].as<bool>(),
                             x.model["mlp_bias"].as<bool>()};
  };
  CHECK(biases("") == std::vector<bool>{true, true, true});
  CHECK(biases("--disable-bias-linear") == std::vector<bool>{false, false, false});
  CHECK(biases("--disable-bias-linear --add-qkv-bias") == std::vector<bool>{true, false, false});  // Qwen2
  // BLOOM-176B (BigScience's tr11/tr13 scripts: 70 layers, h 14336, vocab padded to 250880, tied,
  // LayerNorm, GELU MLP 4h, no --disable-bias-linear in Megatron-DeepSpeed). Per layer:
  //   weights 4h^2 (attention) + 8h^2 (MLP) = 12h^2           = 2,466,250,752
  //   biases 3h (q/k/v) + h (out) + 4h + h (MLP) = 9h          =       129,024
  //   2 LayerNorms x 2h = 4h                                   =        57,344
  //   x 70 layers                                              = 172,650,598,400
  //   + embedding 250880 x h = 3,596,615,680 + final norm 2h = 28,672
  //   total                                                    = 176,247,242,752
  // The published 176,247,271,424 is 28,672 = 2h more: --embed-layernorm's LayerNorm, named as not
  // counted. Without the biases (as before) it was 176,238,211,072 (9h x 70 = 9,031,680 less).
  const ScratchDir d("ppsim_megatron_bias_");
  d.write("bloom.sh",
          "python pretrain_gpt.py --num-layers 70 --hidden-size 14336 --num-attention-heads 112 --seq-length 2048 "
          "--pad-vocab-size-to 250880 --embed-layernorm --deepspeed --bf16\n");
  const ModelConfigData c =
      parse_config("megatron_args: bloom.sh\nhardware: {name: a100, gpus: 8}\n", "t.yaml", d.dir.string(), {});
  CHECK(model_params(c.model) == 176247242752.0);
  CHECK(c.read_as ==
        std::vector<std::string>{"--embed-layernorm: the LayerNorm after the embedding (2h weights) is not counted"});
}

TEST_CASE("megatron: a YAML model.vocab beside the arguments is padded as Megatron pads it", "[cost][megatron]") {
  // Megatron pads every tokenizer's vocabulary (vocab_size_with_padding) up to a multiple of
  // --make-vocab-size-divisible-by (128) x tp. BigScience's tr10-13B (PretrainedFromHF, tp 2):
  // 150000 / 256 = 585.9 -> 586 x 256 = 150016. DeepSeek-V3's proxy test (divisible by 3232, tp 2):
  // 256000 / 6464 = 39.6 -> 40 x 6464 = 258560.
  const ScratchDir d("ppsim_megatron_vocab_");
  const std::string dims =
      "python pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
      "--seq-length 128 --tensor-model-parallel-size 2 ";
  d.write("hf.sh", dims + "--tokenizer-type PretrainedFromHF\n");
  d.write("sp.sh", dims + "--tokenizer-type GPTSentencePieceTokenizer --make-vocab-size-divisible-by 3232\n");
  d.write("pai.sh", dims + "--patch-tokenizer-type Qwen2Tokenizer --extra-vocab-size 421\n");
  d.write("nopad.sh", dims + "--tokenizer-type PretrainedFromHF --no-pad-vocab-size\n");
  auto load = [&](const std::string& script, long long vocab) {
    return parse_config(
        fmt::format("megatron_args: {}\nhardware: {{name: h100, gpus: 2}}\nmodel: {{vocab: {}}}\n", script, vocab),
        "t.yaml", d.dir.string(), {});
  };
  const ModelConfigData tr10 = load("hf.sh", 150000);
  CHECK(tr10.model.vocab == 150016);
  CHECK(tr10.read_as ==
        std::vector<std::string>{"model.vocab 150000 padded to 150016 as Megatron pads the tokenizer's "
                                 "vocabulary (a multiple of --make-vocab-size-divisible-by 128 x tp 2)"});
  CHECK(load("sp.sh", 256000).model.vocab == 258560);
  CHECK(load("hf.sh", 150016).model.vocab == 150016);  // already a multiple of 256: as given, no rule listed
  CHECK(load("hf.sh", 150016).read_as.empty());
  // Pai-Megatron-Patch's tokenizer sets the size itself (its vocabulary + --extra-vocab-size), and
  // --no-pad-vocab-size turns Megatron's padding off: as given.
  CHECK(load("pai.sh", 152064 - 1).model.vocab == 152063);
  CHECK(load("nopad.sh", 150000).model.vocab == 150000);
  // The YAML's tp is the run's: tp 4 pads to a multiple of 512: 293 x 512 = 150016; 150100 ->
  // 294 x 512 = 150528.
  const ModelConfigData tp4 =
      parse_config("megatron_args: hf.sh\nhardware: {name: h100, gpus: 4}\nmodel: {vocab: 150100}\nparallel: {tp: 4}\n",
                   "t.yaml", d.dir.string(), {});
  CHECK(tp4.model.vocab == 150528);
  // Without model.vocab: the refusal says it will be padded (Pai's: that it will not).
  CHECK_THAT(d.config_error("megatron_args: hf.sh\nhardware: {name: h100, gpus: 2}\n"),
             PPSIM_CONTAINS("give it as model.vocab (the tokenizer's vocab_size, padded here as Megatron pads it)"));
  CHECK_THAT(d.config_error("megatron_args: pai.sh\nhardware: {name: h100, gpus: 2}\n"),
             PPSIM_CONTAINS("from the tokenizer (--patch-tokenizer-type Qwen2Tokenizer, Pai-Megatron-Patch's: its "
                            "size plus --extra-vocab-size, unpadded), which ppsim does not read; give it as "
                            "model.vocab (the tokenizer's vocab_size)"));
}

TEST_CASE("megatron: a functional test's model_config.yaml, its MODEL_ARGS as the runner passes them",
          "[cost][megatron]") {
  // Megatron-LM d98e8a6 tests/functional_tests/shell_test_utils/_run_training.sh: `true` is a bare
  // flag, a value in ( ) one quoted word, "" leaves the flag out, variables are expanded (eval).
  const std::string yaml =
      "ENV_VARS:\n"
      "  CUDA_DEVICE_MAX_CONNECTIONS: 1\n"
      "  LAYERS: 4\n"
      "MODEL_ARGS:\n"
      "  --num-layers: ${LAYERS}\n"
      "  --hidden-size: 64  # a comment\n"
      "  --num-attention-heads: 4\n"
      "  --swiglu: true\n"
      "  --untie-embeddings-and-output-weights:\n"
      "    true\n"
      "  --num-experts: 8\n"
      "  --moe-layer-freq: ([0]*1+[1]*3)\n"
      "  --save: ${CHECKPOINT_SAVE_PATH}\n"
      "  --load: \"\"\n"
      "TEST_TYPE: regular\n";
  const MegatronArgs y = megatron_args_from_text(yaml, "model_config.yaml");
  const MegatronArgs s = megatron_args_from_text(
      "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --swiglu --untie-embeddings-and-output-weights "
      "--num-experts 8 --moe-layer-freq '([0]*1+[1]*3)' --save /ckpt",
      "a.sh");
  CHECK(YAML::Dump(y.model) == YAML::Dump(s.model));
  CHECK(YAML::Dump(y.parallel) == YAML::Dump(s.parallel));
  CHECK(y.model["layers"].as<int>() == 4);  // ${LAYERS} from ENV_VARS
  CHECK(y.model["mlp"].as<std::string>() == "swiglu");
  CHECK_FALSE(y.model["tied_embeddings"].as<bool>());
  CHECK(y.ignored == std::vector<std::string>{"--save"});  // --load "" is left out, as the runner does
  // Errors at the YAML's line and column: --hidden-size's value is line 6, column 18 (2 + 13 + 2
  // characters before it).
  const std::size_t at64 = yaml.find("64  # a comment");
  REQUIRE(at64 != std::string::npos);
  const std::string bad = yaml.substr(0, at64) + "x" + yaml.substr(at64 + 2);  // (GCC 12's -O3 -Wrestrict misreads replace)
  CHECK(error_of_file(bad, "model_config.yaml") ==
        "model_config.yaml:6:18: --hidden-size: expected an integer >= 1, got 'x'");
  // false: argparse refuses a value after a switch (line 8, column 13).
  const std::size_t at_on = yaml.find("--swiglu: true");
  REQUIRE(at_on != std::string::npos);
  const std::string off = yaml.substr(0, at_on) + "--swiglu: false" + yaml.substr(at_on + 14);
  CHECK_THAT(error_of_file(off, "model_config.yaml"),
             PPSIM_CONTAINS("model_config.yaml:8:13: MODEL_ARGS --swiglu: false: the runner passes '--swiglu false'"));
  // A YAML map without MODEL_ARGS is not an argument list: said so, not ":1:1: no --num-layers".
  CHECK_THAT(error_of_file("--num-layers: 4\nname: x\n", "cfg.yaml"),
             PPSIM_CONTAINS("cfg.yaml: a YAML file without MODEL_ARGS is not an argument list"));
}

TEST_CASE("megatron: --megatron-args without a config names --megatron-args", "[cost][megatron][cli]") {
  // The file reaches the config as a --set value; without a config the refusal was "--set needs a
  // config file", an option the user never gave. Now it names the one given, exit 2 (usage).
  const ScratchDir d("ppsim_megatron_noconfig_");
  const std::string args = d.write("a.sh", "--num-layers 2 --hidden-size 64 --num-attention-heads 4\n");
  ppsim::robust::Scratch scratch("megatron_noconfig");
  for (const char* cmd : {"compare", "plan"}) {
    INFO(cmd);
    const auto r = ppsim::robust::run_ppsim(scratch, std::string(cmd) + " --megatron-args " + args);
    CHECK(r.code == 2);
    CHECK(r.err == fmt::format("ppsim: --megatron-args needs a config file (the cluster, and what the arguments do "
                               "not say): {} CONFIG --megatron-args FILE\n",
                               cmd));
  }
  const auto cal = ppsim::robust::run_ppsim(scratch, "compare --calibration " + args);
  CHECK(cal.code == 2);
  CHECK_THAT(cal.err, PPSIM_CONTAINS("ppsim: --calibration needs a config file"));
  const auto set = ppsim::robust::run_ppsim(scratch, "compare --set model.layers=2");
  CHECK(set.err == "ppsim: --set needs a config file\n");
}

TEST_CASE("megatron: --optimizer-offload-fraction, the host's share of the optimizer states", "[cost][megatron]") {
  // d98e8a6 arguments.py: --optimizer-cpu-offload keeps --optimizer-offload-fraction (default 1.0)
  // of the optimizer states on the host: precision.optimizer_location host, and below 1 the share.
  const std::string dims = "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --bf16 --optimizer-cpu-offload ";
  const MegatronArgs all = megatron_args_from_text(dims, "a.sh");
  CHECK(all.precision["optimizer_location"].as<std::string>() == "host");
  CHECK_FALSE(all.precision["optimizer_host_fraction"]);
  const MegatronArgs half = megatron_args_from_text(dims + "--optimizer-offload-fraction 0.5", "a.sh");
  CHECK(half.precision["optimizer_location"].as<std::string>() == "host");
  CHECK(half.precision["optimizer_host_fraction"].as<double>() == 0.5);
  CHECK_THAT(error_of(dims + "--optimizer-offload-fraction 2"),
             PPSIM_CONTAINS("--optimizer-offload-fraction 2: a share in [0, 1]"));
}
