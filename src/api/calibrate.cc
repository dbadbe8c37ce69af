// api::calibrate: a step time, a throughput or traces in, a calibration out (calibrate.h).
#include "api/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>

#include "api/calibrate_clock.h"
#include "api/request.h"
#include "core/error.h"
#include "core/json_null.h"
#include "cost/config.h"
#include "cost/derive.h"
#include "schedules/registry.h"
#include "trace/pipeline_run.h"
#include "trace/ranks.h"

namespace ppsim::api {

namespace {

constexpr double kMinEff = 0.01;

// What one step time cannot tell apart from the compute scale, with the preset each keeps.
void add_unidentified_by_step(const ModelConfigData& c, Calibration& cal, bool trace) {
  const HardwareSpec& h = c.hardware;
  const std::string one =
      trace ? "a single rank's kernels do not show it" : "one step time cannot tell it from the compute scale";
  auto add = [&](const char* key, double preset, const std::string& why) {
    for (const CalibratedFigure& f : cal.fitted)
      if (f.key == key) return;  // fitted after all (a traced pipeline run)
    cal.unidentified.push_back({key, preset, why});
  };
  if (!trace || !c.model.moe.enabled())
    add("hardware.efficiency.comm", h.efficiency.comm, one + " (collectives, all-to-all, p2p)");
  add("hardware.nvlink_latency_us", h.nvlink_latency_us, one + " (per-call cost inside a node)");
  add("hardware.network_latency_us", h.network_latency_us, one + " (per-call cost between nodes)");
  add("parallel.p2p_sync_us", c.parallel.p2p_sync_us, one + " (the runtime's per-action overhead)");
  if (c.parallel.p2p_runtime == P2pRuntime::torch)
    add("parallel.p2p_sm_share", c.parallel.p2p_sm_share,
        trace ? "needs one trace per pipeline rank of a step the host did not slow"
              : one + " (what PyTorch's p2p kernels take from compute beside them)");
  add("costs.tp_overlap", c.costs.tp_overlap, one);
  add("costs.dp_overlap", c.costs.dp_overlap, one);
  add("hardware.efficiency.accum_exposed", h.efficiency.accum_exposed, one);
  add("hardware.clock.duty_slope", h.clock_duty_slope, one + " (the clock sustained under load)");
  if (trace)
    add("hardware.efficiency.elementwise", h.efficiency.elementwise, "inside the blocks' kernels, not apart from them");
}

// The family the run used: --schedule, else the config's parallel.schedule when it names one.
std::string run_family(const CalibrateRequest& req, const ModelConfigData& c) {
  const std::string name = !req.schedule.empty() ? req.schedule : c.parallel.schedule;
  if (name.empty() || name == "all" || name.find(',') != std::string::npos)
    throw InputError(
        fmt::format("calibrate needs the one schedule the run used (parallel.schedule is '{}'): give --schedule NAME",
                    c.parallel.schedule),
        {}, kExitUsage);
  return find_family(name).name;
}

struct Prediction {
  double step_s = 0, tokens_s = 0;
};

Prediction predict(const CalibrateRequest& req, const std::string& family, const std::vector<std::string>& extra) {
  std::vector<std::string> sets = req.sets;
  sets.insert(sets.end(), extra.begin(), extra.end());
  Request rq;
  rq.config = req.config;
  rq.sets = sets;
  rq.families = family;
  rq.single = true;
  rq.schedule.vpp = req.vpp;
  const Result r = run(rq);
  if (r.rows.empty()) throw InputError(fmt::format("{} produced no result for this config", family));
  return {r.rows.front().physical.step_time_s, r.rows.front().physical.tokens_per_second};
}

CalibrateOutcome calibrate_step(const CalibrateRequest& req, const ModelConfigData& c, const std::string& family) {
  const auto keys = compute_scale_keys(c.hardware);
  const Prediction p0 = predict(req, family, {});
  const double target = req.step_ms ? *req.step_ms / 1e3 : p0.step_s * p0.tokens_s / *req.tokens_per_s;
  const ScaleFit fit = fit_scale([&](double s) { return predict(req, family, compute_scale_sets(keys, s)).step_s; },
                                 target, compute_scale_range(keys));
  if (!fit.reached)
    throw InputError(
        fmt::format("the run's step ({:.6g} ms) is outside what one compute scale reaches on this config "
                    "({:.6g} ms at the preset; every compute efficiency kept in [0.01, 1]): check the "
                    "config's layout, batch and GPU type against the run",
                    target * 1e3, fit.preset_step_s * 1e3));
  const std::string what =
      req.step_ms ? fmt::format("step {:.6g} ms", *req.step_ms) : fmt::format("{:.6g} tokens/s", *req.tokens_per_s);
  CalibrateOutcome out;
  out.calibration = scale_calibration(keys, fit, req.step_ms ? "step_time" : "tokens_per_s", what);
  out.calibration.measured_step_s = target;
  add_unidentified_by_step(c, out.calibration, false);
  return out;
}

// ---- traces ---------------------------------------------------------------------------------

struct BlockSample {
  std::vector<double> attention, mlp, a2a;  // per layer: measured ns per execution (F + I + W)
};

BlockSample trace_blocks(const std::vector<trace::ImportResult>& imports) {
  BlockSample s;
  for (const trace::ImportResult& r : imports)
    for (const auto& entry : r.cells) {
      if (entry.first < 0) continue;
      const auto& subs = entry.second;  // a named reference: clang 14 cannot capture a structured binding
      auto per_exec = [&](trace::SubOp op) {
        double t = 0;
        int n = 0;
        for (int p = 0; p < trace::kPasses; ++p) {
          const trace::Cell& cell = subs[static_cast<std::size_t>(op)][static_cast<std::size_t>(p)];
          t += cell.alone > 0 ? cell.alone : static_cast<double>(cell.busy);
          n = std::max(n, cell.executions);
        }
        return n > 0 ? t / n : 0.0;
      };
      if (const double a = per_exec(trace::SubOp::attention); a > 0) s.attention.push_back(a);
      if (const double m = per_exec(trace::SubOp::mlp); m > 0) s.mlp.push_back(m);
      if (const double d = per_exec(trace::SubOp::dispatch) + per_exec(trace::SubOp::combine); d > 0)
        s.a2a.push_back(d);
    }
  return s;
}

double mean(const std::vector<double>& v) {
  double t = 0;
  for (double x : v) t += x;
  return v.empty() ? 0 : t / static_cast<double>(v.size());
}

// The standard error of the mean of v, relative to the mean (0 for fewer than two samples).
double rel_sem(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size() - 1)) / std::sqrt(static_cast<double>(v.size())) / m;
}

// The model's per-layer block times (F + full B) on `d`: means over the layers of the traced kind.
struct Derived {
  double attention = 0, mlp = 0, a2a = 0;
};

Derived derived_blocks(const ModelConfigData& d) {
  const CostFigures f = cost_figures(d, d.parallel.pp);
  Derived out;
  int n = 0;
  const bool want_moe = d.model.moe.enabled();
  for (const SliceFigures& s : f.slices)
    for (const LayerFigures& l : s.layers) {
      if (l.moe != want_moe) continue;
      out.attention += l.attention.f + l.attention.b;
      out.mlp += l.mlp.f + l.mlp.b;
      out.a2a += l.dispatch_ns + l.combine_ns + l.dispatch_grad_ns + l.combine_grad_ns;
      ++n;
    }
  if (n > 0) {
    out.attention /= n;
    out.mlp /= n;
    out.a2a /= n;
  }
  return out;
}

CalibrateOutcome calibrate_traces(const CalibrateRequest& req, const ModelConfigData& c, const std::string& family);

// A traced pipeline run of PyTorch's runtime (one trace per pipeline rank, p2p_runtime torch):
// the share of the GPU its send and receive kernels hold (parallel.p2p_sm_share) and one scale on
// the kernel-fitted compute efficiencies that makes the traced step's span come out, when the
// host did not slow that step. Adds the figures to `cal`; false where the traces are no such run.
// hardware.clock's response (calibrate_clock.h) from the run's actions: each identified term's
// figures fitted, the others named as kept at their presets. False when no term is identified.
bool fit_response(const trace::PipelineRun& run, const HardwareSpec& h, Calibration& cal,
                  std::vector<std::string>& extra) {
  const ClockResponseFit f = fit_clock_response(clock_points(run, h.clock_reset_idle_ms), h.clock_reset_idle_ms);
  if (!f.warm_identified && !f.slow_identified) return false;
  const std::string from = fmt::format(
      "{} actions' time over their kind's mean against tau, the time into their "
      "busy stretch (0 .. {:.0f} ms; sustained level {:.4f}, rms {:.3f}); idle of "
      "reset_idle_ms {:.3g} kept at the preset",
      f.points, f.span_ms, f.level, f.rms, h.clock_reset_idle_ms);
  auto add = [&](const char* key, double preset, double value, double err, bool identified, const char* why) {
    if (!identified) {
      cal.unidentified.push_back({key, preset, why});
      return;
    }
    cal.fitted.push_back({key, preset, value, err, from});
    extra.push_back(fmt::format("{}={:.9g}", key, value));
  };
  const ClockResponse& r = f.response;
  const char* no_warm = "the trace's actions show no start faster than the sustained clock (under 2 standard errors)";
  const char* no_slow = "the trace's actions show no slow loop within its span (under 2 standard errors)";
  add("hardware.clock.warm", h.clock_warm, r.warm, f.warm_err, f.warm_identified, no_warm);
  add("hardware.clock.warm_ms", h.clock_warm_ms, r.warm_ms, f.warm_ms_err, f.warm_identified, no_warm);
  add("hardware.clock.slow", h.clock_slow, r.slow, f.slow_err, f.slow_identified, no_slow);
  add("hardware.clock.slow_at_ms", h.clock_slow_at_ms, r.slow_at_ms, f.slow_at_err, f.slow_identified, no_slow);
  add("hardware.clock.slow_ms", h.clock_slow_ms, r.slow_ms, f.slow_ms_err, f.slow_identified, no_slow);
  return true;
}

bool fit_pipeline_run(const CalibrateRequest& req, const ModelConfigData& c, const std::string& family,
                      const std::vector<trace::ImportResult>& imports, Calibration& cal);

}  // namespace

std::vector<std::pair<std::string, double>> compute_scale_keys(const HardwareSpec& h) {
  std::vector<std::pair<std::string, double>> k = {{"hardware.efficiency.gemm", h.efficiency.gemm},
                                                   {"hardware.efficiency.attention", h.efficiency.attention},
                                                   {"hardware.efficiency.elementwise", h.efficiency.elementwise}};
  if (h.efficiency.gemm_fp8 > 0) k.emplace_back("hardware.efficiency.gemm_fp8", h.efficiency.gemm_fp8);
  if (h.efficiency.gemm_fp8_wgrad > 0)
    k.emplace_back("hardware.efficiency.gemm_fp8_wgrad", h.efficiency.gemm_fp8_wgrad);
  return k;
}

std::vector<std::string> compute_scale_sets(const std::vector<std::pair<std::string, double>>& keys, double scale) {
  std::vector<std::string> out;
  for (const auto& [k, v] : keys) out.push_back(fmt::format("{}={:.9g}", k, v * scale));
  return out;
}

std::pair<double, double> compute_scale_range(const std::vector<std::pair<std::string, double>>& keys) {
  double hi = 1e9, lo = 0;
  for (const auto& [k, v] : keys) {
    hi = std::min(hi, 1.0 / v);
    lo = std::max(lo, kMinEff / v);
  }
  return {lo, hi};
}

ScaleFit fit_scale(const std::function<double(double)>& step_at, double target, std::pair<double, double> range) {
  ScaleFit f;
  const double xlo = 1.0 / range.second, xhi = 1.0 / range.first;  // x = 1 / scale
  auto eval = [&](double x) {
    ++f.evaluations;
    return step_at(1.0 / x);
  };
  double x0 = 1, f0 = eval(x0);
  f.preset_step_s = f0;
  f.scale = 1;
  f.step_s = f0;
  if (std::abs(f0 / target - 1) < 1e-6) return f;
  // First guess: the whole step scales with compute.
  double x1 = std::clamp(x0 * target / f0, xlo, xhi), f1 = eval(x1);
  for (int i = 0; i < 40 && std::abs(f1 / target - 1) >= 1e-6 && f1 != f0; ++i) {
    const double x2 = std::clamp(x1 + (target - f1) * (x1 - x0) / (f1 - f0), xlo, xhi);
    if (x2 == x1) break;  // pinned at an end of the range
    x0 = x1;
    f0 = f1;
    x1 = x2;
    f1 = eval(x1);
  }
  f.scale = 1.0 / x1;
  f.step_s = f1;
  f.reached = std::abs(f1 / target - 1) < 1e-4;
  return f;
}

Calibration scale_calibration(const std::vector<std::pair<std::string, double>>& keys, const ScaleFit& fit,
                              const std::string& method, const std::string& from) {
  Calibration cal;
  cal.method = method;
  cal.measured_step_s = fit.step_s;
  cal.preset_step_s = fit.preset_step_s;
  cal.calibrated_step_s = fit.step_s;
  cal.note = fmt::format(
      "one scale, {:.4f}, on every compute efficiency explains the run's {}; one figure cannot say which "
      "op is faster or slower, so every compute efficiency moves together and the rest keeps its preset",
      fit.scale, from);
  for (const auto& [k, v] : keys)
    cal.fitted.push_back({k, v, v * fit.scale, std::nullopt, "one scale from the " + from});
  return cal;
}

namespace {

// An efficiency pinned at a bound of its range (1, or kMinEff) with the traced blocks still not
// matched: the trace's kernels ran faster than the config's GPU or links allow at full efficiency
// (or absurdly slower), so the config does not describe the traced run; no figure is written.
void refuse_pinned(const Derived& dv, const BlockSample& m, bool fit_a2a, const EfficiencySpec& e) {
  struct Check {
    const char* key;
    double derived;
    const std::vector<double>& traced_layers;
    double value;
    const char* what;
  };
  const std::vector<double> none;
  const Check checks[] = {
      {"hardware.efficiency.gemm", dv.mlp, m.mlp, e.gemm, "MLP blocks' kernels"},
      {"hardware.efficiency.attention", dv.attention, m.attention, e.attention, "attention blocks' kernels"},
      {"hardware.efficiency.comm", dv.a2a, fit_a2a ? m.a2a : none, e.comm, "MoE dispatch + combine kernels"},
  };
  for (const Check& k : checks) {
    const double traced = mean(k.traced_layers);
    // Within two standard errors of the layers' mean (at least 2%): matched at the bound.
    const double tolerance = std::max(0.02, 2 * rel_sem(k.traced_layers));
    if (traced <= 0 || std::abs(k.derived / traced - 1) <= tolerance) continue;
    const bool fast = k.derived > traced;
    throw InputError(fmt::format(
        "{}: the trace's {} take {:.4g} ms per layer, which the config prices at {:.4g} ms even at efficiency "
        "{:.4g} (the bound of its range): {}; calibrating would hide it, so nothing is written",
        k.key, k.what, traced / 1e6, k.derived / 1e6, k.value,
        fast ? "the traced run's GPU or links are faster than the config's (check hardware: the GPU type, "
               "network_gbps, nvlink_gbps, and the layout: ep, node-limited routing)"
             : "the traced kernels are slower than any efficiency above the floor explains (check the model and "
               "the layout the config gives)"));
  }
}

CalibrateOutcome calibrate_traces(const CalibrateRequest& req, const ModelConfigData& c, const std::string& family) {
  std::vector<trace::ImportResult> imports;
  for (const std::string& p : req.traces) {
    imports.push_back(trace::import_trace_file(p, req.trace_options));
    // The fit compares a layer's forward + full backward with the config's: a forward-only trace
    // would read as a fast GPU. Refused as import-trace refuses it for a training profile.
    if (imports.back().backward == 0 && imports.back().layers > 0)
      throw InputError(SourceLoc{p, 0, 0},
                       "the trace has no backward (no kernel of autograd's backward or of a range naming a backward "
                       "pass): calibrate fits a training step's forward and backward, so a forward-only trace "
                       "cannot calibrate it (give --step-ms of a training step, or trace one)");
  }
  const BlockSample m = trace_blocks(imports);
  if (m.attention.empty() || m.mlp.empty())
    throw InputError(
        fmt::format("'{}': no per-layer attention and MLP work found; calibrating from a trace needs its layers' "
                    "ranges (docs/TRACES.md), or give --step-ms",
                    req.traces.front()));
  // Fixed point: GEMM scale from the MLP blocks, attention from the attention blocks at that GEMM
  // scale, all-to-all efficiency from dispatch + combine; each step re-derives the model's blocks.
  ModelConfigData d = c;
  EfficiencySpec& e = d.hardware.efficiency;
  const bool fit_a2a = !m.a2a.empty() && c.model.moe.enabled();
  for (int it = 0; it < 60; ++it) {
    const Derived dv = derived_blocks(d);
    const double rg = dv.mlp / mean(m.mlp), ra = dv.attention / mean(m.attention);
    const double rc = fit_a2a && dv.a2a > 0 ? dv.a2a / mean(m.a2a) : 1.0;
    e.gemm = std::clamp(e.gemm * rg, kMinEff, 1.0);
    if (e.gemm_fp8 > 0) e.gemm_fp8 = std::clamp(e.gemm_fp8 * rg, kMinEff, 1.0);
    if (e.gemm_fp8_wgrad > 0) e.gemm_fp8_wgrad = std::clamp(e.gemm_fp8_wgrad * rg, kMinEff, 1.0);
    e.attention = std::clamp(e.attention * ra, kMinEff, 1.0);
    e.comm = std::clamp(e.comm * rc, kMinEff, 1.0);
    if (std::abs(rg - 1) < 1e-7 && std::abs(ra - 1) < 1e-7 && std::abs(rc - 1) < 1e-7) break;
  }
  refuse_pinned(derived_blocks(d), m, fit_a2a, e);
  const EfficiencySpec& p = c.hardware.efficiency;
  CalibrateOutcome out;
  Calibration& cal = out.calibration;
  cal.method = "trace";
  const std::string layers = fmt::format("{} layers of {} trace(s)", m.mlp.size(), imports.size());
  auto fitted = [&](const char* key, double preset, double value, double rel, const std::string& from) {
    const bool bound = value >= 1.0 || value <= kMinEff;  // matched within its error there (refuse_pinned)
    cal.fitted.push_back({key, preset, value, value * rel,
                          bound ? from + fmt::format("; at the bound {:.4g} of its range", value) : from});
  };
  fitted("hardware.efficiency.gemm", p.gemm, e.gemm, rel_sem(m.mlp), "MLP blocks' kernels, " + layers);
  if (p.gemm_fp8 > 0)
    fitted("hardware.efficiency.gemm_fp8", p.gemm_fp8, e.gemm_fp8, rel_sem(m.mlp), "as gemm (same scale)");
  if (p.gemm_fp8_wgrad > 0)
    fitted("hardware.efficiency.gemm_fp8_wgrad", p.gemm_fp8_wgrad, e.gemm_fp8_wgrad, rel_sem(m.mlp),
           "as gemm (same scale)");
  fitted("hardware.efficiency.attention", p.attention, e.attention, rel_sem(m.attention),
         "attention blocks' kernels at the fitted GEMM scale, " + layers);
  if (fit_a2a) fitted("hardware.efficiency.comm", p.comm, e.comm, rel_sem(m.a2a), "MoE dispatch + combine kernels");
  const bool pipeline = fit_pipeline_run(req, c, family, imports, cal);
  add_unidentified_by_step(c, cal, true);
  if (!pipeline) {
    Time span = 0;
    for (const trace::ImportResult& r : imports) span = std::max(span, r.step());
    cal.measured_step_s = static_cast<double>(span) / 1e9;
  }
  cal.preset_step_s = predict(req, family, {}).step_s;
  cal.calibrated_step_s = predict(req, family, calibration_sets(cal)).step_s;
  cal.note = pipeline ? fmt::format(
                            "fitted on the traced kernels (the ratio of attention to GEMM time, the p2p kernels' "
                            "share) and the traced step's span ({:.4g} ms, which the host did not slow; "
                            "{:.4g} ms predicted calibrated)",
                            cal.measured_step_s * 1e3, cal.calibrated_step_s * 1e3)
                      : fmt::format(
                            "fitted on the traced kernels, not the step's span ({:.4g} ms traced, {:.4g} ms predicted "
                            "calibrated): a span longer than the prediction is host, profiler or what the model lacks",
                            cal.measured_step_s * 1e3, cal.calibrated_step_s * 1e3);
  return out;
}

}  // namespace

ShareFit p2p_share(const std::vector<trace::ImportResult>& imports) {
  constexpr int kMinBeside = 20;
  std::vector<double> measured, grid;
  for (const trace::ImportResult& r : imports) {
    const int n = r.attn_slowdown_samples + r.mlp_slowdown_samples;
    if (n >= kMinBeside) {
      const double s = (r.attn_slowdown * r.attn_slowdown_samples + r.mlp_slowdown * r.mlp_slowdown_samples) / n;
      if (s >= 1) measured.push_back(1 - 1 / s);
    }
    if (r.profile.comm_sm_fraction > 0) grid.push_back(r.profile.comm_sm_fraction);
  }
  const bool by_slowdown = measured.size() == imports.size();
  const std::vector<double>& v = by_slowdown ? measured : grid;
  if (v.empty()) return {};
  ShareFit f;
  f.share = mean(v);
  f.uncertainty = f.share * rel_sem(v);
  if (f.uncertainty < 1e-9) f.uncertainty = 0;  // equal shares: no spread (not a rounding residue)
  f.measured = by_slowdown;
  f.from = by_slowdown ? fmt::format("compute kernels beside and away from the p2p kernels, {} ranks", v.size())
                       : fmt::format(
                             "the p2p kernels' grid over the SMs (time-weighted), {} ranks: the linear rule "
                             "(the traced step ran fewer than {} compute kernels beside them)",
                             v.size(), kMinBeside);
  return f;
}

// The same action of a rank runs slower once the GPU has computed for a while (a power-limited
// clock) than after it idled: its plateau against its mean (calibrate.h has the algebra).
ClockFit fit_clock(const trace::PipelineRun& run, double ref) {
  ClockFit f;
  std::vector<double> rhos, duties;
  for (const trace::RankRun& r : run.ranks) {
    std::map<std::pair<int, int>, std::vector<double>> by;  // (stage, kind; a pair: -1) -> compute
    auto key = [](const Action& a) {
      return a.overlapped ? std::pair{a.first.stage, -1} : std::pair{a.first.stage, static_cast<int>(a.first.kind)};
    };
    double ran = 0;
    for (const trace::ExecutedAction& x : r.actions) {
      by[key(x.action)].push_back(static_cast<double>(x.compute));
      ran += static_cast<double>(x.compute);
    }
    double plateau = 0;
    for (auto& [k, v] : by) {
      std::sort(v.begin(), v.end());
      const double med = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
      plateau += med * static_cast<double>(v.size());
    }
    if (ran <= 0 || run.makespan() <= 0) continue;
    rhos.push_back(plateau / ran);
    duties.push_back(ran / static_cast<double>(run.makespan()));
  }
  if (rhos.empty()) return f;
  f.rho = mean(rhos);
  f.duty = mean(duties);
  const double m = std::max(0.0, f.duty - ref), den = (1 - ref) - f.rho * m;
  if (!(f.rho > 1) || !(den > 0)) return f;
  f.slope = (f.rho - 1) / den;
  f.uncertainty = f.rho * rel_sem(rhos) * ((1 - ref) - m) / (den * den);  // d slope / d rho times rho's error
  f.identified = true;
  return f;
}

namespace {

bool fit_pipeline_run(const CalibrateRequest& req, const ModelConfigData& c, const std::string& family,
                      const std::vector<trace::ImportResult>& imports, Calibration& cal) {
  if (c.parallel.p2p_runtime != P2pRuntime::torch || c.parallel.pp < 2 ||
      static_cast<int>(imports.size()) != c.parallel.pp)
    return false;
  for (const trace::ImportResult& r : imports)
    if (!trace::host_bound_line(r).empty()) return false;  // a span the host set: the kernels alone
  std::optional<trace::PipelineRun> run;
  try {
    run = trace::rebuild_pipeline(trace::read_ranks(req.traces, req.trace_options.comm_kernel));
  } catch (const InputError&) {
    return false;  // no action ranges: no step to fit on
  }
  std::vector<std::string> extra;
  const ShareFit share = p2p_share(imports);
  if (share.share > 0) {
    cal.fitted.push_back(
        {"parallel.p2p_sm_share", c.parallel.p2p_sm_share, share.share, share.uncertainty, share.from});
    extra.push_back(fmt::format("parallel.p2p_sm_share={:.9g}", share.share));
  }
  const HardwareSpec& h = c.hardware;
  const bool response = fit_response(*run, h, cal, extra);
  const ClockFit clock = response ? ClockFit{} : fit_clock(*run, h.clock_duty_ref);
  if (clock.identified) {
    cal.fitted.push_back({"hardware.clock.duty_slope", h.clock_duty_slope, clock.slope, clock.uncertainty,
                          fmt::format("each rank's actions at their plateau against as they ran ({:.2f}% faster) at "
                                      "duty {:.3f}, {} ranks; duty_ref kept at {:.2g}",
                                      100 * (clock.rho - 1), clock.duty, run->ranks.size(), h.clock_duty_ref)});
    extra.push_back(fmt::format("hardware.clock.duty_slope={:.9g}", clock.slope));
  }
  // One scale on the kernel-fitted efficiencies (and elementwise, at its preset) so that the run's
  // own schedule predicts the traced step: what the layers' kernels leave out (the loss, gradient
  // accumulation, the kernels between the blocks, the gaps) spread over the compute.
  std::vector<std::pair<std::string, double>> keys;
  for (const CalibratedFigure& f : cal.fitted)
    if (f.key.rfind("hardware.efficiency.", 0) == 0 && f.key != "hardware.efficiency.comm")
      keys.emplace_back(f.key, f.value);
  keys.emplace_back("hardware.efficiency.elementwise", h.efficiency.elementwise);
  const double step = static_cast<double>(run->makespan());
  auto step_at = [&](double s) {
    std::vector<std::string> sets = compute_scale_sets(keys, s);
    sets.insert(sets.end(), extra.begin(), extra.end());
    return predict(req, family, sets).step_s;
  };
  const ScaleFit fit = fit_scale(step_at, step / 1e9, compute_scale_range(keys));
  if (!fit.reached) return false;
  // The step's own uncertainty: the run's step (first to last action kernel, aligned clocks)
  // against the longest device's span.
  Time span = 0;
  for (const trace::ImportResult& r : imports) span = std::max(span, r.step());
  const double rel = std::abs(static_cast<double>(span) - step) / step;
  const double kernels = cal.fitted.front().uncertainty.value_or(0) / cal.fitted.front().value;
  for (CalibratedFigure& f : cal.fitted) {
    if (f.key.rfind("hardware.efficiency.", 0) != 0 || f.key == "hardware.efficiency.comm") continue;
    const double own = f.uncertainty ? *f.uncertainty / f.value : 0;
    f.value *= fit.scale;
    f.uncertainty = f.value * std::sqrt(own * own + rel * rel);
    f.from += fmt::format("; times {:.4f}, the scale that gives the traced step", fit.scale);
  }
  const double el = h.efficiency.elementwise * fit.scale;
  cal.fitted.push_back({"hardware.efficiency.elementwise", h.efficiency.elementwise, el,
                        el * std::sqrt(kernels * kernels + rel * rel),
                        fmt::format("the preset times {:.4f}, the scale that gives the traced step", fit.scale)});
  cal.measured_step_s = step / 1e9;
  return true;
}

std::string render_report(const Calibration& cal) {
  std::string o = fmt::format("calibration ({}): {}\n", cal.method, cal.note);
  o += fmt::format("step: measured {:.6g} ms, preset prediction {:.6g} ms, calibrated {:.6g} ms\n",
                   cal.measured_step_s * 1e3, cal.preset_step_s * 1e3, cal.calibrated_step_s * 1e3);
  o += fmt::format("{:<36} {:>10} {:>10} {:>12}  {}\n", "fitted", "preset", "value", "+-", "from");
  for (const CalibratedFigure& f : cal.fitted)
    o += fmt::format("{:<36} {:>10.4g} {:>10.4g} {:>12}  {}\n", f.key, f.preset, f.value,
                     f.uncertainty ? fmt::format("{:.2g}", *f.uncertainty) : std::string("one figure"), f.from);
  o += "not identified by this run (kept at the preset):\n";
  for (const UnidentifiedFigure& f : cal.unidentified)
    o += fmt::format("  {:<34} {:>10.4g}  {}\n", f.key, f.preset, f.why);
  return o;
}

}  // namespace

nlohmann::json calibration_json(const Calibration& c) {
  nlohmann::json fitted = nlohmann::json::array(), kept = nlohmann::json::array();
  for (const CalibratedFigure& x : c.fitted)
    fitted.push_back({{"key", x.key},
                      {"preset", x.preset},
                      {"value", x.value},
                      {"uncertainty", or_null(x.uncertainty)},
                      {"from", x.from}});
  for (const UnidentifiedFigure& x : c.unidentified)
    kept.push_back({{"key", x.key}, {"preset", x.preset}, {"why", x.why}});
  return {{"method", c.method},
          {"config", c.config},
          {"note", c.note},
          {"measured_step_s", c.measured_step_s},
          {"preset_step_s", c.preset_step_s},
          {"calibrated_step_s", c.calibrated_step_s},
          {"fitted", fitted},
          {"not_identified", kept}};
}

nlohmann::json calibration_notes(const ModelConfig& cfg, const std::vector<ScheduleAt>& results) {
  return calibration_notes(*cfg.data, results);
}

nlohmann::json calibration_notes(const ModelConfigData& c, const std::vector<ScheduleAt>& results) {
  if (!names_calibration(c.tree)) return nullptr;
  const std::string base = std::filesystem::path(c.file).parent_path().string();
  const std::optional<Calibration> cal = read_named_calibration(c.tree, base, c.file);
  if (!cal) return nullptr;
  nlohmann::json j;
  j["file"] = cal->path;
  j["method"] = cal->method;
  nlohmann::json changed = nlohmann::json::array();
  for (const CalibratedFigure& f : cal->fitted)
    changed.push_back(
        {{"key", f.key}, {"preset", f.preset}, {"value", f.value}, {"uncertainty", or_null(f.uncertainty)}});
  j["changed"] = changed;
  j["implied"] = cal->implied;
  nlohmann::json kept = nlohmann::json::array();
  for (const UnidentifiedFigure& f : cal->unidentified) kept.push_back(f.key);
  j["kept_at_preset"] = kept;
  nlohmann::json ex = nlohmann::json::array();
  for (const ScheduleAt& r : results)
    ex.push_back(
        {{"schedule", r.schedule},
         {"extrapolates", calibration_extrapolation(*cal, calibrated_run(c, r.schedule, r.microbatches, r.vpp))}});
  j["results"] = ex;
  return j;
}

std::string calibration_note_text(const nlohmann::json& n) {
  if (n.is_null()) return {};
  std::string o = fmt::format("calibrated ({}, {}):", n["file"].get<std::string>(), n["method"].get<std::string>());
  for (const auto& f : n["changed"])
    o += fmt::format(" {} {:.4g} -> {:.4g};", f["key"].get<std::string>(), f["preset"].get<double>(),
                     f["value"].get<double>());
  for (const auto& s : n["implied"]) o += fmt::format(" {} (the file's version fitted it so);", s.get<std::string>());
  o += "\n";
  for (const auto& r : n["results"]) {
    std::string lines;
    for (const auto& l : r["extrapolates"]) lines += (lines.empty() ? "" : ", ") + l.get<std::string>();
    o += fmt::format("  {}: {}\n", r["schedule"].get<std::string>(),
                     lines.empty() ? "the calibrated run itself" : "extrapolates: " + lines);
  }
  return o;
}

CalibrateOutcome calibrate(const CalibrateRequest& req) {
  const int given = (req.traces.empty() ? 0 : 1) + (req.step_ms ? 1 : 0) + (req.tokens_per_s ? 1 : 0);
  if (given != 1) throw InputError("calibrate needs exactly one of: traces, --step-ms, --tokens-per-s", {}, kExitUsage);
  if ((req.step_ms && !(*req.step_ms > 0)) || (req.tokens_per_s && !(*req.tokens_per_s > 0)))
    throw InputError("--step-ms and --tokens-per-s must be positive", {}, kExitUsage);
  const ModelConfig cfg = load_config(req.config, req.sets);
  const ModelConfigData& c = *cfg.data;
  const std::string family = run_family(req, c);
  CalibrateOutcome out = req.traces.empty() ? calibrate_step(req, c, family) : calibrate_traces(req, c, family);
  Calibration& cal = out.calibration;
  cal.config = req.config;
  const int vpp = req.vpp > 0 ? req.vpp : (c.parallel.has_vpp ? c.parallel.vpp : 1);
  cal.run = calibrated_run(c, family, c.parallel.microbatches, family_takes_vpp(family) ? vpp : 1);
  out.yaml = render_calibration(cal);
  out.report = render_report(cal);
  out.json = calibration_json(cal);
  return out;
}

}  // namespace ppsim::api
