// torchtitan's TOML job config -> ppsim config keys, so that `torchtitan: FILE` in a config reads
// the [parallelism] and [training] sections of a run users already launch; the model comes from a
// Hugging Face config.json ([model] hf_assets_path/config.json, or model.hf_config beside it).
//
// Not obvious: torchtitan counts micro-batches per data-parallel rank (local_batch_size /
// pipeline_parallel_microbatch_size), which is ppsim's parallel.microbatches as it stands; and
// its multi-stage schedules put 2 stages on a rank unless pipeline_parallel_layers_per_stage says.
// Read with JobConfig's defaults and meanings (pytorch/torchtitan 238fa99, 2026-02-23, the last
// commit with TOML configs): data_parallel_shard_degree -1 is FSDP over the rest of the world,
// costed as ZeRO-3 with FSDP2's layout (parallel.zero 3, fsdp); a replicate degree above 1 with a
// shard degree above 1 is HSDP (parallel.zero_shard); at pipeline_parallel_degree 1 torchtitan
// builds no pipeline, so the schedule is not read and the local batch is one micro-batch.
// Built without toml++ (libtomlplusplus-dev), reading one is refused with one line.
#pragma once
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace ppsim {

struct TorchtitanKeys {
  YAML::Node model;                // seq_len, micro_batch_size, hf_config (when the TOML names one)
  YAML::Node parallel;             // pp, tp, ep, dp, vpp, microbatches, schedule, recompute
  YAML::Node precision;            // params
  long long layers_per_stage = 0;  // > 0: pipeline_parallel_layers_per_stage (vpp follows from the layers)
  bool multi_stage = false;        // the schedule puts several stages on a rank
  // pipeline_parallel_first/last_stage_less_layers (torchtitan's defaults 1, 1): the embedding and
  // the norm + output count as this many layers when torchtitan splits the layers over its stages.
  long long first_less = 1, last_less = 1;
  int stages_per_rank = 1;  // without layers_per_stage: 1, or 2 for a multi-stage schedule
  bool present = false;     // a TOML was read
  YAML::Node costs;         // dp_comm: true when the data-parallel degree is above 1
  // Why the TOML gives no model: the [model] hf_assets_path's config.json not found (naming the
  // path looked at), or no hf_assets_path; "" when it gives one.
  std::string missing_model;
  // [activation_checkpoint] selective with selective_ac_option N > 1: every Nth transformer block a
  // rank builds is fully recomputed (a count over the rank's stages in order); applied by
  // finish_torchtitan as recompute full + recompute_layers once the split is known. 0: not so.
  long long layer_sac_every = 0;
  // Op-level SAC ("op") or memory_budget: what is recomputed depends on torchtitan's version and
  // model (or on torch.compile), so the config must state parallel.recompute: why, and where.
  std::string recompute_unstated;
  SourceLoc recompute_unstated_at;
  // [model] name and flavor (JobConfig's defaults: llama3, debugmodel). torchtitan builds the model
  // from its table of flavors; hf_assets_path's config.json serves its tokenizer and checkpoint
  // conversion, so the config.json read as the model is checked against the flavor
  // (cost/torchtitan_model.h) unless the YAML gives the model itself.
  std::string model_name, flavor;
  bool flavor_default = false;  // the TOML gives no flavor: JobConfig's debugmodel
  SourceLoc flavor_at;
  bool model_from_assets = false;  // set by the config reader: the YAML writes no model.hf_config
  // [model] converters: float8 on the linear layers (torchao's tensorwise recipe: precision.gemm fp8,
  // fp8_recipe tensor); what ppsim has no figure for (rowwise float8, MX, the experts' float8
  // grouped GEMMs, an unknown converter) is named in `unpriced` and refused unless the YAML states
  // precision.gemm.
  bool fp8_linear = false;
  std::string unpriced;
  SourceLoc converters_at;
  bool gemm_stated = false;  // set by the config reader: the YAML writes precision.gemm
};

// torchtitan's split (generate_llm_fqn_per_model_part): `layers` + first_less + last_less
// effective layers over `stages`, the remainder to the first stages, the first stage's share less
// first_less, the last's less last_less. InputError-free: {} when torchtitan would refuse (a
// stage left without a share, or a weight above the share); the caller names the keys.
std::vector<int> torchtitan_layer_split(long long layers, long long stages, long long first_less, long long last_less);

// `gpus`: the config's hardware.gpus (0: not given), for data_parallel_shard_degree = -1.
TorchtitanKeys read_torchtitan(const std::string& path, long long gpus, const SourceLoc& where = {});
TorchtitanKeys torchtitan_from_text(const std::string& text, const std::string& name, const std::string& dir,
                                    long long gpus);

// ppsim's family for torchtitan's pipeline_parallel_schedule ("1F1B" -> "1f1b"); "" when none.
std::string torchtitan_schedule(const std::string& name);

}  // namespace ppsim
