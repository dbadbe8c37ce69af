#include "api/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "core/schedule.h"
#include "cost/flops.h"
#include "cost/hf_config.h"
#include "cost/invariants.h"
#include "cost/layer_split.h"
#include "cost/memory.h"
#include "cost/yaml_reader.h"

namespace ppsim::api {

namespace {

// A config.json alone: the model from it, a placeholder cluster (ppsim model reads no hardware).
ModelConfigData load_hf(const ModelRequest& req) {
  YAML::Node root(YAML::NodeType::Map);
  YAML::Node model(YAML::NodeType::Map);
  model["hf_config"] = req.path;  // base_dir "": relative to the working directory, as given
  root["model"] = model;
  YAML::Node hw(YAML::NodeType::Map);
  hw["name"] = "h100";
  root["hardware"] = hw;
  YAML::Node par(YAML::NodeType::Map);
  par["pp"] = 1;
  par["microbatches"] = 1;
  root["parallel"] = par;
  // Errors about the file name it, not the placeholder tree.
  ModelConfigData c = validate_config_tree(root, req.path, "", {});
  c.name = std::filesystem::path(req.path).stem().string();
  return c;
}

// "61 layers x 187.10M", or per kind of layer when they differ ("3 layers x 396.36M + 58 layers x
// 19.27M"), each kind once in the order it first appears (Maverick's alternate layers: "24 layers x").
std::string per_layer(const std::vector<double>& v) {
  std::vector<std::pair<double, int>> kinds;
  for (double x : v) {
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == x; });
    if (it == kinds.end())
      kinds.emplace_back(x, 1);
    else
      ++it->second;
  }
  std::string s;
  for (const auto& [x, n] : kinds)
    if (x != 0) s += fmt::format("{}{} layers x {}", s.empty() ? "" : " + ", n, short_count(x));
  return s.empty() ? "none" : s;
}

// Parameters by part, each with what it is made of.
void count_parts(const ModelSpec& m, ModelReport& r) {
  std::vector<double> attention, norms, dense_mlp, router, shared, routed;
  for (int l = 0; l < m.layers; ++l) {
    const LayerParamParts p = layer_param_parts(m, l);
    attention.push_back(p.attention);
    norms.push_back(p.norms);
    dense_mlp.push_back(p.dense_mlp);
    router.push_back(p.router);
    shared.push_back(p.shared_experts);
    routed.push_back(p.routed_experts);
    (m.layer_is_moe(l) ? r.moe_layers : r.dense_layers) += 1;
  }
  auto sum = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); };
  const double share = m.moe.enabled() ? static_cast<double>(m.moe.top_k) / m.moe.experts : 0;
  const double vh = static_cast<double>(m.vocab) * static_cast<double>(m.hidden);
  const double embedding = embedding_params(m);
  const double head = m.tied_embeddings ? 0 : head_params(m) - final_norm_params(m);
  const double fnorm = final_norm_params(m);
  r.parts = {{"embedding", embedding, embedding,
              fmt::format("vocab {} x hidden {}{}", m.vocab, m.hidden,
                          m.learned_positions > 0 ? fmt::format(" + {} positions x hidden", m.learned_positions) : "")},
             {"attention", sum(attention), sum(attention), per_layer(attention)},
             {"dense_mlp", sum(dense_mlp), sum(dense_mlp), per_layer(dense_mlp)},
             {"routed_experts", sum(routed), sum(routed) * share,
              m.moe.enabled()
                  ? fmt::format("{}; {} experts each, top-{} active", per_layer(routed), m.moe.experts, m.moe.top_k)
                  : "none"},
             {"shared_experts", sum(shared), sum(shared), per_layer(shared)},
             {"router", sum(router), sum(router), per_layer(router)},
             {"norms", sum(norms) + fnorm, sum(norms) + fnorm, per_layer(norms) + " + final " + short_count(fnorm)},
             {"head", head, head,
              m.tied_embeddings ? "tied to the embedding" : fmt::format("vocab x hidden = {}", short_count(vh))}};
  for (const auto& p : r.parts) {
    r.total += p.total;
    r.active += p.active;
  }
  if (m.mtp_depth > 0) {
    const LayerParamParts last = layer_param_parts(m, m.layers - 1);
    const double own = mtp_projection_params(m);
    const double layer_active = last.dense() + (m.layer_is_moe(m.layers - 1) ? last.routed_experts * share : 0);
    r.parts.push_back(
        {"mtp", m.mtp_depth * (last.dense() + last.routed_experts + own), m.mtp_depth * (layer_active + own),
         fmt::format("{} x (a layer like the last + {} projection and norms)", m.mtp_depth, short_count(own))});
  }
}

// FLOPs per token, the whole model (no parallel sharding), forward and full backward.
void count_flops(const ModelConfigData& c, ModelReport& r) {
  const Shard whole{1, 1};
  double fwd = 0, bwd = 0;
  for (int l = 0; l < c.model.layers; ++l) {
    const LayerWork w = layer_work(c, l, whole);
    fwd += w.forward_flops();
    bwd += w.backward_flops();
  }
  const BlockWork hw = head_work(c, whole);
  fwd += hw.forward_flops();
  bwd += hw.backward_flops();
  const double tokens = static_cast<double>(c.model.tokens_per_microbatch());
  r.forward_flops_per_token = fwd / tokens;
  r.backward_flops_per_token = bwd / tokens;
}

// The pipeline size asked for (0: none), with c.parallel's layer_split set for it.
int stage_count(const ModelRequest& req, bool hf, ModelConfigData& c) {
  const ModelSpec& m = c.model;
  int pp = req.pp.value_or(hf ? 0 : c.parallel.pp);
  if (!req.layer_split.empty()) {
    if (req.pp && static_cast<int>(req.layer_split.size()) != *req.pp)
      throw InputError(fmt::format("--layer-split has {} entries for --pp {}", req.layer_split.size(), *req.pp), {},
                       kExitUsage);
    pp = static_cast<int>(req.layer_split.size());
    int sum = 0;
    for (int x : req.layer_split) {
      if (x < 0) throw InputError(fmt::format("--layer-split: layer counts must be >= 0, got {}", x), {}, kExitUsage);
      sum += x;
    }
    if (sum != m.layers)
      throw InputError(fmt::format("--layer-split sums to {} layers, the model has {}", sum, m.layers), {}, kExitUsage);
    c.parallel.layer_split = req.layer_split;
  } else if (req.pp && !c.parallel.layer_split.empty() && static_cast<int>(c.parallel.layer_split.size()) != pp) {
    c.parallel.layer_split.clear();  // a new pipeline size: an even split
  }
  if (!(pp > 1 || (pp == 1 && req.pp))) return 0;
  c.parallel.pp = pp;
  // The config's own pipeline keeps its split over pp x vpp stages (validated with the config).
  const bool own_stages = !req.pp && req.layer_split.empty() && c.parallel.vpp > 1;
  if (!own_stages && c.parallel.layer_split.empty() && m.layers % pp != 0) {
    // As evenly as possible, the remainder going to the later stages (layer_split.h's rule).
    if (m.layers < pp)
      throw InputError(fmt::format("--pp {} is more stages than the model's {} layers", pp, m.layers), {}, kExitUsage);
    c.parallel.layer_split.assign(static_cast<std::size_t>(pp), m.layers / pp);
    for (int s = pp - m.layers % pp; s < pp; ++s) ++c.parallel.layer_split[s];
  }
  return pp;
}

// One slice's parameters added to its rank's count.
void add_slice(const ModelSpec& m, const SliceLayout& sl, StageParams& st) {
  st.chunks.push_back({sl.first_layer, sl.layers});
  st.layers += sl.layers;
  st.embedding = st.embedding || sl.embedding;
  st.head = st.head || sl.head;
  for (int l = sl.first_layer; l < sl.first_layer + sl.layers; ++l) {
    const ParamCount p = layer_params(m, l);
    st.params += p.total();
    st.expert_params += p.expert;
  }
  if (sl.embedding) st.params += embedding_params(m);
  if (sl.head) {
    st.params += head_params(m);  // a tied head on another stage holds its own copy
    if (m.mtp_depth > 0) {
      const ParamCount mtp = mtp_module_params(m);
      st.params += m.mtp_depth * mtp.total();
      st.expert_params += m.mtp_depth * mtp.expert;
      if (!sl.embedding) st.params += embedding_params(m);  // the MTP modules' embedding
    }
  }
}

// Per pipeline rank: its slices as the config's schedule places them (stages_per_rank > 1: the
// interleaved placement, stage s on rank s mod pp, or ZB-V's and DualPipeV's V, two stages a rank).
void count_stages(const ModelConfigData& c, int pp, int stages_per_rank, ModelReport& r) {
  Schedule lay;
  const std::string& sched = c.parallel.schedule;
  if (stages_per_rank == 2 && (sched == "zbv" || sched == "dualpipev"))
    layout_v_shape(lay, pp);
  else
    layout_linear(lay, pp, stages_per_rank);
  const std::vector<SliceLayout> slices = slice_layouts(c, pp * stages_per_rank);
  r.stages.assign(static_cast<std::size_t>(pp), StageParams{});
  for (int s = 0; s < pp * stages_per_rank; ++s)
    add_slice(c.model, slices[static_cast<std::size_t>(s)], r.stages[static_cast<std::size_t>(lay.stage_rank[s])]);
  for (int rank = 0; rank < pp; ++rank) {
    StageParams& st = r.stages[static_cast<std::size_t>(rank)];
    st.stage = rank;
    st.first_layer = st.chunks.empty() ? 0 : st.chunks.front()[0];
  }
}

}  // namespace

std::string short_count(double x) {
  if (x >= 1e9) return fmt::format("{:.2f}B", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.2f}M", x / 1e6);
  if (x >= 1e3) return fmt::format("{:.2f}K", x / 1e3);
  return fmt::format("{:.0f}", x);
}

// The invariant of the counts (cost/invariants.h): the parts add up to the memory model's own
// count of the model (model_params, computed apart). The stages are not held to the total: a stage
// may hold a copy (the last stage's embedding for the MTP modules, a tied head).
void check_counts(const ModelReport& r) {
  std::vector<std::pair<std::string, double>> parts;
  for (const ModelPart& p : r.parts)
    if (p.name != "mtp") parts.emplace_back(p.name, p.total);
  check_parts_add_up("the model's parameters by part", model_params(r.config.model), parts, AnswerSource{r.source, ""});
}

ModelReport model_report(const ModelRequest& req) {
  ModelReport r;
  r.source = req.path;
  const bool hf = is_hf_config_file(req.path);
  if (hf && !req.sets.empty())
    throw InputError("--set applies to a ppsim YAML config, not to a config.json", {}, kExitUsage);
  if (req.pp && *req.pp < 1)
    throw InputError(fmt::format("--pp: expected a count >= 1, got {}", *req.pp), {}, kExitUsage);
  if (hf) {
    r.config = load_hf(req);
    const HfReading h = read_hf_config(req.path);
    r.read_as = h.read_as;
    r.not_counted = h.not_counted;
    r.other = h.other;
    r.other_params = h.other_params;
    r.seq_len_why = h.seq_len_why;
  } else {
    const std::string dir = std::filesystem::path(req.path).parent_path().string();
    r.config = parse_config(read_yaml_file(req.path), req.path, dir, req.sets);
    r.read_as = r.config.read_as;  // megatron_args' rules
    r.seq_len_why = "model.seq_len of the config";
  }
  ModelConfigData& c = r.config;
  if (req.seq_len) {
    if (*req.seq_len < 1)
      throw InputError(fmt::format("--seq-len: expected a count >= 1, got {}", *req.seq_len), {}, kExitUsage);
    c.model.seq_len = *req.seq_len;
    r.seq_len_why = "--seq-len";
  }
  r.seq_len = c.model.seq_len;
  count_parts(c.model, r);
  count_flops(c, r);
  const int pp = stage_count(req, hf, c);
  // The config's own pipeline places vpp stages on a rank (2 for ZB-V and DualPipeV); --pp or
  // --layer-split asks for one stage a rank.
  const bool own = !req.pp && req.layer_split.empty();
  const std::string& sched = c.parallel.schedule;
  const int per_rank = !own ? 1 : (sched == "zbv" || sched == "dualpipev") ? 2 : std::max(1, c.parallel.vpp);
  if (pp > 0) count_stages(c, pp, per_rank, r);
  check_counts(r);
  return r;
}

nlohmann::json model_json(const ModelReport& r) {
  const ModelSpec& m = r.config.model;
  auto count = [](double x) { return static_cast<std::int64_t>(std::llround(x)); };
  nlohmann::json j;
  j["source"] = r.source;
  j["model"] = {{"name", r.config.name},
                {"layers", m.layers},
                {"hidden", m.hidden},
                {"heads", m.heads},
                {"kv_heads", m.kv_heads},
                {"vocab", m.vocab},
                {"seq_len", r.seq_len},
                {"dense_layers", r.dense_layers},
                {"moe_layers", r.moe_layers},
                {"experts", m.moe.experts},
                {"top_k", m.moe.top_k},
                {"shared_experts", m.moe.shared_experts},
                {"mla", m.mla.enabled},
                {"mtp_depth", m.mtp_depth},
                {"tied_embeddings", m.tied_embeddings}};
  nlohmann::json by_part = nlohmann::json::object();
  for (const auto& p : r.parts)
    if (p.name != "mtp")
      by_part[p.name] = {{"total", count(p.total)}, {"active", count(p.active)}, {"made_of", p.made_of}};
  j["parameters"] = {{"total", count(r.total)}, {"active", count(r.active)}, {"by_part", by_part}};
  if (!r.other.empty()) j["parameters"]["other"] = {{"what", r.other}, {"params", count(r.other_params)}};
  j["read_as"] = r.read_as;
  j["not_counted"] = r.not_counted;
  for (const auto& p : r.parts)
    if (p.name == "mtp") j["mtp"] = {{"total", count(p.total)}, {"active", count(p.active)}, {"depth", m.mtp_depth}};
  j["flops_per_token"] = {{"seq_len", r.seq_len},
                          {"seq_len_from", r.seq_len_why},
                          {"forward", r.forward_flops_per_token},
                          {"backward", r.backward_flops_per_token}};
  j["stages"] = nlohmann::json::array();
  for (const auto& s : r.stages)
    j["stages"].push_back({{"stage", s.stage},
                           {"first_layer", s.first_layer},
                           {"chunks", s.chunks},
                           {"layers", s.layers},
                           {"embedding", s.embedding},
                           {"head", s.head},
                           {"params", count(s.params)},
                           {"expert_params", count(s.expert_params)}});
  return j;
}

}  // namespace ppsim::api
