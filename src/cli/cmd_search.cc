// `ppsim search`: a thin client of src/search (docs/SEARCH.md). Parses the flags, builds the
// costs for any placement (from --times / --chunk-times, or a YAML config through the cost
// model), runs the search, and prints the searched schedule beside the best of the nine
// families under the same cap; writes the schedule (PyTorch's compute-only CSV) and the picture.
//
// Not obvious: the schedule file and the SVG are written together or not at all, after the
// search, so an error or an interrupted search leaves no partial file.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <memory>

#include "api/request.h"
#include "api/times.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "cost/cost_model.h"
#include "report/html.h"
#include "report/results.h"
#include "report/svg.h"
#include "report/trace.h"
#include "schedules/notation.h"
#include "search/search.h"
#include "sim/engine.h"
#include "sim/metrics.h"

namespace ppsim::cli {

namespace {

struct SearchArgs {
  ScheduleOptions so;
  std::string config;
  std::vector<std::string> sets;
  std::string times = "F=1,B=2,W=1";
  std::string chunk_times;
  double p2p_latency = 0;
  api::UnitCosts overlap;  // --a2a ... --sms: the overlap model on unit times
  double memory_cap = 0;
  std::string placement = "all";
  std::uint64_t seed = 1;
  double time_limit = 10;
  int threads = 0;
  std::string svg;
  std::string html;
  std::string out;
  std::string format = "csv";
  bool quiet = false;
};

std::string row(const std::string& name, const Candidate& c, const SimCosts& costs, const TimeScale& scale) {
  const ScheduleMetrics m =
      compute_metrics(c.schedule, c.sim, costs, nullptr, ScheduleParams{c.schedule.pp, c.schedule.microbatches, 0, 0});
  std::string bub;
  for (std::size_t r = 0; r < m.bubble.size(); ++r) bub += (r ? " " : "") + fmt_time(m.bubble[r], scale);
  return fmt::format("{:<22} {:>14} {:>14}  {:>6}  {:<13} {}\n", name, fmt_time(m.makespan, scale),
                     fmt_time(m.bubble_max, scale), fmt::format("{:.4g}", c.peak_shares),
                     fmt::format("{} x{}", placement_name(placement_of(c.schedule)), c.schedule.parameter_copies), bub);
}

}  // namespace

Runner setup_search(CLI::App& sub) {
  auto a = std::make_shared<SearchArgs>();
  sub.add_option("config", a->config, "YAML config (model, hardware, parallel); optional");
  sub.add_option("--set", a->sets, "override a config key: key.path=value (repeatable)");
  sub.add_option("--pp,-p", a->so.pp, "ranks (default 8, or the config's)");
  sub.add_option("--microbatches,-m", a->so.microbatches, "micro-batches per step (default 20, or the config's)");
  sub.add_option("--times", a->times, "one rank's share: F=..,B=..(full backward),W=..,FB=..")->capture_default_str();
  sub.add_option("--chunk-times", a->chunk_times, "per-chunk times instead of --times (same keys)");
  sub.add_option("--p2p-latency", a->p2p_latency, "latency of each stage-to-stage transfer, in the time unit");
  add_overlap_options(sub, a->overlap);
  sub.add_option("--memory-cap", a->memory_cap,
                 "activations per rank, in micro-batches of one rank's share (a V chunk counts 1/2); 0 = none")
      ->capture_default_str();
  sub.add_option("--placement", a->placement, "linear, v, bidirectional or all")->capture_default_str();
  sub.add_option("--seed", a->seed, "random seed (same seed, same result unless the time limit binds)")
      ->capture_default_str();
  sub.add_option("--time-limit", a->time_limit, "seconds for the whole search")->capture_default_str();
  sub.add_option("--threads,-j", a->threads, "threads (0: every core)")->capture_default_str();
  sub.add_option("--svg", a->svg, "write an SVG timeline of the searched schedule and the best family");
  sub.add_option("--html", a->html, "write a self-contained HTML report of the searched schedule and the best family");
  sub.add_option("--out", a->out, "write the searched schedule to this file");
  sub.add_option("--format", a->format, "schedule file format: csv or torch (both PyTorch's compute-only CSV)")
      ->capture_default_str();
  sub.add_flag("--quiet,-q", a->quiet, "no progress line on stderr");
  return [a]() {
    if (a->format != "csv" && a->format != "torch")
      throw InputError(fmt::format("--format: expected csv or torch, got '{}'", a->format), {}, kExitUsage);
    if (!(a->time_limit > 0 && a->time_limit <= 86400))
      throw InputError(fmt::format("--time-limit: expected seconds in (0, 86400], got {}", a->time_limit), {},
                       kExitUsage);
    if (!(a->memory_cap >= 0 && a->memory_cap <= 1e9))
      throw InputError(fmt::format("--memory-cap: expected a number >= 0, got {}", a->memory_cap), {}, kExitUsage);
    if (!(a->p2p_latency >= 0 && a->p2p_latency <= 1e9))
      throw InputError(fmt::format("--p2p-latency: expected a number in [0, 1e9], got {}", a->p2p_latency), {},
                       kExitUsage);
    std::shared_ptr<ModelConfig> cfg;
    TimeScale scale = TimeScale::units();
    int pp = api::ScheduleChoice::kDefaultPp, m = api::ScheduleChoice::kDefaultMicrobatches;
    if (!a->config.empty()) {
      cfg = std::make_shared<ModelConfig>(load_config(a->config, a->sets));
      scale = TimeScale::millis();
      int v = 0;
      apply_config_parallel(*cfg, pp, m, v);
    } else if (!a->sets.empty()) {
      throw InputError("--set needs a config file", {}, kExitUsage);
    }
    if (a->so.pp != ScheduleOptions::kUnset) pp = a->so.pp;
    if (a->so.microbatches != ScheduleOptions::kUnset) m = a->so.microbatches;
    // The costs are the library's (api::unit_costs, as compare's); the times are parsed here
    // first so that a bad value is one line before any search starts.
    api::UnitCosts units = a->overlap;
    units.times = a->times;
    units.chunk_times = a->chunk_times;
    units.p2p_latency = a->p2p_latency;
    (void)(a->chunk_times.empty() ? api::parse_times(a->times, "--times")
                                  : api::parse_times(a->chunk_times, "--chunk-times"));
    const std::vector<Placement> placements = parse_placements(a->placement);
    if (units.a2a >= 0 || std::isnan(units.a2a)) {
      if (cfg)
        throw InputError("--a2a: the overlap flags apply to --times; with a config, its MoE layers give the overlap "
                         "model its costs",
                         {}, kExitUsage);
      // Checked here for every chunk count the placements use (1 per rank on linear, 2 on a V or
      // two pipes), so that a bad value is one line before any search starts.
      for (Placement p : placements) {
        SimCosts probe;
        api::add_unit_overlap_costs(probe, units, p == Placement::linear ? 1 : 2);
      }
    }

    SearchRequest req;
    req.pp = pp;
    req.microbatches = m;
    req.placements = placements;
    req.memory_cap = a->memory_cap;
    req.seed = a->seed;
    req.time_limit_s = a->time_limit;
    req.threads = a->threads;
    req.costs = [cfg, units](const Schedule& s) { return cfg ? derive_costs(*cfg, s) : api::unit_costs(s, units); };
    if (!a->quiet)
      req.progress = [&scale](std::uint64_t done, std::uint64_t all, Time best) {
        std::fprintf(stderr, "\rsearch: %llu/%llu trials, best makespan %s   ", static_cast<unsigned long long>(done),
                     static_cast<unsigned long long>(all), best ? fmt_time(best, scale).c_str() : "-");
      };
    const SearchResult r = search_schedule(req);
    if (!a->quiet) std::fprintf(stderr, "\n");

    std::string text =
        fmt::format("schedule search: P={} M={} placement {} cap {} seed {}: {} candidates simulated in {:.2f} s{}\n",
                    pp, m, a->placement, a->memory_cap > 0 ? fmt::format("{:g}", a->memory_cap) : "none", a->seed,
                    r.evaluated, r.seconds, r.time_limited ? " (time limit reached)" : "");
    text += fmt::format("{:<22} {:>14} {:>14}  {:>6}  {:<13} {}\n", "schedule", "makespan", "bubble(max)", "peak",
                        "placement", "bubble per rank");
    const SimCosts best_costs = req.costs(r.best.schedule);
    text += row("searched", r.best, best_costs, scale);
    if (r.best_family.valid)
      text += row("best family: " + r.best_family.name, r.best_family, req.costs(r.best_family.schedule), scale);
    else
      text += "best family: none of the nine fits the cap\n";
    const Time mk = r.best.sim.makespan();
    text += fmt::format(
        "lower bound {} (docs/SEARCH.md); gap {:.2f}%", fmt_time(r.lower_bound, scale),
        r.lower_bound > 0 ? 100.0 * static_cast<double>(mk - r.lower_bound) / static_cast<double>(r.lower_bound) : 0.0);
    if (r.best_family.valid)
      text += fmt::format("; {:.2f}% faster than {}",
                          100.0 * static_cast<double>(r.best_family.sim.makespan() - mk) /
                              static_cast<double>(r.best_family.sim.makespan()),
                          r.best_family.name);
    text += "\n";
    for (const auto& [fam, why] : r.family_notes) text += fmt::format("  not compared: {}: {}\n", fam, why);

    std::vector<std::pair<std::string, std::string>> files;
    if (!a->out.empty()) files.emplace_back(a->out, schedule_to_csv(r.best.schedule));
    if (!a->svg.empty()) {
      SimOptions opt;
      opt.record_timeline = true;
      const SimResult sr = simulate(r.best.schedule, best_costs, opt);
      std::vector<NamedTimeline> named{{"searched", &sr.timeline}};
      SimResult fr;
      if (r.best_family.valid) {
        fr = simulate(r.best_family.schedule, req.costs(r.best_family.schedule), opt);
        named.push_back({r.best_family.name, &fr.timeline});
      }
      files.emplace_back(a->svg, render_svg(named));
    }
    if (!a->html.empty()) {
      SimOptions opt;
      opt.record_timeline = true;
      std::vector<ResultRow> rows;
      std::vector<SimResult> sims;
      sims.reserve(2);  // the report points into it
      auto add = [&](const std::string& name, const Candidate& c) {
        const SimCosts costs = req.costs(c.schedule);
        sims.push_back(simulate(c.schedule, costs, opt));
        ResultRow row;
        row.metrics = compute_metrics(c.schedule, sims.back(), costs, nullptr,
                                      ScheduleParams{c.schedule.pp, c.schedule.microbatches, 0, 0});
        row.metrics.schedule = name;
        rows.push_back(std::move(row));
      };
      add("searched", r.best);
      if (r.best_family.valid) add(r.best_family.name, r.best_family);
      HtmlReport rep;
      rep.kind = "search";
      rep.title = "ppsim search";
      rep.results = results_json(rows, {}, scale);
      for (std::size_t i = 0; i < rows.size(); ++i)
        rep.timelines.push_back({rows[i].metrics.schedule, &sims[i].timeline, nullptr, static_cast<int>(i), {}});
      files.emplace_back(a->html, render_html(rep));
    }
    files.emplace_back("-", text);
    write_outputs(files);
    return 0;
  };
}

}  // namespace ppsim::cli
