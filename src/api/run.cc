// api::run: the evaluation behind compare / simulate and ppsim.simulate / ppsim.compare.
#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "api/config_answer.h"
#include "api/request.h"
#include "api/times.h"
#include "core/error.h"
#include "cost/invariants.h"
#include "schedules/registry.h"
#include "schedules/schedule_list.h"
#include "sim/engine.h"
#include "sim/metrics.h"

namespace ppsim::api {

void add_unit_overlap_costs(SimCosts& costs, const UnitCosts& u, int v) {
  if (u.layers < 1 || u.layers % v != 0)
    throw InputError(fmt::format("--layers: {} layers do not split into {} chunks per rank", u.layers, v), {}, kExitUsage);
  if (!(u.attn_share >= 0 && u.attn_share <= 1))
    throw InputError(fmt::format("--attn-share must be in [0, 1], got {}", u.attn_share), {}, kExitUsage);
  if (u.sms < 1 || u.comm_sms < 0 || u.comm_sms >= u.sms)
    throw InputError(fmt::format("--comm-sms must be in [0, --sms), got {} of {}", u.comm_sms, u.sms), {}, kExitUsage);
  const int layers = u.layers / v;
  const Time a2a = units_to_ticks(u.a2a, "--a2a");
  costs.moe.clear();
  for (const SliceCosts& c : costs.slice) {
    MoeSliceCosts m;
    m.layers = layers;
    auto attn = [&](Time t) { return static_cast<Time>(std::llround(static_cast<double>(t) / layers * u.attn_share)); };
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
  costs.comm_sm_fraction = static_cast<double>(u.comm_sms) / u.sms;
}

SimCosts unit_costs(const Schedule& s, const UnitCosts& u) {
  const SliceCosts c = u.chunk_times ? to_slice(*u.chunk_times) : chunk_costs(u.times, s.chunks_per_rank);
  SimCosts costs = uniform_costs(s.stages_per_pipe, c);
  costs.link.latency = units_to_ticks(u.p2p_latency, "--p2p-latency");
  if (u.a2a >= 0) {
    add_unit_overlap_costs(costs, u, s.chunks_per_rank);
    check_overlap_work(s, costs);
  }
  return costs;
}

std::string unit_source(const UnitCosts& u) {
  const UniformTimes& t = u.chunk_times ? *u.chunk_times : u.times;
  auto units = [](Time x) { return static_cast<double>(x) / kTicksPerUnit; };
  return fmt::format("{} F={:g},B={:g},W={:g},FB={:g}", u.chunk_times ? "--chunk-times" : "--times", units(t.f),
                     units(t.b), units(t.w), units(t.fb));
}

Result run(const Request& req) {
  apply_limits(req.schedule);
  Result out;
  std::optional<ModelConfig> cfg = req.loaded_config;
  if (cfg) {
    out.scale = TimeScale::millis();
    out.extra["config"] = req.config_name;
  } else if (!req.config.empty()) {
    cfg = load_config(req.config, req.sets);
    out.scale = TimeScale::millis();
    out.extra["config"] = req.config;
  } else if (!req.sets.empty()) {
    throw InputError("--set needs a config file", {}, kExitUsage);
  } else {
    out.scale = TimeScale::units();
  }
  const UnitCosts& u = req.units;
  // Values are checked once, before any schedule runs, so that a bad value is an error rather
  // than a reason to skip every schedule.
  if (!cfg) {
    units_to_ticks(u.p2p_latency, "--p2p-latency");
  }
  // NaN compares false with everything, so range checks let it through: --a2a nan used to
  // switch the overlap model off silently.
  for (const auto& [flag, v] : {std::pair{"--a2a", u.a2a}, std::pair{"--attn-share", u.attn_share}})
    if (std::isnan(v)) throw InputError(fmt::format("{}: expected a number, got nan", flag), {}, kExitUsage);

  auto run_one = [&](const Schedule& given, const Family* fam, const ScheduleParams& params) {
    const Schedule s = cfg ? as_run(*cfg, given) : given;
    SimCosts costs = cfg ? derive_costs(*cfg, s) : unit_costs(s, u);
    SimOptions opt;
    opt.record_timeline = req.timelines;
    SimResult r = cfg ? simulate_config(*cfg, s, costs, opt) : simulate(s, costs, opt);
    ResultRow row;
    row.metrics = compute_metrics(s, r, costs, fam, params);
    const AnswerSource src = cfg ? source_of(*cfg) : AnswerSource{unit_source(u), {}};
    check_timing(s, costs, row.metrics, src);
    if (cfg) {
      row.physical = physical_result(*cfg, s, r);
      check_config_answer(*cfg, s, r, row.physical, src);
    }
    out.rows.push_back(std::move(row));
    if (req.timelines) out.timelines.push_back(std::move(r.timeline));
  };

  const ScheduleChoice& sc = req.schedule;
  if (sc.schedule || !sc.schedule_file.empty()) {
    const Schedule s = sc.schedule ? *sc.schedule : import_file(sc);
    if (!s.dialect.empty()) out.extra["schedule_file"] = import_info(s);
    try {
      if (sc.schedule && sc.generated_with)
        run_one(s, &find_family(s.family), *sc.generated_with);
      else
        run_one(s, nullptr, ScheduleParams{s.pp, s.microbatches, s.chunks_per_rank, s.pp});
    } catch (const InputError& e) {
      // A file's order that cannot run (a deadlock): the error names the file.
      if (sc.schedule_file.empty() || !e.loc().file.empty()) throw;
      throw InputError(SourceLoc{sc.schedule_file, 0, 0}, e.message(), e.suggestion(), e.exit_code());
    }
  } else {
    ScheduleChoice choice = sc;
    if (cfg) {
      // Values given in the request win over the config's parallel section.
      int pp = 0, m = 0, v = 0;
      apply_config_parallel(*cfg, pp, m, v);
      if (!choice.pp) choice.pp = pp;
      if (!choice.microbatches) choice.microbatches = m;
      if (choice.vpp == 0) choice.vpp = v;
    }
    std::string list = req.families;
    if (cfg && is_all_schedules(list) && !req.single && !req.families_given) list = config_schedules(*cfg);
    for (const Family* fam : pick_families(list)) {
      const ScheduleParams p = params_for(*fam, choice);
      try {
        const Schedule s = make_schedule(fam->name, p);
        run_one(s, fam, p);
      } catch (const InputError& e) {
        // Only a family's own constraint skips it; bad values and limits stop the run.
        if (req.single || e.exit_code() != kExitInput) throw;
        out.skipped.push_back({fam->name, e.message()});
      }
    }
  }
  if (cfg) {
    // A calibrated config says what it changed and how far each result extrapolates (api/calibrate.h).
    std::vector<ScheduleAt> at;
    for (const ResultRow& r : out.rows) at.push_back({r.metrics.schedule, r.metrics.microbatches, r.metrics.vpp});
    nlohmann::json notes = calibration_notes(*cfg, at);
    if (!notes.is_null()) out.extra["calibration"] = std::move(notes);
  }
  return out;
}

nlohmann::json to_json(const Result& r) { return results_json(r.rows, r.skipped, r.scale, r.extra); }

}  // namespace ppsim::api
