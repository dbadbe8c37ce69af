#include "cost/torchtitan.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

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
  if (par.integer("expert_tensor_parallel_degree", 1) > 1)
    throw InputError(par.loc("expert_tensor_parallel_degree"),
                     "[parallelism] expert_tensor_parallel_degree > 1: expert tensor parallelism is not modelled");
  p["pp"] = pp;
  p["tp"] = tp;
  if (cp > 1) {
    p["cp"] = cp;
    p["cp_runtime"] = "torch";  // PyTorch's context_parallel: its ring backward (docs/CONFIG.md)
  }
  if (ep > 1) p["ep"] = ep;
  const long long replicate = par.integer("data_parallel_replicate_degree", 1);
  long long shard = par.integer("data_parallel_shard_degree", -1);
  if (shard == -1 && gpus > 0) shard = gpus / (pp * tp * cp * std::max(1LL, replicate));
  if (shard >= 1 && replicate >= 1) p["dp"] = shard * replicate;

  const std::string sched = par.string("pipeline_parallel_schedule", "1F1B");
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
  p["microbatches"] = local / mbs;
  m["micro_batch_size"] = mbs;
  if (tr.has("seq_len")) m["seq_len"] = tr.integer("seq_len", 2048);
  const std::string mp = tr.string("mixed_precision_param", "bfloat16");
  prec["params"] = mp == "float32" ? "fp32" : "bf16";
  const std::string mode = ac.string("mode", "selective");
  if (mode == "full")
    p["recompute"] = "full";
  else if (mode == "selective")
    p["recompute"] = "selective";
  else if (mode == "none")
    p["recompute"] = "none";
  else
    throw InputError(ac.loc("mode"), fmt::format("[activation_checkpoint] mode '{}': none, selective or full", mode));
  // The model: [model] hf_assets_path/config.json when it exists.
  const std::string assets = model.string("hf_assets_path", "");
  if (!assets.empty()) {
    std::filesystem::path cfg = std::filesystem::path(assets) / "config.json";
    if (cfg.is_relative() && !dir.empty()) cfg = std::filesystem::path(dir) / cfg;
    if (std::filesystem::exists(cfg)) m["hf_config"] = std::filesystem::absolute(cfg).lexically_normal().string();
  }
  // Stages per rank: layers_per_stage (vpp = layers / it / pp, once the layers are known), else
  // torchtitan's default of 2 for a multi-stage schedule (ZB-V and DualPipeV have 2 by design).
  if (par.has("pipeline_parallel_layers_per_stage")) {
    out.layers_per_stage = par.integer("pipeline_parallel_layers_per_stage", 1);
    if (out.layers_per_stage < 1)
      throw InputError(par.loc("pipeline_parallel_layers_per_stage"),
                       "[parallelism] pipeline_parallel_layers_per_stage must be >= 1");
    out.multi_stage = multi;
  } else if (family == "interleaved-1f1b") {
    p["vpp"] = 2;
  }
  out.stages_per_rank = multi ? 2 : 1;
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
  std::ifstream in(path, std::ios::binary);
  const SourceLoc at = where.file.empty() ? SourceLoc{path, 0, 0} : where;
  if (!in) throw InputError(at, fmt::format("cannot open the torchtitan file '{}'", path), {}, kExitIo);
  std::string text;
  char buf[1 << 14];
  while (text.size() <= (4u << 20) && in.read(buf, sizeof buf).gcount() > 0)
    text.append(buf, static_cast<std::size_t>(in.gcount()));
  if (text.size() > (4u << 20)) throw InputError(at, fmt::format("'{}' is over 4 MiB", path), {}, kExitLimit);
  return torchtitan_from_text(text, path, std::filesystem::path(path).parent_path().string(), gpus);
}

}  // namespace ppsim
