// Data-parallel communication and the optimizer step (step_costs.h gives the counts).
#include "cost/step_costs.h"

#include <algorithm>
#include <set>

#include "cost/layer_split.h"
#include "cost/memory.h"

namespace ppsim {

StepCosts step_costs(const ModelConfigData& c, const Schedule& s) {
  const ModelSpec& m = c.model;
  const ParallelSpec& p = c.parallel;
  const HardwareSpec& h = c.hardware;
  const std::vector<SliceLayout> slices = slice_layouts(c, s.stages_per_pipe);
  StepCosts out;
  out.ranks.resize(static_cast<std::size_t>(s.pp));
  std::vector<std::set<int>> held(static_cast<std::size_t>(s.pp));
  for (std::size_t st = 0; st < s.stage_rank.size(); ++st)
    held[static_cast<std::size_t>(s.stage_rank[st])].insert(s.slice[st]);

  const double tp = p.tp, ep = p.ep;
  const double n_dense = p.grad_dp(), n_expert = std::max(1, p.expert_dp());
  const double grad_b = dtype_bytes(c.precision.grads), param_b = dtype_bytes(c.precision.params);
  // Bytes per parameter a rank sends, times (n-1)/n below.
  double per_param = 0;
  if (p.zero == 0) per_param = 2 * grad_b;
  else if (p.zero < 3) per_param = grad_b + param_b;
  else per_param = grad_b + 2 * param_b;
  const bool intra = static_cast<long long>(p.tp) * p.grad_dp() <= h.gpus_per_node;
  const double bw = (intra ? h.nvlink_bytes_per_ns_one_way() : h.network_gbps) * h.efficiency.comm;  // bytes/ns
  const double latency_ns = 1e3 * (intra ? h.nvlink_latency_us : h.network_latency_us);
  const int collectives = p.zero == 0 ? 1 : p.zero < 3 ? 2 : 3;

  const double master = c.precision.params == Dtype::fp32 ? 0.0 : 8.0;
  const double opt_per_param = 2 * grad_b + master + 4 * dtype_bytes(c.precision.optimizer) +
                               (c.precision.params == Dtype::fp32 ? 8.0 : param_b);
  const bool opt_on_gpu = c.precision.optimizer_location == StateLocation::device;

  for (int r = 0; r < s.pp; ++r) {
    RankStepCosts& rc = out.ranks[static_cast<std::size_t>(r)];
    for (int sl : held[static_cast<std::size_t>(r)]) {
      const SliceLayout& lay = slices[static_cast<std::size_t>(sl)];
      for (int l = lay.first_layer; l < lay.first_layer + lay.layers; ++l) {
        const ParamCount pc = layer_params(m, l);
        rc.dense_params += pc.dense / tp;
        rc.expert_params += pc.expert / (ep * tp);
      }
      if (lay.embedding) rc.dense_params += embedding_params(m) / tp;
      if (lay.head) {
        rc.dense_params += head_params(m) / tp;
        for (int d = 0; d < m.mtp_depth; ++d) {
          const ParamCount pc = mtp_module_params(m);
          rc.dense_params += pc.dense / tp;
          rc.expert_params += pc.expert / (ep * tp);
        }
      }
    }
    const double dense_share = n_dense > 1 ? (n_dense - 1) / n_dense : 0.0;
    const double expert_share = n_expert > 1 ? (n_expert - 1) / n_expert : 0.0;
    rc.dp_bytes = per_param * (rc.dense_params * dense_share + rc.expert_params * expert_share);
    rc.dp_ns = rc.dp_bytes > 0 ? rc.dp_bytes / bw + collectives * latency_ns : 0.0;
    rc.dp_exposed_ns = (1.0 - c.costs.dp_overlap) * rc.dp_ns;
    const double updated = p.zero >= 1 ? rc.dense_params / n_dense + rc.expert_params / n_expert
                                       : rc.dense_params + rc.expert_params;
    rc.optimizer_bytes = opt_on_gpu ? opt_per_param * updated : 0.0;
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
