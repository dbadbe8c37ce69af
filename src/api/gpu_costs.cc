#include "api/gpu_costs.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace ppsim::api {

SimCosts profiled_costs(const ModelConfig& cfg, const Schedule& s, const ProfiledOps& p) {
  auto ns = [](double ms) { return static_cast<Time>(std::llround(ms * 1e6)); };
  SliceCosts sc;
  sc.f = ns(p.f_ms);
  sc.b = ns(p.b_ms);
  sc.w = std::min(sc.b, ns(p.w_ms));
  sc.fb = ns(p.fb_ms);
  SimCosts costs = uniform_costs(s.stages_per_pipe, sc, TimeScale::millis());
  const SimCosts derived = derive_costs(cfg, s);
  costs.link = derived.link;
  costs.rank_node = derived.rank_node;
  costs.inter_node_link = derived.inter_node_link;
  for (std::size_t i = 0; i < costs.slice.size() && i < derived.slice.size(); ++i) {
    costs.slice[i].act_bytes = derived.slice[i].act_bytes;
    costs.slice[i].grad_bytes = derived.slice[i].grad_bytes;
  }
  return costs;
}

int replay_gpu(int r, int ep, int gpus) { return (r * std::max(1, ep)) % gpus; }

int replay_partition(int r, int ep, int gpus) {
  int g = 0;
  for (int q = 0; q < r; ++q) g += replay_gpu(q, ep, gpus) == replay_gpu(r, ep, gpus) ? 1 : 0;
  return g;
}

void share_devices(SimCosts& c, int pp, int gpus, double step, const std::vector<double>* by_kind, int ep) {
  PPSIM_CHECK(gpus >= 1, "gpus = {}", gpus);
  c.rank_device.resize(static_cast<std::size_t>(pp));
  for (int r = 0; r < pp; ++r) c.rank_device[static_cast<std::size_t>(r)] = replay_gpu(r, ep, gpus);
  c.share_slowdown = std::max(1.0, step);
  // Shard e of rank r is on GPU (r ep + e) % gpus: on shard 0's GPU when e % gpus == 0.
  c.share_copies = std::max(1, ep) > 1 ? (ep - 1) / gpus + 1 : 1;
  if (by_kind)
    for (double v : *by_kind) c.share_by_kind.push_back(std::max(1.0, v));  // beside another: never faster
}

void unshare_profiled_copies(SimCosts& c, int pp) {
  if (c.share_copies <= 1) return;
  const double f = 1.0 + (c.share_copies - 1) * (c.share_slowdown - 1.0);
  if (c.rank_kind_scale.empty()) c.rank_kind_scale.assign(static_cast<std::size_t>(3 * pp), 1.0);
  for (double& x : c.rank_kind_scale) x /= f;
}

void profiled_overlap_costs(SimCosts& c, const std::map<std::string, double>& sub_ops_ms, int layers,
                            double comm_sm_fraction) {
  PPSIM_CHECK(layers >= 1, "layers = {}", layers);
  MoeSliceCosts m;
  m.layers = layers;
  std::map<std::string, Time MoeSliceCosts::*> field = {
      {"attn_fwd", &MoeSliceCosts::attn_f},       {"attn_bwd", &MoeSliceCosts::attn_b},
      {"attn_w", &MoeSliceCosts::attn_w},         {"mlp_fwd", &MoeSliceCosts::mlp_f},
      {"mlp_bwd", &MoeSliceCosts::mlp_b},         {"mlp_w", &MoeSliceCosts::mlp_w},
      {"dispatch_fwd", &MoeSliceCosts::dispatch}, {"combine_fwd", &MoeSliceCosts::combine},
      {"dispatch_bwd", &MoeSliceCosts::dispatch_b}, {"combine_bwd", &MoeSliceCosts::combine_b}};
  for (const auto& [k, ms] : sub_ops_ms) {
    const auto it = field.find(k);
    if (it == field.end()) throw InputError(fmt::format("profiled sub-op '{}' is not one the overlap model takes", k));
    m.*(it->second) = static_cast<Time>(std::llround(ms * 1e6 / layers));  // ns per layer
  }
  c.moe.assign(c.slice.size(), m);
  c.comm_sm_fraction = comm_sm_fraction;
}

void scale_rank_speeds(SimCosts& c, int pp, int gpus, const std::vector<std::array<double, 3>>& g_alone, int ep) {
  PPSIM_CHECK(gpus >= 1 && !g_alone.empty(), "gpus = {}, partitions = {}", gpus, g_alone.size());
  const auto& sp0 = g_alone.front();
  c.rank_kind_scale.assign(static_cast<std::size_t>(3 * pp), 1.0);
  for (int r = 0; r < pp; ++r) {
    const auto& g = g_alone.at(static_cast<std::size_t>(replay_partition(r, ep, gpus)));
    for (std::size_t k = 0; k < 3; ++k)
      if (sp0[k] > 0 && g[k] > 0) c.rank_kind_scale[3 * static_cast<std::size_t>(r) + k] = g[k] / sp0[k];
  }
}

void apply_link_probe(SimCosts& c, double median_us, Bytes bytes) {
  const Time measured = static_cast<Time>(std::llround(median_us * 1e3));
  c.link.latency = std::max<Time>(0, measured - c.link.occupancy(bytes));
}

std::vector<ReplayMemoryPrediction> replay_memory(const std::string& config, const std::vector<std::string>& sets,
                                                  const Schedule& s, const SimResult* r) {
  std::vector<std::string> all = sets;
  all.push_back("parallel.embedding_on_first=false");
  all.push_back("parallel.head_on_last=false");
  std::vector<ReplayMemoryPrediction> out;
  for (const MemoryBreakdown& m : predicted_memory(load_config(config, all), s, r))
    out.push_back({m, m.weights + m.gradients + m.activations + m.comm_buffers + m.workspace});
  return out;
}

double middle_run(std::vector<double> runs_us) {
  PPSIM_CHECK(!runs_us.empty(), "no probe runs");
  std::sort(runs_us.begin(), runs_us.end());
  return runs_us[runs_us.size() / 2];
}

}  // namespace ppsim::api
