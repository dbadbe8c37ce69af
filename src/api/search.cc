#include "api/search.h"

#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "api/times.h"
#include "core/error.h"
#include "cost/config.h"
#include "cost/cost_model.h"
#include "cost/invariants.h"
#include "report/results.h"
#include "report/svg.h"
#include "report/trace.h"
#include "schedules/notation.h"
#include "search/search.h"
#include "sim/engine.h"
#include "sim/metrics.h"

namespace ppsim::api {

namespace {

ScheduleMetrics metrics_of(const std::string& name, const Candidate& c, const SimCosts& costs) {
  ScheduleMetrics m =
      compute_metrics(c.schedule, c.sim, costs, nullptr, ScheduleParams{c.schedule.pp, c.schedule.microbatches, 0, 0});
  m.schedule = name;
  return m;
}

std::string row(const std::string& name, const Candidate& c, const ScheduleMetrics& m, const TimeScale& scale) {
  std::string bub;
  for (std::size_t r = 0; r < m.bubble.size(); ++r) {
    if (r) bub += ' ';
    bub += format_time(m.bubble[r], scale);
  }
  return fmt::format("{:<22} {:>14} {:>14}  {:>18}  {:<13} {}\n", name, format_time(m.makespan, scale),
                     format_time(m.bubble_max, scale), fmt::format("{:.4g}", c.peak_shares),
                     fmt::format("{} x{}", placement_name(placement_of(c.schedule)), c.schedule.parameter_copies), bub);
}

void check_limits(const SearchCall& a) {
  if (!(a.time_limit > 0 && a.time_limit <= 86400))
    throw InputError(fmt::format("--time-limit: expected seconds in (0, 86400], got {}", a.time_limit), {}, kExitUsage);
  if (a.memory_cap && !(*a.memory_cap >= 0 && *a.memory_cap <= 1e9))
    throw InputError(fmt::format("--memory-cap: expected a number >= 0 or none, got {}", *a.memory_cap), {},
                     kExitUsage);
  if (!(a.units.p2p_latency >= 0 && a.units.p2p_latency <= 1e9))
    throw InputError(fmt::format("--p2p-latency: expected a number in [0, 1e9], got {}", a.units.p2p_latency), {},
                     kExitUsage);
}

// What the costs come from: the config (if any), P and M, the unit times and the placements.
struct Setup {
  std::shared_ptr<ModelConfig> cfg;
  int pp = ScheduleChoice::kDefaultPp, m = ScheduleChoice::kDefaultMicrobatches;
  UnitCosts units;
  std::vector<Placement> placements;
};

Setup setup_costs(const SearchCall& a, SearchOutcome& out) {
  Setup st;
  out.scale = TimeScale::units();
  if (!a.config.empty()) {
    st.cfg = std::make_shared<ModelConfig>(load_config(a.config, a.sets));
    out.scale = TimeScale::millis();
    int v = 0;
    apply_config_parallel(*st.cfg, st.pp, st.m, v);
  } else if (!a.sets.empty()) {
    throw InputError("--set needs a config file", {}, kExitUsage);
  }
  if (a.pp) st.pp = *a.pp;
  if (a.microbatches) st.m = *a.microbatches;
  // The costs are compare's (unit_costs); the times are parsed first so that a bad value is one
  // line before any search starts.
  st.units = a.units;
  st.placements = parse_placements(a.placement);
  if (st.units.a2a >= 0 || std::isnan(st.units.a2a)) {
    if (st.cfg)
      throw InputError("--a2a: the overlap flags apply to --times; with a config, its MoE layers give the overlap "
                       "model its costs",
                       {}, kExitUsage);
    // Checked for every chunk count the placements use (1 per rank on linear, 2 on a V or two
    // pipes), so that a bad value is one line before any search starts.
    for (Placement p : st.placements) {
      SimCosts probe;
      add_unit_overlap_costs(probe, st.units, p == Placement::linear ? 1 : 2);
    }
  }
  return st;
}

SearchRequest make_request(const SearchCall& a, const Setup& st) {
  SearchRequest req;
  req.pp = st.pp;
  req.microbatches = st.m;
  req.placements = st.placements;
  req.one_parameter_copy = a.placement == "torch";
  req.memory_cap = a.memory_cap.value_or(0);
  req.cap_at_best_family = !a.memory_cap;
  req.seed = a.seed;
  req.time_limit_s = a.time_limit;
  req.threads = a.threads;
  if (a.w_hold && !(*a.w_hold >= 0 && *a.w_hold <= 1))
    throw InputError(fmt::format("--w-hold: expected a share in [0, 1], got {}", *a.w_hold), {}, kExitUsage);
  req.costs = [cfg = st.cfg, units = st.units, w_hold = a.w_hold](const Schedule& s) {
    SimCosts c = cfg ? derive_costs(*cfg, s) : unit_costs(s, units);
    if (w_hold)
      for (SliceCosts& x : c.slice) x.w_hold = *w_hold;
    return c;
  };
  req.progress = a.progress;
  if (a.objective != "" && a.objective != "makespan" && a.objective != "span")
    throw InputError(fmt::format("--objective: makespan or span, not '{}'", a.objective), {}, kExitUsage);
  req.objective_span = a.objective == "span" || (a.objective.empty() && st.cfg && post_validation(*st.cfg));
  return req;
}

// hardware.clock: the search ranks orders at the base clock; each reported row is then run at its
// own duty's clock (simulate_config, which leaves its costs clocked), as compare and plan run theirs.
// Returns the note the table prints ("" when the config has no clock).
std::string reclock_rows(const ModelConfig& cfg, SearchResult& r, SearchOutcome& out) {
  auto reclock = [&](Candidate& c, SimCosts& costs) {
    const Time base = c.sim.makespan();
    c.sim = simulate_config(cfg, c.schedule, costs);
    return fmt::format("{} {} -> {}", c.name, format_time(base, out.scale), format_time(c.sim.makespan(), out.scale));
  };
  std::string note = "clock (hardware.clock): ranked at the base clock; each row run at its duty's clock: " +
                     reclock(r.best, out.best_costs);
  if (r.best_family.valid) note += ", " + reclock(r.best_family, out.family_costs);
  return note + "\n";
}

// The reported rows, each checked against the invariants (cost/invariants.h) before it is reported.
void add_rows(const ModelConfig* cfg, const UnitCosts& units, const SearchResult& r, SearchOutcome& out) {
  const AnswerSource src = cfg ? source_of(*cfg) : AnswerSource{unit_source(units), {}};
  auto add_row = [&](const std::string& name, const Candidate& c, const SimCosts& costs) {
    out.rows.push_back({metrics_of(name, c, costs), {}});
    check_timing(c.schedule, costs, out.rows.back().metrics, src);
    if (!cfg) return;
    out.rows.back().physical = physical_result(*cfg, c.schedule, c.sim);
    check_physical(*cfg, c.schedule, c.sim, out.rows.back().physical, src);
  };
  add_row("searched", r.best, out.best_costs);
  if (r.best_family.valid) add_row(r.best_family.name, r.best_family, out.family_costs);
}

// The figures the table and the JSON share.
struct Summary {
  bool clocked = false;
  double gap = 0, faster = 0;
};

std::string search_table(const SearchCall& a, const SearchRequest& req, const SearchResult& r, const SearchOutcome& out,
                         const Summary& sum) {
  const TimeScale& scale = out.scale;
  constexpr const char* kTorchPlacement =
      "torch (linear and v: one parameter copy, as PyTorch runs; --placement all adds two-copy schedules)";
  const std::string cap_text = r.memory_cap <= 0 ? "none"
                               : out.cap_source == "best family"
                                   ? fmt::format("{:g} rank shares (the best family's peak)", r.memory_cap)
                                   : fmt::format("{:g} rank shares", r.memory_cap);
  std::string text =
      fmt::format("schedule search: P={} M={} placement {} cap {} seed {}: {} candidates simulated in {:.2f} s{}\n",
                  out.pp, out.microbatches, a.placement == "torch" ? kTorchPlacement : a.placement, cap_text, a.seed,
                  r.evaluated, r.seconds, r.time_limited ? " (time limit reached)" : "");
  text += fmt::format("{:<22} {:>14} {:>14}  {:>18}  {:<13} {}\n", "schedule", "makespan", "bubble(max)",
                      "peak (rank shares)", "placement", "bubble per rank");
  text += row("searched", r.best, out.rows[0].metrics, scale);
  if (r.best_family.valid)
    text += row("best family: " + r.best_family.name, r.best_family, out.rows[1].metrics, scale);
  else
    text += "best family: none of the nine fits the cap\n";
  text += fmt::format("lower bound {} (docs/SEARCH.md); gap {:.2f}%{}", format_time(r.lower_bound, scale), sum.gap,
                      sum.clocked ? " at the base clock" : "");
  if (r.best_family.valid) text += fmt::format("; {:.2f}% faster than {}", sum.faster, r.best_family.name);
  text += "\n";
  if (req.objective_span) {
    Time work = 0;
    for (const RankStats& st : r.best.sim.ranks) work = std::max(work, st.busy);
    text += fmt::format("objective: the longest rank's own span (post-validation, docs/SEARCH.md): searched {}",
                        format_time(r.best.sim.longest_span(), scale));
    if (r.best_family.valid)
      text += fmt::format(", {} {}", r.best_family.name, format_time(r.best_family.sim.longest_span(), scale));
    text += fmt::format("; busiest rank's work {}\n", format_time(work, scale));
  }
  return text;
}

nlohmann::json search_json(const SearchCall& a, const SearchRequest& req, const SearchResult& r,
                           const SearchOutcome& out, const Summary& sum) {
  const TimeScale& scale = out.scale;
  nlohmann::json sj = {{"pp", out.pp},
                       {"microbatches", out.microbatches},
                       {"placement", a.placement},
                       {"memory_cap", r.memory_cap > 0 ? nlohmann::json(r.memory_cap) : nlohmann::json()},
                       {"memory_cap_source", out.cap_source},
                       {"seed", a.seed},
                       {"candidates", r.evaluated},
                       {"seconds", r.seconds},
                       {"time_limited", r.time_limited},
                       {"lower_bound", scale.to_display(r.lower_bound)},
                       {"objective", req.objective_span ? "span" : "makespan"},
                       {"longest_span", scale.to_display(r.best.sim.longest_span())},
                       {"gap", sum.gap / 100.0},
                       {"clocked", sum.clocked},
                       {"searched_peak_shares", r.best.peak_shares},
                       {"searched_placement", placement_name(placement_of(r.best.schedule))}};
  if (r.best_family.valid) {
    sj["best_family"] = r.best_family.name;
    sj["best_family_peak_shares"] = r.best_family.peak_shares;
    sj["faster_than_best_family"] = sum.faster / 100.0;
  } else {
    sj["best_family"] = nullptr;
  }
  return sj;
}

}  // namespace

SearchOutcome search(const SearchCall& a) {
  check_limits(a);
  SearchOutcome out;
  const Setup st = setup_costs(a, out);
  const SearchRequest req = make_request(a, st);
  SearchResult r = search_schedule(req);
  out.searched = r.best.schedule;
  out.has_family = r.best_family.valid;
  if (out.has_family) out.best_family = r.best_family.schedule;
  out.pp = st.pp;
  out.microbatches = st.m;
  out.placement = a.placement;
  out.cap_source = a.memory_cap ? (*a.memory_cap > 0 ? "given" : "none") : (r.memory_cap > 0 ? "best family" : "none");
  out.best_costs = req.costs(r.best.schedule);
  if (r.best_family.valid) out.family_costs = req.costs(r.best_family.schedule);

  Summary sum;
  const Time base_makespan = r.best.sim.makespan();  // the lower bound is at the base clock
  sum.clocked = st.cfg && st.cfg->data->hardware.clock_duty_slope > 0;
  const std::string clock_note = sum.clocked ? reclock_rows(*st.cfg, r, out) : "";
  add_rows(st.cfg.get(), st.units, r, out);
  sum.gap = r.lower_bound > 0
                ? 100.0 * static_cast<double>(base_makespan - r.lower_bound) / static_cast<double>(r.lower_bound)
                : 0.0;
  if (r.best_family.valid)
    sum.faster = 100.0 * static_cast<double>(r.best_family.sim.makespan() - r.best.sim.makespan()) /
                 static_cast<double>(r.best_family.sim.makespan());

  std::string text = search_table(a, req, r, out, sum) + clock_note;
  std::vector<Skipped> notes;
  for (const auto& [fam, why] : r.family_notes) {
    text += fmt::format("  not compared: {}: {}\n", fam, why);
    notes.push_back({fam, why});
  }
  out.table = std::move(text);
  nlohmann::json extra;
  if (!a.config.empty()) extra["config"] = a.config;
  extra["search"] = search_json(a, req, r, out, sum);
  out.json = results_json(out.rows, notes, out.scale, extra);
  return out;
}

std::string SearchOutcome::schedule_csv() const { return schedule_to_csv(searched); }

std::vector<SearchOutcome::NamedRun> SearchOutcome::timelines() const {
  SimOptions opt;
  opt.record_timeline = true;
  std::vector<NamedRun> out;
  out.push_back({"searched", simulate(searched, best_costs, opt)});
  if (has_family)
    out.push_back({rows.size() > 1 ? rows[1].metrics.schedule : best_family.family,
                   simulate(best_family, family_costs, opt)});
  return out;
}

std::string SearchOutcome::svg() const {
  const std::vector<NamedRun> runs = timelines();
  std::vector<NamedTimeline> named;
  for (const auto& r : runs) named.push_back({r.name, &r.sim.timeline});
  return render_svg(named);
}

}  // namespace ppsim::api
