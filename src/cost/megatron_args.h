// Megatron-LM launch arguments -> ppsim config keys, so that `megatron_args: FILE` in a config
// (or `--megatron-args FILE` on compare and plan) reads the run a user already launches.
//
// FILE is the argument list of a launch script: `--flag value ...`, over any number of lines,
// with `\` continuations, quotes and `#` comments; words before the first flag (torchrun,
// pretrain_gpt.py) are skipped. Not obvious: Megatron's defaults differ from ppsim's (GELU,
// LayerNorm, tied embeddings, dropout 0.1 unless the flags say otherwise), and those defaults are
// what the keys say when a flag is absent. The result merges under the config's own keys (those
// written in the YAML win). Flags ppsim does not use are listed in `ignored`, not refused.
#pragma once
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/error.h"

namespace ppsim {

struct MegatronArgs {
  YAML::Node model;      // model keys (layers, hidden, moe, mla, ...)
  YAML::Node parallel;   // pp, tp, ep, vpp, layer_split, recompute*, zero, microbatches (needs dp)
  YAML::Node precision;  // params, gemm
  int global_batch_size = 0;  // 0: not given; microbatches = it / (micro_batch_size * dp)
  int micro_batch_size = 1;
  std::vector<std::string> ignored;  // flags read but not used, in file order
};

// `where` locates an unreadable file (the megatron_args key); errors inside point at the flag's
// line:col in the file.
MegatronArgs read_megatron_args(const std::string& path, const SourceLoc& where = {});
MegatronArgs megatron_args_from_text(const std::string& text, const std::string& name);

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
