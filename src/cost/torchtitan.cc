#include "cost/torchtitan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/text_file.h"

#if PPSIM_HAVE_TOMLPP
#include <toml++/toml.h>
#endif

namespace ppsim {

std::vector<int> torchtitan_layer_split(long long layers, long long stages, long long first_less, long long last_less) {
  if (stages < 1 || layers < 0) return {};
  if (stages == 1) return {static_cast<int>(layers)};
  const long long effective = layers + first_less + last_less;
  if (stages > effective) return {};
  const long long per = effective / stages, extra = effective % stages;
  if (per == 0 || first_less > per || last_less > per) return {};
  std::vector<int> out;
  long long placed = 0;
  for (long long i = 0; i < stages; ++i) {
    long long n = per + (i < extra ? 1 : 0);
    if (i == 0) n -= first_less;
    if (i == stages - 1) n -= last_less;
    n = std::min(n, layers - placed);  // torchtitan stops at the last layer
    out.push_back(static_cast<int>(n));
    placed += n;
  }
  out.back() += static_cast<int>(layers - placed);  // none left over in torchtitan's own checks' range
  return out;
}

std::string torchtitan_schedule(const std::string& name) {
  if (name == "GPipe") return "gpipe";
  if (name == "1F1B") return "1f1b";
  if (name == "Interleaved1F1B") return "interleaved-1f1b";
  if (name == "ZBVZeroBubble") return "zbv";
  if (name == "DualPipeV") return "dualpipev";
  return "";
}

#if PPSIM_HAVE_TOMLPP

namespace {

SourceLoc loc_of(const toml::node* n, const std::string& name) {
  if (!n) return SourceLoc{name, 0, 0};
  const auto& s = n->source();
  return SourceLoc{name, static_cast<int>(s.begin.line), static_cast<int>(s.begin.column)};
}

std::string loc_text(const SourceLoc& l) { return fmt::format("{}:{}:{}", l.file, l.line, l.col); }

class Section {
 public:
  Section(const toml::table* t, std::string section, std::string name)
      : t_(t), section_(std::move(section)), name_(std::move(name)) {}
  const toml::node* get(const char* key) const { return t_ ? t_->get(key) : nullptr; }
  bool has(const char* key) const { return get(key) != nullptr; }
  long long integer(const char* key, long long def) const {
    const toml::node* n = get(key);
    if (!n) return def;
    if (!n->is_integer()) throw InputError(loc_of(n, name_), fmt::format("[{}] {} must be an integer", section_, key));
    return n->value<long long>().value_or(def);
  }
  std::string string(const char* key, const std::string& def) const {
    const toml::node* n = get(key);
    if (!n) return def;
    if (!n->is_string()) throw InputError(loc_of(n, name_), fmt::format("[{}] {} must be a string", section_, key));
    return n->value<std::string>().value_or(def);
  }
  SourceLoc loc(const char* key) const { return loc_of(get(key), name_); }

 private:
  const toml::table* t_;
  std::string section_, name_;
};

// data_parallel_shard_degree (-1: the world left after pp x tp x cp x replicate) and
// data_parallel_replicate_degree: dp = shard x replicate; a shard above 1 is FSDP (ZeRO-3 in
// FSDP2's layout), over the shard group only when replicate is above 1 (HSDP); the DP traffic on.
void read_data_parallel(const Section& par, long long per_replica, long long gpus, YAML::Node p, TorchtitanKeys& out) {
  const long long replicate = par.integer("data_parallel_replicate_degree", 1);
  long long shard = par.integer("data_parallel_shard_degree", -1);
  if (replicate < 1 || shard == 0 || shard < -1)
    throw InputError(par.loc(replicate < 1 ? "data_parallel_replicate_degree" : "data_parallel_shard_degree"),
                     "[parallelism] data_parallel degrees must be >= 1 (the shard degree -1: the rest of the world)");
  if (shard == -1) {
    if (gpus <= 0) return;  // dp follows from hardware.gpus / (pp x tp x cp) in the config
    if (gpus % (per_replica * replicate) != 0)
      throw InputError(par.loc("data_parallel_shard_degree"),
                       fmt::format("[parallelism] data_parallel_shard_degree -1: {} GPUs is not a multiple of "
                                   "pipeline x tensor x context x replicate = {}",
                                   gpus, per_replica * replicate));
    shard = gpus / (per_replica * replicate);
  } else if (gpus > 0 && per_replica * replicate * shard != gpus) {
    // torchtitan's ParallelDims: the degrees' product is the world size.
    throw InputError(par.loc(par.has("data_parallel_shard_degree") ? "data_parallel_shard_degree"
                                                                   : "data_parallel_replicate_degree"),
                     fmt::format("[parallelism] pipeline x tensor x context x data_parallel_replicate x "
                                 "data_parallel_shard = {} x {} x {} = {} GPUs, but the config has {} (torchtitan "
                                 "requires the world size; data_parallel_shard_degree -1 takes the rest)",
                                 per_replica, replicate, shard, per_replica * replicate * shard, gpus));
  }
  p["dp"] = shard * replicate;
  YAML::Node costs(YAML::NodeType::Map);
  if (shard * replicate > 1) costs["dp_comm"] = true;
  out.costs = costs;
  if (shard > 1) {
    p["zero"] = 3;
    p["fsdp"] = true;
    if (replicate > 1) p["zero_shard"] = shard;
  }
}

// torchtitan's 2024 layout kept the degrees under [training] and the pipeline under
// [experimental]; its names and meanings changed since (data_parallel_degree, microbatch counts,
// lower-case schedule names). Read as the current layout they would be dropped: refused.
void refuse_old_layout(const toml::table& doc, const std::string& name) {
  for (const char* section : {"training", "experimental"}) {
    const Section sec(doc[section].as_table(), section, name);
    for (const char* key :
         {"data_parallel_degree", "data_parallel_shard_degree", "data_parallel_replicate_degree",
          "tensor_parallel_degree", "pipeline_parallel_degree", "context_parallel_degree", "pipeline_parallel_schedule",
          "pipeline_parallel_microbatches", "pipeline_parallel_split_points", "expert_parallel_degree"})
      if (sec.has(key))
        throw InputError(sec.loc(key),
                         fmt::format("[{}] {}: torchtitan's 2024 layout, which ppsim does not read; today's "
                                     "torchtitan (and ppsim) take the degrees and the pipeline under [parallelism] "
                                     "(data_parallel_shard_degree, tensor_parallel_degree, pipeline_parallel_degree, "
                                     "pipeline_parallel_schedule, pipeline_parallel_microbatch_size)",
                                     section, key));
  }
}

// [training] global_batch_size (-1 or absent: local x dp): a multiple of local_batch_size x dp,
// as torchtitan asserts. One step here is one local batch (gradient accumulation is not read).
void check_global_batch(const Section& tr, long long local, const YAML::Node& p) {
  const long long global = tr.integer("global_batch_size", -1);
  if (global < 0 || !p["dp"]) return;
  const long long dp = p["dp"].as<long long>();
  if (global == 0 || global % (local * dp) != 0)
    throw InputError(tr.loc("global_batch_size"),
                     fmt::format("[training] global_batch_size {} is not a multiple of local_batch_size {} x "
                                 "data-parallel degree {} = {} (torchtitan asserts it)",
                                 global, local, dp, local * dp));
}

// [activation_checkpoint] (ActivationCheckpointConfig: mode "selective", selective_ac_option "2" by
// default). full and none as they say; selective N: every Nth block (0 and 1: every one), applied
// once the split is known; op-level SAC and memory_budget: the config states the recompute.
void read_activation_checkpoint(const Section& ac, YAML::Node p, TorchtitanKeys& out) {
  const std::string mode = ac.string("mode", "selective");
  if (mode == "full" || mode == "none") {
    p["recompute"] = mode;
    return;
  }
  if (mode == "memory_budget") {
    out.recompute_unstated_at = ac.loc("mode");
    out.recompute_unstated =
        "[activation_checkpoint] mode memory_budget: what torch.compile recomputes under its budget is not known "
        "before the run; write parallel.recompute (none, selective, full) or parallel.recompute_ops beside torchtitan";
    return;
  }
  if (mode != "selective")
    throw InputError(ac.loc("mode"),
                     fmt::format("[activation_checkpoint] mode '{}': none, selective, full or memory_budget", mode));
  const toml::node* opt_node = ac.get("selective_ac_option");
  const std::string opt = opt_node && opt_node->is_integer() ? std::to_string(opt_node->value<long long>().value_or(0))
                                                             : ac.string("selective_ac_option", "2");
  if (opt == "op") {
    out.recompute_unstated_at = ac.loc("selective_ac_option");
    out.recompute_unstated =
        "[activation_checkpoint] selective_ac_option \"op\": torchtitan's op-level SAC saves the outputs its "
        "version and model list and recomputes the rest, which ppsim cannot know from the TOML; write "
        "parallel.recompute (none, selective, full) or parallel.recompute_ops beside torchtitan (docs/CONFIG.md)";
    return;
  }
  if (opt.empty() || !std::all_of(opt.begin(), opt.end(), [](unsigned char ch) { return std::isdigit(ch); }) ||
      opt.size() > 9)
    throw InputError(ac.loc("selective_ac_option"),
                     fmt::format("[activation_checkpoint] selective_ac_option '{}': \"op\" or a positive integer N "
                                 "(every Nth block recomputed)",
                                 opt));
  const long long every = std::stoll(opt);
  if (every <= 1)
    p["recompute"] = "full";  // torchtitan: `not ac_freq or count % ac_freq == 0`: every block
  else
    out.layer_sac_every = every;
}

// [model] converters and their settings: torchao's float8 on the linear layers ("float8", or
// "quantize.linear.float8" at 238fa99) with its tensorwise recipe is precision.gemm fp8 at
// fp8_recipe tensor; anything else is named for check_torchtitan_model to refuse unless stated.
void read_converters(const toml::table& doc, const Section& model, TorchtitanKeys& out) {
  const toml::node* conv = model.get("converters");
  if (!conv) return;
  out.converters_at = model.loc("converters");
  const toml::array* list = conv->as_array();
  if (!list) throw InputError(out.converters_at, "[model] converters must be a list of strings");
  for (const toml::node& n : *list) {
    const std::optional<std::string> name = n.value<std::string>();
    if (!name) throw InputError(out.converters_at, "[model] converters must be a list of strings");
    if (*name == "float8" || *name == "quantize.linear.float8")
      out.fp8_linear = true;
    else if (out.unpriced.empty())
      out.unpriced = fmt::format("\"{}\"", *name);
  }
  if (!out.fp8_linear) return;
  // The recipe: [quantize.linear.float8] (238fa99) or [float8] (earlier layouts); none is tensorwise.
  const toml::node* recipe = doc.at_path("quantize.linear.float8.recipe_name").node();
  if (!recipe) recipe = doc.at_path("float8.recipe_name").node();
  const std::string name = recipe ? recipe->value<std::string>().value_or("?") : "tensorwise";
  if (name != "tensorwise" && out.unpriced.empty()) {
    out.unpriced = fmt::format("float8 with recipe_name \"{}\" (ppsim prices per-tensor scaling, tensorwise)", name);
    out.converters_at = loc_of(recipe, out.converters_at.file);
  }
}

}  // namespace

TorchtitanKeys torchtitan_from_text(const std::string& text, const std::string& name, const std::string& dir,
                                    long long gpus) {
  toml::table doc;
  try {
    doc = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    const auto& s = e.source();
    throw InputError(SourceLoc{name, static_cast<int>(s.begin.line), static_cast<int>(s.begin.column)},
                     fmt::format("not valid TOML: {}", std::string(e.description())));
  }
  refuse_old_layout(doc, name);
  const Section par(doc["parallelism"].as_table(), "parallelism", name);
  const Section tr(doc["training"].as_table(), "training", name);
  const Section model(doc["model"].as_table(), "model", name);
  const Section ac(doc["activation_checkpoint"].as_table(), "activation_checkpoint", name);
  TorchtitanKeys out;
  YAML::Node m(YAML::NodeType::Map), p(YAML::NodeType::Map), prec(YAML::NodeType::Map);

  const long long pp = par.integer("pipeline_parallel_degree", 1);
  const long long tp = par.integer("tensor_parallel_degree", 1);
  const long long cp = par.integer("context_parallel_degree", 1);
  const long long ep = par.integer("expert_parallel_degree", 1);
  if (pp < 1 || tp < 1 || ep < 1)
    throw InputError(par.loc(pp < 1   ? "pipeline_parallel_degree"
                             : tp < 1 ? "tensor_parallel_degree"
                                      : "expert_parallel_degree"),
                     "[parallelism] degrees must be >= 1");
  if (cp < 1) throw InputError(par.loc("context_parallel_degree"), "[parallelism] degrees must be >= 1");
  // JobConfig: etp is 1 (experts not split by tp, EP over dp and tp) or tp; no effect at ep 1.
  const long long etp = par.integer("expert_tensor_parallel_degree", 1);
  if (ep > 1 && tp > 1 && etp != tp && etp != 1)
    throw InputError(par.loc("expert_tensor_parallel_degree"),
                     fmt::format("[parallelism] expert_tensor_parallel_degree {} with tensor_parallel_degree {}: "
                                 "torchtitan takes 1 (whole experts) or tp",
                                 etp, tp));
  p["pp"] = pp;
  p["tp"] = tp;
  if (cp > 1) {
    p["cp"] = cp;
    p["cp_runtime"] = "torch";  // PyTorch's context_parallel: its ring backward (docs/CONFIG.md)
  }
  if (ep > 1) p["ep"] = ep;
  if (ep > 1 && tp > 1 && etp == 1) p["etp"] = 1;  // whole experts, EP over dp x tp (parallel.etp)
  read_data_parallel(par, pp * tp * cp, gpus, p, out);

  // At pp 1 torchtitan builds no pipeline: the schedule is not read.
  const std::string sched = pp == 1 ? "1F1B" : par.string("pipeline_parallel_schedule", "1F1B");
  const std::string family = torchtitan_schedule(sched);
  if (family.empty())
    throw InputError(
        par.loc("pipeline_parallel_schedule"),
        fmt::format("[parallelism] pipeline_parallel_schedule '{}' has no ppsim family (GPipe, 1F1B, "
                    "Interleaved1F1B, ZBVZeroBubble, DualPipeV); its CSV can be simulated with --schedule-file",
                    sched));
  p["schedule"] = family;
  const bool multi = family == "interleaved-1f1b" || family == "zbv" || family == "dualpipev";
  const long long mbs = par.integer("pipeline_parallel_microbatch_size", 1);
  const long long local = tr.integer("local_batch_size", tr.integer("batch_size", 8));
  if (mbs < 1 || local % mbs != 0)
    throw InputError(
        tr.has("local_batch_size") ? tr.loc("local_batch_size") : par.loc("pipeline_parallel_microbatch_size"),
        fmt::format("[training] local_batch_size {} is not a multiple of [parallelism] "
                    "pipeline_parallel_microbatch_size {}",
                    local, mbs));
  check_global_batch(tr, local, p);
  p["microbatches"] = pp == 1 ? 1 : local / mbs;  // at pp 1, the local batch in one pass
  m["micro_batch_size"] = pp == 1 ? local : mbs;
  if (tr.has("seq_len")) m["seq_len"] = tr.integer("seq_len", 2048);
  const std::string mp = tr.string("mixed_precision_param", "bfloat16");
  prec["params"] = mp == "float32" ? "fp32" : "bf16";
  read_activation_checkpoint(ac, p, out);
  out.model_name = model.string("name", "llama3");
  out.flavor = model.string("flavor", "debugmodel");
  out.flavor_default = !model.has("flavor");
  out.flavor_at = model.has("flavor") ? model.loc("flavor") : loc_of(doc["model"].node(), name);
  read_converters(doc, model, out);
  if (out.fp8_linear && out.unpriced.empty()) {
    prec["gemm"] = "fp8";
    prec["fp8_recipe"] = "tensor";  // torchao's tensorwise: one scale per tensor
  }
  // The model: [model] hf_assets_path/config.json when it exists.
  const std::string assets = model.string("hf_assets_path", "");
  if (!assets.empty()) {
    // torchtitan resolves it from where it runs (its repository's root, above the TOML's
    // train_configs/ folder): the TOML's folder, then each folder above it.
    const std::filesystem::path rel = std::filesystem::path(assets) / "config.json";
    std::filesystem::path base = std::filesystem::absolute(dir.empty() ? "." : dir).lexically_normal();
    const std::filesystem::path first = (rel.is_absolute() ? rel : base / rel).lexically_normal();
    std::filesystem::path found;
    for (int up = 0; up < 32 && found.empty(); ++up) {
      const std::filesystem::path cfg = (rel.is_absolute() ? rel : base / rel).lexically_normal();
      if (std::filesystem::exists(cfg)) found = cfg;
      if (rel.is_absolute() || base == base.parent_path()) break;
      base = base.parent_path();
    }
    if (!found.empty())
      m["hf_config"] = found.string();
    else
      out.missing_model = fmt::format(
          "{}: [model] hf_assets_path = \"{}\": no config.json at {} nor in the folders "
          "above (torchtitan's download_hf_assets puts it there); give model.hf_config or "
          "the model's keys",
          loc_text(model.loc("hf_assets_path")), assets, first.string());
  } else {
    out.missing_model = fmt::format(
        "{}: no [model] hf_assets_path: ppsim reads the model from its config.json; give "
        "model.hf_config or the model's keys",
        name);
  }
  // Stages per rank: layers_per_stage (vpp = layers / it / pp, once the layers are known), else
  // torchtitan's default of 2 for a multi-stage schedule (ZB-V and DualPipeV have 2 by design).
  if (par.has("pipeline_parallel_layers_per_stage")) {
    out.layers_per_stage = par.integer("pipeline_parallel_layers_per_stage", 1);
    if (out.layers_per_stage < 1)
      throw InputError(par.loc("pipeline_parallel_layers_per_stage"),
                       "[parallelism] pipeline_parallel_layers_per_stage must be >= 1");
    out.multi_stage = multi;
  } else if (family == "interleaved-1f1b" && pp > 1) {
    p["vpp"] = 2;
  }
  out.stages_per_rank = multi && pp > 1 ? 2 : 1;
  out.first_less = par.integer("pipeline_parallel_first_stage_less_layers", 1);
  out.last_less = par.integer("pipeline_parallel_last_stage_less_layers", 1);
  if (out.first_less < 0 || out.last_less < 0)
    throw InputError(par.loc(out.first_less < 0 ? "pipeline_parallel_first_stage_less_layers"
                                                : "pipeline_parallel_last_stage_less_layers"),
                     "[parallelism] pipeline_parallel_first/last_stage_less_layers must be >= 0");
  out.present = true;
  out.model = m;
  out.parallel = p;
  out.precision = prec;
  return out;
}

#else

TorchtitanKeys torchtitan_from_text(const std::string&, const std::string& name, const std::string&, long long) {
  throw InputError(SourceLoc{name, 0, 0},
                   "this ppsim was built without toml++ (libtomlplusplus-dev): torchtitan TOML configs are refused");
}

#endif

TorchtitanKeys read_torchtitan(const std::string& path, long long gpus, const SourceLoc& where) {
  const std::string text = read_text_file(path, where, "torchtitan file", 4u << 20);
  return torchtitan_from_text(text, path, std::filesystem::path(path).parent_path().string(), gpus);
}

}  // namespace ppsim
