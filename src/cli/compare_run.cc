#include "cli/compare_run.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "cost/cost_model.h"
#include "report/svg.h"
#include "report/trace.h"
#include "schedules/notation.h"
#include "schedules/registry.h"
#include "sim/engine.h"
#include "sim/metrics.h"

namespace ppsim::cli {

namespace {

std::vector<const Family*> pick_families(const std::string& list) {
  std::vector<const Family*> out;
  if (list == "all" || list.empty()) {
    for (const auto& f : families()) out.push_back(&f);
    return out;
  }
  std::size_t pos = 0;
  while (pos <= list.size()) {
    std::size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    const std::string name = list.substr(pos, comma - pos);
    if (!name.empty()) out.push_back(&find_family(name));
    pos = comma + 1;
  }
  if (out.empty()) throw InputError("--schedules: no schedule named", {}, kExitUsage);
  return out;
}

Time units_to_ticks(double v, const char* flag) {
  if (!std::isfinite(v) || v < 0 || v > 1e9)
    throw InputError(fmt::format("{}: expected a number in [0, 1e9], got {}", flag, v), {}, kExitUsage);
  return static_cast<Time>(std::llround(v * static_cast<double>(kTicksPerUnit)));
}

// The overlap model from unit flags: each chunk holds layers/v layers; a chunk's F, b and W are
// split evenly over its layers and into attention (attn_share) and MLP; each layer's dispatch
// and combine take a2a.
void add_unit_overlap_costs(SimCosts& costs, const RunRequest& req, int v) {
  if (req.layers < 1 || req.layers % v != 0)
    throw InputError(fmt::format("--layers: {} layers do not split into {} chunks per rank", req.layers, v), {}, kExitUsage);
  if (!(req.attn_share >= 0 && req.attn_share <= 1))
    throw InputError(fmt::format("--attn-share must be in [0, 1], got {}", req.attn_share), {}, kExitUsage);
  if (req.sms < 1 || req.comm_sms < 0 || req.comm_sms >= req.sms)
    throw InputError(fmt::format("--comm-sms must be in [0, --sms), got {} of {}", req.comm_sms, req.sms), {}, kExitUsage);
  const int layers = req.layers / v;
  const Time a2a = units_to_ticks(req.a2a, "--a2a");
  costs.moe.clear();
  for (const SliceCosts& c : costs.slice) {
    MoeSliceCosts m;
    m.layers = layers;
    auto attn = [&](Time t) { return static_cast<Time>(std::llround(static_cast<double>(t) / layers * req.attn_share)); };
    auto mlp = [&](Time t) { return t / layers - attn(t); };
    m.attn_f = attn(c.f);
    m.mlp_f = mlp(c.f);
    m.attn_b = attn(c.input_grad());
    m.mlp_b = mlp(c.input_grad());
    m.attn_w = attn(c.w);
    m.mlp_w = mlp(c.w);
    m.dispatch = m.dispatch_b = a2a;
    m.combine = m.combine_b = a2a;
    costs.moe.push_back(m);
  }
  costs.comm_sm_fraction = static_cast<double>(req.comm_sms) / req.sms;
}

}  // namespace

RunOutput run_schedules(const RunRequest& req) {
  apply_limits(req.so);
  RunOutput out;
  std::unique_ptr<ModelConfig> cfg;
  if (!req.config.empty()) {
    cfg = std::make_unique<ModelConfig>(load_config(req.config, req.sets));
    out.scale = TimeScale::millis();
    out.extra["config"] = req.config;
  } else if (!req.sets.empty()) {
    throw InputError("--set needs a config file", {}, kExitUsage);
  } else {
    out.scale = TimeScale::units();
  }
  // Flag values are checked once, before any schedule runs, so that a bad value is an error
  // rather than a reason to skip every schedule.
  if (!cfg) {
    if (req.chunk_times.empty()) parse_times(req.times, "--times");
    else parse_times(req.chunk_times, "--chunk-times");
    units_to_ticks(req.p2p_latency, "--p2p-latency");
  }
  // NaN compares false with everything, so range checks let it through: --a2a nan used to
  // switch the overlap model off silently.
  for (const auto& [flag, v] : {std::pair{"--a2a", req.a2a}, std::pair{"--attn-share", req.attn_share}})
    if (std::isnan(v)) throw InputError(fmt::format("{}: expected a number, got nan", flag), {}, kExitUsage);
  const bool want_timeline = req.keep_timeline || !req.trace.empty() || !req.svg.empty() || !req.timeline_path.empty();

  auto run_one = [&](const Schedule& s, const Family* fam, const ScheduleParams& params) {
    SimCosts costs;
    if (cfg) {
      costs = derive_costs(*cfg, s);
    } else {
      SliceCosts c = req.chunk_times.empty() ? chunk_costs(parse_times(req.times, "--times"), s.chunks_per_rank)
                                             : to_slice(parse_times(req.chunk_times, "--chunk-times"));
      costs = uniform_costs(s.stages_per_pipe, c);
      costs.link.latency = units_to_ticks(req.p2p_latency, "--p2p-latency");
      if (req.a2a >= 0) {
        add_unit_overlap_costs(costs, req, s.chunks_per_rank);
        check_overlap_work(s, costs);
      }
    }
    SimOptions opt;
    opt.record_timeline = want_timeline;
    SimResult r = simulate(s, costs, opt);
    ResultRow row;
    row.metrics = compute_metrics(s, r, costs, fam, params);
    if (cfg) row.physical = physical_result(*cfg, s, r);
    out.rows.push_back(std::move(row));
    if (want_timeline) out.timelines.push_back(std::move(r.timeline));
  };

  if (!req.so.schedule_file.empty()) {
    const Schedule s = import_csv_file(req.so.schedule_file, req.so.pp == ScheduleOptions::kUnset ? 0 : req.so.pp,
                                       req.so.microbatches == ScheduleOptions::kUnset ? 0 : req.so.microbatches,
                                       parse_layout(req.so.layout));
    run_one(s, nullptr, ScheduleParams{s.pp, s.microbatches, s.chunks_per_rank, s.pp});
  } else {
    ScheduleOptions so = req.so;
    if (cfg) {
      // Flags given on the command line win over the config's parallel section.
      int pp = 0, m = 0, v = 0;
      apply_config_parallel(*cfg, pp, m, v);
      if (so.pp == ScheduleOptions::kUnset) so.pp = pp;
      if (so.microbatches == ScheduleOptions::kUnset) so.microbatches = m;
      if (so.vpp == 0) so.vpp = v;
    }
    std::string list = req.schedules;
    if (cfg && (list.empty() || list == "all") && !req.single) list = config_schedules(*cfg);
    for (const Family* fam : pick_families(list)) {
      const ScheduleParams p = params_for(*fam, so);
      try {
        const Schedule s = make_schedule(fam->name, p);
        run_one(s, fam, p);
      } catch (const InputError& e) {
        // Only a family's own constraint skips it; bad flags and limits stop the run.
        if (req.single || e.exit_code() != kExitInput) throw;
        out.skipped.push_back({fam->name, e.message()});
      }
    }
  }
  if (!req.trace.empty() || !req.svg.empty()) {
    std::vector<NamedTimeline> named;
    for (std::size_t i = 0; i < out.timelines.size(); ++i)
      named.push_back({out.rows[i].metrics.schedule, &out.timelines[i],
                       out.rows[i].physical.memory_curve.empty() ? nullptr : &out.rows[i].physical.memory_curve});
    if (!req.trace.empty()) out.side_files.emplace_back(req.trace, render_trace(named));
    if (!req.svg.empty()) out.side_files.emplace_back(req.svg, render_svg(named));
  }
  if (!req.timeline_path.empty() && !out.timelines.empty())
    out.side_files.emplace_back(req.timeline_path, render_timeline_json(out.timelines.front()));
  return out;
}

void emit_results(const RunOutput& out, Format f, const std::string& path) {
  std::string text;
  switch (f) {
    case Format::Json: text = render_json(out.rows, out.skipped, out.scale, out.extra); break;
    case Format::Csv: text = render_csv(out.rows, out.scale); break;
    default: text = render_table(out.rows, out.skipped, out.scale); break;
  }
  std::vector<std::pair<std::string, std::string>> files = out.side_files;
  files.emplace_back(path, text);
  write_outputs(files);  // all of them or none
}

}  // namespace ppsim::cli
