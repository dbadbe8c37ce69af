// Data-parallel communication and the optimizer step (step_costs.h gives the counts).
#include "cost/step_costs.h"

#include <algorithm>
#include <set>

#include "cost/layer_split.h"
#include "cost/memory.h"

namespace ppsim {

namespace {

// The rank's parameters: its slices' layers, embedding, head and MTP modules, after the tp
// (dense) and ep x etp (routed experts) splits, and its layer count.
void rank_params(const ModelConfigData& c, const std::vector<SliceLayout>& slices, const std::set<int>& held,
                 RankStepCosts& rc, int& layers) {
  const ModelSpec& m = c.model;
  const double tp = c.parallel.tp, ep = c.parallel.ep, etp = c.parallel.expert_tp();
  for (int sl : held) {
    const SliceLayout& lay = slices[static_cast<std::size_t>(sl)];
    layers += lay.layers;
    for (int l = lay.first_layer; l < lay.first_layer + lay.layers; ++l) {
      const ParamCount pc = layer_params(m, l);
      rc.dense_params += pc.dense / tp;
      rc.expert_params += pc.expert / (ep * etp);
    }
    if (lay.embedding) rc.dense_params += embedding_params(m) / tp;
    if (!lay.head) continue;
    rc.dense_params += head_params(m) / tp;
    for (int d = 0; d < m.mtp_depth; ++d) {
      const ParamCount pc = mtp_module_params(m);
      rc.dense_params += pc.dense / tp;
      rc.expert_params += pc.expert / (ep * etp);
    }
  }
}

double share(double n) { return n > 1 ? (n - 1) / n : 0.0; }

}  // namespace

DpSync dp_sync_of(const ParallelSpec& p, int pp) {
  if (p.dp_sync != DpSync::automatic) return p.dp_sync;
  if (p.zero < 3) return DpSync::step;
  return p.fsdp && pp > 1 ? DpSync::step : DpSync::microbatch;
}

StepCosts step_costs(const ModelConfigData& c, const Schedule& s, const std::vector<double>* busy_ns) {
  const ParallelSpec& p = c.parallel;
  const HardwareSpec& h = c.hardware;
  const std::vector<SliceLayout> slices = slice_layouts(c, s.stages_per_pipe);
  StepCosts out;
  out.ranks.resize(static_cast<std::size_t>(s.pp));
  std::vector<std::set<int>> held(static_cast<std::size_t>(s.pp));
  for (std::size_t st = 0; st < s.stage_rank.size(); ++st)
    held[static_cast<std::size_t>(s.stage_rank[st])].insert(s.slice[st]);

  // ZeRO's collectives run over its shard group (zero_dp); with HSDP the replicas of each shard
  // all-reduce its gradients (grad_dp / zero_dp of them). ZeRO 0 all-reduces over grad_dp.
  const double n_dense = p.zero >= 1 ? p.zero_dp() : p.grad_dp();
  const double n_expert = std::max(1, p.zero >= 1 ? p.expert_zero_dp() : p.expert_dp());
  const double r_dense = p.zero >= 1 ? static_cast<double>(p.grad_dp()) / p.zero_dp() : 1.0;
  const double r_expert = p.zero >= 1 ? static_cast<double>(std::max(1, p.expert_dp())) / n_expert : 1.0;
  const double grad_b = dtype_bytes(c.precision.grads), param_b = dtype_bytes(c.precision.params);
  // Rounds of each collective a step: ZeRO 3's gathers (forward and backward) and the gradient
  // reduction run once per micro-batch (of a pipe: each slice a rank holds sees mb_per_pipe) or once.
  const DpSync sync = dp_sync_of(p, s.pp);
  const double mb = std::max(1, s.mb_per_pipe());
  const double gather_rounds = p.zero == 3 && sync != DpSync::step ? mb : 1.0;
  const double reduce_rounds = sync == DpSync::microbatch ? mb : 1.0;
  const double gather_b = p.zero == 3 ? 2 * param_b * gather_rounds : p.zero >= 1 ? param_b : 0.0;
  const double scatter_b = (p.zero == 0 ? 2 * grad_b : grad_b) * reduce_rounds;
  const bool intra = static_cast<long long>(p.tp) * p.grad_dp() <= h.gpus_per_node;
  // Across nodes NCCL runs a ring per NIC: the k members of the group in one node (DP next to TP)
  // drive k NICs at once, each ring carrying 1/k of the data, so the group's bandwidth per GPU is k
  // NICs' (at most NVLink's, which carries the rings inside the node). k = 1 with TP filling a node.
  const double per_node = std::max(1, std::min(p.grad_dp(), h.gpus_per_node / std::max(1, p.tp)));
  const double bw =
      (intra ? h.nvlink_bytes_per_ns_one_way() : std::min(h.nvlink_bytes_per_ns_one_way(), per_node * h.network_gbps)) *
      h.efficiency.comm;  // bytes/ns
  const double latency_ns = 1e3 * (intra ? h.nvlink_latency_us : h.network_latency_us);
  const double collectives = (p.zero == 3   ? 2 * gather_rounds
                              : p.zero >= 1 ? 1.0
                                            : 0.0) +
                             reduce_rounds * (r_dense > 1 ? 2 : 1);

  const double master = c.precision.params == Dtype::fp32 ? 0.0 : 8.0;
  const double opt_per_param = 2 * grad_b + master + 4 * dtype_bytes(c.precision.optimizer) +
                               (c.precision.params == Dtype::fp32 ? 8.0 : param_b);
  const double opt_on_gpu = 1 - c.precision.optimizer_on_host();  // the share the GPU steps

  for (int r = 0; r < s.pp; ++r) {
    RankStepCosts& rc = out.ranks[static_cast<std::size_t>(r)];
    int layers = 0;
    rank_params(c, slices, held[static_cast<std::size_t>(r)], rc, layers);
    const double dense = rc.dense_params, expert = rc.expert_params;
    const double gather = gather_b * (dense * share(n_dense) + expert * share(n_expert));
    const double scatter = scatter_b * (dense * share(n_dense) + expert * share(n_expert));
    const double replicas =
        2 * grad_b * reduce_rounds * (dense / n_dense * share(r_dense) + expert / n_expert * share(r_expert));
    rc.dp_bytes = gather + scatter + replicas;
    rc.dp_ns = rc.dp_bytes > 0 ? rc.dp_bytes / bw + collectives * latency_ns : 0.0;
    rc.dp_exposed_ns = (1.0 - c.costs.dp_overlap) * rc.dp_ns;
    if (p.zero == 3 && c.costs.fsdp_prefetch && busy_ns != nullptr && layers > 0 &&
        static_cast<std::size_t>(r) < busy_ns->size()) {
      // FSDP's prefetch: each layer's all-gather runs under the layer before it, each reduce-
      // scatter under the layer after it; in each round the first layer's forward all-gather and
      // the last layer's reduce-scatter have nothing to hide under (a backward ends waiting for its
      // reduce-scatters), the rest hide under the rank's compute as far as it lasts. gather and
      // scatter count every round, so first and last are one layer's share of each round, summed.
      const double first = gather / 2 / layers / bw, last = scatter / layers / bw;
      const double rest = std::max(0.0, rc.dp_ns - first - last);
      rc.dp_exposed_ns =
          std::min(rc.dp_ns, first + last + std::max(0.0, rest - (*busy_ns)[static_cast<std::size_t>(r)]));
    }
    const double updated = p.zero >= 1 ? dense / n_dense + expert / n_expert : dense + expert;
    rc.optimizer_bytes = opt_on_gpu * opt_per_param * updated;
    rc.optimizer_ns = rc.optimizer_bytes / (h.hbm_gbps * h.efficiency.elementwise);
    const double added = (c.costs.dp_comm ? rc.dp_exposed_ns : 0.0) + (c.costs.optimizer_step ? rc.optimizer_ns : 0.0);
    rc.added_ns = added;
    if (added > out.added_ns) {
      out.added_ns = added;
      out.worst_rank = r;
    }
  }
  return out;
}

}  // namespace ppsim
