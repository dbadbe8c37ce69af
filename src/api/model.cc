#include "api/model.h"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "cost/flops.h"
#include "cost/hf_config.h"
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

}  // namespace

ModelReport model_report(const ModelRequest& req) {
  ModelReport r;
  r.source = req.path;
  const bool hf = is_hf_config_file(req.path);
  if (hf && !req.sets.empty())
    throw InputError("--set applies to a ppsim YAML config, not to a config.json", {}, kExitUsage);
  if (req.pp && *req.pp < 1) throw InputError(fmt::format("--pp: expected a count >= 1, got {}", *req.pp), {}, kExitUsage);
  if (hf) {
    r.config = load_hf(req);
  } else {
    const std::string dir = std::filesystem::path(req.path).parent_path().string();
    r.config = parse_config(read_yaml_file(req.path), req.path, dir, req.sets);
  }
  ModelConfigData& c = r.config;
  if (req.seq_len) {
    if (*req.seq_len < 1) throw InputError(fmt::format("--seq-len: expected a count >= 1, got {}", *req.seq_len), {}, kExitUsage);
    c.model.seq_len = *req.seq_len;
  }
  const ModelSpec& m = c.model;
  r.seq_len = m.seq_len;

  // Parameters by part.
  double attention = 0, norms = final_norm_params(m), dense_mlp = 0, router = 0, shared = 0, routed = 0, routed_active = 0;
  for (int l = 0; l < m.layers; ++l) {
    const LayerParamParts p = layer_param_parts(m, l);
    attention += p.attention;
    norms += p.norms;
    dense_mlp += p.dense_mlp;
    router += p.router;
    shared += p.shared_experts;
    routed += p.routed_experts;
    if (m.moe.enabled()) routed_active += p.routed_experts * m.moe.top_k / m.moe.experts;
  }
  const double embedding = embedding_params(m);
  const double head = m.tied_embeddings ? 0 : head_params(m) - final_norm_params(m);
  r.parts = {{"embedding", embedding, embedding},   {"attention", attention, attention}, {"dense_mlp", dense_mlp, dense_mlp},
             {"routed_experts", routed, routed_active}, {"shared_experts", shared, shared}, {"router", router, router},
             {"norms", norms, norms},                {"head", head, head}};
  for (const auto& p : r.parts) {
    r.total += p.total;
    r.active += p.active;
  }
  if (m.mtp_depth > 0) {
    const LayerParamParts last = layer_param_parts(m, m.layers - 1);
    const double own = mtp_projection_params(m);
    const double layer_active =
        last.dense() + (m.moe.enabled() && m.layer_is_moe(m.layers - 1) ? last.routed_experts * m.moe.top_k / m.moe.experts : 0);
    r.parts.push_back({"mtp", m.mtp_depth * (last.dense() + last.routed_experts + own), m.mtp_depth * (layer_active + own)});
  }

  // FLOPs per token, the whole model (no parallel sharding), forward and full backward.
  const Shard whole{1, 1};
  double fwd = 0, bwd = 0;
  for (int l = 0; l < m.layers; ++l) {
    const LayerWork w = layer_work(c, l, whole);
    fwd += w.forward_flops();
    bwd += w.backward_flops();
  }
  const BlockWork hw = head_work(c, whole);
  fwd += hw.forward_flops();
  bwd += hw.backward_flops();
  const double tokens = static_cast<double>(m.tokens_per_microbatch());
  r.forward_flops_per_token = fwd / tokens;
  r.backward_flops_per_token = bwd / tokens;

  // Stages.
  int pp = req.pp.value_or(hf ? 0 : c.parallel.pp);
  if (!req.layer_split.empty()) {
    if (req.pp && static_cast<int>(req.layer_split.size()) != *req.pp)
      throw InputError(fmt::format("--layer-split has {} entries for --pp {}", req.layer_split.size(), *req.pp), {}, kExitUsage);
    pp = static_cast<int>(req.layer_split.size());
    int sum = 0;
    for (int x : req.layer_split) {
      if (x < 0) throw InputError(fmt::format("--layer-split: layer counts must be >= 0, got {}", x), {}, kExitUsage);
      sum += x;
    }
    if (sum != m.layers)
      throw InputError(fmt::format("--layer-split sums to {} layers, the model has {}", sum, m.layers), {}, kExitUsage);
    c.parallel.layer_split = req.layer_split;
  } else if (pp > 0 && !c.parallel.layer_split.empty() && static_cast<int>(c.parallel.layer_split.size()) != pp) {
    c.parallel.layer_split.clear();  // a new pipeline size: an even split
  }
  if (pp > 1 || (pp == 1 && req.pp)) {
    c.parallel.pp = pp;
    if (c.parallel.layer_split.empty() && m.layers % pp != 0) {
      // As evenly as possible, the remainder going to the later stages (layer_split.h's rule).
      if (m.layers < pp)
        throw InputError(fmt::format("--pp {} is more stages than the model's {} layers", pp, m.layers), {}, kExitUsage);
      c.parallel.layer_split.assign(static_cast<std::size_t>(pp), m.layers / pp);
      for (int s = pp - m.layers % pp; s < pp; ++s) ++c.parallel.layer_split[s];
    }
    const std::vector<SliceLayout> slices = slice_layouts(c, pp);
    for (int s = 0; s < pp; ++s) {
      const SliceLayout& sl = slices[s];
      StageParams st;
      st.stage = s;
      st.first_layer = sl.first_layer;
      st.layers = sl.layers;
      st.embedding = sl.embedding;
      st.head = sl.head;
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
      r.stages.push_back(st);
    }
  }
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
                {"moe_layers", m.moe.enabled() ? m.layers - m.dense_layers_first : 0},
                {"experts", m.moe.experts},
                {"top_k", m.moe.top_k},
                {"shared_experts", m.moe.shared_experts},
                {"mla", m.mla.enabled},
                {"mtp_depth", m.mtp_depth},
                {"tied_embeddings", m.tied_embeddings}};
  nlohmann::json by_part = nlohmann::json::object();
  for (const auto& p : r.parts)
    if (p.name != "mtp") by_part[p.name] = {{"total", count(p.total)}, {"active", count(p.active)}};
  j["parameters"] = {{"total", count(r.total)}, {"active", count(r.active)}, {"by_part", by_part}};
  for (const auto& p : r.parts)
    if (p.name == "mtp") j["mtp"] = {{"total", count(p.total)}, {"active", count(p.active)}, {"depth", m.mtp_depth}};
  j["flops_per_token"] = {{"seq_len", r.seq_len},
                          {"forward", r.forward_flops_per_token},
                          {"backward", r.backward_flops_per_token}};
  j["stages"] = nlohmann::json::array();
  for (const auto& s : r.stages)
    j["stages"].push_back({{"stage", s.stage},
                           {"first_layer", s.first_layer},
                           {"layers", s.layers},
                           {"embedding", s.embedding},
                           {"head", s.head},
                           {"params", count(s.params)},
                           {"expert_params", count(s.expert_params)}});
  return j;
}

}  // namespace ppsim::api
