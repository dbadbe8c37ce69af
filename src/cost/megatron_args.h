// Megatron-LM launch arguments -> ppsim config keys, so that `megatron_args: FILE` in a config
// (or `--megatron-args FILE` on compare and plan) reads the run a user already launches.
//
// FILE is a launch script, read as bash would pass its words and never run (shell_script.h):
// the training command is the one that runs a `.py` with the most `--` flags after it (torchrun
// ... pretrain_gpt.py ..., ray job submit ... -- python3 train.py ...); a plain argument list
// (`--flag value` lines) reads too. Flags follow argparse: `--flag=value`, the last of a
// repeated flag wins. Megatron's own defaults apply where a flag is absent (its
// megatron/training/arguments.py and TransformerConfig at NVIDIA/Megatron-LM d98e8a6, 2026-08):
// GELU, LayerNorm, tied embeddings, dropout 0.1, tp = pp = cp = 1, --ffn-hidden-size 4h (with
// --swiglu int(8h/3 / 64) x 64), --moe-ffn-hidden-size = --ffn-hidden-size, top-k 2, a global
// batch of micro-batch size x dp, biases on every linear layer (add_bias_linear), FP8's delayed
// (per-tensor) recipe, MLA's ranks (--kv-lora-rank 32, --qk-head-dim 128, ...). The result
// merges under the config's own keys (those written in the YAML win). Flags ppsim does not use
// are listed in `ignored`, not refused. A value the script does not decide (an environment
// variable, a branch on a file's existence) is refused where ppsim uses it, naming the flag, the
// script's line, why, and the variable to set.
//
// FILE may be the top of a set (run_table_1.sh sourcing CONFIG.sh and submitting SRUN.sh through
// sbatch): the files it sources and the scripts it runs are read with it (shell_script.h); the
// user's variables (ScriptEnv) replace the scripts' own assignments to them. A script that
// reaches its own `exit 1` (an if/elif chain's else) before a training command holding undecided
// words is refused at that exit.
#pragma once
#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "core/error.h"

namespace ppsim {

struct MegatronArgs {
  YAML::Node model;           // model keys (layers, hidden, moe, mla, ...)
  YAML::Node parallel;        // pp, tp, ep, vpp, layer_split, recompute*, zero, microbatches (needs dp)
  YAML::Node precision;       // params, gemm
  YAML::Node costs;           // dp_overlap, where the script states how gradients are reduced
  int global_batch_size = 0;  // 0: not given; microbatches = it / (micro_batch_size * dp)
  int micro_batch_size = 1;
  std::vector<std::string> ignored;  // flags read but not used, in file order
  // The world size the launcher states (torchrun --nproc-per-node x --nnodes; slime's
  // --actor-num-nodes x --actor-num-gpus-per-node; Slurm's tasks: sbatch/srun --ntasks, else
  // --nodes x --ntasks-per-node), 0 when it does not; from: what said it;
  // why: what made it unknown.
  long long world_size = 0;
  std::string world_size_from, world_size_why;
  std::string source;  // "file:line" of the training command
  // Where the training command starts in the script (for a plain argument list, its first line),
  // and --global-batch-size's value: the places errors about them point at.
  SourceLoc at{};
  SourceLoc global_batch_at{};
  // Why a missing flag may be missing: the first unknown word among the arguments (an unset
  // array, a file not sourced), or a line right after the command that starts with a flag (a
  // missing `\` at the end of the line before). "" when none.
  std::string missing_hint;
  // slime's --use-dynamic-batch-size: micro-batches packed to --max-tokens-per-gpu at run time.
  std::string dynamic_batch;
  std::string tokenizer;  // --tokenizer-type, when given (the vocabulary's source)
  // How Megatron pads the tokenizer's vocabulary (vocab_size_with_padding): up to a multiple of
  // this (--make-vocab-size-divisible-by, default 128) x tp; 0: not padded (--no-pad-vocab-size,
  // Pai-Megatron-Patch's --patch-tokenizer-type). Applied to a YAML's model.vocab where the
  // arguments give none (the config's expansion).
  long long vocab_divisible_by = 128;
  // How a flag was read beyond a copy of its value ("--glu-activation geglu: a gated MLP ..."),
  // listed by `ppsim model` as its "read as" rules (ModelConfigData::read_as).
  std::vector<std::string> read_as;
  // What ppsim cannot price from the file alone but the config may decide: refused (message at
  // `at`) unless the YAML writes `key` (a dotted path, "precision.fp8_recipe"), whose value wins.
  struct Refusal {
    std::string key;
    SourceLoc at;
    std::string message;
  };
  std::vector<Refusal> unless_written;
};

// The variables a user sets for the script (`megatron_args: {script: F, env: {MODEL_SIZE: 76B}}`):
// they replace the script's own assignments to them (shell_script.h, read_shell).
using ScriptEnv = std::map<std::string, std::string>;
// Whether `name` can be a ScriptEnv key: a shell variable name ([A-Za-z_][A-Za-z0-9_]*).
bool is_script_variable(const std::string& name);

// `where` locates an unreadable file (the megatron_args key); errors inside point at the flag's
// line:col in the file.
MegatronArgs read_megatron_args(const std::string& path, const SourceLoc& where = {}, const ScriptEnv& env = {});
// `dir`: the script's folder (for `source FILE` and `$(dirname "$0")`).
MegatronArgs megatron_args_from_text(const std::string& text, const std::string& name, const std::string& dir = "",
                                     const ScriptEnv& env = {});

// `vocab` padded as Megatron pads a tokenizer's vocabulary: up to a multiple of divisible_by x tp.
long long megatron_padded_vocab(long long vocab, long long divisible_by, long long tp);

// Megatron's --pipeline-model-parallel-layout ("Et*3|(tt|)*29,m|L": E embedding, t a layer, m an
// MTP layer, L the loss and head, '|' ends a chunk, X*n and (...)*n repeat, ',' and spaces are
// ignored) as layers per chunk, with the MTP layers counted; InputError(loc) when malformed.
struct PipelineLayout {
  std::vector<int> layers;  // per chunk, in Megatron's order (chunk i on rank i mod pp)
  int mtp = 0;
  bool embedding_first = true;  // E only in the first chunk
  bool loss_last = true;        // L only in the last chunk
};
PipelineLayout parse_pipeline_layout(const std::string& layout, const SourceLoc& loc);

}  // namespace ppsim
