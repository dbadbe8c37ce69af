// Prediction of a traced step from its imported profile (predict.h).
#include "trace/predict.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "cost/cost_model.h"
#include "schedules/registry.h"
#include "sim/engine.h"
#include "sim/overlap.h"

namespace ppsim::trace {

namespace {

MoeSliceCosts chunk_costs(const CostProfile& p, int layers) {
  MoeSliceCosts m = *p.sub_ops;
  m.layers = layers;
  m.attn_comm_slowdown = p.attn_comm_slowdown;
  m.mlp_comm_slowdown = p.mlp_comm_slowdown;
  return m;
}

}  // namespace

Prediction predict_traced(const ImportResult& r, const PredictRequest& req) {
  if (!r.profile.sub_ops)
    throw InputError("--schedule: the trace has no per-layer sub-op times to predict from (no numbered layer found)");
  if (req.sms < 1 || req.comm_sms < 0 || req.comm_sms >= req.sms)
    throw InputError(fmt::format("--comm-sms must be in [0, --sms), got {} of {}", req.comm_sms, req.sms), {},
                     kExitUsage);
  const CostProfile& p = r.profile;
  const double sigma = p.comm_sm_fraction > 0 ? p.comm_sm_fraction : static_cast<double>(req.comm_sms) / req.sms;
  Prediction out;
  out.sm_sharing = p.attn_comm_slowdown > 0 || p.mlp_comm_slowdown > 0
                       ? fmt::format("profiled (attention {:.3f}, mlp {:.3f}; linear rule sigma = {:.3f} for the rest)",
                                     p.attn_comm_slowdown, p.mlp_comm_slowdown, sigma)
                       : fmt::format("linear rule (sigma = {:.3f})", sigma);
  out.traced = r.step();
  out.outside_layers = r.outside_layers;
  out.unmapped = r.unmapped + r.unlinked;
  if (req.schedule == "pair" || req.schedule == "fb-pair") {
    const int layers = req.layers_per_chunk > 0 ? req.layers_per_chunk : r.layers;
    const MoeSliceCosts c = chunk_costs(p, layers);
    Action a;
    a.first = Op{OpKind::F, 0, 1};
    a.second = Op{OpKind::B, 1, 0};
    a.overlapped = true;
    const ActionCost ac = overlap_action_cost(a, c, c, sigma);
    out.what = fmt::format("F&B pair ({} layers per chunk)", layers);
    out.predicted = ac.duration;
    out.has_busy = true;
    out.traced_busy = r.compute_busy();
    out.predicted_busy = ac.compute_busy;
    return out;
  }
  if (req.devices < 1) throw InputError(fmt::format("--devices must be >= 1, got {}", req.devices), {}, kExitUsage);
  ScheduleParams sp;
  sp.pp = req.pp;
  sp.microbatches = req.microbatches;
  sp.vpp = req.vpp;
  const Family& fam = find_family(req.schedule);
  const Schedule s = make_schedule(fam.name, resolve_params(fam, sp));
  const int stages = s.stages_per_pipe;
  int layers = req.layers_per_chunk;
  if (layers <= 0) {
    if (r.layers % stages != 0)
      throw InputError(
          fmt::format("--schedule {}: the trace's {} layers do not split into {} stages; give --layers-per-chunk",
                      fam.name, r.layers, stages),
          {}, kExitUsage);
    layers = r.layers / stages;
  }
  SimCosts costs;
  costs.scale = TimeScale::millis();
  SliceCosts sc;
  sc.f = p.op.f * layers;
  sc.b = p.op.b * layers;
  sc.w = p.op.w * layers;
  sc.fb = sc.f + sc.b;
  costs.slice.assign(static_cast<std::size_t>(stages), sc);
  costs.moe.assign(static_cast<std::size_t>(stages), chunk_costs(p, layers));
  costs.comm_sm_fraction = sigma;
  if (req.devices < s.pp) {
    costs.rank_device.resize(static_cast<std::size_t>(s.pp));
    for (int rk = 0; rk < s.pp; ++rk) costs.rank_device[static_cast<std::size_t>(rk)] = rk % req.devices;
    costs.share_slowdown = 2.0;  // time-sliced: k at once, each k times slower
  }
  check_overlap_work(s, costs);  // ops x layers under the limit (--max-ops of the other commands)
  const SimResult res = simulate(s, costs);
  out.what = fmt::format("{} P={} M={} ({} layers per chunk, {} GPU{})", fam.name, s.pp, s.microbatches, layers,
                         std::min(req.devices, s.pp), std::min(req.devices, s.pp) == 1 ? "" : "s");
  out.predicted = res.makespan();
  return out;
}

std::string render_prediction(const Prediction& p) {
  auto ms = [](Time t) { return static_cast<double>(t) / 1e6; };
  std::string o = fmt::format("\nprediction for {}; SM sharing: {}\n", p.what, p.sm_sharing);
  o += fmt::format("  step (GPU span): traced {:.3f} ms, predicted {:.3f} ms, error {:+.1f}%\n", ms(p.traced),
                   ms(p.predicted), 100 * p.error());
  if (p.has_busy)
    o += fmt::format("  compute streams busy: traced {:.3f} ms, predicted {:.3f} ms, error {:+.1f}%\n",
                     ms(p.traced_busy), ms(p.predicted_busy), 100 * p.busy_error());
  std::vector<std::string> left;
  if (p.outside_layers > 0)
    left.push_back(fmt::format("{:.3f} ms of kernels outside the numbered layers (embedding, head, loss, optimizer)",
                               ms(p.outside_layers)));
  if (p.unmapped > 0) left.push_back(fmt::format("{:.3f} ms of unmapped or unlinked kernels", ms(p.unmapped)));
  if (!left.empty())
    o += fmt::format("  not in the prediction: {}; the traced span holds them\n", fmt::join(left, " and "));
  return o;
}

}  // namespace ppsim::trace

namespace ppsim::trace {

nlohmann::json prediction_json(const Prediction& p) {
  nlohmann::json j = {{"what", p.what},
                      {"sm_sharing", p.sm_sharing},
                      {"traced_ms", static_cast<double>(p.traced) / 1e6},
                      {"predicted_ms", static_cast<double>(p.predicted) / 1e6},
                      {"error", p.error()},
                      {"outside_layers_ms", static_cast<double>(p.outside_layers) / 1e6},
                      {"unmapped_ms", static_cast<double>(p.unmapped) / 1e6}};
  if (p.has_busy) {
    j["traced_compute_busy_ms"] = static_cast<double>(p.traced_busy) / 1e6;
    j["predicted_compute_busy_ms"] = static_cast<double>(p.predicted_busy) / 1e6;
    j["compute_busy_error"] = p.busy_error();
  }
  return j;
}

}  // namespace ppsim::trace
